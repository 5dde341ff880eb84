#include "llm/tokenizer_json_reader.h"

#include "kiln/error.h"

namespace kiln::llm::tok {
namespace {

using nlohmann::json;

class Reader : public nlohmann::json_sax<json> {
 public:
  Reader(TokenizerJson& out, const std::string& source, int64_t max_token_id)
      : out_(out), source_(source), max_token_id_(max_token_id) {}

  bool null() override { return value(nullptr, "null"); }
  bool boolean(bool v) override { return value(v, v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override { return integer(v); }
  bool number_unsigned(number_unsigned_t v) override {
    // Beyond int64 is beyond any id; -1 gets it reported as out of range.
    return integer(v > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(v));
  }
  bool number_float(number_float_t v, const string_t& text) override { return value(v, text); }
  bool binary(binary_t&) override { return true; }  // JSON text never produces binary values

  bool string(string_t& s) override {
    if (mode_ == Mode::Merges) {
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        bad("model.merges[{}] = '{}' is not two tokens separated by one space", out_.merges.size(), s);
      }
      out_.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      return true;
    }
    if (mode_ == Mode::MergePair) {
      pair_.push_back(std::move(s));
      return true;
    }
    std::string text = "\"" + s + "\"";  // for an error message only; this part of the file is small
    return value(std::move(s), text);
  }

  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::Tree) return reject_nested("an object");
    if (at_model_member("vocab")) {
      mode_ = Mode::Vocab;
      out_.has_vocab = true;
      return true;
    }
    return open(json::object());
  }
  bool end_object() override {
    if (mode_ == Mode::Vocab) {
      mode_ = Mode::Tree;
      return true;
    }
    return close();
  }

  bool start_array(std::size_t) override {
    if (mode_ == Mode::Merges) {
      mode_ = Mode::MergePair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::Tree) return reject_nested("an array");
    if (at_model_member("merges")) {
      mode_ = Mode::Merges;
      out_.has_merges = true;
      return true;
    }
    return open(json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::MergePair) {
      if (pair_.size() != 2) bad("model.merges[{}] has {} entries, expected [\"a\", \"b\"]", out_.merges.size(), pair_.size());
      out_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::Merges;
      return true;
    }
    if (mode_ == Mode::Merges) {
      mode_ = Mode::Tree;
      return true;
    }
    return close();
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    fail(ErrorKind::Value, "Tokenizer", "{}: not valid JSON: {}", source_, e.what());
  }

 private:
  enum class Mode { Tree, Vocab, Merges, MergePair };

  template <typename... Args>
  [[noreturn]] void bad(fmt::format_string<Args...> f, Args&&... args) const {
    fail(ErrorKind::Value, "Tokenizer", "{}: {}", source_, fmt::format(f, std::forward<Args>(args)...));
  }

  // The container about to open is the root's "model" object's member `name`.
  bool at_model_member(const char* name) const {
    return stack_.size() == 2 && keys_[1] == "model" && stack_[1]->is_object() && key_ == name;
  }

  bool integer(int64_t v) {
    if (mode_ == Mode::Vocab && v >= 0 && v <= max_token_id_) {
      out_.vocab.emplace_back(std::move(key_), static_cast<int32_t>(v));
      return true;
    }
    return value(v, std::to_string(v));
  }

  bool value(json v, const std::string& text) {
    switch (mode_) {
      case Mode::Vocab:
        bad("model.vocab['{}'] = {} is not a token id (an integer in [0, {}])", key_, text, max_token_id_);
      case Mode::Merges:
      case Mode::MergePair:
        bad("model.merges[{}] holds {}; expected \"a b\" or [\"a\", \"b\"]", out_.merges.size(), text);
      case Mode::Tree:
        break;
    }
    place(std::move(v));
    return true;
  }

  bool reject_nested(const char* what) {
    if (mode_ == Mode::Vocab) bad("model.vocab['{}'] is {}, not a token id", key_, what);
    bad("model.merges[{}] holds {}; expected \"a b\" or [\"a\", \"b\"]", out_.merges.size(), what);
  }

  json* place(json v) {
    if (stack_.empty()) {
      out_.rest = std::move(v);
      return &out_.rest;
    }
    json& parent = *stack_.back();
    if (parent.is_object()) {
      json& slot = parent[key_];
      slot = std::move(v);
      return &slot;
    }
    parent.push_back(std::move(v));
    return &parent.back();
  }

  bool open(json container) {
    // While a container is open its parent receives nothing, so the pointer stays valid.
    std::string key = !stack_.empty() && stack_.back()->is_object() ? key_ : std::string();
    stack_.push_back(place(std::move(container)));
    keys_.push_back(std::move(key));
    return true;
  }
  bool close() {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }

  TokenizerJson& out_;
  const std::string& source_;
  int64_t max_token_id_;
  Mode mode_ = Mode::Tree;
  std::string key_;
  std::vector<json*> stack_;
  std::vector<std::string> keys_;  // per open container: its key in the parent object
  std::vector<std::string> pair_;
};

}  // namespace

TokenizerJson read_tokenizer_json(const std::string& text, const std::string& source, int64_t max_token_id) {
  TokenizerJson out;
  Reader reader(out, source, max_token_id);
  json::sax_parse(text, &reader);
  return out;
}

}  // namespace kiln::llm::tok
