// Synthetic Hugging Face checkpoints (`kiln make-model`): a folder with config.json,
// generation_config.json, tokenizer.json, tokenizer_config.json and safetensors holding
// exactly the tensor names, shapes and dtypes of the real architecture (spec models.md
// §1.3, §3.3, §5.1), filled with deterministic random weights scaled so activations stay
// O(1) through the layers and routers spread tokens over the experts. Lets everything
// from loading to decoding run, at real shapes, without downloading a model.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/llm_synthetic.h"
#include "kiln/tensor.h"
#include "llm/config.h"

namespace kiln::llm {

// One tensor of a checkpoint as stored.
struct CheckpointTensorSpec {
  std::string name;
  DType dtype = DType::BFloat16;
  Shape shape;
};

// Every tensor a Hugging Face checkpoint of `config` holds, with per-expert names, in
// module order (embedding, then layer by layer, then the final norm and lm_head):
//   qwen3_moe: model.embed_tokens.weight; per layer model.layers.{i}.input_layernorm,
//     self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm, post_attention_layernorm, then
//     mlp.gate + mlp.experts.{e}.{gate,up,down}_proj (MoE layer) or
//     mlp.{gate,up,down}_proj (dense layer), all ".weight"; model.norm.weight;
//     lm_head.weight unless tied.
//   lfm2_moe: model.embed_tokens.weight; per layer model.layers.{i}.operator_norm,
//     self_attn.{q,k,v,out}_proj + self_attn.{q,k}_layernorm (attention layer) or
//     conv.conv + conv.in_proj + conv.out_proj (short-conv layer), then
//     feed_forward.gate + feed_forward.expert_bias (float32, no ".weight") +
//     feed_forward.experts.{e}.{w1,w3,w2} (MoE layer) or feed_forward.{w1,w3,w2} (dense
//     layer), ffn_norm; model.embedding_norm.weight; lm_head.weight unless tied.
// Everything is in config.dtype except expert_bias. With config.fp8_block_scaled every
// projection (attention, short-conv in/out, expert and dense MLP) is float8_e4m3fn and is
// followed by "<name>_scale_inv" (float32 [ceil(N/128), ceil(K/128)]); routers, norms,
// conv.conv, embeddings and lm_head keep config.dtype.
std::vector<CheckpointTensorSpec> checkpoint_tensor_specs(const ModelConfig& config);

// The geometry of a preset for arch "qwen3_moe" or "lfm2_moe":
//   tiny           for tests: hidden 64, heads 4/2 of 16, 8 experts top-2 of width 32,
//                  vocab 512; qwen3_moe 3 layers (layer 1 dense), lfm2_moe 4 layers
//                  (conv, attention, conv, attention; layer 0 dense).
//   demo           a ~150-170 MB bf16 model that decodes fast on two cores: hidden 512,
//                  8 layers, heads 8/2 of 64, 32 experts top-4 of width 192, vocab 4096.
//   qwen3-30b-a3b  the real Qwen3-30B-A3B geometry (qwen3_moe only).
//   lfm2-8b-a1b    the real LFM2-8B-A1B geometry (lfm2_moe only).
// num_layers keeps the first N layers (1..the preset's count; LFM2 keeps its layer-type
// prefix and at most N dense layers). Token ids are left unset: they come from the
// tokenizer write_synthetic_model builds. Unknown arch or preset, or a bad layer count,
// is a Value error.
ModelConfig synthetic_model_config(const std::string& arch, const std::string& preset,
                                   std::optional<int64_t> num_layers = std::nullopt, bool fp8 = false);

struct SyntheticModel {
  ModelConfig config;               // as written to config.json / generation_config.json
  std::vector<std::string> shards;  // safetensors files written (paths)
  uint64_t tensor_bytes = 0;        // total tensor data
};

// Writes the folder (created if needed). Stale model*.safetensors files and index of an
// earlier run in the folder are replaced. Weights depend only on the seed and the tensor
// name: the same options give byte-identical files on every machine and thread count.
SyntheticModel write_synthetic_model(const SyntheticModelOptions& options);

}  // namespace kiln::llm
