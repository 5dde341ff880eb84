// A model's own chat template (tokenizer_config.json "chat_template", or the
// chat_template.jinja / chat_template.json file beside it), rendered the way transformers'
// apply_chat_template renders it: the variables messages, tools (None unless given),
// documents (None), add_generation_prompt, the tokenizer's special tokens (bos_token,
// eos_token, pad_token, unk_token) and any extra keyword arguments (enable_thinking, ...).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "llm/jinja_ast.h"
#include "llm/jinja_eval.h"
#include "llm/jinja_value.h"

namespace kiln::llm {

class ChatTemplate {
 public:
  // Parses `source`; `name` names it in errors ("DIR/tokenizer_config.json chat_template").
  ChatTemplate(std::string_view source, std::string name);

  // Renders. `extra` are keyword arguments (tools, enable_thinking, ...), which override
  // `special_tokens` of the same name.
  std::string render(const jinja::Value& messages, bool add_generation_prompt,
                     const std::vector<std::pair<std::string, jinja::Value>>& extra,
                     const std::vector<std::pair<std::string, std::string>>& special_tokens,
                     const jinja::RenderLimits& limits = {}) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const jinja::Template> template_;
};

// The op name chat-template errors carry.
inline constexpr std::string_view kChatTemplateOp = "chat template";

// What a tokenizer_config.json "chat_template" value selects: a string as is; from the
// list form [{"name": ..., "template": ...}], the one named "default". Returns the
// template text, or nullopt with `problem` set when the value is malformed or has no
// default.
std::optional<std::string> select_chat_template(const nlohmann::json& value, std::string& problem);

}  // namespace kiln::llm
