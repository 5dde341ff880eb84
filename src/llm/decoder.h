// The decoder stack every supported family is built from (spec: models.md §0.5):
//
//   x = embed(tokens)                                   float32 residual stream
//   per layer: x += mixer(rms_norm(x, mixer_norm))      attention, short conv or Gated DeltaNet
//              x += ffn(rms_norm(x, ffn_norm))          MoE or dense SwiGLU
//   logits = lm_head(rms_norm(x, final_norm))           last row, or all rows
//
// The family files (models/qwen3_moe.cpp, models/lfm2_moe.cpp, models/qwen3_hybrid.cpp)
// only map tensor names and config keys onto these blocks. Qwen3-Next and Qwen3.5 scale
// every layer norm and the final norm by (1 + w) (config.zero_centred_norms).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/llm.h"
#include "kiln/ops/decode_block.h"
#include "llm/blocks/attention_block.h"
#include "llm/blocks/delta_net_block.h"
#include "llm/blocks/ffn_blocks.h"
#include "llm/blocks/short_conv_block.h"
#include "llm/config.h"
#include "llm/decode_steps.h"
#include "llm/kv_cache.h"
#include "llm/weights.h"

namespace kiln::llm {

struct DecoderLayer {
  Tensor mixer_norm, ffn_norm;  // float32 [hidden]
  std::optional<AttentionBlock> attention;  // exactly one mixer
  std::optional<ShortConvBlock> conv;
  std::optional<DeltaNetBlock> delta_net;
  std::optional<MoeBlock> moe;  // exactly one FFN
  std::optional<DenseFfn> dense;
  // The MoE half of a one-token forward as one fused call (ffn_norm, router, top-k,
  // experts, shared expert, residual add), where the device has the kernel.
  std::optional<MoeBlockDecode> moe_decode;
  // The attention block's entry for one token (mixer_norm, q/k/v, q/k norms, RoPE, the
  // K/V cache write) as one fused call, where the device has the kernel.
  std::optional<AttentionEntryDecode> attention_decode;
};

struct DecoderWeights {
  Tensor embedding;  // [vocab, hidden]
  std::vector<DecoderLayer> layers;
  Tensor final_norm;  // float32 [hidden]
  Linear lm_head;     // [vocab, hidden]
};

// Family assemblers: read every tensor of the family's layout through `loader`.
DecoderWeights load_qwen3_moe(const ModelConfig& config, WeightLoader& loader);
DecoderWeights load_lfm2_moe(const ModelConfig& config, WeightLoader& loader);
// Qwen3-Next and Qwen3.5 (models/qwen3_hybrid.cpp).
DecoderWeights load_qwen3_hybrid(const ModelConfig& config, WeightLoader& loader);

// q/k/v/out projections and per-head q/k norms under `prefix` ("model.layers.2.self_attn.").
AttentionBlock load_attention_block(const ModelConfig& config, WeightLoader& loader, const std::string& prefix,
                                    const std::string& out_proj, const std::string& q_norm,
                                    const std::string& k_norm);
// The geometry the blocks rely on (one mixer and one FFN kind per layer, heads divisible
// by KV heads, top_k <= experts, ...): a config that breaks it is a Value error.
void check_layer_plan(const ModelConfig& config);
// Per-layer work (names, loads, allocations) starts only once the checkpoint is known to
// hold tensors of the last layer the config counts: num_hidden_layers far beyond the
// checkpoint is a Value error at once, not after loading every layer it does hold.
void check_layers_present(const ModelConfig& config, const WeightLoader& loader);
// The dense SwiGLU FFN under `prefix` ("model.layers.0.mlp.") from its three projections'
// names ("gate_proj", "up_proj", "down_proj"), and the output head (tied to `embedding`
// when the config says so); models/shared_weights.cpp.
DenseFfn load_dense_ffn(const ModelConfig& config, WeightLoader& loader, const std::string& prefix,
                        const std::string& gate, const std::string& up, const std::string& down);
Linear load_lm_head(const ModelConfig& config, WeightLoader& loader, const Tensor& embedding);

class DecoderModel final : public Model {
 public:
  DecoderModel(ModelConfig config, DecoderWeights weights, KvCache cache, ModelInfo info,
               std::shared_ptr<const Tokenizer> tokenizer, std::vector<int32_t> eos_ids, bool fused_decode = true);

 private:
  // Model's calls, run with the model's lock held.
  Tensor forward_locked(std::span<const int32_t> tokens, bool all_logits) override;
  void reset_locked() override;
  int64_t position_locked() const override { return position_; }
  int64_t decode_bytes_per_token_locked() const override;

  ModelConfig config_;
  DecoderWeights weights_;
  KvCache cache_;
  int64_t position_ = 0;
  bool has_attention_ = false;
  Tensor rms_norm_layer(const Tensor& x, const Tensor& weight) const;
  void prepare_fused_decode();
  // The other residual row of a one-token forward: fused blocks write x + block(x) here,
  // then the two swap, so decode allocates no residual per layer.
  Tensor decode_residual_;
  // A one-token forward on the CPU runs on buffers formed at load (decode_steps.h): the
  // frame (embedding row, residual rows, head and logits) and per layer the steps the
  // fused blocks leave (attention exit, dense FFN, short conv, Gated DeltaNet).
  struct LayerDecodeSteps {
    std::optional<AttentionExitStep> attention;
    std::optional<ShortConvStep> conv;
    std::optional<DeltaNetStep> delta_net;
    std::optional<DenseFfnStep> dense;
  };
  std::optional<DecodeBuffers> decode_buffers_;
  std::optional<DecodeFrame> decode_frame_;
  std::vector<LayerDecodeSteps> decode_steps_;
  void prepare_decode_steps();
  Tensor forward_decode_step(int32_t token);
  bool every_attention_fused_ = false;  // a one-token forward then needs no RoPE tables
  int64_t weight_decode_bytes_ = 0;  // the weight part of decode_bytes_per_token
};

}  // namespace kiln::llm
