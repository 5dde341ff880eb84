#include "llm/decoder.h"

#include <algorithm>
#include <utility>

#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/nn.h"

namespace kiln::llm {
namespace {
constexpr const char* kForward = "Model.forward";

// float32 [T, H] rows of the table for `ids` (CPU int64, already checked against the
// vocabulary). On another device one token is a view of its row, so a decode step reads
// no index back to the host (embedding checks its indices there, a wait); a prompt pays
// that one wait.
Tensor embed_tokens(const Tensor& table, const Tensor& ids) {
  if (table.device() == kCPU) return embedding(table, ids).to(DType::Float32);
  if (ids.numel() == 1) {
    const Tensor row = table.narrow(0, ids.data<int64_t>()[0], 1);
    return row.dtype() == DType::Float32 ? row.clone() : row.to(DType::Float32);  // never the table itself
  }
  return embedding(table, ids.to(table.device())).to(DType::Float32);
}
}  // namespace

void check_layer_plan(const ModelConfig& c) {
  constexpr const char* op = "load model";
  auto positive = [&](int64_t v, const char* what) {
    KILN_CHECK_KIND(v > 0, Value, op, "config.json: {} must be > 0, got {}", what, v);
  };
  positive(c.vocab_size, "vocab_size");
  positive(c.hidden_size, "hidden_size");
  positive(c.num_layers, "num_hidden_layers");
  KILN_CHECK_KIND(static_cast<int64_t>(c.mixers.size()) == c.num_layers &&
                      static_cast<int64_t>(c.moe_layers.size()) == c.num_layers,
                  Value, op, "config.json: {} layers but {} mixer kinds and {} FFN kinds", c.num_layers,
                  c.mixers.size(), c.moe_layers.size());
  const bool any_attention = std::count(c.mixers.begin(), c.mixers.end(), MixerKind::Attention) > 0;
  if (any_attention) {
    positive(c.num_heads, "num_attention_heads");
    positive(c.num_kv_heads, "num_key_value_heads");
    positive(c.head_dim, "head_dim");
    KILN_CHECK_KIND(c.num_heads % c.num_kv_heads == 0, Value, op,
                    "config.json: num_attention_heads ({}) must be a multiple of num_key_value_heads ({})",
                    c.num_heads, c.num_kv_heads);
    KILN_CHECK_KIND(c.head_dim % 2 == 0, Value, op, "config.json: head_dim must be even for RoPE, got {}",
                    c.head_dim);
  }
  if (std::count(c.mixers.begin(), c.mixers.end(), MixerKind::ShortConv) > 0) positive(c.conv_kernel, "conv_L_cache");
  if (std::count(c.mixers.begin(), c.mixers.end(), MixerKind::GatedDeltaNet) > 0) {
    const DeltaNetGeometry& d = c.delta_net;
    positive(d.num_key_heads, "linear_num_key_heads");
    positive(d.num_value_heads, "linear_num_value_heads");
    positive(d.key_head_dim, "linear_key_head_dim");
    positive(d.value_head_dim, "linear_value_head_dim");
    positive(d.conv_kernel, "linear_conv_kernel_dim");
    KILN_CHECK_KIND(d.num_value_heads % d.num_key_heads == 0, Value, op,
                    "config.json: linear_num_value_heads ({}) must be a multiple of linear_num_key_heads ({})",
                    d.num_value_heads, d.num_key_heads);
  }
  if (any_attention && c.rotary_dim != 0) {
    KILN_CHECK_KIND(c.rotary_dim >= 2 && c.rotary_dim % 2 == 0 && c.rotary_dim <= c.head_dim, Value, op,
                    "config.json: the rotary width must be even and in [2, head_dim = {}], got {}", c.head_dim,
                    c.rotary_dim);
  }
  if (std::count(c.moe_layers.begin(), c.moe_layers.end(), true) > 0) {
    positive(c.num_experts, "num_experts");
    positive(c.moe_intermediate_size, "moe_intermediate_size");
    KILN_CHECK_KIND(c.num_experts_per_tok > 0 && c.num_experts_per_tok <= c.num_experts, Value, op,
                    "config.json: num_experts_per_tok must be in [1, num_experts = {}], got {}", c.num_experts,
                    c.num_experts_per_tok);
  }
  if (std::count(c.moe_layers.begin(), c.moe_layers.end(), false) > 0) {
    positive(c.intermediate_size, "intermediate_size");
  }
}

void check_layers_present(const ModelConfig& c, const WeightLoader& loader) {
  const std::string last = "model.layers." + std::to_string(c.num_layers - 1) + ".";
  KILN_CHECK_KIND(loader.has_prefix(last), Value, "load model",
                  "config.json: num_hidden_layers is {} but the checkpoint holds no tensor of layer {} ('{}*')",
                  c.num_layers, c.num_layers - 1, last);
}

AttentionBlock load_attention_block(const ModelConfig& c, WeightLoader& loader, const std::string& prefix,
                                    const std::string& out_proj, const std::string& q_norm,
                                    const std::string& k_norm) {
  AttentionBlock a;
  a.num_heads = c.num_heads;
  a.num_kv_heads = c.num_kv_heads;
  a.head_dim = c.head_dim;
  a.norm_eps = c.norm_eps;
  const int64_t q_width = c.num_heads * c.head_dim;
  const int64_t kv_width = c.num_kv_heads * c.head_dim;
  // Gated attention's q_proj holds a gate head next to each query head.
  a.output_gate = c.attention_output_gate;
  a.q_proj = loader.linear(prefix + "q_proj.weight", a.output_gate ? 2 * q_width : q_width, c.hidden_size,
                           LinearRole::Projection);
  a.k_proj = loader.linear(prefix + "k_proj.weight", kv_width, c.hidden_size, LinearRole::Projection);
  a.v_proj = loader.linear(prefix + "v_proj.weight", kv_width, c.hidden_size, LinearRole::Projection);
  a.o_proj = loader.linear(prefix + out_proj + ".weight", c.hidden_size, q_width, LinearRole::Projection);
  a.q_norm = loader.small(prefix + q_norm + ".weight", {c.head_dim});
  a.k_norm = loader.small(prefix + k_norm + ".weight", {c.head_dim});
  a.zero_centred_norms = c.zero_centred_norms;
  return a;
}

DecoderModel::DecoderModel(ModelConfig config, DecoderWeights weights, KvCache cache, ModelInfo info,
                           std::shared_ptr<const Tokenizer> tokenizer, std::vector<int32_t> eos_ids,
                           bool fused_decode)
    : config_(std::move(config)), weights_(std::move(weights)), cache_(std::move(cache)) {
  info_ = std::move(info);
  tokenizer_ = std::move(tokenizer);
  eos_ids_ = std::move(eos_ids);
  has_attention_ = std::count(config_.mixers.begin(), config_.mixers.end(), MixerKind::Attention) > 0;

  // One embedding row, every layer's norms, mixer and FFN (top_k experts), the final
  // norm and lm_head.
  int64_t bytes = config_.hidden_size * static_cast<int64_t>(weights_.embedding.element_size());
  for (const DecoderLayer& layer : weights_.layers) {
    bytes += static_cast<int64_t>(layer.mixer_norm.nbytes() + layer.ffn_norm.nbytes());
    bytes += layer.attention ? layer.attention->decode_bytes()
             : layer.conv    ? layer.conv->decode_bytes()
                             : layer.delta_net->decode_bytes();
    bytes += layer.moe ? layer.moe->decode_bytes() : layer.dense->decode_bytes();
  }
  weight_decode_bytes_ = bytes + static_cast<int64_t>(weights_.final_norm.nbytes()) + weights_.lm_head.bytes();
  if (fused_decode) prepare_fused_decode();
}

namespace {

// The fused one-token blocks of a layer, from the weights the unfused blocks hold.
AttentionEntryDecodeConfig attention_entry_config(const ModelConfig& config, const DecoderLayer& layer,
                                                  DType cache_dtype) {
  const AttentionBlock& b = *layer.attention;
  AttentionEntryDecodeConfig c;
  c.norm_weight = layer.mixer_norm;
  c.norm_one_plus = config.zero_centred_norms;
  c.norm_eps = config.norm_eps;
  c.q_weight = b.q_proj.weight;
  c.k_weight = b.k_proj.weight;
  c.v_weight = b.v_proj.weight;
  c.q_scale = b.q_proj.scale;
  c.k_scale = b.k_proj.scale;
  c.v_scale = b.v_proj.scale;
  c.num_heads = b.num_heads;
  c.num_kv_heads = b.num_kv_heads;
  c.head_dim = b.head_dim;
  c.output_gate = b.output_gate;
  c.q_norm = b.q_norm;
  c.k_norm = b.k_norm;
  c.head_norm_one_plus = b.zero_centred_norms;
  c.head_norm_eps = b.norm_eps;
  c.rotary_dim = config.rotary_dim;
  c.rope_theta = config.rope_theta;
  c.cache_dtype = cache_dtype;
  return c;
}

MoeBlockDecodeConfig moe_block_config(const ModelConfig& config, const DecoderLayer& layer) {
  const MoeBlock& m = *layer.moe;
  MoeBlockDecodeConfig c;
  c.norm_weight = layer.ffn_norm;
  c.norm_one_plus = config.zero_centred_norms;
  c.norm_eps = config.norm_eps;
  c.router = m.router.weight;
  c.top_k = m.top_k;
  c.scoring = m.scoring;
  c.renormalize = m.renormalize;
  c.selection_bias = m.selection_bias;
  c.routed_scaling_factor = m.routed_scaling_factor;
  c.renorm_eps = m.renorm_eps;
  c.experts = m.experts;
  c.shared = m.shared;
  return c;
}

}  // namespace

void DecoderModel::prepare_fused_decode() {
  every_attention_fused_ = true;
  for (DecoderLayer& layer : weights_.layers) {
    if (layer.attention) {
      layer.attention_decode = AttentionEntryDecode::prepare(attention_entry_config(config_, layer, cache_.dtype()));
      every_attention_fused_ = every_attention_fused_ && layer.attention_decode.has_value();
    }
    // FP8 routers (scaled) take the unfused path.
    if (layer.moe && !layer.moe->router.scale) {
      layer.moe_decode = MoeBlockDecode::prepare(moe_block_config(config_, layer));
      if (layer.moe_decode && !decode_residual_.defined()) {
        decode_residual_ = Tensor::empty({1, config_.hidden_size}, DType::Float32, layer.moe->router.weight.device());
      }
    }
  }
  if (weights_.embedding.device() == kCPU) prepare_decode_steps();
}

void DecoderModel::prepare_decode_steps() {
  decode_buffers_.emplace(weights_.embedding.device());
  DecodeBuffers& buffers = *decode_buffers_;
  const bool one_plus = config_.zero_centred_norms;
  for (const DecoderLayer& layer : weights_.layers) {
    LayerDecodeSteps steps;
    if (layer.attention && layer.attention_decode) {
      steps.attention = AttentionExitStep::make(*layer.attention, cache_.dtype(), buffers);
    }
    if (layer.conv) {
      steps.conv = ShortConvStep::make(*layer.conv, NormStep::make(layer.mixer_norm, one_plus, config_.norm_eps),
                                       buffers);
    }
    if (layer.delta_net) {
      steps.delta_net = DeltaNetStep::make(
          *layer.delta_net, NormStep::make(layer.mixer_norm, one_plus, config_.norm_eps), config_.hidden_size, buffers);
    }
    if (layer.dense) {
      steps.dense = DenseFfnStep::make(*layer.dense, NormStep::make(layer.ffn_norm, one_plus, config_.norm_eps),
                                       config_.hidden_size, buffers);
    }
    decode_steps_.push_back(std::move(steps));
  }
  decode_frame_.emplace(weights_.embedding, NormStep::make(weights_.final_norm, one_plus, config_.norm_eps),
                        weights_.lm_head, buffers);
}

// A one-token forward with the fused blocks and the decode steps: what forward_locked's
// general path computes, bit for bit, without allocating once the buffers exist.
Tensor DecoderModel::forward_decode_step(int32_t token) {
  DecodeFrame& frame = *decode_frame_;
  Tensor x = frame.embed(token);
  Tensor other = frame.other_residual();
  for (int64_t i = 0; i < static_cast<int64_t>(weights_.layers.size()); ++i) {
    const DecoderLayer& layer = weights_.layers[static_cast<size_t>(i)];
    LayerDecodeSteps& steps = decode_steps_[static_cast<size_t>(i)];
    if (steps.attention) {
      const AttentionEntryDecode::Output entry =
          (*layer.attention_decode)(x, cache_.keys(i), cache_.values(i), position_);
      (*steps.attention)(x, entry.q, entry.gate, cache_, i, position_);
    } else if (steps.conv) {
      (*steps.conv)(x, cache_, i);
    } else {
      (*steps.delta_net)(x, cache_, i);
    }
    if (layer.moe_decode) {
      (*layer.moe_decode)(x, other);  // other = x + moe(ffn_norm(x))
      std::swap(x, other);
    } else if (steps.dense) {
      (*steps.dense)(x);
    } else {
      const Tensor h = rms_norm_layer(x, layer.ffn_norm);
      add_(x, layer.moe ? layer.moe->forward(h) : layer.dense->forward(h));
    }
  }
  Tensor logits = frame.logits(x);
  position_ += 1;
  return logits;
}

void DecoderModel::reset_locked() {
  position_ = 0;
  cache_.reset();
}

Tensor DecoderModel::rms_norm_layer(const Tensor& x, const Tensor& weight) const {
  return config_.zero_centred_norms ? rms_norm_one_plus(x, weight, config_.norm_eps)
                                    : rms_norm_llama(x, weight, config_.norm_eps);
}

int64_t DecoderModel::decode_bytes_per_token_locked() const {
  const int64_t keys_read = std::min(position_ + 1, cache_.capacity());
  return weight_decode_bytes_ + keys_read * cache_.kv_bytes_per_token();
}

Tensor DecoderModel::forward_locked(std::span<const int32_t> tokens, bool all_logits) {
  // Everything that can be wrong with the input is checked before any state changes.
  const int64_t count = static_cast<int64_t>(tokens.size());
  KILN_CHECK_KIND(count > 0, Value, kForward, "no tokens to run");
  KILN_CHECK_KIND(position_ + count <= cache_.capacity(), Value, kForward,
                  "{} tokens at position {} exceed the context of {} tokens (LoadOptions::max_context)", count,
                  position_, cache_.capacity());
  for (int64_t t = 0; t < count; ++t) {
    KILN_CHECK_KIND(tokens[t] >= 0 && tokens[t] < config_.vocab_size, Index, kForward,
                    "token {} (at {}) is outside the vocabulary of {} ids", tokens[t], t, config_.vocab_size);
  }
  // Every attention layer's entry fused: a decode token needs no RoPE tables, and the
  // decode steps cover the rest of the token.
  if (count == 1 && decode_frame_ && every_attention_fused_) return forward_decode_step(tokens[0]);
  Tensor ids = Tensor::empty({count}, DType::Int64);
  int64_t* id_data = ids.data<int64_t>();
  for (int64_t t = 0; t < count; ++t) id_data[t] = tokens[t];

  const Device device = weights_.embedding.device();
  Tensor x = embed_tokens(weights_.embedding, ids);  // a fresh float32 [T, H] tensor
  RopeTables rope;
  if (has_attention_ && !(count == 1 && every_attention_fused_)) {
    // Partial rotary (Qwen3-Next, Qwen3.5): tables of rotary_dim / 2 angles turn only the
    // first rotary_dim dims of each head. Qwen3.5's M-RoPE sections reduce to this for
    // text, whose three position streams are all the token position.
    const int64_t rotary_dim = config_.rotary_dim > 0 ? config_.rotary_dim : config_.head_dim;
    rope = rope_cos_sin(arange(Scalar(position_), Scalar(position_ + count)), rotary_dim, config_.rope_theta,
                        DType::Float32);
    if (device != kCPU) rope = {rope.cos.to(device), rope.sin.to(device)};  // tables built here, used there
  }
  for (int64_t i = 0; i < static_cast<int64_t>(weights_.layers.size()); ++i) {
    const DecoderLayer& layer = weights_.layers[i];
    // Blocks return their last projection's dtype; add_ widens into the float32 stream.
    Tensor h;
    if (count == 1 && layer.attention_decode) {
      const AttentionEntryDecode::Output entry = (*layer.attention_decode)(x, cache_.keys(i), cache_.values(i), position_);
      add_(x, layer.attention->attend(entry.q, entry.gate, cache_, i, position_));
    } else {
      h = rms_norm_layer(x, layer.mixer_norm);
      add_(x, layer.attention ? layer.attention->forward(h, cache_, i, rope, position_)
              : layer.conv    ? layer.conv->forward(h, cache_, i)
                              : layer.delta_net->forward(h, cache_, i));
    }
    if (count == 1 && layer.moe_decode) {
      (*layer.moe_decode)(x, decode_residual_);  // decode_residual_ = x + moe(ffn_norm(x))
      std::swap(x, decode_residual_);
      continue;
    }
    h = rms_norm_layer(x, layer.ffn_norm);
    add_(x, layer.moe ? layer.moe->forward(h) : layer.dense->forward(h));
  }
  Tensor rows = all_logits ? x : x.narrow(0, count - 1, 1);
  Tensor logits = weights_.lm_head(rms_norm_layer(rows, weights_.final_norm)).to(DType::Float32);
  position_ += count;
  // The one wait of a step on a device: the sampler reads the logits on the CPU.
  return logits.device() == kCPU ? logits : logits.to(kCPU);
}

}  // namespace kiln::llm
