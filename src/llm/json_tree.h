// JSON from model folders parsed with a bound on nesting depth.
//
// nlohmann::json::parse itself is iterative, but it keeps no bound on depth, and what
// reads the tree afterwards (dump() in error messages, recursive readers, the tree's
// copies) recurses: a file nested a few hundred thousand levels deep overflows the
// stack. The parse callback that reports depth is no answer either: nlohmann 3.11's
// callback parser rescans the whole parent object each time a member object closes,
// which is quadratic in the members (tens of thousands of safetensors entries took
// seconds). A pre-scan of brackets would have to repeat the lexer's rules for strings
// and escapes to be exact. So this SAX handler builds the same tree as json::parse in
// one pass and refuses a container opened deeper than the bound, using the parser's own
// view of the structure.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::llm {

// Real configs, tokenizers and indexes nest fewer than 10 levels.
inline constexpr int kMaxModelJsonDepth = 64;

class JsonTreeBuilder : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit JsonTreeBuilder(int max_depth = kMaxModelJsonDepth) : max_depth_(max_depth) {}

  // False on invalid JSON or nesting deeper than max_depth; then too_deep() and
  // syntax_error() say which.
  bool parse(std::string_view text);
  nlohmann::json& result() { return result_; }
  bool too_deep() const { return too_deep_; }
  const std::string& syntax_error() const { return syntax_error_; }  // nlohmann's message
  // "not valid JSON: <reason>" or "JSON nests deeper than <max_depth> levels".
  std::string problem() const;

  bool null() override { return place(nullptr); }
  bool boolean(bool v) override { return place(v); }
  bool number_integer(number_integer_t v) override { return place(v); }
  bool number_unsigned(number_unsigned_t v) override { return place(v); }
  bool number_float(number_float_t v, const string_t&) override { return place(v); }
  bool string(string_t& s) override { return place(std::move(s)); }
  bool binary(binary_t&) override { return true; }  // JSON text never holds binary values
  bool key(string_t& k) override;
  bool start_object(std::size_t) override { return open(nlohmann::json::object()); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(nlohmann::json::array()); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override;

 protected:
  // Called when an object already holds `key` (the new value replaces the old one, as
  // json::parse does); `depth` is 1 for the members of the top-level object.
  virtual void on_duplicate_key(const std::string& /*key*/, std::size_t /*depth*/) {}

  // Containers open now: 0 at the top level, 1 inside the top-level container, ...
  std::size_t depth() const { return stack_.size(); }
  // The i-th open container (0 = outermost) and its key in its parent ("" in an array).
  const nlohmann::json& open_container(std::size_t i) const { return *stack_[i]; }
  const std::string& open_key(std::size_t i) const { return keys_[i]; }
  // The key the next value of the innermost open object is stored under.
  const std::string& pending_key() const { return key_; }

  bool place(nlohmann::json v);
  bool open(nlohmann::json container);
  bool close();

 private:
  int max_depth_;
  bool too_deep_ = false;
  std::string syntax_error_;
  nlohmann::json result_;
  std::string key_;
  std::vector<nlohmann::json*> stack_;
  std::vector<std::string> keys_;
  nlohmann::json* last_placed_ = nullptr;
};

// `value` as JSON text for an error message: at most ~200 bytes (cut at a character
// boundary, "..." marking the cut), so quoting a value never copies megabytes of a file.
std::string json_excerpt(const nlohmann::json& value);

// The tree of `text`; invalid JSON or nesting deeper than kMaxModelJsonDepth is a Value
// error under `op`, its message led by `prefix` (e.g. "tokenizer.json: ").
nlohmann::json parse_json_tree(std::string_view text, std::string_view op, std::string_view prefix = "");

}  // namespace kiln::llm
