#include "vulkan_test_util.h"

#include <cmath>
#include <cstdlib>

#include "kiln/generator.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"

namespace kiln::testing {
namespace {

// Before any test touches Vulkan: the validation layer checks every test when it is
// installed (vulkan-validationlayers); an explicit KILN_VULKAN_VALIDATION=0 wins.
const bool validation_requested = [] {
  setenv("KILN_VULKAN_VALIDATION", "1", 0);
  return true;
}();

}  // namespace

void VulkanTest::SetUp() {
  const VulkanAvailability a = vulkan_availability();
  if (!a.usable) GTEST_SKIP() << "no usable Vulkan device: " << a.reason;
  validation_errors_before_ = vulkan_validation_error_count();
}

void VulkanTest::TearDown() {
  if (!vulkan_is_available()) return;
  vulkan_synchronize();
  EXPECT_EQ(vulkan_validation_error_count(), validation_errors_before_) << "Vulkan validation errors (see stderr)";
}

std::vector<uint8_t> tensor_bytes(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint8_t> bytes(c.nbytes());
  if (!bytes.empty()) std::memcpy(bytes.data(), c.data_ptr(), bytes.size());
  return bytes;
}

void expect_same_bits(const Tensor& device_result, const Tensor& cpu_result) {
  ASSERT_EQ(device_result.device().type, DeviceType::Vulkan);
  ASSERT_EQ(device_result.sizes(), cpu_result.sizes());
  ASSERT_EQ(device_result.dtype(), cpu_result.dtype());
  const auto got = tensor_bytes(device_result.to(kCPU));
  const auto want = tensor_bytes(cpu_result);
  ASSERT_EQ(got.size(), want.size());
  const size_t item = cpu_result.element_size();
  for (size_t i = 0; i < got.size(); i += item) {
    if (std::memcmp(&got[i], &want[i], item) != 0) {
      ADD_FAILURE() << "element " << i / item << " differs (" << cpu_result.describe() << ")";
      return;
    }
  }
}

void expect_close(const Tensor& device_result, const Tensor& cpu_result, double rtol, double atol) {
  ASSERT_EQ(device_result.device().type, DeviceType::Vulkan);
  ASSERT_EQ(device_result.sizes(), cpu_result.sizes());
  ASSERT_EQ(device_result.dtype(), cpu_result.dtype());
  const Tensor got = device_result.to(kCPU).to(DType::Float64).contiguous();
  const Tensor want = cpu_result.to(DType::Float64).contiguous();
  const double* g = got.data<double>();
  const double* w = want.data<double>();
  int failures = 0;
  for (int64_t i = 0; i < got.numel() && failures < 5; ++i) {
    const bool ok = std::isnan(w[i]) ? std::isnan(g[i])
                    : std::isinf(w[i]) ? g[i] == w[i]
                                       : std::fabs(g[i] - w[i]) <= atol + rtol * std::fabs(w[i]);
    if (!ok) {
      ++failures;
      ADD_FAILURE() << "element " << i << ": vulkan " << g[i] << ", cpu " << w[i] << " (rtol " << rtol << ", atol "
                    << atol << ")";
    }
  }
}

double storage_eps(DType dt) {
  switch (dt) {
    case DType::Float16: return std::ldexp(1.0, -10);
    case DType::BFloat16: return std::ldexp(1.0, -7);
    case DType::Float8_e4m3fn: return std::ldexp(1.0, -3);
    case DType::Float8_e5m2: return std::ldexp(1.0, -2);
    default: return 0;
  }
}

Tensor uniform(const Shape& sizes, double lo, double hi, uint64_t seed, DType dt) {
  Generator gen(seed);
  return add(mul(rand(sizes, DType::Float32, &gen), Scalar(hi - lo)), Scalar(lo)).to(dt);
}

}  // namespace kiln::testing
