// Model::load: config, tokenizer and checkpoint in, a DecoderModel with its KV cache out.
#include <algorithm>
#include <chrono>

#include "kiln/allocator.h"
#include "kiln/error.h"
#include "kiln/llm.h"
#include "llm/checkpoint.h"
#include "llm/config.h"
#include "llm/decoder.h"
#include "llm/device_placement.h"
#include "llm/kv_cache.h"
#include "llm/tokenizer.h"
#include "llm/weights.h"

namespace kiln::llm {
namespace {

constexpr const char* kLoad = "load model";
constexpr int64_t kDefaultContext = 4096;

std::string_view arch_class_name(Arch arch) {
  switch (arch) {
    case Arch::Qwen3Moe: return "Qwen3MoeForCausalLM";
    case Arch::Lfm2Moe: return "Lfm2MoeForCausalLM";
    case Arch::Qwen3: return "Qwen3ForCausalLM";
    case Arch::Qwen3Next: return "Qwen3NextForCausalLM";
    case Arch::Qwen35Moe: return "Qwen3_5MoeForConditionalGeneration";
  }
  return "unknown";
}

int64_t context_capacity(const ModelConfig& config, int64_t requested) {
  KILN_CHECK_KIND(requested >= 0, Value, kLoad, "max_context must be >= 0 (0 = default), got {}", requested);
  const int64_t limit = config.max_position_embeddings;
  if (requested == 0) return limit > 0 ? std::min(limit, kDefaultContext) : kDefaultContext;
  KILN_CHECK_KIND(limit <= 0 || requested <= limit, Value, kLoad,
                  "max_context {} exceeds the model's max_position_embeddings {}", requested, limit);
  return requested;
}

}  // namespace

std::string_view weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::AsStored: return "as-stored";
    case WeightFormat::Float32: return "float32";
    case WeightFormat::BFloat16: return "bfloat16";
    case WeightFormat::Fp8: return "fp8";
  }
  return "unknown";
}

WeightFormat weight_format_from_name(std::string_view name) {
  if (name == "as-stored" || name == "auto") return WeightFormat::AsStored;
  if (name == "float32" || name == "f32") return WeightFormat::Float32;
  if (name == "bfloat16" || name == "bf16") return WeightFormat::BFloat16;
  if (name == "fp8" || name == "float8") return WeightFormat::Fp8;
  fail(ErrorKind::Value, "weight format", "unknown weight format '{}'; expected as-stored (auto), float32 (f32), "
       "bfloat16 (bf16) or fp8 (float8)", name);
}

Model::~Model() = default;

// A thread that already holds the model (generate's on_text callback calling back into
// it) gets an error: waiting would deadlock, and running would change the sequence
// under the call that holds it. Only the holder stores its own id in owner_, so no
// other thread can mistake itself for the holder.
void Model::acquire(std::string_view op) const {
  KILN_CHECK(!held_by_this_thread(), op,
             "this thread is already using the model (a call from generate's on_text callback?); a model runs "
             "one call at a time, so call it after the running call returns");
  mutex_.lock();
  owner_.store(std::this_thread::get_id());
}

void Model::release() const {
  owner_.store(std::thread::id());
  mutex_.unlock();
}

class Model::Lock {
 public:
  Lock(const Model& model, std::string_view op) : model_(model) { model_.acquire(op); }
  ~Lock() { model_.release(); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  const Model& model_;
};

Model::Session::Session(Model& model) : model_(model) { model_.acquire("Model.Session"); }
Model::Session::~Session() { model_.release(); }

Tensor Model::forward(std::span<const int32_t> tokens, bool all_logits) {
  const Lock lock(*this, "Model.forward");
  return forward_locked(tokens, all_logits);
}

void Model::reset() {
  const Lock lock(*this, "Model.reset");
  reset_locked();
}

bool Model::held_by_this_thread() const { return owner_.load() == std::this_thread::get_id(); }

// Reads are safe from the thread holding the model (a callback showing progress), so
// only they skip the lock there; the calls that change the sequence do not.
int64_t Model::position() const {
  if (held_by_this_thread()) return position_locked();
  const Lock lock(*this, "Model.position");
  return position_locked();
}

int64_t Model::decode_bytes_per_token() const {
  if (held_by_this_thread()) return decode_bytes_per_token_locked();
  const Lock lock(*this, "Model.decode_bytes_per_token");
  return decode_bytes_per_token_locked();
}

std::vector<int32_t> Model::encode(std::string_view text, bool add_special_tokens) const {
  return tokenizer_->encode(text, add_special_tokens);
}

std::string Model::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return tokenizer_->decode(ids, skip_special_tokens);
}

std::string Model::chat_prompt(std::string_view user, std::string_view system, bool enable_thinking) const {
  return tokenizer_->chat_prompt(user, system, enable_thinking);
}

std::string Model::apply_chat_template(std::string_view messages_json, bool add_generation_prompt,
                                       std::string_view kwargs_json,
                                       std::optional<std::string_view> chat_template) const {
  return tokenizer_->apply_chat_template(messages_json, add_generation_prompt, kwargs_json, chat_template);
}

bool Model::has_chat_template() const { return tokenizer_->has_chat_template(); }

std::unique_ptr<Model> Model::load(const std::string& dir, const LoadOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.cache_dtype) {
    KILN_CHECK_KIND(*options.cache_dtype == DType::Float32 || *options.cache_dtype == DType::BFloat16, Value, kLoad,
                    "cache_dtype must be float32 or bfloat16, got {}", dtype_name(*options.cache_dtype));
  }
  ModelConfig config = load_model_config(dir);
  const int64_t capacity = context_capacity(config, options.max_context);
  // Before the weights load (minutes for a real model): a context the machine cannot hold
  // fails now, judged at the narrowest cache dtype until the weights decide it.
  check_kv_cache_fits(config.mixers, config.num_kv_heads, config.head_dim, config.conv_kernel, config.hidden_size,
                      capacity, options.cache_dtype.value_or(DType::BFloat16), config.delta_net);
  auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::load(dir));
  Checkpoint checkpoint = Checkpoint::open(dir);

  // Experts packed into huge pages serve the CPU's decode; a model bound for another
  // device uploads the mapped tensors as they are.
  WeightLoader loader(checkpoint, options.weights, options.progress, /*pack_mapped_experts=*/options.device == kCPU);
  DecoderWeights weights;
  switch (config.arch) {
    case Arch::Qwen3Moe:
    case Arch::Qwen3: weights = load_qwen3_moe(config, loader); break;  // dense Qwen3: every layer dense
    case Arch::Lfm2Moe: weights = load_lfm2_moe(config, loader); break;
    case Arch::Qwen3Next:
    case Arch::Qwen35Moe: weights = load_qwen3_hybrid(config, loader); break;
  }
  loader.finish();
  move_weights_to_device(weights, options.device);
  // Conversion temporaries (and the per-expert matrices packed into one tensor per
  // projection) sit in the allocator's cache: hand them back, so the process holds the
  // model and nothing else.
  empty_cache();

  const std::set<LinearFormat>& formats = loader.linear_formats();
  const bool narrow_weights =
      std::any_of(formats.begin(), formats.end(), [](const LinearFormat& f) { return f.narrow(); });
  const DType cache_dtype = options.cache_dtype.value_or(narrow_weights ? DType::BFloat16 : DType::Float32);
  KvCache cache(config.mixers, config.num_kv_heads, config.head_dim, config.conv_kernel, config.hidden_size, capacity,
                cache_dtype, config.delta_net, options.device);

  std::vector<int32_t> eos;
  for (int64_t id : config.eos_token_ids) eos.push_back(static_cast<int32_t>(id));
  for (int32_t id : tokenizer->eos_ids()) eos.push_back(id);
  std::sort(eos.begin(), eos.end());
  eos.erase(std::unique(eos.begin(), eos.end()), eos.end());

  ModelInfo info;
  info.arch = std::string(arch_class_name(config.arch));
  info.model_type = config.model_type;
  info.num_layers = config.num_layers;
  info.num_attention_layers = std::count(config.mixers.begin(), config.mixers.end(), MixerKind::Attention);
  info.hidden_size = config.hidden_size;
  info.vocab_size = config.vocab_size;
  info.num_experts = config.num_experts;
  info.experts_per_token = config.num_experts_per_tok;
  info.weight_format = options.weights;
  info.weight_dtypes = loader.linear_dtypes();
  info.cache_dtype = cache_dtype;
  info.max_context = capacity;
  info.kv_cache_bytes = cache.kv_bytes_per_token() * capacity;
  info.fixed_state_bytes = cache.total_bytes() - info.kv_cache_bytes;
  info.parameter_count = loader.parameter_count();
  info.resident_weight_bytes = loader.resident_bytes();
  info.fp8_quantization = loader.fp8_report();
  info.device = options.device;
  info.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const int64_t vocab_size = config.vocab_size;
  auto model = std::make_unique<DecoderModel>(std::move(config), std::move(weights), std::move(cache),
                                              std::move(info), std::move(tokenizer), std::move(eos),
                                              options.fused_decode);
  check_runs_on_device(*model, options.device, vocab_size);
  return model;
}

}  // namespace kiln::llm
