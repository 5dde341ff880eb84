// config.json / generation_config.json -> ModelConfig. Geometry keys are required (class
// defaults in transformers describe other models, spec models.md §1.1); flags that real
// files may omit take transformers' defaults for the architecture. Every option that
// would change the math in a way kiln does not implement (rope scaling, sliding window,
// biases, other quantisation schemes) is refused rather than ignored.
#include "llm/config.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string_view>
#include <unordered_set>

#include "kiln/error.h"
#include "llm/json_tree.h"
#include "llm/model_files.h"

namespace kiln::llm {
namespace {

using nlohmann::json;

// Bounds on the sizes a config.json can ask for, each far above any real model (the
// largest have ~130 layers, 25k hidden, 512 experts, 262k vocabulary, 10M positions).
// Their products (q width, expert and embedding tables) stay far below 2^63.
constexpr int64_t kMaxVocab = int64_t{1} << 24;  // the tokenizer's id bound too
constexpr int64_t kMaxHidden = int64_t{1} << 18;
constexpr int64_t kMaxLayers = int64_t{1} << 12;
constexpr int64_t kMaxHeads = int64_t{1} << 12;
constexpr int64_t kMaxHeadDim = int64_t{1} << 12;
constexpr int64_t kMaxExperts = int64_t{1} << 16;
constexpr int64_t kMaxIntermediate = int64_t{1} << 20;
constexpr int64_t kMaxConvKernel = int64_t{1} << 12;
constexpr int64_t kMaxPositions = int64_t{1} << 40;

// Typed access to one JSON object; errors name the file and the key.
class Reader {
 public:
  Reader(const json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  template <typename... Args>
  [[noreturn]] void error(ErrorKind kind, std::string_view key, fmt::format_string<Args...> f, Args&&... args) const {
    fail(kind, "config " + source_, "'{}{}' {}", prefix_, key, fmt::format(f, std::forward<Args>(args)...));
  }

  // Present and not null.
  bool has(std::string_view key) const {
    const auto it = object_.find(key);
    return it != object_.end() && !it->is_null();
  }
  const json& at(std::string_view key) const {
    if (!has(key)) error(ErrorKind::Value, key, "is missing");
    return *object_.find(key);
  }

  int64_t integer(std::string_view key) const {
    const json& v = at(key);
    if (!v.is_number_integer()) error(ErrorKind::Value, key, "must be an integer, got {}", json_excerpt(v));
    return v.get<int64_t>();
  }
  int64_t positive(std::string_view key) const {
    const int64_t v = integer(key);
    if (v <= 0) error(ErrorKind::Value, key, "must be positive, got {}", v);
    return v;
  }
  int64_t positive(std::string_view key, int64_t fallback) const { return has(key) ? positive(key) : fallback; }
  // A count or width: positive and at most `bound`, so that no per-layer loop, table or
  // product of sizes a hostile file asks for runs long or overflows.
  int64_t size(std::string_view key, int64_t bound) const {
    const int64_t v = positive(key);
    if (v > bound) {
      error(ErrorKind::Value, key, "is {}, more than kiln's bound of {} (real checkpoints stay far below)", v, bound);
    }
    return v;
  }
  std::optional<int64_t> optional_integer(std::string_view key) const {
    return has(key) ? std::optional<int64_t>(integer(key)) : std::nullopt;
  }

  double number(std::string_view key) const {
    const json& v = at(key);
    if (!v.is_number()) error(ErrorKind::Value, key, "must be a number, got {}", json_excerpt(v));
    return v.get<double>();
  }
  double positive_number(std::string_view key) const {
    const double v = number(key);
    if (!(v > 0)) error(ErrorKind::Value, key, "must be positive, got {}", v);
    return v;
  }
  std::optional<double> optional_number(std::string_view key) const {
    return has(key) ? std::optional<double>(number(key)) : std::nullopt;
  }

  bool boolean(std::string_view key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = at(key);
    if (!v.is_boolean()) error(ErrorKind::Value, key, "must be true or false, got {}", json_excerpt(v));
    return v.get<bool>();
  }
  std::optional<bool> optional_boolean(std::string_view key) const {
    return has(key) ? std::optional<bool>(boolean(key, false)) : std::nullopt;
  }

  std::string string(std::string_view key) const {
    const json& v = at(key);
    if (!v.is_string()) error(ErrorKind::Value, key, "must be a string, got {}", json_excerpt(v));
    return v.get<std::string>();
  }

  // An id or a list of ids (eos_token_id), each in [0, vocab_size): a stop id the model
  // cannot produce (or one that would wrap to another id as int32) is a config error.
  std::vector<int64_t> ids(std::string_view key, int64_t vocab_size) const {
    if (!has(key)) return {};
    const json& v = at(key);
    std::vector<int64_t> ids;
    if (v.is_number_integer()) {
      ids.push_back(v.get<int64_t>());
    } else if (v.is_array()) {
      for (const json& id : v) {
        if (!id.is_number_integer()) break;
        ids.push_back(id.get<int64_t>());
      }
    }
    if (!v.is_number_integer() && !(v.is_array() && ids.size() == v.size())) {
      error(ErrorKind::Value, key, "must be an integer or a list of integers, got {}", json_excerpt(v));
    }
    for (int64_t id : ids) {
      if (id < 0 || id >= vocab_size) {
        error(ErrorKind::Value, key, "holds {}, outside the vocabulary [0, {})", id, vocab_size);
      }
    }
    return ids;
  }

  Reader object(std::string_view key) const {
    const json& v = at(key);
    if (!v.is_object()) error(ErrorKind::Value, key, "must be an object, got {}", json_excerpt(v));
    return Reader(v, source_, prefix_ + std::string(key) + ".");
  }

 private:
  const json& object_;
  std::string source_;
  std::string prefix_;
};

json parse_json_object(const std::string& text, const std::string& source) {
  const json j = parse_json_tree(text, "config " + source);
  if (!j.is_object()) fail(ErrorKind::Value, "config " + source, "expected a JSON object, got {}", j.type_name());
  return j;
}

DType parse_dtype(const Reader& r) {
  const char* key = r.has("torch_dtype") ? "torch_dtype" : "dtype";
  if (!r.has(key)) return DType::BFloat16;
  const std::string name = r.string(key);
  if (name == "bfloat16") return DType::BFloat16;
  if (name == "float16") return DType::Float16;
  if (name == "float32") return DType::Float32;
  r.error(ErrorKind::Value, key, "is '{}', expected bfloat16, float16 or float32", name);
}

// rope_theta at the top level (transformers v4 files) or in rope_parameters (v5).
// Scaled variants (YaRN, linear, dynamic, llama3) change the angles: refused.
double parse_rope(const Reader& r) {
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!r.has(key)) continue;
    const Reader rope = r.object(key);
    for (const char* type_key : {"rope_type", "type"}) {
      if (rope.has(type_key) && rope.string(type_key) != "default") {
        rope.error(ErrorKind::NotImplemented, type_key, "is '{}': only the default RoPE is supported",
                   rope.string(type_key));
      }
    }
    if (std::string_view(key) == "rope_parameters" && rope.has("rope_theta")) return rope.positive_number("rope_theta");
  }
  return r.positive_number("rope_theta");
}

void parse_quantization(const Reader& r, ModelConfig& c) {
  if (!r.has("quantization_config")) return;
  const Reader q = r.object("quantization_config");
  const std::string method = q.string("quant_method");
  if (method != "fp8") {
    q.error(ErrorKind::NotImplemented, "quant_method", "is '{}': only fp8 (block-scaled) checkpoints are supported",
            method);
  }
  if (q.has("fmt") && q.string("fmt") != "e4m3") {
    q.error(ErrorKind::NotImplemented, "fmt", "is '{}': only e4m3 is supported", q.string("fmt"));
  }
  if (q.has("activation_scheme") && q.string("activation_scheme") != "dynamic") {
    q.error(ErrorKind::NotImplemented, "activation_scheme", "is '{}': only dynamic is supported",
            q.string("activation_scheme"));
  }
  const json& block = q.at("weight_block_size");
  if (block != json::array({128, 128})) {
    q.error(ErrorKind::NotImplemented, "weight_block_size", "is {}: only [128, 128] blocks are supported",
            json_excerpt(block));
  }
  c.fp8_block_scaled = true;
}

void parse_generation(const std::string& text, const std::string& source, ModelConfig& c) {
  const json j = parse_json_object(text, source);
  const Reader r(j, source);
  GenerationDefaults& g = c.generation;
  g.temperature = r.optional_number("temperature");
  g.top_k = r.optional_integer("top_k");
  g.top_p = r.optional_number("top_p");
  g.min_p = r.optional_number("min_p");
  g.repetition_penalty = r.optional_number("repetition_penalty");
  g.do_sample = r.optional_boolean("do_sample");
  // A set, not a scan of the list per id: a file may list millions.
  std::unordered_set<int64_t> known(c.eos_token_ids.begin(), c.eos_token_ids.end());
  for (int64_t id : r.ids("eos_token_id", c.vocab_size)) {
    if (known.insert(id).second) c.eos_token_ids.push_back(id);
  }
}

void refuse_if(const Reader& r, const char* key, bool refused_value, const char* why) {
  if (r.has(key) && r.boolean(key, false) == refused_value) r.error(ErrorKind::NotImplemented, key, "{}", why);
}

// Keys every Qwen family shares (Qwen3, Qwen3-MoE, Qwen3-Next, Qwen3.5).
void parse_qwen_common(const Reader& r, ModelConfig& c) {
  if (r.has("hidden_act") && r.string("hidden_act") != "silu") {
    r.error(ErrorKind::NotImplemented, "hidden_act", "is '{}': only silu is supported", r.string("hidden_act"));
  }
  refuse_if(r, "attention_bias", true, "is true: attention biases are not supported");
  refuse_if(r, "use_sliding_window", true, "is true: sliding-window attention is not supported");
  c.head_dim = r.has("head_dim") ? r.size("head_dim", kMaxHeadDim) : 0;
  c.norm_eps = r.positive_number("rms_norm_eps");
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  c.scoring = MoeScoring::Softmax;
}

// Layer i is MoE iff i is not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0
// (Qwen3-MoE and Qwen3-Next).
void parse_sparse_layers(const Reader& r, ModelConfig& c) {
  const int64_t sparse_step = r.positive("decoder_sparse_step", 1);
  std::set<int64_t> dense_only;
  if (r.has("mlp_only_layers")) {
    const json& list = r.at("mlp_only_layers");
    if (!list.is_array()) r.error(ErrorKind::Value, "mlp_only_layers", "must be a list of layer indices");
    for (const json& v : list) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.num_layers) {
        r.error(ErrorKind::Value, "mlp_only_layers", "holds {}, expected layer indices in [0, {})", json_excerpt(v),
                c.num_layers);
      }
      dense_only.insert(v.get<int64_t>());
    }
  }
  c.moe_layers.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) c.moe_layers[i] = !dense_only.count(i) && (i + 1) % sparse_step == 0;
}

void parse_qwen3_moe(const Reader& r, ModelConfig& c) {
  c.arch = Arch::Qwen3Moe;
  parse_qwen_common(r, c);
  c.norm_topk_prob = r.boolean("norm_topk_prob", false);
  c.mixers.assign(c.num_layers, MixerKind::Attention);
  parse_sparse_layers(r, c);
}

// Dense Qwen3 (Qwen3ForCausalLM, spec §4.1): Qwen3-MoE's attention, a SwiGLU in every layer.
void parse_qwen3(const Reader& r, ModelConfig& c) {
  c.arch = Arch::Qwen3;
  parse_qwen_common(r, c);
  c.mixers.assign(c.num_layers, MixerKind::Attention);
  c.moe_layers.assign(c.num_layers, false);
}

// partial_rotary_factor at the top level (transformers v4 files) or in rope_parameters
// (v5); transformers' default for these families is 0.25.
int64_t parse_rotary_dim(const Reader& r, int64_t head_dim) {
  double factor = 0.25;
  const char* key = "partial_rotary_factor";
  if (r.has("rope_parameters") && r.object("rope_parameters").has(key)) {
    factor = r.object("rope_parameters").positive_number(key);
  } else if (r.has(key)) {
    factor = r.positive_number(key);
  }
  const double width = factor * static_cast<double>(head_dim);
  // HF takes int(head_dim * factor); RoPE needs an even width of at least 2.
  const int64_t dim = static_cast<int64_t>(width);
  if (!(factor <= 1.0) || dim < 2 || dim % 2 != 0) {
    r.error(ErrorKind::Value, key, "is {}: head_dim {} times it must give an even rotary width of 2..head_dim", factor,
            head_dim);
  }
  return dim;
}

struct LayerTypeName {
  std::string_view name;
  MixerKind kind;
};

// layer_types: one entry per layer, each one of `names`; anything else is an error of
// `unknown` kind: "[i] is <type><expected>".
void parse_layer_types(const Reader& r, ModelConfig& c, std::span<const LayerTypeName> names, ErrorKind unknown,
                       std::string_view expected) {
  const json& types = r.at("layer_types");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != c.num_layers) {
    r.error(ErrorKind::Value, "layer_types", "must list one type per layer ({} = num_hidden_layers), got {}",
            c.num_layers, types.is_array() ? std::to_string(types.size()) + " entries" : json_excerpt(types));
  }
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string type = types[i].is_string() ? types[i].get<std::string>() : json_excerpt(types[i]);
    const auto it = std::find_if(names.begin(), names.end(), [&](const LayerTypeName& n) { return n.name == type; });
    if (it == names.end()) r.error(unknown, "layer_types", "[{}] is {}{}", i, type, expected);
    c.mixers.push_back(it->kind);
  }
}

// layer_types ("linear_attention" / "full_attention"), or derived from
// full_attention_interval: layer i is full attention iff (i + 1) % interval == 0.
void parse_hybrid_layer_types(const Reader& r, ModelConfig& c) {
  if (!r.has("layer_types")) {
    const int64_t interval = r.positive("full_attention_interval", 4);
    for (int64_t i = 0; i < c.num_layers; ++i) {
      c.mixers.push_back((i + 1) % interval == 0 ? MixerKind::Attention : MixerKind::GatedDeltaNet);
    }
    return;
  }
  static constexpr LayerTypeName kNames[] = {{"linear_attention", MixerKind::GatedDeltaNet},
                                             {"full_attention", MixerKind::Attention}};
  parse_layer_types(r, c, kNames, ErrorKind::NotImplemented,
                    ": kiln runs \"linear_attention\" (Gated DeltaNet) and \"full_attention\" layers");
}

// Qwen3-Next and the Qwen3.5 text tower (spec §2): gated attention with zero-centred
// q/k norms and partial RoPE, Gated DeltaNet layers, MoE with a shared expert.
void parse_qwen_hybrid(const Reader& r, ModelConfig& c, bool qwen35) {
  c.arch = qwen35 ? Arch::Qwen35Moe : Arch::Qwen3Next;
  parse_qwen_common(r, c);
  if (c.head_dim == 0) c.head_dim = c.hidden_size / c.num_heads;
  refuse_if(r, "attn_output_gate", false, "is false: kiln runs the gated attention these models ship");
  c.attention_output_gate = true;
  c.zero_centred_norms = true;
  c.rotary_dim = parse_rotary_dim(r, c.head_dim);
  c.delta_net.num_key_heads = r.size("linear_num_key_heads", kMaxHeads);
  c.delta_net.num_value_heads = r.size("linear_num_value_heads", kMaxHeads);
  c.delta_net.key_head_dim = r.size("linear_key_head_dim", kMaxHeadDim);
  c.delta_net.value_head_dim = r.size("linear_value_head_dim", kMaxHeadDim);
  c.delta_net.conv_kernel = r.size("linear_conv_kernel_dim", kMaxConvKernel);
  if (c.delta_net.num_value_heads % c.delta_net.num_key_heads != 0) {
    r.error(ErrorKind::Value, "linear_num_value_heads", "({}) must be a multiple of linear_num_key_heads ({})",
            c.delta_net.num_value_heads, c.delta_net.num_key_heads);
  }
  parse_hybrid_layer_types(r, c);
  c.shared_expert_intermediate_size = r.size("shared_expert_intermediate_size", kMaxIntermediate);
  if (qwen35) {
    // Qwen3_5MoeTopKRouter renormalises the top-k unconditionally; every layer is MoE.
    c.norm_topk_prob = true;
    c.moe_layers.assign(c.num_layers, true);
    c.weight_prefix = "model.language_model.";
  } else {
    c.norm_topk_prob = r.boolean("norm_topk_prob", true);
    parse_sparse_layers(r, c);
  }
}

void parse_lfm2_moe(const Reader& r, ModelConfig& c) {
  c.arch = Arch::Lfm2Moe;
  refuse_if(r, "conv_bias", true, "is true: short-conv biases are not supported");
  if (r.has("head_dim") && r.size("head_dim", kMaxHeadDim) * c.num_heads != c.hidden_size) {
    r.error(ErrorKind::NotImplemented, "head_dim", "is {}: LFM2 attention uses hidden_size / num_attention_heads = {}",
            r.integer("head_dim"), c.hidden_size / c.num_heads);
  }
  c.norm_eps = r.positive_number("norm_eps");
  // transformers reads the original key tie_embedding in preference to tie_word_embeddings.
  c.tie_word_embeddings = r.has("tie_embedding") ? r.boolean("tie_embedding", true)
                                                 : r.boolean("tie_word_embeddings", true);
  c.norm_topk_prob = r.boolean("norm_topk_prob", true);
  c.use_expert_bias = r.boolean("use_expert_bias", true);
  c.routed_scaling_factor = r.has("routed_scaling_factor") ? r.positive_number("routed_scaling_factor") : 1.0;
  c.scoring = MoeScoring::Sigmoid;
  c.conv_kernel = r.size("conv_L_cache", kMaxConvKernel);

  static constexpr LayerTypeName kNames[] = {{"conv", MixerKind::ShortConv},
                                             {"short_conv", MixerKind::ShortConv},
                                             {"full_attention", MixerKind::Attention},
                                             {"attention", MixerKind::Attention},
                                             {"attn", MixerKind::Attention}};
  parse_layer_types(r, c, kNames, ErrorKind::Value, ", expected \"conv\" or \"full_attention\"");

  const int64_t dense_layers = r.integer("num_dense_layers");
  if (dense_layers < 0 || dense_layers > c.num_layers) {
    r.error(ErrorKind::Value, "num_dense_layers", "is {}, expected 0..{} (num_hidden_layers)", dense_layers,
            c.num_layers);
  }
  c.moe_layers.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) c.moe_layers[i] = i >= dense_layers;
}

}  // namespace

ModelConfig parse_model_config(const std::string& config_json, const std::string& source,
                               const std::string& generation_json) {
  const json j = parse_json_object(config_json, source);
  const Reader top(j, source);
  ModelConfig c;
  c.model_type = top.string("model_type");
  static const std::set<std::string> kSupported = {"qwen3_moe", "lfm2_moe", "qwen3", "qwen3_next", "qwen3_5_moe",
                                                   "qwen3_5_moe_text"};
  if (!kSupported.count(c.model_type)) {
    top.error(ErrorKind::NotImplemented, "model_type",
              "is '{}': supported model types are qwen3_moe, lfm2_moe, qwen3, qwen3_next and qwen3_5_moe "
              "(qwen3_5_moe_text)", c.model_type);
  }
  // Qwen3.5 folders (Qwen3_5MoeForConditionalGeneration) hold the text tower's geometry
  // under text_config; kiln runs that tower and ignores vision_config.
  const bool qwen35 = c.model_type == "qwen3_5_moe" || c.model_type == "qwen3_5_moe_text";
  const bool nested = c.model_type == "qwen3_5_moe";
  if (nested && !top.has("text_config")) {
    top.error(ErrorKind::NotImplemented, "text_config",
              "is missing: kiln runs the Qwen3.5 text tower only, and this folder describes no text model");
  }
  const Reader r = nested ? top.object("text_config") : top;
  c.vocab_size = r.size("vocab_size", kMaxVocab);
  c.hidden_size = r.size("hidden_size", kMaxHidden);
  c.num_layers = r.size("num_hidden_layers", kMaxLayers);
  c.num_heads = r.size("num_attention_heads", kMaxHeads);
  c.num_kv_heads = r.size("num_key_value_heads", kMaxHeads);
  if (c.num_heads % c.num_kv_heads != 0) {
    r.error(ErrorKind::Value, "num_attention_heads", "({}) must be a multiple of num_key_value_heads ({})",
            c.num_heads, c.num_kv_heads);
  }
  c.max_position_embeddings = r.size("max_position_embeddings", kMaxPositions);
  c.rope_theta = parse_rope(r);
  c.dtype = parse_dtype(nested && !top.has("torch_dtype") && !top.has("dtype") ? r : top);
  // Token ids sit in text_config or at the top level of a Qwen3.5 config.
  const Reader& ids = nested && !top.has("eos_token_id") ? r : top;
  c.bos_token_id = ids.optional_integer("bos_token_id");
  c.pad_token_id = ids.optional_integer("pad_token_id");
  c.eos_token_ids = ids.ids("eos_token_id", c.vocab_size);

  if (c.model_type == "qwen3_moe") {
    parse_qwen3_moe(r, c);
  } else if (c.model_type == "qwen3") {
    parse_qwen3(r, c);
  } else if (c.model_type == "qwen3_next" || qwen35) {
    parse_qwen_hybrid(r, c, qwen35);
    if (nested) c.tie_word_embeddings = top.boolean("tie_word_embeddings", c.tie_word_embeddings);
  } else {
    parse_lfm2_moe(r, c);
  }
  if (c.head_dim == 0) {
    if (c.hidden_size % c.num_heads != 0) {
      r.error(ErrorKind::Value, "hidden_size", "({}) must be a multiple of num_attention_heads ({}) when head_dim is "
              "not given", c.hidden_size, c.num_heads);
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }

  // Expert geometry matters only when some layer is MoE (dense Qwen3 has none).
  const bool has_moe = std::find(c.moe_layers.begin(), c.moe_layers.end(), true) != c.moe_layers.end();
  if (has_moe) {
    c.num_experts = r.size("num_experts", kMaxExperts);
    c.num_experts_per_tok = r.size("num_experts_per_tok", kMaxExperts);
    if (c.num_experts_per_tok > c.num_experts) {
      r.error(ErrorKind::Value, "num_experts_per_tok", "({}) exceeds num_experts ({})", c.num_experts_per_tok,
              c.num_experts);
    }
    c.moe_intermediate_size = r.size("moe_intermediate_size", kMaxIntermediate);
  }
  // The dense width matters only when some layer is dense.
  const bool has_dense = std::find(c.moe_layers.begin(), c.moe_layers.end(), false) != c.moe_layers.end();
  c.intermediate_size = has_dense || r.has("intermediate_size") ? r.size("intermediate_size", kMaxIntermediate) : 0;

  parse_quantization(nested && !top.has("quantization_config") ? r : top, c);
  if (!generation_json.empty()) {
    const std::filesystem::path dir = std::filesystem::path(source).parent_path();
    parse_generation(generation_json, (dir / "generation_config.json").string(), c);
  }
  return c;
}

ModelConfig load_model_config(const std::string& dir) {
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  const std::string generation_path = (std::filesystem::path(dir) / "generation_config.json").string();
  const std::string generation = regular_file_exists(generation_path, "config")
                                     ? read_regular_file(generation_path, kMaxConfigFileBytes, "config")
                                     : "";
  return parse_model_config(read_regular_file(config_path, kMaxConfigFileBytes, "config"), config_path, generation);
}

}  // namespace kiln::llm
