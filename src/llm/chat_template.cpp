// Chat templates (chat_template.h): parse once at load, render per prompt.
#include "llm/chat_template.h"

#include <nlohmann/json.hpp>

#include "llm/jinja_parser.h"

namespace kiln::llm {

ChatTemplate::ChatTemplate(std::string_view source, std::string name)
    : name_(std::move(name)), template_(jinja::parse_template(source, kChatTemplateOp, name_)) {}

std::string ChatTemplate::render(const jinja::Value& messages, bool add_generation_prompt,
                                 const std::vector<std::pair<std::string, jinja::Value>>& extra,
                                 const std::vector<std::pair<std::string, std::string>>& special_tokens,
                                 const jinja::RenderLimits& limits) const {
  std::vector<std::pair<std::string, jinja::Value>> variables;
  for (const auto& [name, text] : special_tokens) variables.emplace_back(name, jinja::Value::string(text));
  variables.emplace_back("messages", messages);
  variables.emplace_back("tools", jinja::Value::none());
  variables.emplace_back("documents", jinja::Value::none());
  variables.emplace_back("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
  // Later entries win (Evaluator::render assigns in order), so extra overrides the rest.
  for (const auto& kv : extra) variables.push_back(kv);
  jinja::Evaluator evaluator(*template_, kChatTemplateOp, limits);
  return evaluator.render(variables);
}

std::optional<std::string> select_chat_template(const nlohmann::json& value, std::string& problem) {
  if (value.is_string()) return value.get<std::string>();
  if (!value.is_array()) {
    problem = "chat_template must be a string or a list of {\"name\", \"template\"} entries";
    return std::nullopt;
  }
  std::string names;
  for (const auto& entry : value) {
    const bool well_formed = entry.is_object() && entry.contains("name") && entry.contains("template") &&
                             entry["name"].is_string() && entry["template"].is_string();
    if (!well_formed) {
      problem = "each chat_template list entry must be {\"name\": str, \"template\": str}";
      return std::nullopt;
    }
    const std::string name = entry["name"].get<std::string>();
    if (name == "default") return entry["template"].get<std::string>();
    names += (names.empty() ? "" : ", ") + name;
  }
  problem = "chat_template lists templates (" + names + ") but none named \"default\"";
  return std::nullopt;
}

}  // namespace kiln::llm
