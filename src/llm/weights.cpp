#include "llm/weights.h"

#include <algorithm>
#include <cmath>

#include "kiln/error.h"
#include "kiln/ops/elementwise.h"  // sub
#include "kiln/ops/linear.h"
#include "kiln/ops/reduce.h"  // norm

namespace kiln::llm {
namespace {

constexpr const char* kOp = "load weights";
constexpr int64_t kFp8Block = 128;  // Hugging Face weight_block_size [128, 128] (spec §5.1)

bool is_plain_float(DType t) { return t == DType::Float32 || t == DType::BFloat16 || t == DType::Float16; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// |dequant(q) - w|_F^2 and |w|_F^2 of a [rows, K] matrix, a few MiB at a time so the
// float32 temporaries stay small even for lm_head.
std::pair<double, double> squared_errors(const Tensor& original, const Tensor& q, const Tensor& scale) {
  const int64_t rows = original.size(0);
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(1, original.size(1)));
  double err = 0.0, ref = 0.0;
  for (int64_t r = 0; r < rows; r += chunk) {
    const int64_t n = std::min(chunk, rows - r);
    Tensor o = original.narrow(0, r, n).to(DType::Float32);
    const double e = norm(sub(dequantize_fp8(q.narrow(0, r, n), scale.narrow(0, r, n)), o)).item().to_double();
    const double w = norm(o).item().to_double();
    err += e * e;
    ref += w * w;
  }
  return {err, ref};
}

}  // namespace

Tensor Linear::operator()(const Tensor& x) const {
  if (scale) return linear_fp8(x, weight, *scale);
  return linear(x.to(weight.dtype()), weight);
}

int64_t Linear::bytes() const {
  return static_cast<int64_t>(weight.nbytes() + (scale ? scale->nbytes() : 0));
}

WeightLoader::WeightLoader(const Checkpoint& checkpoint, WeightFormat format,
                           std::function<void(std::string_view, int64_t, int64_t)> progress)
    : checkpoint_(checkpoint), format_(format), progress_(std::move(progress)) {
  total_tensors_ = static_cast<int64_t>(checkpoint_.names().size());
}

void WeightLoader::step() {
  ++done_tensors_;
  if (progress_) progress_("weights", std::min(done_tensors_, total_tensors_), total_tensors_);
}

void WeightLoader::finish() {
  if (progress_) progress_("weights", total_tensors_, total_tensors_);
}

Tensor WeightLoader::checked_float(const std::string& name, const Shape& shape) {
  Tensor t = checkpoint_.get(name, shape);
  KILN_CHECK_KIND(is_plain_float(t.dtype()), Type, kOp, "tensor '{}' is {}; expected float32, bfloat16 or float16",
                  name, dtype_name(t.dtype()));
  step();
  return t;
}

Tensor WeightLoader::small(const std::string& name, const Shape& shape) {
  Tensor t = checked_float(name, shape).to(DType::Float32).contiguous();
  parameter_count_ += t.numel();
  resident_bytes_ += static_cast<int64_t>(t.nbytes());
  return t;
}

Tensor WeightLoader::embedding(const std::string& name, int64_t vocab, int64_t hidden) {
  Tensor t = checked_float(name, {vocab, hidden});
  if (format_ == WeightFormat::Float32 || format_ == WeightFormat::BFloat16) {
    const DType target = format_ == WeightFormat::Float32 ? DType::Float32 : DType::BFloat16;
    if (t.dtype() != target) {
      t = t.to(target);
      checkpoint_.release(name);
    }
  }
  parameter_count_ += t.numel();
  resident_bytes_ += static_cast<int64_t>(t.nbytes());
  return t;
}

WeightLoader::Loaded WeightLoader::quantize(const Tensor& weight, int64_t matrix_rows) {
  // Rows are the output features of every matrix ([E, N, K] flattens to [E*N, K]).
  const int64_t k = weight.size(-1);
  Tensor rows = weight.reshape({-1, k});
  auto [q, scale] = quantize_fp8_rowwise(rows);
  // One relative error per matrix, as if fused experts were separate tensors.
  const int64_t per_matrix = matrix_rows > 0 ? matrix_rows : weight.size(-2);
  for (int64_t r = 0; r + per_matrix <= rows.size(0) && per_matrix > 0; r += per_matrix) {
    auto [err, ref] = squared_errors(rows.narrow(0, r, per_matrix), q.narrow(0, r, per_matrix),
                                     scale.narrow(0, r, per_matrix));
    const double rel = ref > 0.0 ? std::sqrt(err / ref) : 0.0;
    ++quantized_tensors_;
    max_quant_error_ = std::max(max_quant_error_, rel);
    sum_sq_quant_error_ += rel * rel;
  }
  Shape scale_shape(weight.sizes().begin(), weight.sizes().end() - 1);
  return {q.view(weight.sizes()), scale.view(scale_shape)};
}

WeightLoader::Loaded WeightLoader::convert_fp8(const std::string& name, const Tensor& weight, const Tensor& scale) {
  if (format_ == WeightFormat::AsStored || format_ == WeightFormat::Fp8) return {weight, scale};
  const DType target = format_ == WeightFormat::Float32 ? DType::Float32 : DType::BFloat16;
  Tensor out;
  if (weight.dim() == 2) {
    out = dequantize_fp8(weight, scale, target);
  } else {
    out = Tensor::empty(weight.sizes(), target);
    for (int64_t e = 0; e < weight.size(0); ++e) {
      out.select(0, e).copy_(dequantize_fp8(weight.select(0, e), scale.select(0, e), target));
    }
  }
  checkpoint_.release(name);
  checkpoint_.release(name + "_scale_inv");
  return {out, std::nullopt};
}

WeightLoader::Loaded WeightLoader::convert_float(const std::string& name, const Tensor& weight, LinearRole role,
                                                 int64_t matrix_rows) {
  switch (format_) {
    case WeightFormat::AsStored:
      return {weight, std::nullopt};
    case WeightFormat::Fp8: {
      if (role == LinearRole::Router) return {weight, std::nullopt};
      Loaded q = quantize(weight, matrix_rows);
      checkpoint_.release(name);
      return q;
    }
    case WeightFormat::Float32:
    case WeightFormat::BFloat16: {
      const DType target = format_ == WeightFormat::Float32 ? DType::Float32 : DType::BFloat16;
      if (weight.dtype() == target) return {weight, std::nullopt};
      Tensor cast = weight.to(target);
      checkpoint_.release(name);
      return {cast, std::nullopt};
    }
  }
  fail(ErrorKind::Value, kOp, "unknown weight format");
}

WeightLoader::Loaded WeightLoader::load_matrix(const std::string& name, const Shape& shape, LinearRole role,
                                               int64_t matrix_rows) {
  const TensorEntry& entry = checkpoint_.entry(name);
  if (entry.dtype != DType::Float8_e4m3fn) return convert_float(name, checked_float(name, shape), role, matrix_rows);

  const std::string scale_name = name + "_scale_inv";
  KILN_CHECK(checkpoint_.has(scale_name), kOp,
             "tensor '{}' is float8_e4m3fn but its block scales '{}' are missing (an FP8 weight needs them)", name,
             scale_name);
  Tensor weight = checkpoint_.get(name, shape);
  step();
  Shape scale_shape = shape;
  scale_shape[scale_shape.size() - 2] = ceil_div(shape[shape.size() - 2], kFp8Block);
  scale_shape[scale_shape.size() - 1] = ceil_div(shape[shape.size() - 1], kFp8Block);
  Tensor scale = checked_float(scale_name, scale_shape).to(DType::Float32).contiguous();
  return convert_fp8(name, weight, scale);
}

void WeightLoader::note_linear(const Loaded& loaded, bool count_parameters) {
  if (count_parameters) parameter_count_ += loaded.weight.numel();
  resident_bytes_ += static_cast<int64_t>(loaded.weight.nbytes() + (loaded.scale ? loaded.scale->nbytes() : 0));
  std::string kind(dtype_name(loaded.weight.dtype()));
  if (loaded.scale) kind += loaded.scale->dim() == loaded.weight.dim() ? " (128x128 block scales)" : " (row scales)";
  linear_dtypes_.insert(kind);
}

Linear WeightLoader::linear(const std::string& name, int64_t out_features, int64_t in_features, LinearRole role) {
  Loaded loaded = load_matrix(name, {out_features, in_features}, role);
  note_linear(loaded);
  return Linear{loaded.weight, loaded.scale};
}

Linear WeightLoader::tied_lm_head(const Tensor& embedding) {
  if (format_ != WeightFormat::Fp8) return Linear{embedding, std::nullopt};
  Loaded q = quantize(embedding, 0);
  note_linear(q, /*count_parameters=*/false);
  return Linear{q.weight, q.scale};
}

MoeExperts WeightLoader::experts(const ExpertNames& names, int64_t num_experts, int64_t width, int64_t hidden) {
  const std::string fused_gate_up = names.prefix + ".gate_up_proj";
  if (checkpoint_.has(fused_gate_up)) {
    Loaded gate_up = load_matrix(fused_gate_up, {num_experts, 2 * width, hidden}, LinearRole::Projection, width);
    Loaded down = load_matrix(names.prefix + ".down_proj", {num_experts, hidden, width}, LinearRole::Projection);
    note_linear(gate_up);
    note_linear(down);
    return MoeExperts::from_fused(gate_up.weight, down.weight, gate_up.scale, down.scale);
  }
  MoeExperts experts;
  experts.experts.reserve(static_cast<size_t>(num_experts));
  for (int64_t e = 0; e < num_experts; ++e) {
    const std::string base = names.prefix + "." + std::to_string(e) + ".";
    Linear gate = linear(base + names.gate + ".weight", width, hidden, LinearRole::Projection);
    Linear up = linear(base + names.up + ".weight", width, hidden, LinearRole::Projection);
    Linear down = linear(base + names.down + ".weight", hidden, width, LinearRole::Projection);
    experts.experts.push_back(SwigluWeights{gate.weight, up.weight, down.weight, gate.scale, up.scale, down.scale});
  }
  return experts;
}

std::string WeightLoader::linear_dtypes() const {
  std::string out;
  for (const std::string& kind : linear_dtypes_) out += (out.empty() ? "" : " + ") + kind;
  return out;
}

bool WeightLoader::any_bf16_or_fp8_linear() const {
  return std::any_of(linear_dtypes_.begin(), linear_dtypes_.end(), [](const std::string& kind) {
    return kind.rfind("bfloat16", 0) == 0 || kind.rfind("float8", 0) == 0;
  });
}

std::optional<Fp8QuantizationReport> WeightLoader::fp8_report() const {
  if (quantized_tensors_ == 0) return std::nullopt;
  return Fp8QuantizationReport{quantized_tensors_, max_quant_error_,
                               std::sqrt(sum_sq_quant_error_ / static_cast<double>(quantized_tensors_))};
}

}  // namespace kiln::llm
