#include "llm/tokenizer_json_reader.h"

#include "kiln/error.h"
#include "llm/json_tree.h"

namespace kiln::llm::tok {
namespace {

using nlohmann::json;

// The tree part is JsonTreeBuilder's (bounded depth); model.vocab and model.merges are
// diverted into vectors as they stream past.
class Reader : public JsonTreeBuilder {
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
  bool key(string_t& k) override {
    if (mode_ == Mode::Vocab) {
      vocab_key_ = std::move(k);
      return true;
    }
    return JsonTreeBuilder::key(k);
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

 private:
  enum class Mode { Tree, Vocab, Merges, MergePair };

  template <typename... Args>
  [[noreturn]] void bad(fmt::format_string<Args...> f, Args&&... args) const {
    fail(ErrorKind::Value, "Tokenizer", "{}: {}", source_, fmt::format(f, std::forward<Args>(args)...));
  }

  // The container about to open is the root's "model" object's member `name`.
  bool at_model_member(const char* name) const {
    return depth() == 2 && open_key(1) == "model" && open_container(1).is_object() && pending_key() == name;
  }

  bool integer(int64_t v) {
    if (mode_ == Mode::Vocab && v >= 0 && v <= max_token_id_) {
      out_.vocab.emplace_back(std::move(vocab_key_), static_cast<int32_t>(v));
      return true;
    }
    return value(v, std::to_string(v));
  }

  bool value(json v, const std::string& text) {
    switch (mode_) {
      case Mode::Vocab:
        bad("model.vocab['{}'] = {} is not a token id (an integer in [0, {}])", vocab_key_, text, max_token_id_);
      case Mode::Merges:
      case Mode::MergePair:
        bad("model.merges[{}] holds {}; expected \"a b\" or [\"a\", \"b\"]", out_.merges.size(), text);
      case Mode::Tree:
        break;
    }
    return place(std::move(v));
  }

  bool reject_nested(const char* what) {
    if (mode_ == Mode::Vocab) bad("model.vocab['{}'] is {}, not a token id", vocab_key_, what);
    bad("model.merges[{}] holds {}; expected \"a b\" or [\"a\", \"b\"]", out_.merges.size(), what);
  }

  TokenizerJson& out_;
  const std::string& source_;
  int64_t max_token_id_;
  Mode mode_ = Mode::Tree;
  std::string vocab_key_;  // the vocabulary entry whose id comes next
  std::vector<std::string> pair_;
};

}  // namespace

TokenizerJson read_tokenizer_json(const std::string& text, const std::string& source, int64_t max_token_id) {
  TokenizerJson out;
  Reader reader(out, source, max_token_id);
  if (!reader.parse(text)) fail(ErrorKind::Value, "Tokenizer", "{}: {}", source, reader.problem());
  out.rest = std::move(reader.result());
  return out;
}

}  // namespace kiln::llm::tok
