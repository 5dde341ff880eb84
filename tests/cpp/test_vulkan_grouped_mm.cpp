// The Vulkan grouped_mm (offs read on the device) against the CPU kernel on the same
// inputs: all four cases, every dtype, row- and column-major operands (views made on the
// device the same way as on the host), empty groups, rows/columns past offs[-1] (zeros),
// grouped_mm_fp8, and offsets the host would refuse (NaN on the device).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "bf16_dot_mode.h"
#include "kiln/generator.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/grouped_mm.h"
#include "test_util.h"
#include "vulkan_test_util.h"

namespace kiln {
namespace {

using VulkanGroupedMm = testing::VulkanTest;

constexpr double kEps32 = std::numeric_limits<float>::epsilon();

double eps_of(DType dt) {
  return dt == DType::BFloat16 ? 0x1p-7 : dt == DType::Float16 ? 0x1p-10 : 0.0;
}

// A host operand and the same view of a device copy of its storage.
struct Operand {
  Tensor host, device;
};

Tensor random_base(const Shape& shape, DType dt, uint64_t seed) {
  Generator g(seed);
  return randn(shape, DType::Float64, &g).to(dt);
}

// Leading dims padded to 16 bytes (grouped_mm's stride rule); column-major operands are
// transposes of row-major ones.
int64_t padded(int64_t n) { return std::max<int64_t>(8, (n + 7) / 8 * 8); }

Operand matrix(int64_t rows, int64_t cols, DType dt, bool column_major, uint64_t seed) {
  const Tensor base = random_base(column_major ? Shape{cols, padded(rows)} : Shape{rows, padded(cols)}, dt, seed);
  const auto view = [&](const Tensor& t) {
    return column_major ? t.narrow(1, 0, rows).t() : t.narrow(1, 0, cols);
  };
  return {view(base), view(base.to(kVulkan))};
}

Operand batch(int64_t g, int64_t rows, int64_t cols, DType dt, bool column_major, uint64_t seed) {
  const Tensor base =
      random_base(column_major ? Shape{g, cols, padded(rows)} : Shape{g, rows, padded(cols)}, dt, seed);
  const auto view = [&](const Tensor& t) {
    return column_major ? t.narrow(2, 0, rows).transpose(1, 2) : t.narrow(2, 0, cols);
  };
  return {view(base), view(base.to(kVulkan))};
}

Tensor int32_tensor(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::Int32);
  for (size_t i = 0; i < v.size(); ++i) t.data<int32_t>()[i] = v[i];
  return t;
}

// Both sides sum K float32 products in some order: each within K eps32 sum|a b| of the
// exact value (Higham 3.1, with a factor 2 of margin), so they differ by at most twice
// that; sum|a b| is grouped_mm of |a| and |b| on the host. A narrow output adds one
// rounding of each side (eps_out |result|).
void expect_matches_cpu(const Tensor& got, const Tensor& want, const Tensor& magnitude, int64_t K,
                        const std::string& what) {
  ASSERT_EQ(got.device().type, DeviceType::Vulkan) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const Tensor g = got.to(kCPU).to(DType::Float64).contiguous();
  const Tensor w = want.to(DType::Float64).contiguous();
  const Tensor m = magnitude.to(DType::Float64).contiguous();
  const double eps_out = eps_of(want.dtype());
  int bad = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    const double gv = g.data<double>()[i], wv = w.data<double>()[i];
    const double tol = 4.0 * static_cast<double>(K) * kEps32 * m.data<double>()[i] + 2.0 * eps_out * std::abs(wv);
    if (!(std::abs(gv - wv) <= tol) && bad++ < 5) {
      ADD_FAILURE() << what << " element " << i << ": got " << gv << ", CPU " << wv << " +- " << tol;
    }
  }
}

// |t| in float32, row-major with the last dim padded to 16 bytes (grouped_mm's rule).
Tensor abs_f32(const Tensor& t) {
  Shape wide = t.sizes();
  wide.back() = padded(wide.back());
  Tensor out = zeros(wide).narrow(t.dim() - 1, 0, t.size(-1));
  out.copy_(abs(t.to(DType::Float32)));
  return out;
}

const DType kDtypes[] = {DType::Float32, DType::BFloat16, DType::Float16};

std::string tag(const char* kind, DType dt, bool a_col, bool b_col) {
  return std::string(kind) + " " + std::string(dtype_name(dt)) + (a_col ? " A col-major" : "") + (b_col ? " B col-major" : "");
}

void check(const char* kind, DType dt, bool a_col, bool b_col, const Operand& a, const Operand& b,
           const std::vector<int32_t>* offs, int64_t K) {
  std::optional<Tensor> host_offs, device_offs;
  if (offs != nullptr) {
    host_offs = int32_tensor(*offs);
    device_offs = host_offs->to(kVulkan);
  }
  const Tensor want = grouped_mm(a.host, b.host, host_offs);
  const Tensor magnitude = grouped_mm(abs_f32(a.host), abs_f32(b.host), host_offs);
  expect_matches_cpu(grouped_mm(a.device, b.device, device_offs), want, magnitude, K, tag(kind, dt, a_col, b_col));
}

TEST_F(VulkanGroupedMm, AllFourCasesMatchCpu) {
  const std::vector<int32_t> rows = {0, 1, 4, 4, 12, 30, 31, 31};  // rows 31..39 past offs[-1]
  const std::vector<int32_t> cols = {0, 9, 9, 40, 75};              // columns 75..79 past offs[-1]
  const std::vector<int32_t> ks = {0, 13, 13, 50, 64};              // groups 0 and 2 have no K
  for (DType dt : kDtypes) {
    for (bool a_col : {false, true}) {
      for (bool b_col : {false, true}) {
        check("2Dx3D", dt, a_col, b_col, matrix(40, 37, dt, a_col, 1), batch(8, 37, 70, dt, b_col, 2), &rows, 37);
        check("3Dx2D", dt, a_col, b_col, batch(5, 11, 29, dt, a_col, 3), matrix(29, 80, dt, b_col, 4), &cols, 29);
        check("2Dx2D", dt, a_col, b_col, matrix(9, 64, dt, a_col, 5), matrix(64, 21, dt, b_col, 6), &ks, 64);
        check("3Dx3D", dt, a_col, b_col, batch(3, 17, 45, dt, a_col, 7), batch(3, 45, 33, dt, b_col, 8), nullptr, 45);
      }
    }
  }
  // One decode row per group, and a group over the whole input.
  const std::vector<int32_t> one = {1, 2, 3};
  check("2Dx3D decode", DType::BFloat16, false, true, matrix(3, 64, DType::BFloat16, false, 9),
        batch(3, 64, 48, DType::BFloat16, true, 10), &one, 64);
}

TEST_F(VulkanGroupedMm, Fp8WeightsMatchCpu) {
  // The shaders multiply float32 x: the CPU's float32 path is their oracle (the GEMV's
  // bf16 dot path would round x to bf16 first).
  const bf16_dot_test::Bf16DotMode float32_cpu(0);
  const int64_t G = 4, N = 40, K = 136;
  const std::vector<int32_t> offs = {2, 2, 5, 9};  // rows 9, 10 past offs[-1]
  const Tensor w = mul(random_base({G, N, K}, DType::Float32, 20), Scalar(0.5)).to(DType::Float8_e4m3fn);
  const Tensor scale = add(abs(random_base({G, N}, DType::Float32, 21)), Scalar(0.5));
  for (DType dt : kDtypes) {
    const Tensor a = random_base({11, K}, dt, 22);
    const Tensor want = grouped_mm_fp8(a, w, scale, int32_tensor(offs));
    const Tensor got = grouped_mm_fp8(a.to(kVulkan), w.to(kVulkan), scale.to(kVulkan), int32_tensor(offs).to(kVulkan));
    const Tensor magnitude = grouped_mm_fp8(abs_f32(a), abs(w.to(DType::Float32)).to(DType::Float8_e4m3fn),
                                            scale, int32_tensor(offs));
    expect_matches_cpu(got, want, magnitude, K, std::string("fp8 ") + std::string(dtype_name(dt)));
  }
}

TEST_F(VulkanGroupedMm, OffsetsTheHostWouldRefuseGiveNaN) {
  const Operand a = matrix(8, 16, DType::Float32, false, 30);
  const Operand b = batch(2, 16, 8, DType::Float32, false, 31);
  for (const std::vector<int32_t>& offs : {std::vector<int32_t>{6, 4}, std::vector<int32_t>{4, 9},
                                           std::vector<int32_t>{-1, 8}}) {
    testing::expect_error([&] { grouped_mm(a.host, b.host, int32_tensor(offs)); }, ErrorKind::Value, "offs");
    const Tensor got = grouped_mm(a.device, b.device, int32_tensor(offs).to(kVulkan)).to(kCPU);
    for (int64_t i = 0; i < got.numel(); ++i) ASSERT_TRUE(std::isnan(got.data<float>()[i])) << i;
  }
  const Operand k2 = matrix(4, 16, DType::Float32, false, 32);
  const Operand k2b = matrix(16, 8, DType::Float32, false, 33);
  const Tensor got = grouped_mm(k2.device, k2b.device, int32_tensor({8, 20}).to(kVulkan)).to(kCPU);
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_TRUE(std::isnan(got.data<float>()[i])) << i;
  testing::expect_error([&] { grouped_mm(a.device, b.device, int32_tensor({4, 8})); }, ErrorKind::Runtime,
                        "same device");
}

}  // namespace
}  // namespace kiln
