// Installs the Vulkan linear kernel (shaders/linear.comp): y = x W^T (+ bias) for
// float32, float16 and bfloat16 weights, and float8_e4m3fn weights with per-row or
// 128 x 128 block scales; one work group per output element, so the decode GEMV (M = 1)
// reads each weight row once, coalesced. float64 and the FP8 quantisation helpers have
// no Vulkan kernel yet.
#include "backend/linear.h"
#include "backend/vulkan/vk_kernels.h"
#include "kiln/error.h"
#include "kiln/int_math.h"

namespace kiln::vulkan {
namespace {

void linear(const ExecutionContext&, const backend::LinearWeight& w, const backend::LinearActivations& act) {
  const char* op = "linear";
  const bool fp8 = w.dtype == DType::Float8_e4m3fn;
  KILN_CHECK_KIND(act.dtype == DType::Float32 || act.dtype == DType::Float16 || act.dtype == DType::BFloat16,
                  NotImplemented, op, "{} has no Vulkan linear kernel (float32, float16, bfloat16 and FP8 weights do)",
                  dtype_name(act.dtype));
  KILN_CHECK(act.M <= 65535, op, "the Vulkan linear kernel takes up to 65535 rows of input, got {}", act.M);
  int64_t x_elements = 0, y_elements = 0, w_elements = 0;
  KILN_CHECK(checked_mul(act.M, w.K, &x_elements) && checked_mul(act.M, w.N, &y_elements) &&
                 checked_mul(w.N - 1, w.row_stride, &w_elements) && checked_add(w_elements, w.K, &w_elements),
             op, "size overflow");
  const int64_t k_blocks = (w.K + kFp8ScaleBlock - 1) / kFp8ScaleBlock;
  const int64_t scale_elements =
      !fp8 ? 0 : w.scale_layout == backend::Fp8ScaleLayout::PerRow ? w.N : (w.N + kFp8ScaleBlock - 1) / kFp8ScaleBlock * k_blocks;
  const Binding y = bind_raw(act.y, act.dtype, y_elements, op);
  const Binding x = bind_raw(act.x, act.dtype, x_elements, op);
  const Binding wb = bind_raw(w.data, w.dtype, w_elements, op);
  const int64_t bias_elements = act.bias == nullptr ? 0 : (act.bias_stride == 0 ? 1 : w.N);
  const Binding b = act.bias != nullptr ? bind_raw(act.bias, act.dtype, bias_elements, op) : x;
  const Binding s = fp8 ? bind_raw(w.scale, DType::Float32, scale_elements, op) : x;
  struct {
    uint32_t M, N, K, row_stride, bias_stride, k_blocks, y_first, x_first, w_first, b_first, s_first;
  } push{static_cast<uint32_t>(act.M), static_cast<uint32_t>(w.N), static_cast<uint32_t>(w.K),
         static_cast<uint32_t>(w.row_stride), static_cast<uint32_t>(act.bias_stride), static_cast<uint32_t>(k_blocks),
         y.first, x.first, wb.first, b.first, s.first};
  const uint32_t scales = !fp8 ? 0u : w.scale_layout == backend::Fp8ScaleLayout::PerRow ? 1u : 2u;
  const uint32_t spec[] = {dtype_code(w.dtype), dtype_code(act.dtype), act.bias != nullptr ? 1u : 0u, scales};
  const auto grid = grid_for(w.N, 1, op);
  dispatch(op, "linear", spec, {y, x, wb, b, s}, &push, sizeof(push), grid[0], grid[1],
           static_cast<uint32_t>(act.M));
}

const bool registered = [] {
  backend::LinearKernels k;
  k.linear = &linear;
  k.quantize_fp8_rows = [](const ExecutionContext&, const backend::Fp8RowQuantization&) -> int64_t {
    missing_kernel("quantize_fp8");
  };
  k.dequantize_fp8_rows = [](const ExecutionContext&, const backend::LinearWeight&, float*) {
    missing_kernel("dequantize_fp8");
  };
  backend::linear_kernels.install(DeviceType::Vulkan, k);
  return true;
}();

}  // namespace
}  // namespace kiln::vulkan
