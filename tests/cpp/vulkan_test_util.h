// Shared by the Vulkan tests: a fixture that skips (with the probe's reason) when no
// Vulkan device is usable, turns the validation layer on when it is installed, and
// fails a test that caused a validation error; and comparisons of device results with
// the CPU's.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kiln/tensor.h"
#include "kiln/vulkan.h"

namespace kiln::testing {

class VulkanTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

 private:
  int64_t validation_errors_before_ = 0;
};

// The raw bytes of a CPU tensor, contiguous.
std::vector<uint8_t> tensor_bytes(const Tensor& t);
// Expects a (on the device) and b (on the CPU) to hold the same bits.
void expect_same_bits(const Tensor& device_result, const Tensor& cpu_result);
// Expects |device - cpu| <= atol + rtol * |cpu| elementwise (read as float64); NaN must
// meet NaN, inf the same inf.
void expect_close(const Tensor& device_result, const Tensor& cpu_result, double rtol, double atol);

// Unit roundoff of a result stored in dt (0 for float32: the kernel's own error covers it).
double storage_eps(DType dt);
// Values uniform in [lo, hi) drawn in float32 from `seed`, then stored as dt (CPU).
Tensor uniform(const Shape& sizes, double lo, double hi, uint64_t seed, DType dt = DType::Float32);

}  // namespace kiln::testing
