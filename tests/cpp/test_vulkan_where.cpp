// The Vulkan ternary kernel (shaders/ternary.comp) against the CPU on the same inputs:
// where with bool and uint8 conditions, broadcast and strided operands, every dtype
// that moves bytes (float storage, bool, integers) and mixed float storage dtypes, Python
// numbers, views of many dims; masked_fill (through where) out of place and in place;
// clamp with tensor and number bounds, NaN anywhere; the ops that build and combine bool
// masks (logical, bitwise on bool, isnan/isinf/isfinite) and convert them. where
// only moves or converts elements and clamp only compares, so every result is the CPU's
// bit for bit (NaN compared as NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/vulkan.h"
#include "elementwise_test_util.h"
#include "test_util.h"
#include "vulkan_test_util.h"

namespace kiln {
namespace {

using testing::expect_close;
using testing::expect_error;
using testing::expect_same_bits;
using testing::uniform;
using VulkanWhere = testing::VulkanTest;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A [rows, cols] bool condition, true where a uniform draw is below 0.4.
Tensor condition(const Shape& sizes, uint64_t seed) { return lt(uniform(sizes, 0, 1, seed), Scalar(0.4)); }

TEST_F(VulkanWhere, WhereMatchesCpuOnBroadcastAndStridedOperands) {
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16, DType::Float8_e4m3fn, DType::Float8_e5m2}) {
    SCOPED_TRACE(dtype_name(dt));
    // 7 x 131 (no multiple of the work group), a transposed, b broadcast along rows, the
    // condition broadcast along columns.
    const Tensor cond = condition({7, 1}, 1);
    const Tensor a = uniform({131, 7}, -2, 2, 2, dt).t();
    const Tensor b = uniform({1, 131}, -2, 2, 3, dt);
    expect_same_bits(where(cond.to(kVulkan), a.to(kVulkan), b.to(kVulkan)), where(cond, a, b));
    // Full-size condition, a strided window of a.
    const Tensor full_cond = condition({7, 131}, 4);
    const Tensor wide = uniform({7, 262}, -2, 2, 5, dt);
    const Tensor window = wide.slice(1, 0, std::nullopt, 2);
    expect_same_bits(where(full_cond.to(kVulkan), wide.to(kVulkan).slice(1, 0, std::nullopt, 2), b.to(kVulkan)),
                     where(full_cond, window, b));
  }
}

TEST_F(VulkanWhere, WhereMovesTheBytesOfEveryDType) {
  const Tensor cond = condition({5, 67}, 11);
  for (DType dt : {DType::Bool, DType::UInt8, DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::Float64,
                   DType::Complex64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = uniform({5, 67}, -100, 100, 12).to(dt);
    const Tensor b = uniform({67}, -100, 100, 13).to(dt);
    expect_same_bits(where(cond.to(kVulkan), a.to(kVulkan), b.to(kVulkan)), where(cond, a, b));
  }
  // Infinities, NaN and signed zeros go through untouched.
  const Tensor odd = ew_test::make_tensor({kNaN, kInf, -kInf, -0.0, 0.0, 1e-40, -3e38}, DType::Float32);
  const Tensor picks = ew_test::make_tensor({1, 0, 1, 1, 0, 1, 1}, DType::Bool);
  const Tensor other = full({7}, Scalar(5.0));
  expect_same_bits(where(picks.to(kVulkan), odd.to(kVulkan), other.to(kVulkan)), where(picks, odd, other));
  expect_same_bits(where(picks.to(kVulkan), other.to(kVulkan), odd.to(kVulkan)), where(picks, other, odd));
}

TEST_F(VulkanWhere, WhereWithUInt8ConditionMixedDTypesAndNumbers) {
  const Tensor cond = condition({9, 33}, 21);
  const Tensor cond_u8 = mul(cond.to(DType::UInt8), Scalar(7));  // any nonzero byte is true
  const Tensor a = uniform({9, 33}, -2, 2, 22, DType::BFloat16);
  const Tensor b = uniform({9, 33}, -2, 2, 23, DType::Float32);
  // bfloat16 with float32: a float32 result, a converted on the device.
  expect_same_bits(where(cond.to(kVulkan), a.to(kVulkan), b.to(kVulkan)), where(cond, a, b));
  expect_same_bits(where(cond_u8.to(kVulkan), a.to(kVulkan), b.to(kVulkan)), where(cond_u8, a, b));
  // float32 into float16 through a number: the result is a's dtype (PyTorch's promotion).
  const Tensor h = uniform({9, 33}, -2, 2, 24, DType::Float16);
  expect_same_bits(where(cond.to(kVulkan), h.to(kVulkan), Scalar(0.1)), where(cond, h, Scalar(0.1)));
  expect_same_bits(where(cond.to(kVulkan), Scalar(-kInf), h.to(kVulkan)), where(cond, Scalar(-kInf), h));
  // Both numbers: the attention mask's bias, 0 where allowed and -inf elsewhere.
  expect_same_bits(where(cond.to(kVulkan), Scalar(0.0), Scalar(-kInf)), where(cond, Scalar(0.0), Scalar(-kInf)));
  expect_same_bits(where(cond.to(kVulkan), Scalar(int64_t{3}), Scalar(int64_t{-4})),
                   where(cond, Scalar(int64_t{3}), Scalar(int64_t{-4})));
}

TEST_F(VulkanWhere, WhereAndClampOfManyDimsAndEmpty) {
  // 8 dims reversed (none merge), the condition broadcast along every other dim.
  Shape sizes = {2, 3, 2, 2, 3, 2, 2, 3};
  Shape reversed(sizes.size());
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  const Tensor a = uniform(sizes, -2, 2, 31).permute(reversed);
  const Tensor ad = uniform(sizes, -2, 2, 31).to(kVulkan).permute(reversed);
  Shape cond_sizes = a.sizes();
  for (size_t d = 0; d < cond_sizes.size(); d += 2) cond_sizes[d] = 1;
  const Tensor cond = condition(cond_sizes, 32);
  expect_same_bits(where(cond.to(kVulkan), ad, Scalar(9.0)), where(cond, a, Scalar(9.0)));
  expect_same_bits(clamp(ad, Scalar(-0.5), Scalar(0.75)), clamp(a, Scalar(-0.5), Scalar(0.75)));
  const Tensor empty = zeros({0, 3});
  EXPECT_EQ(where(empty.to(DType::Bool).to(kVulkan), empty.to(kVulkan), Scalar(1.0)).sizes(), (Shape{0, 3}));
}

TEST_F(VulkanWhere, ClampMatchesCpuWithTensorAndNumberBoundsAndNaN) {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = uniform({11, 37}, -3, 3, 41, dt);
    const Tensor lo = uniform({11, 1}, -2, 0, 42, dt);
    const Tensor hi = uniform({37}, 0, 2, 43, dt).t();
    expect_same_bits(clamp(x.to(kVulkan), lo.to(kVulkan), hi.to(kVulkan)), clamp(x, lo, hi));
    expect_same_bits(clamp(x.to(kVulkan).t(), Scalar(-1.0), Scalar(1.5)), clamp(x.t(), Scalar(-1.0), Scalar(1.5)));
    // lo > hi gives hi everywhere (PyTorch).
    expect_same_bits(clamp(x.to(kVulkan), Scalar(1.0), Scalar(-1.0)), clamp(x, Scalar(1.0), Scalar(-1.0)));
    // A lone NaN number bound returns x (PyTorch's CPU kernels), a copy on the device.
    expect_same_bits(clamp(x.to(kVulkan), Scalar(kNaN), std::nullopt), clamp(x, Scalar(kNaN), std::nullopt));
    // One bound: maximum / minimum (the binary kernel).
    expect_same_bits(clamp(x.to(kVulkan), Scalar(-0.25), std::nullopt), clamp(x, Scalar(-0.25), std::nullopt));
    expect_same_bits(clamp_max(x.to(kVulkan), hi.to(kVulkan)), clamp_max(x, hi));
  }
  // A NaN in x or in either bound gives NaN.
  const Tensor x = ew_test::make_tensor({kNaN, 0.5, 0.5, -kInf, kInf, -0.0}, DType::Float32);
  const Tensor lo = ew_test::make_tensor({0.0, kNaN, 0.0, -1.0, -1.0, 0.0}, DType::Float32);
  const Tensor hi = ew_test::make_tensor({1.0, 1.0, kNaN, 1.0, 1.0, 1.0}, DType::Float32);
  expect_close(clamp(x.to(kVulkan), lo.to(kVulkan), hi.to(kVulkan)), clamp(x, lo, hi), 0, 0);
}

TEST_F(VulkanWhere, MaskedFillMatchesCpu) {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Int64, DType::Bool}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = uniform({23, 9}, -5, 5, 61).to(dt).t();  // strided
    const Tensor mask = condition({1, 23}, 62);                 // broadcast along rows
    const Scalar value = dt == DType::Bool ? Scalar(true) : Scalar(int64_t{-3});
    expect_same_bits(masked_fill(x.to(kVulkan), mask.to(kVulkan), value), masked_fill(x, mask, value));
    // In place, into a strided window of a bigger device tensor.
    Tensor cpu = uniform({9, 46}, -5, 5, 63).to(dt);
    Tensor dev = cpu.to(kVulkan);
    masked_fill_(cpu.slice(1, 1, std::nullopt, 2), mask.expand({9, 23}), value);
    masked_fill_(dev.slice(1, 1, std::nullopt, 2), mask.to(kVulkan).expand({9, 23}), value);
    expect_same_bits(dev, cpu);
  }
  // Scores hidden above the diagonal with -inf, the mask compared on the device.
  const Tensor scores = uniform({5, 5}, -1, 1, 64);
  const Tensor col = arange(Scalar(5)).to(DType::Float32).unsqueeze(0), row = col.t();
  const Tensor future = gt(col.to(kVulkan), row.to(kVulkan));
  expect_same_bits(masked_fill(scores.to(kVulkan), future, Scalar(-kInf)),
                   masked_fill(scores, gt(col, row), Scalar(-kInf)));
}

// Masks built and combined on the device: logical and bitwise ops on bool, logical ops
// and isnan/isinf/isfinite on floats, bool operands in float arithmetic (0 and 1).
TEST_F(VulkanWhere, BoolMaskOpsMatchCpu) {
  const Tensor m = condition({6, 35}, 71);
  const Tensor n = condition({35}, 72);
  const Tensor md = m.to(kVulkan), nd = n.to(kVulkan);
  expect_same_bits(logical_not(md), logical_not(m));
  expect_same_bits(bitwise_not(md), bitwise_not(m));
  expect_same_bits(logical_and(md, nd), logical_and(m, n));
  expect_same_bits(logical_or(md.t(), nd.unsqueeze(1)), logical_or(m.t(), n.unsqueeze(1)));
  expect_same_bits(logical_xor(md, nd), logical_xor(m, n));
  expect_same_bits(bitwise_and(md, nd), bitwise_and(m, n));
  expect_same_bits(bitwise_or(md, nd), bitwise_or(m, n));
  expect_same_bits(bitwise_xor(md, nd), bitwise_xor(m, n));
  expect_same_bits(eq(md, nd), eq(m, n));
  expect_same_bits(ne(md, nd), ne(m, n));
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = ew_test::make_tensor({kNaN, kInf, -kInf, -0.0, 0.0, 1e-40, -2.5, 3e38, 1.0}, dt);
    const Tensor xd = x.to(kVulkan);
    expect_same_bits(isnan(xd), isnan(x));
    expect_same_bits(isinf(xd), isinf(x));
    expect_same_bits(isfinite(xd), isfinite(x));
    expect_same_bits(logical_not(xd), logical_not(x));
    const Tensor y = ew_test::make_tensor({0.0, 1.0, 0.0, 2.0, -0.0, 0.0, 1.0, 0.0, kNaN}, dt);
    expect_same_bits(logical_and(xd, y.to(kVulkan)), logical_and(x, y));
    expect_same_bits(logical_or(xd, y.to(kVulkan)), logical_or(x, y));
    expect_same_bits(logical_xor(xd, y.to(kVulkan)), logical_xor(x, y));
  }
  // A bool mask in float arithmetic is 0 and 1.
  const Tensor v = uniform({6, 35}, -2, 2, 73);
  expect_same_bits(mul(v.to(kVulkan), md), mul(v, m));
  expect_same_bits(add(md, v.to(kVulkan)), add(m, v));
}

// Masks converted on the device: bool and uint8 to every float storage dtype (0 and 1,
// 0..255), float storage to bool (nonzero, NaN included, is true; -0 is false).
TEST_F(VulkanWhere, MaskConversionsMatchCpu) {
  const Tensor m = condition({7, 19}, 81);
  const Tensor bytes = uniform({7, 19}, 0, 255, 82).to(DType::UInt8);
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16, DType::Float8_e4m3fn, DType::Float8_e5m2}) {
    SCOPED_TRACE(dtype_name(dt));
    expect_same_bits(m.to(kVulkan).t().to(dt), m.t().to(dt));
    expect_same_bits(bytes.to(kVulkan).to(dt), bytes.to(dt));
    const Tensor x = ew_test::make_tensor({kNaN, kInf, -kInf, -0.0, 0.0, 1e-40, -2.5, 3e38, 1.0}, dt);
    expect_same_bits(x.to(kVulkan).to(DType::Bool), x.to(DType::Bool));
  }
}

TEST_F(VulkanWhere, MixedDevicesAndUnsupportedOperandsAreClearErrors) {
  const Tensor dev = ones({3}).to(kVulkan);
  const Tensor host_cond = ones({3}, DType::Bool);
  expect_error([&] { where(host_cond, dev, dev); }, ErrorKind::Runtime, "Expected all tensors to be on the same device");
  expect_error([&] { clamp(dev, ones({3}), ones({3}).to(kVulkan)); }, ErrorKind::Runtime, "same device");
  // A condition of another dtype is PyTorch's TypeError, on the device as on the CPU.
  expect_error([&] { where(dev, dev, dev); }, ErrorKind::Type, "expected condition to be a boolean tensor");
  // int32 with int64 would need an integer conversion, which the device does not have yet.
  const Tensor i32 = ones({3}, DType::Int32).to(kVulkan), i64 = ones({3}, DType::Int64).to(kVulkan);
  expect_error([&] { where(host_cond.to(kVulkan), i32, i64); }, ErrorKind::NotImplemented,
               "where of int32 and int64 into int64 is not implemented on vulkan yet");
  // clamp of integers computes in integers: no Vulkan kernel.
  expect_error([&] { clamp(i32, Scalar(0), Scalar(1)); }, ErrorKind::NotImplemented, "clamp");
}

}  // namespace
}  // namespace kiln
