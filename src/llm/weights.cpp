#include "llm/weights.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/shape.h"  // stack
#include "kiln/runtime.h"    // cpu_info: available memory

namespace kiln::llm {
namespace {

constexpr const char* kOp = "load weights";

bool is_plain_float(DType t) { return t == DType::Float32 || t == DType::BFloat16 || t == DType::Float16; }

// A view of the mapped checkpoint (Checkpoint::get marks those read-only), not a copy.
bool is_mapped(const Tensor& t) { return !t.storage()->from_allocator && t.storage()->read_only; }

std::atomic<bool> g_available_overridden{false};
std::atomic<int64_t> g_available_override{0};

}  // namespace

bool may_pack_experts(int64_t bytes) {
  const int64_t available = g_available_overridden.load(std::memory_order_acquire)
                                ? g_available_override.load(std::memory_order_relaxed)
                                : cpu_info().available_memory_bytes;
  return bytes <= available - kPackingHeadroomBytes;
}

void override_available_memory_for_packing(std::optional<int64_t> bytes) {
  g_available_override.store(bytes.value_or(0), std::memory_order_relaxed);
  g_available_overridden.store(bytes.has_value(), std::memory_order_release);
}

LinearFormat LinearFormat::of(const Tensor& weight, const std::optional<Tensor>& scale) {
  if (!scale) return {weight.dtype(), Scales::None};
  return {weight.dtype(), scale->dim() == weight.dim() ? Scales::Block128 : Scales::PerRow};
}

std::string LinearFormat::name() const {
  std::string out(dtype_name(dtype));
  if (scales == Scales::Block128) out += " (128x128 block scales)";
  if (scales == Scales::PerRow) out += " (row scales)";
  return out;
}

Linear::Linear(Tensor weight_, std::optional<Tensor> scale_)
    : weight(std::move(weight_)), scale(std::move(scale_)), format(LinearFormat::of(weight, scale)) {}

Tensor Linear::operator()(const Tensor& x) const {
  if (format.scales != LinearFormat::Scales::None) return linear_fp8(x, weight, *scale);
  return linear(x.to(format.dtype), weight);
}

int64_t Linear::bytes() const {
  return static_cast<int64_t>(weight.nbytes() + (scale ? scale->nbytes() : 0));
}

WeightLoader::WeightLoader(const Checkpoint& checkpoint, WeightFormat format,
                           std::function<void(std::string_view, int64_t, int64_t)> progress, bool pack_mapped_experts)
    : checkpoint_(checkpoint),
      plan_(plan_for(format)),
      pack_mapped_experts_(pack_mapped_experts),
      progress_(std::move(progress)) {
  total_tensors_ = static_cast<int64_t>(checkpoint_.names().size());
}

WeightLoader::Plan WeightLoader::plan_for(WeightFormat format) {
  switch (format) {
    case WeightFormat::AsStored: return {};
    case WeightFormat::Float32: return {DType::Float32, false, true};
    case WeightFormat::BFloat16: return {DType::BFloat16, false, true};
    case WeightFormat::Fp8: return {std::nullopt, true, true};
  }
  fail(ErrorKind::Value, kOp, "unknown weight format");
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
  if (plan_.cast_to && t.dtype() != *plan_.cast_to) {
    t = t.to(*plan_.cast_to);
    checkpoint_.release(name);
  }
  parameter_count_ += t.numel();
  resident_bytes_ += static_cast<int64_t>(t.nbytes());
  return t;
}

Linear WeightLoader::quantize(const Tensor& weight, int64_t matrix_rows) {
  // Rows are the output features of every matrix ([E, N, K] flattens to [E*N, K]).
  const int64_t k = weight.size(-1);
  const Fp8RowwiseQuantization q = quantize_fp8_rowwise_with_error(weight.reshape({-1, k}));
  // One relative error per matrix, as if fused experts were separate tensors.
  const int64_t rows = q.weight.size(0);
  const int64_t per_matrix = matrix_rows > 0 ? matrix_rows : weight.size(-2);
  const double* err = q.squared_error.data<double>();
  const double* ref = q.squared_norm.data<double>();
  for (int64_t r = 0; r + per_matrix <= rows && per_matrix > 0; r += per_matrix) {
    double e = 0.0, w = 0.0;
    for (int64_t i = r; i < r + per_matrix; ++i) {
      e += err[i];
      w += ref[i];
    }
    const double rel = w > 0.0 ? std::sqrt(e / w) : 0.0;
    ++quantized_tensors_;
    max_quant_error_ = std::max(max_quant_error_, rel);
    sum_sq_quant_error_ += rel * rel;
  }
  Shape scale_shape(weight.sizes().begin(), weight.sizes().end() - 1);
  return {q.weight.view(weight.sizes()), q.scale.view(scale_shape)};
}

Linear WeightLoader::convert_fp8(const std::string& name, const Tensor& weight, const Tensor& scale) {
  if (!plan_.cast_to) {  // as stored, also for Fp8: these keep their block scales
    checkpoint_.prefault(name);
    return {weight, scale};
  }
  const DType target = *plan_.cast_to;
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

Linear WeightLoader::convert_float(const std::string& name, const Tensor& weight, LinearRole role,
                                                 int64_t matrix_rows) {
  if (plan_.cast_to) {
    if (weight.dtype() == *plan_.cast_to) {
      checkpoint_.prefault(name);
      return {weight, std::nullopt};
    }
    Tensor cast = weight.to(*plan_.cast_to);
    checkpoint_.release(name);
    return {cast, std::nullopt};
  }
  if (!plan_.quantize_fp8) {
    checkpoint_.prefault(name);
    return {weight, std::nullopt};
  }
  if (role == LinearRole::Router) return {weight, std::nullopt};
  Linear q = quantize(weight, matrix_rows);
  checkpoint_.release(name);
  return q;
}

Linear WeightLoader::load_matrix(const std::string& name, const Shape& shape, LinearRole role,
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
  scale_shape[scale_shape.size() - 2] = ceil_div(shape[shape.size() - 2], kFp8ScaleBlock);
  scale_shape[scale_shape.size() - 1] = ceil_div(shape[shape.size() - 1], kFp8ScaleBlock);
  Tensor scale = checked_float(scale_name, scale_shape).to(DType::Float32).contiguous();
  return convert_fp8(name, weight, scale);
}

void WeightLoader::note_linear(const Linear& loaded, bool count_parameters) {
  if (count_parameters) parameter_count_ += loaded.weight.numel();
  resident_bytes_ += static_cast<int64_t>(loaded.weight.nbytes() + (loaded.scale ? loaded.scale->nbytes() : 0));
  linear_formats_.insert(loaded.format);
}

Linear WeightLoader::linear(const std::string& name, int64_t out_features, int64_t in_features, LinearRole role) {
  Linear loaded = load_matrix(name, {out_features, in_features}, role);
  note_linear(loaded);
  return loaded;
}

Linear WeightLoader::tied_lm_head(const Tensor& embedding) {
  if (!plan_.quantize_fp8) return Linear{embedding, std::nullopt};
  Linear q = quantize(embedding, 0);
  note_linear(q, /*count_parameters=*/false);
  return q;
}

MoeExperts WeightLoader::experts(const ExpertNames& names, int64_t num_experts, int64_t width, int64_t hidden) {
  const std::string fused_gate_up = names.prefix + ".gate_up_proj";
  if (checkpoint_.has(fused_gate_up)) {
    const std::string fused_down = names.prefix + ".down_proj";
    Linear gate_up = load_matrix(fused_gate_up, {num_experts, 2 * width, hidden}, LinearRole::Projection, width);
    Linear down = load_matrix(fused_down, {num_experts, hidden, width}, LinearRole::Projection);
    // Mapped [E, 2I, H] and [E, H, I] tensors: one copy each, in huge pages (see
    // kPackingHeadroomBytes); the scales are small and stay as they are.
    for (auto [linear, name] : {std::pair{&gate_up, &fused_gate_up}, std::pair{&down, &fused_down}}) {
      if (pack_mapped_experts_ && is_mapped(linear->weight) && may_pack_experts(linear->bytes())) {
        *linear = Linear{linear->weight.clone(), linear->scale};
        checkpoint_.release(*name);
      }
    }
    note_linear(gate_up);
    note_linear(down);
    return MoeExperts::from_fused(gate_up.weight, down.weight, gate_up.scale, down.scale);
  }
  MoeExperts experts;
  experts.experts.resize(static_cast<size_t>(num_experts));
  // One projection of every expert at a time, packed before the next is loaded.
  const auto load_projection = [&](const std::string& proj, int64_t rows, int64_t cols, Tensor SwigluWeights::*weight,
                                   std::optional<Tensor> SwigluWeights::*scale) {
    std::vector<Tensor> weights, scales;
    std::vector<std::string> names_loaded;
    for (int64_t e = 0; e < num_experts; ++e) {
      names_loaded.push_back(names.prefix + "." + std::to_string(e) + "." + proj + ".weight");
      Linear l = linear(names_loaded.back(), rows, cols, LinearRole::Projection);
      weights.push_back(l.weight);
      if (l.scale) scales.push_back(*l.scale);
    }
    // Converted matrices are separate allocations of a megabyte or two, each in 4 KiB
    // pages, and mapped ones sit in the mapping's 4 KiB pages; decode streams them, and on
    // these (virtual) machines a TLB miss per page costs about half the bandwidth. One
    // [E, rows, cols] tensor is one large allocation, which the allocator backs with huge
    // pages: always for copies, for mapped views when the memory allows.
    int64_t projection_bytes = 0;
    for (const Tensor& w : weights) projection_bytes += static_cast<int64_t>(w.nbytes());
    for (const Tensor& s : scales) projection_bytes += static_cast<int64_t>(s.nbytes());
    const bool mapped = !weights.empty() && is_mapped(weights.front());
    if (plan_.copies || (mapped && pack_mapped_experts_ && may_pack_experts(projection_bytes))) {
      const Tensor packed = stack(weights);
      for (int64_t e = 0; e < num_experts; ++e) weights[e] = packed.select(0, e);
      if (!scales.empty()) {
        const Tensor packed_scales = stack(scales);
        for (int64_t e = 0; e < num_experts; ++e) scales[e] = packed_scales.select(0, e);
      }
      // Weights kept in their stored dtype were mapped views: the copy replaces them.
      for (const std::string& name : names_loaded) checkpoint_.release(name);
    }
    for (int64_t e = 0; e < num_experts; ++e) {
      experts.experts[e].*weight = weights[e];
      if (!scales.empty()) experts.experts[e].*scale = scales[e];
    }
  };
  load_projection(names.gate, width, hidden, &SwigluWeights::gate, &SwigluWeights::gate_scale);
  load_projection(names.up, width, hidden, &SwigluWeights::up, &SwigluWeights::up_scale);
  load_projection(names.down, hidden, width, &SwigluWeights::down, &SwigluWeights::down_scale);
  return experts;
}

std::string WeightLoader::linear_dtypes() const {
  std::set<std::string> names;  // listed by name, whatever the order of the formats
  for (const LinearFormat& format : linear_formats_) names.insert(format.name());
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : " + ") + name;
  return out;
}

std::optional<Fp8QuantizationReport> WeightLoader::fp8_report() const {
  if (quantized_tensors_ == 0) return std::nullopt;
  return Fp8QuantizationReport{quantized_tensors_, max_quant_error_,
                               std::sqrt(sum_sq_quant_error_ / static_cast<double>(quantized_tensors_))};
}

}  // namespace kiln::llm
