#include "llm/json_tree.h"

#include <fmt/format.h>

#include "kiln/error.h"
#include "llm/tokenizer_utf8.h"

namespace kiln::llm {

using nlohmann::json;

bool JsonTreeBuilder::parse(std::string_view text) {
  too_deep_ = false;
  syntax_error_.clear();
  result_ = json();
  key_.clear();
  stack_.clear();
  keys_.clear();
  return json::sax_parse(text.begin(), text.end(), this);
}

std::string JsonTreeBuilder::problem() const {
  if (too_deep_) return fmt::format("JSON nests deeper than {} levels", max_depth_);
  return "not valid JSON: " + syntax_error_;
}

bool JsonTreeBuilder::key(string_t& k) {
  key_ = std::move(k);
  return true;
}

bool JsonTreeBuilder::parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
  // nlohmann quotes the bytes it last read, which may be invalid UTF-8: repaired, so the
  // message stays text (Python turns a message that is not UTF-8 into an empty one).
  syntax_error_ = tok::utf8_lossy(e.what());
  return false;
}

bool JsonTreeBuilder::place(json v) {
  if (stack_.empty()) {
    result_ = std::move(v);
    last_placed_ = &result_;
    return true;
  }
  json& parent = *stack_.back();
  if (parent.is_object()) {
    json::object_t& members = *parent.get_ptr<json::object_t*>();
    auto it = members.find(key_);
    if (it != members.end()) {
      on_duplicate_key(key_, stack_.size());
      it->second = std::move(v);
    } else {
      it = members.emplace(key_, std::move(v)).first;
    }
    last_placed_ = &it->second;
    return true;
  }
  parent.push_back(std::move(v));
  last_placed_ = &parent.back();
  return true;
}

bool JsonTreeBuilder::open(json container) {
  if (stack_.size() >= static_cast<std::size_t>(max_depth_)) {
    too_deep_ = true;
    return false;  // stops the parser
  }
  std::string key = !stack_.empty() && stack_.back()->is_object() ? key_ : std::string();
  place(std::move(container));
  // While a container is open its parent receives nothing, so the pointer stays valid.
  stack_.push_back(last_placed_);
  keys_.push_back(std::move(key));
  return true;
}

bool JsonTreeBuilder::close() {
  stack_.pop_back();
  keys_.pop_back();
  return true;
}

std::string json_excerpt(const json& value) {
  constexpr size_t kMaxBytes = 200;
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() <= kMaxBytes) return text;
  size_t cut = kMaxBytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  text.resize(cut);
  return text + "...";
}

json parse_json_tree(std::string_view text, std::string_view op, std::string_view prefix) {
  JsonTreeBuilder builder;
  if (!builder.parse(text)) fail(ErrorKind::Value, op, "{}{}", prefix, builder.problem());
  return std::move(builder.result());
}

}  // namespace kiln::llm
