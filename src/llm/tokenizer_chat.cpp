// Chat prompts through the model's own chat template (chat_template.h): Tokenizer's
// template calls, and chat_prompt's path when the folder has a template.
#include <optional>

#include "kiln/error.h"
#include "llm/jinja_json.h"
#include "llm/tokenizer_impl.h"

namespace kiln::llm {
namespace {

const ChatTemplate& usable_template(const Tokenizer::Impl& m, std::string_view op) {
  if (m.chat_template) return *m.chat_template;
  if (!m.chat_template_problem.empty()) {
    fail(ErrorKind::Value, op, "the chat template cannot be used: {}", m.chat_template_problem);
  }
  fail(ErrorKind::Value, op, "{} has no chat template (tokenizer_config.json \"chat_template\" or chat_template.jinja)",
       m.source);
}

jinja::Value message(std::string_view role, std::string_view content) {
  auto d = std::make_shared<jinja::DictData>();
  d->items.emplace_back(jinja::Value::string("role"), jinja::Value::string(std::string(role)));
  d->items.emplace_back(jinja::Value::string("content"), jinja::Value::string(std::string(content)));
  return jinja::Value::dict(std::move(d));
}

}  // namespace

std::string template_chat_prompt(const Tokenizer::Impl& m, std::string_view user, std::string_view system,
                                 bool enable_thinking) {
  const ChatTemplate& tmpl = usable_template(m, "Tokenizer.chat_prompt");
  jinja::ValueList messages;
  if (!system.empty()) messages.push_back(message("system", system));
  messages.push_back(message("user", user));
  std::vector<std::pair<std::string, jinja::Value>> extra;
  // Passed only when switched off, as a caller of transformers' apply_chat_template would.
  if (!enable_thinking) extra.emplace_back("enable_thinking", jinja::Value::boolean(false));
  return tmpl.render(jinja::Value::list(std::move(messages)), /*add_generation_prompt=*/true, extra,
                     m.template_special_tokens);
}

bool Tokenizer::has_chat_template() const { return impl_ && impl_->chat_template != nullptr; }

std::string Tokenizer::chat_template_problem() const { return impl_ ? impl_->chat_template_problem : std::string(); }

std::string Tokenizer::apply_chat_template(std::string_view messages_json, bool add_generation_prompt,
                                           std::string_view kwargs_json,
                                           std::optional<std::string_view> chat_template) const {
  constexpr std::string_view kOp = "Tokenizer.apply_chat_template";
  if (!impl_) fail(ErrorKind::Runtime, kOp, "not loaded: create it with Tokenizer::load or Tokenizer::from_json");
  std::optional<ChatTemplate> given;
  if (chat_template) given.emplace(*chat_template, "the given chat_template");
  const ChatTemplate& tmpl = given ? *given : usable_template(*impl_, kOp);
  const jinja::Value messages = jinja::value_from_json(messages_json, kOp, "messages: ");
  if (!messages.is_list()) fail(ErrorKind::Value, kOp, "messages must be a list of messages, got {}", messages.type_name());
  const jinja::Value kwargs = jinja::value_from_json(kwargs_json, kOp, "keyword arguments: ");
  if (!kwargs.is_dict()) fail(ErrorKind::Value, kOp, "keyword arguments must be an object, got {}", kwargs.type_name());
  std::vector<std::pair<std::string, jinja::Value>> extra;
  for (const auto& [key, value] : kwargs.dict_data().items) extra.emplace_back(key.str(), value);
  return tmpl.render(messages, add_generation_prompt, extra, impl_->template_special_tokens);
}

}  // namespace kiln::llm
