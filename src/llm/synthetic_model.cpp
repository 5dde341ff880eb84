// Writes synthetic checkpoints tensor by tensor, in chunks of rows, so memory stays at a
// few tens of MB whatever the model size. Every value is a pure function of (seed, tensor
// name, element index): a counter-based hash, so chunking and threads never change it.
#include "llm/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/scalar_types.h"  // kFp8ScaleBlock
#include "kiln/scalar_types.h"
#include "kiln/context.h"
#include "kiln/thread_pool.h"
#include "llm/safetensors_format.h"
#include "llm/tokenizer.h"

namespace kiln::llm {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOp = "make-model";
constexpr float kFp8Max = 448.0f;   // largest finite float8_e4m3fn
// The synthetic tokenizer only needs enough ids for readable demo text; the embedding
// keeps the preset's real vocabulary size.
constexpr int64_t kMaxTokenizerVocab = 4096;
// Elements generated per chunk (16 MB of float32).
constexpr int64_t kChunkElements = int64_t{1} << 22;

// How a tensor's values are made: drawn uniform on [center - half_width, center +
// half_width), or (ScaleInv) the block scales found while quantising the FP8 weight
// written just before it.
enum class Fill { Uniform, ScaleInv };
struct PlannedTensor {
  CheckpointTensorSpec spec;
  Fill fill = Fill::Uniform;
  float center = 0.0f;
  float half_width = 0.0f;
};

// Uniform with standard deviation `std`.
float half_width_for_std(double std) { return static_cast<float>(std * std::sqrt(3.0)); }

class Planner {
 public:
  explicit Planner(const ModelConfig& c) : c_(c) {}

  // Linear weight [n, k]: std 1/sqrt(k) keeps y = W x at the scale of x.
  void linear(const std::string& name, int64_t n, int64_t k) {
    const bool fp8 = c_.fp8_block_scaled;
    add(name, fp8 ? DType::Float8_e4m3fn : c_.dtype, {n, k}, 0.0f, half_width_for_std(1.0 / std::sqrt(double(k))));
    if (fp8) {
      const Shape scale_shape{ceil_div(n, kFp8ScaleBlock), ceil_div(k, kFp8ScaleBlock)};
      tensors_.push_back({{name + "_scale_inv", DType::Float32, scale_shape}, Fill::ScaleInv});
    }
  }
  // RMSNorm weights: 1 with a little noise, so a wrong norm variant shows in the output.
  void norm(const std::string& name, int64_t n) { add(name, c_.dtype, {n}, 1.0f, 0.05f); }
  // Router [experts, hidden]: logits of std ~2 for a unit-RMS input, so different tokens
  // rank the experts differently and the softmax/sigmoid weights are far from uniform.
  void router(const std::string& name, int64_t experts, int64_t hidden) {
    add(name, c_.dtype, {experts, hidden}, 0.0f, half_width_for_std(2.0 / std::sqrt(double(hidden))));
  }
  void add(const std::string& name, DType dtype, Shape shape, float center, float half_width) {
    tensors_.push_back({{name, dtype, std::move(shape)}, Fill::Uniform, center, half_width});
  }

  // A linear weight that stays in the checkpoint dtype in FP8 checkpoints too.
  void dense_linear(const std::string& name, int64_t n, int64_t k) {
    add(name, c_.dtype, {n, k}, 0.0f, half_width_for_std(1.0 / std::sqrt(double(k))));
  }
  // Zero-centred RMSNorm weights (Qwen3-Next, Qwen3.5): the scale is 1 + w, so w is drawn
  // around 0, wide enough (scales 0.7 .. 1.3) that treating w as the scale shows.
  void offset_norm(const std::string& name, int64_t n) { add(name, c_.dtype, {n}, 0.0f, 0.3f); }

  std::vector<PlannedTensor> plan() {
    const int64_t h = c_.hidden_size;
    const bool hybrid = c_.arch == Arch::Qwen3Next || c_.arch == Arch::Qwen35Moe;
    const std::string m = hybrid ? c_.weight_prefix : "model.";
    add(m + "embed_tokens.weight", c_.dtype, {c_.vocab_size, h}, 0.0f, half_width_for_std(1.0));
    for (int64_t i = 0; i < c_.num_layers; ++i) {
      const std::string p = m + "layers." + std::to_string(i) + ".";
      if (c_.arch == Arch::Qwen3Moe || c_.arch == Arch::Qwen3) {
        qwen3_layer(p, i);
      } else if (hybrid) {
        hybrid_layer(p, i);
      } else {
        lfm2_layer(p, i);
      }
    }
    if (hybrid) {
      offset_norm(m + "norm.weight", h);
    } else {
      norm(c_.arch == Arch::Lfm2Moe ? "model.embedding_norm.weight" : "model.norm.weight", h);
    }
    if (!c_.tie_word_embeddings) {
      add("lm_head.weight", c_.dtype, {c_.vocab_size, h}, 0.0f, half_width_for_std(1.0 / std::sqrt(double(h))));
    }
    return std::move(tensors_);
  }

 private:
  void qwen3_layer(const std::string& p, int64_t i) {
    const int64_t h = c_.hidden_size, q = c_.num_heads * c_.head_dim, kv = c_.num_kv_heads * c_.head_dim;
    norm(p + "input_layernorm.weight", h);
    linear(p + "self_attn.q_proj.weight", q, h);
    linear(p + "self_attn.k_proj.weight", kv, h);
    linear(p + "self_attn.v_proj.weight", kv, h);
    linear(p + "self_attn.o_proj.weight", h, q);
    norm(p + "self_attn.q_norm.weight", c_.head_dim);
    norm(p + "self_attn.k_norm.weight", c_.head_dim);
    norm(p + "post_attention_layernorm.weight", h);
    if (c_.moe_layers[i]) {
      router(p + "mlp.gate.weight", c_.num_experts, h);
      for (int64_t e = 0; e < c_.num_experts; ++e) {
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        swiglu(x + "gate_proj.weight", x + "up_proj.weight", x + "down_proj.weight", c_.moe_intermediate_size);
      }
    } else {
      swiglu(p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", p + "mlp.down_proj.weight", c_.intermediate_size);
    }
  }

  // Qwen3-Next / Qwen3.5 (spec §2.6): gated attention or Gated DeltaNet, then MoE with
  // a shared expert (or, in Qwen3-Next's mlp_only_layers, a dense SwiGLU).
  void hybrid_layer(const std::string& p, int64_t i) {
    const int64_t h = c_.hidden_size, q = c_.num_heads * c_.head_dim, kv = c_.num_kv_heads * c_.head_dim;
    const DeltaNetGeometry& d = c_.delta_net;
    offset_norm(p + "input_layernorm.weight", h);
    if (c_.mixers[i] == MixerKind::Attention) {
      linear(p + "self_attn.q_proj.weight", 2 * q, h);  // [query | gate] per head
      linear(p + "self_attn.k_proj.weight", kv, h);
      linear(p + "self_attn.v_proj.weight", kv, h);
      linear(p + "self_attn.o_proj.weight", h, q);
      offset_norm(p + "self_attn.q_norm.weight", c_.head_dim);
      offset_norm(p + "self_attn.k_norm.weight", c_.head_dim);
    } else {
      const std::string a = p + "linear_attn.";
      if (c_.arch == Arch::Qwen3Next) {
        linear(a + "in_proj_qkvz.weight", 2 * d.key_dim() + 2 * d.value_dim(), h);
        dense_linear(a + "in_proj_ba.weight", 2 * d.num_value_heads, h);
      } else {
        linear(a + "in_proj_qkv.weight", d.conv_channels(), h);
        linear(a + "in_proj_z.weight", d.value_dim(), h);
        dense_linear(a + "in_proj_b.weight", d.num_value_heads, h);
        dense_linear(a + "in_proj_a.weight", d.num_value_heads, h);
      }
      add(a + "conv1d.weight", c_.dtype, {d.conv_channels(), 1, d.conv_kernel}, 0.0f,
          half_width_for_std(1.0 / std::sqrt(double(d.conv_kernel))));
      // Float32 in the checkpoint, as Qwen stores them. dt_bias near transformers' init of
      // 1; A = exp(A_log) in 0.05 .. 2.7, so some heads keep their state over many tokens
      // (decay exp(g) near 1) and others forget it within a few.
      add(a + "dt_bias", DType::Float32, {d.num_value_heads}, 1.0f, 1.0f);
      add(a + "A_log", DType::Float32, {d.num_value_heads}, -1.0f, 2.0f);
      add(a + "norm.weight", c_.dtype, {d.value_head_dim}, 1.0f, 0.2f);
      linear(a + "out_proj.weight", h, d.value_dim());
    }
    offset_norm(p + "post_attention_layernorm.weight", h);
    if (!c_.moe_layers[i]) {
      swiglu(p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", p + "mlp.down_proj.weight", c_.intermediate_size);
      return;
    }
    router(p + "mlp.gate.weight", c_.num_experts, h);
    const int64_t inter = c_.moe_intermediate_size;
    if (c_.arch == Arch::Qwen35Moe && !c_.fp8_block_scaled) {
      // Qwen3.5's bf16 release stores each layer's experts fused, gate rows first, with no
      // ".weight" suffix (spec §0.6); its FP8 release splits them per expert (§5.2).
      add(p + "mlp.experts.gate_up_proj", c_.dtype, {c_.num_experts, 2 * inter, h}, 0.0f,
          half_width_for_std(1.0 / std::sqrt(double(h))));
      add(p + "mlp.experts.down_proj", c_.dtype, {c_.num_experts, h, inter}, 0.0f,
          half_width_for_std(1.0 / std::sqrt(double(inter))));
    } else {
      for (int64_t e = 0; e < c_.num_experts; ++e) {
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        swiglu(x + "gate_proj.weight", x + "up_proj.weight", x + "down_proj.weight", inter);
      }
    }
    const std::string s = p + "mlp.shared_expert.";
    swiglu(s + "gate_proj.weight", s + "up_proj.weight", s + "down_proj.weight", c_.shared_expert_intermediate_size);
    // Scalar gate logits of std ~2, so sigmoid spreads over (0, 1) from token to token.
    add(p + "mlp.shared_expert_gate.weight", c_.dtype, {1, h}, 0.0f, half_width_for_std(2.0 / std::sqrt(double(h))));
  }

  void lfm2_layer(const std::string& p, int64_t i) {
    const int64_t h = c_.hidden_size, q = c_.num_heads * c_.head_dim, kv = c_.num_kv_heads * c_.head_dim;
    norm(p + "operator_norm.weight", h);
    if (c_.mixers[i] == MixerKind::Attention) {
      linear(p + "self_attn.q_proj.weight", q, h);
      linear(p + "self_attn.k_proj.weight", kv, h);
      linear(p + "self_attn.v_proj.weight", kv, h);
      linear(p + "self_attn.out_proj.weight", h, q);
      norm(p + "self_attn.q_layernorm.weight", c_.head_dim);
      norm(p + "self_attn.k_layernorm.weight", c_.head_dim);
    } else {
      // Depthwise causal conv over conv_L_cache taps: std 1/sqrt(taps) like a linear.
      add(p + "conv.conv.weight", c_.dtype, {h, 1, c_.conv_kernel}, 0.0f,
          half_width_for_std(1.0 / std::sqrt(double(c_.conv_kernel))));
      linear(p + "conv.in_proj.weight", 3 * h, h);
      linear(p + "conv.out_proj.weight", h, h);
    }
    if (c_.moe_layers[i]) {
      router(p + "feed_forward.gate.weight", c_.num_experts, h);
      // Selection-only bias, float32 in the real checkpoint: small next to sigmoid scores.
      add(p + "feed_forward.expert_bias", DType::Float32, {c_.num_experts}, 0.0f, 0.01f);
      for (int64_t e = 0; e < c_.num_experts; ++e) {
        const std::string x = p + "feed_forward.experts." + std::to_string(e) + ".";
        swiglu(x + "w1.weight", x + "w3.weight", x + "w2.weight", c_.moe_intermediate_size);
      }
    } else {
      swiglu(p + "feed_forward.w1.weight", p + "feed_forward.w3.weight", p + "feed_forward.w2.weight",
             c_.intermediate_size);
    }
    norm(p + "ffn_norm.weight", h);
  }

  void swiglu(const std::string& gate, const std::string& up, const std::string& down, int64_t width) {
    linear(gate, width, c_.hidden_size);
    linear(up, width, c_.hidden_size);
    linear(down, c_.hidden_size, width);
  }

  const ModelConfig& c_;
  std::vector<PlannedTensor> tensors_;
};

// splitmix64's output function: a bijective mix of all 64 bits.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t tensor_key(uint64_t seed, const std::string& name) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001B3ull;
  return mix64(h ^ mix64(seed));
}

// Values [first, first + count) of a tensor, each handed to store(j, value) (j from 0).
template <typename Store>
void generate(const PlannedTensor& t, uint64_t key, int64_t first, int64_t count, Store store) {
  // Locals, so the stores through `store` cannot make the compiler reload them.
  const float low = t.center - t.half_width, width = 2.0f * t.half_width;
  current_context().pool().parallel_for(count, 1 << 15, [&, low, width](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const uint64_t bits = mix64(key + static_cast<uint64_t>(first + j + 1) * 0x9E3779B97F4A7C15ull);
      const float u = static_cast<float>(static_cast<uint32_t>(bits >> 40)) * (1.0f / 16777216.0f);  // [0, 1)
      store(j, low + width * u);
    }
  });
}

// Streams the planned tensors into the shards a chunk of rows at a time: generated
// straight into the stored dtype, or for FP8 in float32 and then quantised per 128x128
// block (keeping the block scales for the "_scale_inv" tensor that follows).
class TensorStreamer {
 public:
  explicit TensorStreamer(uint64_t seed) : seed_(seed) {}

  void write(const PlannedTensor& t, SafetensorsWriter& out) {
    if (t.fill == Fill::ScaleInv) {
      const uint64_t bytes = pending_scales_.size() * sizeof(float);
      KILN_CHECK(pending_for_ + "_scale_inv" == t.spec.name &&
                     bytes == tensor_byte_size(t.spec.shape, DType::Float32, kOp),
                 kOp, "scales of '{}' do not match '{}'", pending_for_, t.spec.name);
      out.write(pending_scales_.data(), bytes);
      return;
    }
    const int64_t cols = t.spec.shape.empty() ? 1 : t.spec.shape.back();
    const int64_t rows = cols == 0 ? 0 : shape_numel(t.spec.shape) / cols;
    const bool fp8 = t.spec.dtype == DType::Float8_e4m3fn;
    // Whole 128-row blocks per chunk so FP8 block scales see every row of their block.
    int64_t chunk_rows = std::max<int64_t>(1, kChunkElements / std::max<int64_t>(cols, 1));
    if (fp8) {
      chunk_rows = std::max<int64_t>(kFp8ScaleBlock, chunk_rows / kFp8ScaleBlock * kFp8ScaleBlock);
      pending_for_ = t.spec.name;
      pending_scales_.assign(ceil_div(rows, kFp8ScaleBlock) * ceil_div(cols, kFp8ScaleBlock), 0.0f);
    }
    const uint64_t key = tensor_key(seed_, t.spec.name);
    for (int64_t r = 0; r < rows; r += chunk_rows) {
      const int64_t n = std::min(chunk_rows, rows - r);
      if (fp8) {
        values_.resize(n * cols);
        generate(t, key, r * cols, n * cols, [v = values_.data()](int64_t j, float x) { v[j] = x; });
        quantize_fp8_blocks(n, cols, r / kFp8ScaleBlock);
      } else {
        generate_narrow(t, key, r * cols, n * cols);
      }
      out.write(bytes_.data(), bytes_.size());
    }
  }

 private:
  // Generated straight into the stored dtype, the dtype chosen once outside the loop.
  void generate_narrow(const PlannedTensor& t, uint64_t key, int64_t first, int64_t count) {
    const DType dtype = t.spec.dtype;
    bytes_.resize(count * itemsize(dtype));
    uint8_t* b = bytes_.data();
    switch (dtype) {
      case DType::BFloat16:
        return generate(t, key, first, count, [b](int64_t j, float x) {
          const uint16_t bits = float_to_bf16_bits(x);
          std::memcpy(b + 2 * j, &bits, 2);
        });
      case DType::Float16:
        return generate(t, key, first, count, [b](int64_t j, float x) {
          const uint16_t bits = float_to_half_bits(x);
          std::memcpy(b + 2 * j, &bits, 2);
        });
      case DType::Float32:
        return generate(t, key, first, count, [b](int64_t j, float x) { std::memcpy(b + 4 * j, &x, 4); });
      default:
        fail(ErrorKind::Runtime, kOp, "cannot write synthetic {} weights", dtype_name(dtype));
    }
  }

  // Rows [0, n) of the chunk, whose first row block is `row_block`: scale = amax / 448
  // per 128x128 block (1 for an all-zero block), stored value e4m3(w / scale).
  void quantize_fp8_blocks(int64_t n, int64_t cols, int64_t row_block) {
    bytes_.resize(n * cols);
    const int64_t col_blocks = ceil_div(cols, kFp8ScaleBlock);
    const int64_t row_blocks = ceil_div(n, kFp8ScaleBlock);
    current_context().pool().parallel_for(row_blocks * col_blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t blk = begin; blk < end; ++blk) {
        const int64_t r0 = blk / col_blocks * kFp8ScaleBlock, r1 = std::min(n, r0 + kFp8ScaleBlock);
        const int64_t c0 = blk % col_blocks * kFp8ScaleBlock, c1 = std::min(cols, c0 + kFp8ScaleBlock);
        float amax = 0.0f;
        for (int64_t r = r0; r < r1; ++r) {
          for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(values_[r * cols + c]));
        }
        const float scale = amax > 0.0f ? amax / kFp8Max : 1.0f;
        pending_scales_[(row_block + blk / col_blocks) * col_blocks + blk % col_blocks] = scale;
        for (int64_t r = r0; r < r1; ++r) {
          for (int64_t c = c0; c < c1; ++c) bytes_[r * cols + c] = float_to_fp8_e4m3fn_bits(values_[r * cols + c] / scale);
        }
      }
    });
  }

  uint64_t seed_;
  std::vector<float> values_;
  std::vector<uint8_t> bytes_;
  std::string pending_for_;
  std::vector<float> pending_scales_;
};

void write_text_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) fail(ErrorKind::Runtime, kOp, "cannot write {}", path.string());
}

// Earlier runs may have left a different sharding behind; Checkpoint::open would prefer a
// stale index over a fresh single file.
void remove_stale_weights(const fs::path& dir) {
  static const std::regex kShard(R"(model(-\d{5}-of-\d{5})?\.safetensors(\.index\.json)?)");
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && std::regex_match(e.path().filename().string(), kShard)) fs::remove(e.path());
  }
}

// Tokens the configs name, looked up in the tokenizer that is written next to them.
void set_token_ids(ModelConfig& c, const SyntheticTokenizer& files) {
  const Tokenizer tokenizer = Tokenizer::from_json(files.tokenizer_json, files.tokenizer_config_json);
  KILN_CHECK(tokenizer.vocab_size() <= c.vocab_size, kOp, "synthetic tokenizer has {} ids, more than vocab_size {}",
             tokenizer.vocab_size(), c.vocab_size);
  const auto id = [&](const char* token) -> int64_t {
    const std::optional<int32_t> found = tokenizer.token_to_id(token);
    KILN_CHECK(found.has_value(), kOp, "synthetic tokenizer lacks {}", token);
    return *found;
  };
  c.eos_token_ids = {id("<|im_end|>")};
  GenerationDefaults& g = c.generation;
  g.do_sample = true;
  if (c.arch != Arch::Lfm2Moe) {
    // Qwen3 ships eos [<|im_end|>, <|endoftext|>] in generation_config.json.
    c.bos_token_id = id("<|endoftext|>");
    c.eos_token_ids.push_back(id("<|endoftext|>"));
    g.temperature = 0.6;
    g.top_k = 20;
    g.top_p = 0.95;
  } else {
    c.bos_token_id = id("<|startoftext|>");
    c.pad_token_id = id("<|pad|>");
    g.temperature = 0.3;
    g.min_p = 0.15;
    g.repetition_penalty = 1.05;
  }
}

std::string generation_config_json(const ModelConfig& c) {
  nlohmann::json j = {{"do_sample", *c.generation.do_sample},
                      {"eos_token_id", c.eos_token_ids},
                      {"temperature", *c.generation.temperature},
                      {"transformers_version", "4.51.0"}};
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  j["pad_token_id"] = c.pad_token_id ? *c.pad_token_id : *c.bos_token_id;
  if (c.generation.top_k) j["top_k"] = *c.generation.top_k;
  if (c.generation.top_p) j["top_p"] = *c.generation.top_p;
  if (c.generation.min_p) j["min_p"] = *c.generation.min_p;
  if (c.generation.repetition_penalty) j["repetition_penalty"] = *c.generation.repetition_penalty;
  return j.dump(2) + "\n";
}

// Consecutive groups of tensors, a new shard whenever the next tensor would pass the limit.
std::vector<std::vector<size_t>> plan_shards(const std::vector<uint64_t>& sizes, uint64_t max_shard_bytes) {
  std::vector<std::vector<size_t>> shards(1);
  uint64_t in_shard = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!shards.back().empty() && in_shard + sizes[i] > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += sizes[i];
  }
  return shards;
}

}  // namespace

std::vector<CheckpointTensorSpec> checkpoint_tensor_specs(const ModelConfig& config) {
  std::vector<CheckpointTensorSpec> specs;
  for (PlannedTensor& t : Planner(config).plan()) specs.push_back(std::move(t.spec));
  return specs;
}

SyntheticModel write_synthetic_model(const SyntheticModelOptions& options) {
  SyntheticModel result;
  ModelConfig& c = result.config;
  c = synthetic_model_config(options.arch, options.preset, options.num_layers, options.fp8);
  if (options.max_shard_bytes == 0) fail(ErrorKind::Value, kOp, "max_shard_bytes must be positive");

  const fs::path dir(options.out_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (options.out_dir.empty() || !fs::is_directory(dir, ec)) {
    fail(ErrorKind::Runtime, kOp, "cannot create the output folder '{}'{}", options.out_dir,
         ec ? ": " + ec.message() : "");
  }

  const SyntheticTokenizer tokenizer = make_synthetic_tokenizer(
      c.arch == Arch::Lfm2Moe ? TokenizerFlavor::Lfm2 : TokenizerFlavor::Qwen,
      std::min(c.vocab_size, kMaxTokenizerVocab));
  // The small presets size their embedding to the tokenizer, so every id a random model
  // samples decodes to text; the real-shape presets keep the real vocabulary (padding
  // rows past the tokenizer, as Qwen's checkpoints have).
  if (options.preset == "tiny" || options.preset == "demo") {
    c.vocab_size = Tokenizer::from_json(tokenizer.tokenizer_json, tokenizer.tokenizer_config_json).vocab_size();
  }
  set_token_ids(c, tokenizer);
  write_text_file(dir / "tokenizer.json", tokenizer.tokenizer_json);
  write_text_file(dir / "tokenizer_config.json", tokenizer.tokenizer_config_json);
  write_text_file(dir / "config.json", model_config_to_json(c));
  write_text_file(dir / "generation_config.json", generation_config_json(c));
  remove_stale_weights(dir);

  const std::vector<PlannedTensor> plan = Planner(c).plan();
  std::vector<uint64_t> sizes;
  for (const PlannedTensor& t : plan) sizes.push_back(tensor_byte_size(t.spec.shape, t.spec.dtype, kOp));
  SyntheticModelProgress progress;
  progress.tensors_total = static_cast<int64_t>(plan.size());
  for (uint64_t s : sizes) progress.bytes_total += s;
  result.tensor_bytes = progress.bytes_total;

  const std::vector<std::vector<size_t>> shards = plan_shards(sizes, options.max_shard_bytes);
  nlohmann::json weight_map = nlohmann::json::object();
  TensorStreamer streamer(options.seed);
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file = shards.size() == 1
                                 ? std::string("model.safetensors")
                                 : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
    std::vector<SafetensorsEntrySpec> entries;
    for (size_t i : shards[s]) {
      entries.push_back({plan[i].spec.name, plan[i].spec.dtype, plan[i].spec.shape});
      weight_map[plan[i].spec.name] = file;
    }
    SafetensorsWriter writer((dir / file).string(), entries, {{"format", "pt"}});
    for (size_t i : shards[s]) {
      streamer.write(plan[i], writer);
      ++progress.tensors_done;
      progress.bytes_done += sizes[i];
      if (options.progress) options.progress(progress);
    }
    writer.finish();
    result.shards.push_back((dir / file).string());
  }
  if (shards.size() > 1) {
    const nlohmann::json index = {{"metadata", {{"total_size", result.tensor_bytes}}}, {"weight_map", weight_map}};
    write_text_file(dir / "model.safetensors.index.json", index.dump(2) + "\n");
  }
  return result;
}

}  // namespace kiln::llm

namespace kiln::llm {

SyntheticModelSummary make_synthetic_model(const SyntheticModelOptions& options) {
  SyntheticModel model = write_synthetic_model(options);
  return {model.config.model_type, model.config.num_layers, std::move(model.shards), model.tensor_bytes};
}

}  // namespace kiln::llm
