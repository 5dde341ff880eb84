// Reading Hugging Face tokenizer.json (+ tokenizer_config.json) into Tokenizer::Impl.
// Everything the file can say is either honoured or refused with an error naming the
// field: an unsupported component is NotImplemented, a malformed one is a Value error.
#include <nlohmann/json.hpp>

#include <algorithm>

#include "kiln/error.h"
#include "llm/json_tree.h"
#include "llm/model_files.h"
#include "llm/tokenizer_byte_level.h"
#include "llm/tokenizer_impl.h"
#include "llm/tokenizer_json_reader.h"

namespace kiln::llm {
namespace {

using nlohmann::json;
constexpr std::string_view kOp = "Tokenizer";
// Real vocabularies stay below 2^19 ids; the bound keeps a corrupt id from sizing tables.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;
// Ids index dense per-id tables, so an id far past the number of tokens the file defines
// would size them from nothing (one id near 2^24 cost a gigabyte). Real vocabularies are
// dense, with at most a few hundred unused ids: ids must stay below twice the number of
// tokens plus this slack.
constexpr int64_t kIdSlack = 65536;
// Real pre-tokenizers have at most four steps; each Split compiles a regex and every
// piece of text passes through every step, so a file listing thousands is refused.
constexpr int kMaxPreTokenizerSteps = 64;

class Loader {
 public:
  explicit Loader(const std::string& source) : source_(source) {}

  std::shared_ptr<Tokenizer::Impl> build(tok::TokenizerJson& doc, const json* config, const std::string& config_source);

 private:
  template <typename... Args>
  [[noreturn]] void value_error(fmt::format_string<Args...> f, Args&&... args) const {
    fail(ErrorKind::Value, kOp, "{}: {}", source_, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  [[noreturn]] void unsupported(fmt::format_string<Args...> f, Args&&... args) const {
    fail(ErrorKind::NotImplemented, kOp, "{}: {}", source_, fmt::format(f, std::forward<Args>(args)...));
  }

  // A present, non-null member, or nullptr.
  static const json* member(const json& obj, const char* key) {
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  const json& object_member(const json& obj, const char* key, const std::string& path) const {
    const json* m = member(obj, key);
    if (m == nullptr || !m->is_object()) value_error("{}.{} must be an object", path, key);
    return *m;
  }
  std::string string_member(const json& obj, const char* key, const std::string& path) const {
    const json* m = member(obj, key);
    if (m == nullptr || !m->is_string()) value_error("{}.{} must be a string", path, key);
    return m->get<std::string>();
  }
  bool bool_member(const json& obj, const char* key, bool fallback, const std::string& path) const {
    const json* m = member(obj, key);
    if (m == nullptr) return fallback;
    if (!m->is_boolean()) value_error("{}.{} must be true or false, got {}", path, key, json_excerpt(*m));
    return m->get<bool>();
  }
  int32_t token_id(const json& value, const std::string& path) const {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > kMaxTokenId) {
      value_error("{} = {} is not a token id (an integer in [0, {}])", path, json_excerpt(value), kMaxTokenId);
    }
    return static_cast<int32_t>(value.get<int64_t>());
  }
  std::string type_of(const json& component, const std::string& path) const {
    if (!component.is_object()) value_error("{} must be an object, got {}", path, json_excerpt(component));
    return string_member(component, "type", path);
  }

  void read_model(const json& model, tok::TokenizerJson& doc, Tokenizer::Impl& impl);
  void read_added_tokens(const json* added, Tokenizer::Impl& impl);
  void read_normalizer(const json& normalizer, const std::string& path, Tokenizer::Impl& impl);
  void read_pre_tokenizer(const json& pre, const std::string& path, Tokenizer::Impl& impl);
  void read_pre_tokenizer_step(const json& pre, const std::string& type, const std::string& path,
                               Tokenizer::Impl& impl);
  void read_post_processor(const json& post, const std::string& path, Tokenizer::Impl& impl);
  void read_decoder(const json* decoder);
  void read_config(const json& config, const std::string& config_source, Tokenizer::Impl& impl);
  void fill_id_tables(Tokenizer::Impl& impl);

  // A vocabulary or added-token id beyond id_limit_ is refused before any table is sized.
  [[noreturn]] void id_past_limit(int64_t id, const std::string& path) const {
    value_error("{} = {} is far past the {} tokens the file defines (ids must stay below {})", path, id, token_count_,
                id_limit_);
  }

  std::string source_;
  int64_t token_count_ = 0;  // vocabulary entries and added tokens
  int64_t id_limit_ = 0;
  int pre_tokenizer_steps_ = 0;
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<tok::AddedToken> added_;
  std::vector<int32_t> template_prefix_;
};

std::shared_ptr<Tokenizer::Impl> Loader::build(tok::TokenizerJson& doc, const json* config,
                                               const std::string& config_source) {
  const json& root = doc.rest;
  if (!root.is_object()) value_error("expected a JSON object at the top level");
  auto impl = std::make_shared<Tokenizer::Impl>();
  impl->source = source_;
  const json* added = member(root, "added_tokens");
  token_count_ = static_cast<int64_t>(doc.vocab.size() + (added != nullptr && added->is_array() ? added->size() : 0));
  id_limit_ = std::min(2 * token_count_ + kIdSlack, kMaxTokenId + 1);
  read_model(object_member(root, "model", "tokenizer"), doc, *impl);
  read_added_tokens(added, *impl);
  if (const json* normalizer = member(root, "normalizer")) read_normalizer(*normalizer, "normalizer", *impl);
  if (const json* pre = member(root, "pre_tokenizer")) read_pre_tokenizer(*pre, "pre_tokenizer", *impl);
  if (!impl->pre_tokenizer.has_byte_level()) {
    unsupported("pre_tokenizer has no ByteLevel step; only byte-level BPE tokenizers are supported");
  }
  if (const json* post = member(root, "post_processor")) read_post_processor(*post, "post_processor", *impl);
  read_decoder(member(root, "decoder"));
  fill_id_tables(*impl);
  for (const auto* ids : {&template_prefix_, &impl->suffix_ids}) {
    for (int32_t id : *ids) {
      if (static_cast<size_t>(id) >= impl->kind.size() || impl->kind[id] == Tokenizer::Impl::Kind::Unused) {
        value_error("post_processor adds id {}, which names no token", id);
      }
    }
  }
  impl->prefix_ids = template_prefix_;
  if (!template_prefix_.empty()) impl->bos = template_prefix_.front();
  if (config != nullptr) read_config(*config, config_source, *impl);
  for (const char* eos : {"<|im_end|>", "<|endoftext|>"}) {
    const auto it = impl->id_of_token.find(eos);
    if (it != impl->id_of_token.end() &&
        std::find(impl->eos.begin(), impl->eos.end(), it->second) == impl->eos.end()) {
      impl->eos.push_back(it->second);
    }
  }
  return impl;
}

void Loader::read_model(const json& model, tok::TokenizerJson& doc, Tokenizer::Impl& impl) {
  const std::string type = string_member(model, "type", "model");
  if (type != "BPE") unsupported("model.type '{}' is not supported (expected BPE)", type);
  if (bool_member(model, "byte_fallback", false, "model")) {
    unsupported("model.byte_fallback = true is not supported (byte-level BPE never needs it)");
  }
  if (const json* dropout = member(model, "dropout"); dropout != nullptr && !(dropout->is_number() && *dropout == 0)) {
    unsupported("model.dropout = {} is not supported (expected null)", json_excerpt(*dropout));
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* value = member(model, affix);
    if (value != nullptr && !(value->is_string() && value->get<std::string>().empty())) {
      unsupported("model.{} = {} is not supported (expected null or \"\")", affix, json_excerpt(*value));
    }
  }

  if (!doc.has_vocab) value_error("model.vocab must be an object");
  vocab_.reserve(doc.vocab.size());
  int32_t max_id = -1;
  for (const auto& [token, id] : doc.vocab) {
    if (id >= id_limit_) id_past_limit(id, "model.vocab['" + token + "']");
    max_id = std::max(max_id, id);
  }
  std::vector<const std::string*> token_of_id(static_cast<size_t>(max_id + 1), nullptr);
  for (auto& [token, id] : doc.vocab) {
    if (token_of_id[id] != nullptr) value_error("model.vocab gives id {} to both '{}' and '{}'", id, *token_of_id[id], token);
    const auto [where, fresh] = vocab_.emplace(std::move(token), id);
    if (!fresh) value_error("model.vocab lists '{}' twice", where->first);
    token_of_id[id] = &where->first;
  }
  doc.vocab = {};
  if (!doc.has_merges && member(model, "merges") != nullptr) value_error("model.merges must be an array");

  tok::BpeModel::Options options;
  options.ignore_merges = bool_member(model, "ignore_merges", false, "model");
  if (const json* unk = member(model, "unk_token")) {
    if (!unk->is_string()) value_error("model.unk_token must be a string or null");
    const auto it = vocab_.find(unk->get<std::string>());
    if (it == vocab_.end()) value_error("model.unk_token '{}' is not in model.vocab", unk->get<std::string>());
    options.unk_id = it->second;
  }
  impl.bpe = std::make_unique<tok::BpeModel>(vocab_, doc.merges, options, source_);
  doc.merges = {};
}

void Loader::read_added_tokens(const json* added, Tokenizer::Impl& impl) {
  if (added == nullptr) return;
  if (!added->is_array()) value_error("added_tokens must be an array");
  std::vector<tok::AddedToken> raw, normalized;
  for (size_t i = 0; i < added->size(); ++i) {
    const json& entry = (*added)[i];
    const std::string path = fmt::format("added_tokens[{}]", i);
    if (!entry.is_object()) value_error("{} must be an object", path);
    tok::AddedToken token;
    const json* id = member(entry, "id");
    if (id == nullptr) value_error("{}.id is missing", path);
    token.id = token_id(*id, path + ".id");
    if (token.id >= id_limit_) id_past_limit(token.id, path + ".id");
    token.content = string_member(entry, "content", path);
    if (token.content.empty()) value_error("{}.content is empty", path);
    token.special = bool_member(entry, "special", false, path);
    token.lstrip = bool_member(entry, "lstrip", false, path);
    token.rstrip = bool_member(entry, "rstrip", false, path);
    token.single_word = bool_member(entry, "single_word", false, path);
    // Hugging Face's default: special tokens are matched in the raw text.
    token.normalized = bool_member(entry, "normalized", !token.special, path);
    added_.push_back(token);
    (token.normalized ? normalized : raw).push_back(token);
  }
  impl.raw_added = tok::AddedTokenMatcher(std::move(raw));
  impl.normalized_added = tok::AddedTokenMatcher(std::move(normalized));
}

void Loader::read_normalizer(const json& normalizer, const std::string& path, Tokenizer::Impl& impl) {
  const std::string type = type_of(normalizer, path);
  if (type == "NFC") {
    impl.nfc = true;
  } else if (type == "Sequence") {
    const json* steps = member(normalizer, "normalizers");
    if (steps == nullptr || !steps->is_array()) value_error("{}.normalizers must be an array", path);
    for (size_t i = 0; i < steps->size(); ++i) read_normalizer((*steps)[i], fmt::format("{}.normalizers[{}]", path, i), impl);
  } else {
    unsupported("{} type '{}' is not supported (supported: NFC, a Sequence of NFC, or null)", path, type);
  }
}

void Loader::read_pre_tokenizer(const json& pre, const std::string& path, Tokenizer::Impl& impl) {
  const std::string type = type_of(pre, path);
  if (type == "Sequence") {
    const json* steps = member(pre, "pretokenizers");
    if (steps == nullptr || !steps->is_array()) value_error("{}.pretokenizers must be an array", path);
    for (size_t i = 0; i < steps->size(); ++i) {
      read_pre_tokenizer((*steps)[i], fmt::format("{}.pretokenizers[{}]", path, i), impl);
    }
  } else if (type == "Split" || type == "ByteLevel") {
    if (++pre_tokenizer_steps_ > kMaxPreTokenizerSteps) {
      value_error("{}: the pre_tokenizer has more than {} steps", path, kMaxPreTokenizerSteps);
    }
    read_pre_tokenizer_step(pre, type, path, impl);
  } else {
    unsupported("{} type '{}' is not supported (supported: Split, ByteLevel, Sequence)", path, type);
  }
}

void Loader::read_pre_tokenizer_step(const json& pre, const std::string& type, const std::string& path,
                                     Tokenizer::Impl& impl) {
  if (type == "Split") {
    const std::string behavior = string_member(pre, "behavior", path);
    if (behavior != "Isolated") unsupported("{}.behavior '{}' is not supported (expected Isolated)", path, behavior);
    if (bool_member(pre, "invert", false, path)) unsupported("{}.invert = true is not supported", path);
    const json& pattern = object_member(pre, "pattern", path);
    const bool is_regex = member(pattern, "Regex") != nullptr;
    if (!is_regex && member(pattern, "String") == nullptr) {
      value_error("{}.pattern must be {{\"Regex\": ...}} or {{\"String\": ...}}, got {}", path, json_excerpt(pattern));
    }
    const std::string text = string_member(pattern, is_regex ? "Regex" : "String", path + ".pattern");
    impl.pre_tokenizer.add_split(std::make_shared<const tok::Regex>(text, !is_regex, source_ + ": " + path));
  } else {
    impl.pre_tokenizer.add_byte_level(bool_member(pre, "add_prefix_space", true, path),
                                      bool_member(pre, "use_regex", true, path));
  }
}

void Loader::read_post_processor(const json& post, const std::string& path, Tokenizer::Impl& impl) {
  const std::string type = type_of(post, path);
  if (type == "ByteLevel") return;  // only adjusts offsets, which kiln does not report
  if (type == "Sequence") {
    const json* steps = member(post, "processors");
    if (steps == nullptr || !steps->is_array()) value_error("{}.processors must be an array", path);
    for (size_t i = 0; i < steps->size(); ++i) {
      read_post_processor((*steps)[i], fmt::format("{}.processors[{}]", path, i), impl);
    }
    return;
  }
  if (type != "TemplateProcessing") {
    unsupported("{} type '{}' is not supported (supported: ByteLevel, TemplateProcessing, Sequence)", path, type);
  }
  const json* single = member(post, "single");
  if (single == nullptr || !single->is_array()) value_error("{}.single must be an array", path);
  const json* specials = member(post, "special_tokens");
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const json& piece = (*single)[i];
    const std::string piece_path = fmt::format("{}.single[{}]", path, i);
    if (piece.is_object() && member(piece, "Sequence") != nullptr) {
      seen_sequence = true;
      continue;
    }
    if (!piece.is_object() || member(piece, "SpecialToken") == nullptr) {
      value_error("{} = {} is neither a SpecialToken nor the Sequence", piece_path, json_excerpt(piece));
    }
    const std::string name = string_member(piece["SpecialToken"], "id", piece_path + ".SpecialToken");
    const json* entry = specials == nullptr ? nullptr : member(*specials, name.c_str());
    const json* ids = entry == nullptr ? nullptr : member(*entry, "ids");
    if (ids == nullptr || !ids->is_array()) value_error("{}.special_tokens has no ids for '{}'", path, name);
    for (const json& id : *ids) {
      (seen_sequence ? impl.suffix_ids : template_prefix_).push_back(token_id(id, path + ".special_tokens." + name));
    }
  }
}

void Loader::read_decoder(const json* decoder) {
  if (decoder == nullptr) unsupported("decoder is null; only the ByteLevel decoder is supported");
  const std::string type = type_of(*decoder, "decoder");
  if (type != "ByteLevel") unsupported("decoder type '{}' is not supported (expected ByteLevel)", type);
}

void Loader::fill_id_tables(Tokenizer::Impl& impl) {
  int64_t size = 0;
  for (const auto& [token, id] : vocab_) size = std::max<int64_t>(size, id + 1);
  for (const auto& token : added_) size = std::max<int64_t>(size, token.id + 1);
  impl.token_text.assign(static_cast<size_t>(size), {});
  impl.token_bytes.assign(static_cast<size_t>(size), {});
  impl.kind.assign(static_cast<size_t>(size), Tokenizer::Impl::Kind::Unused);
  for (const auto& [token, id] : vocab_) {
    impl.token_text[id] = token;
    impl.kind[id] = Tokenizer::Impl::Kind::Vocab;
  }
  // An added token wins over a vocabulary entry with the same id, as in Hugging Face.
  for (const auto& token : added_) {
    impl.token_text[token.id] = token.content;
    impl.kind[token.id] = token.special ? Tokenizer::Impl::Kind::Special : Tokenizer::Impl::Kind::Added;
  }
  // Vocabulary tokens go back through the byte map (one whose characters are not all in
  // it passes through as its UTF-8, as Hugging Face's ByteLevel decoder does); added tokens
  // decode to their text, so "đem" or "č" in one is not misread as byte-map characters.
  const tok::ByteLevelMap& bytes_map = tok::ByteLevelMap::get();
  for (size_t id = 0; id < impl.token_text.size(); ++id) {
    if (impl.kind[id] != Tokenizer::Impl::Kind::Vocab ||
        !bytes_map.decode(impl.token_text[id], impl.token_bytes[id])) {
      impl.token_bytes[id] = impl.token_text[id];
    }
  }
  impl.id_of_token = std::move(vocab_);
  for (const auto& token : added_) impl.id_of_token[token.content] = token.id;
}

void Loader::read_config(const json& config, const std::string& config_source, Tokenizer::Impl& impl) {
  if (!config.is_object()) fail(ErrorKind::Value, kOp, "{}: expected a JSON object at the top level", config_source);
  // bos_token / eos_token are a string, an AddedToken object {"content": ...}, or null.
  const auto named_token = [&](const char* key) -> std::optional<int32_t> {
    const json* value = member(config, key);
    if (value == nullptr) return std::nullopt;
    const json* content = value->is_object() ? member(*value, "content") : value;
    if (content == nullptr || !content->is_string()) {
      fail(ErrorKind::Value, kOp, "{}: {} must be a string or {{\"content\": ...}}, got {}", config_source, key,
           json_excerpt(*value));
    }
    const auto it = impl.id_of_token.find(content->get<std::string>());
    if (it == impl.id_of_token.end()) {
      fail(ErrorKind::Value, kOp, "{}: {} '{}' is not a token of {}", config_source, key, content->get<std::string>(),
           source_);
    }
    return it->second;
  };
  // The texts templates see; bos/eos are also checked against the vocabulary below.
  for (const char* key : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
    const json* value = member(config, key);
    const json* content = value != nullptr && value->is_object() ? member(*value, "content") : value;
    if (content != nullptr && content->is_string()) impl.template_special_tokens.emplace_back(key, content->get<std::string>());
  }
  if (const json* chat_template = member(config, "chat_template")) {
    std::string problem;
    if (const auto text = select_chat_template(*chat_template, problem)) {
      set_chat_template(impl, *text, config_source + " chat_template");
    } else {
      impl.chat_template_problem = config_source + ": " + problem;
    }
  }
  if (const auto bos = named_token("bos_token")) impl.bos = bos;
  if (const auto eos = named_token("eos_token")) impl.eos.push_back(*eos);
  const json* add_bos = member(config, "add_bos_token");
  if (add_bos != nullptr && !add_bos->is_boolean()) {
    fail(ErrorKind::Value, kOp, "{}: add_bos_token must be true or false, got {}", config_source,
         json_excerpt(*add_bos));
  }
  // The post-processor's template, when it has one, already says what to add.
  if (add_bos != nullptr && add_bos->get<bool>() && impl.prefix_ids.empty()) {
    if (!impl.bos) fail(ErrorKind::Value, kOp, "{}: add_bos_token is true but no bos_token is named", config_source);
    impl.prefix_ids.push_back(*impl.bos);
  }
}

}  // namespace

void set_chat_template(Tokenizer::Impl& impl, std::string_view text, const std::string& name) {
  // A template kiln cannot parse does not stop the model loading: only chat prompts need it.
  try {
    impl.chat_template = std::make_shared<const ChatTemplate>(text, name);
    impl.chat_template_problem.clear();
  } catch (const Error& e) {
    impl.chat_template = nullptr;
    impl.chat_template_problem = e.what();
  }
}

Tokenizer Tokenizer::from_json(const std::string& tokenizer_json, const std::string& tokenizer_config_json,
                               const std::string& source, const std::optional<ChatTemplateFile>& chat_template_file) {
  tok::TokenizerJson doc = tok::read_tokenizer_json(tokenizer_json, source, kMaxTokenId);
  std::string config_source = source;
  const std::string_view file_name = "tokenizer.json";
  if (config_source.size() >= file_name.size() &&
      config_source.compare(config_source.size() - file_name.size(), file_name.size(), file_name) == 0) {
    config_source.replace(config_source.size() - file_name.size(), file_name.size(), "tokenizer_config.json");
  } else {
    config_source += " (tokenizer_config.json)";
  }
  std::optional<json> config;
  if (!tokenizer_config_json.empty()) config = parse_json_tree(tokenizer_config_json, kOp, config_source + ": ");
  Tokenizer tokenizer;
  try {
    std::shared_ptr<Impl> impl = Loader(source).build(doc, config ? &*config : nullptr, config_source);
    // A separate template file wins over tokenizer_config's, as in transformers.
    if (chat_template_file) set_chat_template(*impl, chat_template_file->text, chat_template_file->name);
    tokenizer.impl_ = std::move(impl);
  } catch (const json::exception& e) {
    // The loader checks types as it goes; this catches a shape it did not foresee.
    fail(ErrorKind::Value, kOp, "{}: unexpected structure: {}", source, e.what());
  }
  return tokenizer;
}

Tokenizer Tokenizer::load(const std::string& dir) {
  const std::string json_path = dir + "/tokenizer.json";
  const std::string config_path = dir + "/tokenizer_config.json";
  std::string config_text;
  if (regular_file_exists(config_path, kOp)) {
    config_text = read_regular_file(config_path, kMaxTokenizerConfigFileBytes, kOp);
  }
  // Newer folders keep the template in its own file: chat_template.jinja (the text) or
  // chat_template.json ({"chat_template": text}, the processor format of multimodal models).
  std::optional<ChatTemplateFile> template_file;
  const std::string jinja_path = dir + "/chat_template.jinja";
  const std::string json_template_path = dir + "/chat_template.json";
  if (regular_file_exists(jinja_path, kOp)) {
    template_file = ChatTemplateFile{read_regular_file(jinja_path, kMaxTokenizerConfigFileBytes, kOp), jinja_path};
  } else if (regular_file_exists(json_template_path, kOp)) {
    const json doc = parse_json_tree(read_regular_file(json_template_path, kMaxTokenizerConfigFileBytes, kOp), kOp,
                                     json_template_path + ": ");
    const auto text = doc.is_object() ? doc.find("chat_template") : doc.end();
    if (text == doc.end() || !text->is_string()) {
      fail(ErrorKind::Value, kOp, "{}: expected {{\"chat_template\": \"...\"}}", json_template_path);
    }
    template_file = ChatTemplateFile{text->get<std::string>(), json_template_path + " chat_template"};
  }
  return from_json(read_regular_file(json_path, kMaxTokenizerFileBytes, kOp), config_text, json_path, template_file);
}

}  // namespace kiln::llm
