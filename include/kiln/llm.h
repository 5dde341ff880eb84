// kiln's LLM runtime: load a Hugging Face checkpoint folder (config.json, safetensors,
// tokenizer.json), run it one sequence at a time with a KV cache, sample, and stream
// text. Supported families: Qwen3-MoE (`qwen3_moe`), LFM2-MoE (`lfm2_moe`), dense Qwen3
// (`qwen3`), Qwen3-Next (`qwen3_next`) and Qwen3.5/3.6-MoE (`qwen3_5_moe`, text tower)
// (spec/models.md §1-§4), stored float32 / bfloat16 / float16, or Hugging Face FP8
// with 128x128 block scales (§5).
//
// Numerics: the residual stream, norms, RoPE, routing scores, expert sums and logits
// are float32 whatever the weights. Before a float32/bfloat16/float16 linear the
// activations are rounded to the weight's dtype (the linear op takes one dtype), and a
// projection's output stays in that dtype until the next float32 step (so a bf16 dense
// SwiGLU computes act(gate x) * up x in bf16, as transformers does); FP8 weights take
// float32 activations directly (weight-only FP8), and MoE experts of any dtype take the
// float32 activations. The KV cache holds rotated keys and values in `cache_dtype`;
// attention runs in that dtype with float32 accumulation.
//
// Light header: only kiln/tensor.h and the standard library.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::llm {

// The tokenizer of a model folder (declared in the runtime's tokenizer header; Model
// also offers encode/decode/chat_prompt so front ends need nothing else).
class Tokenizer;

// How weights are held in memory after loading.
//   AsStored  zero-copy views of the mapped files (FP8 checkpoints stay FP8 with their
//             block scales), except MoE experts, copied into huge pages on the CPU when
//             the memory allows (docs/llm.md, "Weights"); only small tensors (norms,
//             biases, conv kernels) become float32 copies.
//   Float32 / BFloat16  every weight cast (FP8 checkpoints dequantised).
//   Fp8       every linear and expert weight, and lm_head, as float8_e4m3fn with one
//             float32 scale per output row (quantised at load; weights already FP8
//             keep their block scales); routers and embeddings stay as stored. A tied
//             lm_head gets its own FP8 copy: decode reads half the bytes of a bf16 head.
enum class WeightFormat { AsStored, Float32, BFloat16, Fp8 };

// "as-stored", "float32", "bfloat16", "fp8".
std::string_view weight_format_name(WeightFormat format);
// Parses the names above and the aliases "auto", "f32", "bf16", "float8"; anything else
// is a Value error listing the accepted names.
WeightFormat weight_format_from_name(std::string_view name);

struct LoadOptions {
  WeightFormat weights = WeightFormat::AsStored;
  // float32 or bfloat16; default: bfloat16 when the weights end up bfloat16 or FP8,
  // float32 otherwise.
  std::optional<DType> cache_dtype;
  // Tokens the KV cache holds; 0 = min(max_position_embeddings, 4096).
  int64_t max_context = 0;
  // Called as loading advances ("weights", tensors done, tensors in all); may be empty.
  std::function<void(std::string_view stage, int64_t done, int64_t total)> progress;
  // One-token forwards through the fused decode blocks (kiln/ops/decode_block.h) where
  // the device has them; false runs the unfused ops (same numbers; for comparisons).
  bool fused_decode = true;
  // Where the model runs: the weights go up once at load, the KV cache and other
  // per-sequence state live there, and forward returns the logits on the CPU. A device
  // without a kernel for an op the model needs fails the load (NotImplemented).
  Device device = kCPU;
};

// How far FP8 quantisation at load moved the weights: per quantised tensor the relative
// Frobenius error |dequant(q(W)) - W| / |W|, aggregated over all of them.
struct Fp8QuantizationReport {
  int64_t tensors = 0;
  double max_relative_error = 0.0;
  double rms_relative_error = 0.0;
};

struct ModelInfo {
  std::string arch;        // "Qwen3MoeForCausalLM", "Lfm2MoeForCausalLM", "Qwen3NextForCausalLM", ...
  std::string model_type;  // "qwen3_moe", "lfm2_moe"
  int64_t num_layers = 0;
  int64_t num_attention_layers = 0;
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  WeightFormat weight_format = WeightFormat::AsStored;
  std::string weight_dtypes;  // what the linear weights are in memory: "bfloat16", "float8_e4m3fn (row scales)", ...
  DType cache_dtype = DType::Float32;
  int64_t max_context = 0;
  // Per-sequence state: the K/V cache for max_context tokens, and the fixed state of
  // short-conv and Gated DeltaNet layers (conv history, recurrent state).
  int64_t kv_cache_bytes = 0;
  int64_t fixed_state_bytes = 0;
  int64_t parameter_count = 0;        // weights as in the checkpoint (tied ones once; no scales)
  int64_t resident_weight_bytes = 0;  // bytes of every weight and scale the model holds
  double load_seconds = 0.0;
  std::optional<Fp8QuantizationReport> fp8_quantization;  // when WeightFormat::Fp8 quantised anything
  Device device = kCPU;  // where the weights and the per-sequence state live
};

// One loaded model with the state of one sequence (KV cache, short-conv state).
//
// Threads may share a model: every call that reads or changes the sequence (forward,
// reset, position, decode_bytes_per_token, and generate from its reset to its last
// token) holds the model's lock, so calls take turns and each one runs whole, with the
// results it would have alone. Calls from different threads still interleave with
// each other: a thread that needs several calls in a row on one sequence holds a
// Session for them (or uses a model of its own). From inside a call that already holds
// the model on the same thread (generate's on_text callback), position() and
// decode_bytes_per_token() read the running sequence, and forward() or reset() are a
// Runtime error rather than a deadlock.
class Model {
 public:
  virtual ~Model();
  // Reads DIR/config.json (+ generation_config.json), the safetensors weights and
  // DIR/tokenizer.json. Errors name the file, the tensor or the key at fault.
  static std::unique_ptr<Model> load(const std::string& dir, const LoadOptions& options = {});

  const ModelInfo& info() const { return info_; }

  // Runs `tokens` at positions position() .. position() + T - 1 (one batched pass for
  // T > 1, the one-row decode path for T = 1) and advances position(). Returns float32
  // logits [T, vocab] with all_logits, else [1, vocab] for the last token only.
  // T = 0, an id outside the vocabulary, or more tokens than the cache has room for are
  // errors that leave the sequence state untouched.
  Tensor forward(std::span<const int32_t> tokens, bool all_logits = false);
  // Starts a new sequence (position 0, empty caches).
  void reset();
  int64_t position() const;
  int64_t max_context() const { return info_.max_context; }
  // Bytes one decode step at position() reads: every non-expert weight (lm_head and
  // routers included; one embedding row), top_k experts of each MoE layer, and the K/V
  // cache entries 0..position().
  int64_t decode_bytes_per_token() const;

  // Holds the model's lock for a run of calls on its sequence (generate holds one), so
  // no other thread's call lands between them. Blocks while another thread holds it.
  class Session {
   public:
    explicit Session(Model& model);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    Tensor forward(std::span<const int32_t> tokens, bool all_logits = false) {
      return model_.forward_locked(tokens, all_logits);
    }
    void reset() { model_.reset_locked(); }
    int64_t position() const { return model_.position_locked(); }
    int64_t decode_bytes_per_token() const { return model_.decode_bytes_per_token_locked(); }

   private:
    Model& model_;
  };

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  // The prompt text for one user turn (and an optional system message), ending with the
  // generation prompt: rendered with the model's own chat template (tokenizer_config.json
  // "chat_template" or chat_template.jinja; enable_thinking = false passes
  // enable_thinking=False, which Qwen3 / Qwen3.5 templates answer with the empty think
  // block), or ChatML when the folder has no template (then enable_thinking = false
  // appends "<think>\n\n</think>\n\n").
  std::string chat_prompt(std::string_view user, std::string_view system = "", bool enable_thinking = true) const;
  // transformers' tokenizer.apply_chat_template(messages, add_generation_prompt=...,
  // tokenize=False, **kwargs): messages as a JSON list, the keyword arguments (tools,
  // enable_thinking, ...) as a JSON object; `chat_template` replaces the model's
  // template for this call. Template errors name the template, line and column.
  std::string apply_chat_template(std::string_view messages_json, bool add_generation_prompt,
                                  std::string_view kwargs_json = "{}",
                                  std::optional<std::string_view> chat_template = std::nullopt) const;
  // Whether the folder has a chat template kiln can render.
  bool has_chat_template() const;
  // End-of-sequence ids: config.json and generation_config.json eos ids and the
  // tokenizer's end tokens, sorted, without duplicates.
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }

 protected:
  Model() = default;
  // The model itself, called with the lock held.
  virtual Tensor forward_locked(std::span<const int32_t> tokens, bool all_logits) = 0;
  virtual void reset_locked() = 0;
  virtual int64_t position_locked() const = 0;
  virtual int64_t decode_bytes_per_token_locked() const = 0;

  ModelInfo info_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::vector<int32_t> eos_ids_;

 private:
  class Lock;  // holds the mutex for one call
  // Takes and frees mutex_ (a Session or one call); `op` names the call in the error
  // a re-entrant call gets.
  void acquire(std::string_view op) const;
  void release() const;
  bool held_by_this_thread() const;

  mutable std::mutex mutex_;
  // The thread holding mutex_ (none when free): how a re-entrant call is told apart
  // from a wait for another thread.
  mutable std::atomic<std::thread::id> owner_{};
};

// Next-token choice (Hugging Face's logits processors, in their order: repetition
// penalty, temperature, top-k, top-p, min-p; then a draw from the seeded generator).
struct SamplingParams {
  double temperature = 0.0;         // 0 = greedy (argmax, lowest id on ties)
  int64_t top_k = 0;                // 0 = off
  double top_p = 1.0;               // 1 = off
  double min_p = 0.0;               // 0 = off
  double repetition_penalty = 1.0;  // 1 = off; >1 discourages ids already in the history
  uint64_t seed = 0;
};

struct GenerateOptions {
  int64_t max_new_tokens = 256;
  SamplingParams sampling;
  bool chat = false;   // wrap the prompt in the tokenizer's chat format
  std::string system;  // system message for chat (none when empty)
  bool enable_thinking = true;  // false: chat prompts end with the empty think block
  // Receives the text as it is produced (whole UTF-8 characters); returning false stops
  // generation with stop_reason "callback".
  std::function<bool(std::string_view text)> on_text;
};

struct GenerateResult {
  std::string text;             // the generated text (special tokens left out)
  std::vector<int32_t> tokens;  // the generated ids (an end-of-sequence id included)
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0.0;  // the prompt's forward passes
  double decode_seconds = 0.0;   // every later forward pass and all sampling
  double decode_bytes = 0.0;     // decode_bytes_per_token() summed over the decode steps
  std::string stop_reason;       // "eos", "max_tokens", "callback" or "context_full"
};

// Starts a new sequence on `model` (reset()), encodes the prompt (through the chat
// format when options.chat), prefills it and samples until an end-of-sequence id,
// max_new_tokens, the callback, or a full context. A prompt that encodes to no tokens
// or does not fit the context is a Value error. Holds the model (a Model::Session) from
// the reset to the last token, so concurrent generate calls on one model take turns.
GenerateResult generate(Model& model, std::string_view prompt, const GenerateOptions& options);

}  // namespace kiln::llm
