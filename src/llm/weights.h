// Weights as a model holds them, and the loader that reads them from a checkpoint in
// the requested WeightFormat (spec: models.md §0.6, §5, §8).
//
// Every tensor is read through Checkpoint::get with the shape the config implies, so a
// missing or misshapen tensor is an error naming it. Conversions (cast, dequantise,
// quantise) happen one tensor at a time and the source pages are released right after,
// so loading never holds two full copies of the weights.
//
// FP8 detection is per tensor (spec §8 item 7): float8_e4m3fn storage plus a
// `<name>_scale_inv` sibling of shape [ceil(N/128), ceil(K/128)] (F32, BF16 or F16,
// converted to float32). An FP8 tensor without its scale is an error.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "kiln/llm.h"
#include "kiln/ops/moe.h"
#include "kiln/tensor.h"
#include "llm/checkpoint.h"

namespace kiln::llm {

// How a linear weight is held, decided once when the loader builds it (from the
// requested WeightFormat and what the checkpoint stores). The forward pass, the model's
// report and the KV cache default ask this; none of them looks at the options again.
struct LinearFormat {
  enum class Scales { None, PerRow, Block128 };
  DType dtype = DType::Float32;  // the weight as held
  Scales scales = Scales::None;  // float8_e4m3fn weights carry float32 scales

  // The format of `weight` with `scale` as loaded ([N] or [E, N] per row, else blocks).
  static LinearFormat of(const Tensor& weight, const std::optional<Tensor>& scale);
  // The activation dtype the weight takes without a conversion: its own, or float32 for
  // FP8 (weight-only FP8 takes the activations as they are).
  DType input_dtype() const { return scales == Scales::None ? dtype : DType::Float32; }
  // bfloat16 or FP8: weights this narrow make bfloat16 the KV cache's default dtype.
  bool narrow() const { return dtype == DType::BFloat16 || is_fp8(dtype); }
  // "bfloat16", "float8_e4m3fn (128x128 block scales)", "float8_e4m3fn (row scales)"
  std::string name() const;
  auto operator<=>(const LinearFormat&) const = default;
};

// y = x W^T for a weight [N, K]: float32/bfloat16/float16 (x is rounded to the weight's
// dtype first: the linear op takes one dtype), or float8_e4m3fn with float32 scales
// per row [N] or per 128x128 block (weight-only FP8; x is used as it is).
struct Linear {
  Tensor weight;
  std::optional<Tensor> scale;
  LinearFormat format;

  Linear() = default;
  Linear(Tensor weight, std::optional<Tensor> scale);

  // The activation dtype the weight takes without a conversion (callers feeding one
  // input to several projections convert it once).
  DType input_dtype() const { return format.input_dtype(); }
  // x [..., K] of any float dtype -> [..., N] in the weight's dtype, or for FP8 in x's
  // dtype (float32 after input_dtype()). Callers widen where they need float32.
  Tensor operator()(const Tensor& x) const;
  int64_t bytes() const;  // weight and scale
};

// What a linear weight is for: FP8 quantisation at load skips routers (their error
// moves expert choices; they are tiny) and covers projections and lm_head.
enum class LinearRole { Projection, Router, LmHead };

// Names of one MoE layer's experts: per-expert `{prefix}.{e}.{gate}.weight` (and up,
// down), or fused `{prefix}.gate_up_proj` [E, 2I, H] and `{prefix}.down_proj` [E, H, I].
struct ExpertNames {
  std::string prefix;  // "model.layers.3.mlp.experts"
  std::string gate, up, down;  // "gate_proj", "up_proj", "down_proj" (Qwen); "w1", "w3", "w2" (LFM2)
};

// Experts held as views of the mapped checkpoint (as stored, or already in the requested
// dtype) sit in the file mapping's 4 KiB pages, and decode streams a few MB of them per
// token and layer through a TLB miss per page (under nested paging, a walk of both page
// tables). The loader copies such a layer's experts into one allocation per projection,
// which the allocator backs with huge pages, and drops the mapped pages, when the
// machine has the memory: the copy's bytes must fit in the system's available memory
// (MemAvailable, which counts the page cache the copies come from as reclaimable) less
// kPackingHeadroomBytes. Otherwise, and for a model bound for another device, the
// experts stay mapped.
inline constexpr int64_t kPackingHeadroomBytes = int64_t{1} << 30;
// Whether `bytes` of mapped expert weights are copied into packed memory now.
bool may_pack_experts(int64_t bytes);
// Tests: the available memory may_pack_experts judges by, instead of the system's (nullopt
// restores the system's).
void override_available_memory_for_packing(std::optional<int64_t> bytes);

class WeightLoader {
 public:
  // pack_mapped_experts: copy mapped experts into packed memory when it fits (above).
  WeightLoader(const Checkpoint& checkpoint, WeightFormat format,
               std::function<void(std::string_view, int64_t, int64_t)> progress, bool pack_mapped_experts = true);

  // `name` is the full tensor name ("....q_proj.weight"), the shape [N, K].
  Linear linear(const std::string& name, int64_t out_features, int64_t in_features, LinearRole role);
  // lm_head tied to the embedding table: the same tensor (no copy), except with
  // WeightFormat::Fp8, which quantises a copy so decode reads half the bytes.
  Linear tied_lm_head(const Tensor& embedding);
  // A small tensor (norm weight, bias, conv kernel) as a float32 copy of `shape`.
  Tensor small(const std::string& name, const Shape& shape);
  // The embedding table [vocab, hidden]: stored dtype for AsStored and Fp8, else cast.
  Tensor embedding(const std::string& name, int64_t vocab, int64_t hidden);
  // One MoE layer's experts, E experts of width I over hidden size H, either layout.
  MoeExperts experts(const ExpertNames& names, int64_t num_experts, int64_t width, int64_t hidden);

  bool has(const std::string& name) const { return checkpoint_.has(name); }
  bool has_prefix(const std::string& prefix) const { return checkpoint_.has_prefix(prefix); }
  int64_t parameter_count() const { return parameter_count_; }
  int64_t resident_bytes() const { return resident_bytes_; }
  // Every format a linear or expert weight was loaded in.
  const std::set<LinearFormat>& linear_formats() const { return linear_formats_; }
  // "bfloat16", "float8_e4m3fn (128x128 block scales) + float8_e4m3fn (row scales)", ...
  std::string linear_dtypes() const;
  std::optional<Fp8QuantizationReport> fp8_report() const;
  void finish();  // reports the last progress step

 private:
  // What the requested WeightFormat does to each tensor, resolved once from the format.
  struct Plan {
    std::optional<DType> cast_to;  // Float32, BFloat16: every weight cast, FP8 dequantised
    bool quantize_fp8 = false;     // Fp8: float linears (not routers) quantised per row
    bool copies = false;           // anything but AsStored: weights are copies, not mapped views
  };
  static Plan plan_for(WeightFormat format);
  // Reads `name` of `shape` ([N, K] or [E, N, K]) and converts it for `role`. The
  // quantisation report counts one matrix per `matrix_rows` rows (fused gate_up: I, so
  // gate and up count apart as they do in the per-expert layout); 0 = N.
  Linear load_matrix(const std::string& name, const Shape& shape, LinearRole role, int64_t matrix_rows = 0);
  Linear convert_fp8(const std::string& name, const Tensor& weight, const Tensor& scale);
  Linear convert_float(const std::string& name, const Tensor& weight, LinearRole role, int64_t matrix_rows);
  Linear quantize(const Tensor& weight, int64_t matrix_rows);
  Tensor checked_float(const std::string& name, const Shape& shape);
  void note_linear(const Linear& loaded, bool count_parameters = true);
  void step();

  const Checkpoint& checkpoint_;
  Plan plan_;
  bool pack_mapped_experts_ = true;
  std::function<void(std::string_view, int64_t, int64_t)> progress_;
  int64_t total_tensors_ = 0;
  int64_t done_tensors_ = 0;
  int64_t parameter_count_ = 0;
  int64_t resident_bytes_ = 0;
  std::set<LinearFormat> linear_formats_;
  int64_t quantized_tensors_ = 0;
  double max_quant_error_ = 0.0;
  double sum_sq_quant_error_ = 0.0;
};

}  // namespace kiln::llm
