#include "ops/composite/composite_util.h"

#include "kiln/error.h"
#include "kiln/ops/elementwise.h"

namespace kiln::composite::detail {

DType compute_dtype_of(const Tensor& t, const char* op, const char* name) {
  KILN_CHECK(t.defined(), op, "{} is undefined", name);
  const DType dt = t.dtype();
  KILN_CHECK_KIND(dt == DType::Float32 || dt == DType::Float64 || dt == DType::Float16 || dt == DType::BFloat16, Type,
                  op, "expected {} of dtype float32, float64, float16 or bfloat16, got {}", name, dtype_name(dt));
  return dt == DType::Float64 ? DType::Float64 : DType::Float32;
}

DType wider(DType a, DType b) {
  return a == DType::Float64 || b == DType::Float64 ? DType::Float64 : DType::Float32;
}

Tensor dequantized(const Tensor& weight, const std::optional<Tensor>& scale, const char* op) {
  KILN_CHECK(weight.defined() && weight.dim() == 2, op, "expected a 2-D weight, got {}",
             weight.defined() ? weight.shape_str() : "undefined");
  const Tensor w = weight.to(DType::Float32);
  if (weight.dtype() != DType::Float8_e4m3fn) {
    KILN_CHECK(!scale.has_value(), op, "scales are only for float8_e4m3fn weights, got a {} weight",
               dtype_name(weight.dtype()));
    return w;
  }
  KILN_CHECK(scale.has_value() && scale->defined(), op, "a float8_e4m3fn weight needs its float32 scales");
  KILN_CHECK_KIND(scale->dtype() == DType::Float32, Type, op, "scales must be float32, got {}",
                  dtype_name(scale->dtype()));
  constexpr int64_t block = 128;
  const int64_t rows = w.size(0), cols = w.size(1);
  const Shape per_row{rows};
  const Shape per_block{(rows + block - 1) / block, (cols + block - 1) / block};
  if (scale->sizes() == per_row) return mul(w, scale->unsqueeze(1));
  KILN_CHECK(scale->sizes() == per_block, op, "scales must be {} (per row) or {} (per 128x128 block), got {}",
             shape_to_string(per_row), shape_to_string(per_block), scale->shape_str());
  // Each block scale spread over its 128 x 128 weights, cut to the weight's edge.
  const int64_t rb = per_block[0], cb = per_block[1];
  const Tensor spread = scale->reshape({rb, 1, cb, 1}).expand({rb, block, cb, block}).reshape({rb * block, cb * block});
  return mul(w, spread.narrow(0, 0, rows).narrow(1, 0, cols));
}

}  // namespace kiln::composite::detail
