// The real chat templates of the models kiln runs (tests/data/chat_templates: Qwen3,
// Qwen3.5/3.6, LFM2, LFM2.5) rendered by kiln: against jinja2's renderings
// (chat_template_cases.json), against prompts written out by hand from reading the
// templates, and through the tokenizer (tokenizer_config.json, chat_template.jinja, the
// ChatML fallback, chat_prompt and apply_chat_template).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "jinja_test_util.h"
#include "kiln/error.h"
#include "llm/chat_template.h"
#include "llm/tokenizer.h"
#include "llm_test_files.h"

namespace kiln {
namespace {

using llm::Tokenizer;
using nlohmann::ordered_json;

std::string chat_template_file(const std::string& name) {
  return testing::read_test_data("chat_templates/" + name);
}

// A synthetic tokenizer of the flavour with `chat_template` set in its tokenizer_config
// (a string or a list), or none when null.
Tokenizer tokenizer_with(llm::TokenizerFlavor flavor, const ordered_json& chat_template) {
  const llm::SyntheticTokenizer files = llm::make_synthetic_tokenizer(flavor, 400);
  ordered_json config = ordered_json::parse(files.tokenizer_config_json);
  if (chat_template.is_null()) {
    config.erase("chat_template");
  } else {
    config["chat_template"] = chat_template;
  }
  return Tokenizer::from_json(files.tokenizer_json, config.dump(), "model/tokenizer.json");
}

TEST(ChatTemplates, RenderAsJinja2Does) {
  const ordered_json cases = ordered_json::parse(testing::read_test_data("chat_template_cases.json"));
  ASSERT_GE(cases.size(), 20u);
  for (const auto& c : cases) {
    const std::string name = c["template"].get<std::string>() + " / " + c["name"].get<std::string>();
    SCOPED_TRACE(name);
    const llm::ChatTemplate tmpl(chat_template_file(c["template"]), c["template"]);
    std::vector<std::pair<std::string, std::string>> tokens;
    for (const auto& [k, v] : c["special_tokens"].items()) tokens.emplace_back(k, v.get<std::string>());
    std::vector<std::pair<std::string, llm::jinja::Value>> extra;
    const auto kwargs = llm::jinja::value_from_json(c["kwargs"].dump(), "test", "kwargs: ");
    for (const auto& [k, v] : kwargs.dict_data().items) extra.emplace_back(k.str(), v);
    const auto messages = llm::jinja::value_from_json(c["messages"].dump(), "test", "messages: ");
    try {
      EXPECT_EQ(tmpl.render(messages, c["add_generation_prompt"].get<bool>(), extra, tokens),
                c["expected"].get<std::string>());
    } catch (const Error& e) {
      ADD_FAILURE() << name << ": " << e.what();
    }
  }
}

// Prompts written out from reading the templates (not from any renderer).
TEST(ChatTemplates, Qwen3PromptsByHand) {
  const Tokenizer t = tokenizer_with(llm::TokenizerFlavor::Qwen, chat_template_file("qwen3.jinja"));
  ASSERT_TRUE(t.has_chat_template());
  EXPECT_EQ(t.chat_prompt("Hi"), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.chat_prompt("Hi", "Be brief.", /*enable_thinking=*/false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // History: the reasoning of an earlier turn is dropped, the last turn keeps it.
  const std::string history = R"([
    {"role": "user", "content": "A?"},
    {"role": "assistant", "content": "<think>\nr1\n</think>\n\na1"},
    {"role": "user", "content": "B?"},
    {"role": "assistant", "content": "<think>r2</think>a2"}])";
  EXPECT_EQ(t.apply_chat_template(history, false),
            "<|im_start|>user\nA?<|im_end|>\n<|im_start|>assistant\na1<|im_end|>\n"
            "<|im_start|>user\nB?<|im_end|>\n<|im_start|>assistant\n<think>\nr2\n</think>\n\na2<|im_end|>\n");
  // A tool call with dict arguments and two tool results folded into one user turn. The
  // assistant turn is not the last message and has no reasoning: no think block.
  const std::string tools = R"([
    {"role": "user", "content": "Go"},
    {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
    {"role": "tool", "content": "r1"},
    {"role": "tool", "content": "r2"}])";
  EXPECT_EQ(t.apply_chat_template(tools, true, R"({"tools": [{"name": "f"}]})"),
            "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            "{\"name\": \"f\"}\n</tools>\n\nFor each function call, return a json object with function name and "
            "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
            "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\nGo<|im_end|>\n<|im_start|>assistant\n"
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response>"
            "<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplates, Qwen35PromptsByHand) {
  const Tokenizer t = tokenizer_with(llm::TokenizerFlavor::Qwen, chat_template_file("qwen3_5.jinja"));
  // Thinking on: the generation prompt opens the think block.
  EXPECT_EQ(t.chat_prompt("Hi", "  Sys  "),
            "<|im_start|>system\nSys<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n");
  EXPECT_EQ(t.chat_prompt("Hi", "", false),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // XML tool calls: a list argument as JSON, a string as is.
  const std::string call = R"([
    {"role": "user", "content": "Go"},
    {"role": "assistant", "content": "Sure.", "tool_calls": [
      {"function": {"name": "f", "arguments": {"xs": [1, "a"], "s": "v"}}}]}])";
  EXPECT_EQ(t.apply_chat_template(call, false),
            "<|im_start|>user\nGo<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nSure.\n\n"
            "<tool_call>\n<function=f>\n<parameter=xs>\n[1, \"a\"]\n</parameter>\n<parameter=s>\nv\n"
            "</parameter>\n</function>\n</tool_call><|im_end|>\n");
  // The template's own checks surface as errors naming the line.
  const std::string m = [&] {
    try {
      t.apply_chat_template(R"([{"role": "assistant", "content": "x"}])", true);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(m.find("raised an exception: No user query found in messages."), std::string::npos) << m;
  EXPECT_NE(m.find("model/tokenizer_config.json chat_template line 79, column 9"), std::string::npos) << m;
}

TEST(ChatTemplates, Lfm2PromptsByHand) {
  const Tokenizer t = tokenizer_with(llm::TokenizerFlavor::Lfm2, chat_template_file("lfm2.jinja"));
  EXPECT_EQ(t.chat_prompt("Hi", "Sys"),
            "<|startoftext|><|im_start|>system\nSys<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(t.apply_chat_template(R"([{"role": "user", "content": "q"}, {"role": "tool", "content": {"a": 1}}])",
                                  false, R"({"tools": [{"name": "f"}]})"),
            "<|startoftext|><|im_start|>system\nList of tools: <|tool_list_start|>[{\"name\": \"f\"}]"
            "<|tool_list_end|><|im_end|>\n<|im_start|>user\nq<|im_end|>\n<|im_start|>tool\n"
            "<|tool_response_start|>{\"a\": 1}<|tool_response_end|><|im_end|>\n");
  const Tokenizer t25 = tokenizer_with(llm::TokenizerFlavor::Lfm2, chat_template_file("lfm2_5.jinja"));
  EXPECT_EQ(t25.apply_chat_template(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "ok",
      "tool_calls": [{"function": {"name": "f", "arguments": {"s": "x", "n": 2, "d": {"k": true}}}}]}])",
                                    false),
            "<|startoftext|><|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n"
            "ok<|tool_call_start|>[f(s='x', n=2, d={\"k\": true})]<|tool_call_end|><|im_end|>\n");
}

TEST(ChatTemplates, SyntheticTemplateGivesTheChatMLPrompt) {
  for (const auto flavor : {llm::TokenizerFlavor::Qwen, llm::TokenizerFlavor::Lfm2}) {
    const llm::SyntheticTokenizer files = llm::make_synthetic_tokenizer(flavor, 400);
    const Tokenizer with = Tokenizer::from_json(files.tokenizer_json, files.tokenizer_config_json);
    const Tokenizer without = tokenizer_with(flavor, nullptr);
    ASSERT_TRUE(with.has_chat_template());
    ASSERT_FALSE(without.has_chat_template());
    for (const bool thinking : {true, false}) {
      for (const char* system : {"", "Be kind."}) {
        EXPECT_EQ(with.chat_prompt("Hello there", system, thinking),
                  without.chat_prompt("Hello there", system, thinking));
      }
    }
  }
}

TEST(ChatTemplates, NamedTemplateListUsesDefault) {
  const ordered_json list = ordered_json::array(
      {{{"name", "tool_use"}, {"template", "TOOLS"}}, {{"name", "default"}, {"template", "DEFAULT {{ messages|length }}"}}});
  EXPECT_EQ(tokenizer_with(llm::TokenizerFlavor::Qwen, list).chat_prompt("x"), "DEFAULT 1");
  const ordered_json no_default = ordered_json::array({{{"name", "tool_use"}, {"template", "TOOLS"}}});
  const Tokenizer t = tokenizer_with(llm::TokenizerFlavor::Qwen, no_default);
  EXPECT_FALSE(t.has_chat_template());
  EXPECT_NE(t.chat_template_problem().find("none named \"default\""), std::string::npos);
  EXPECT_THROW(t.chat_prompt("x"), Error);
}

TEST(ChatTemplates, BrokenTemplateLoadsButChatFails) {
  const Tokenizer t = tokenizer_with(llm::TokenizerFlavor::Qwen, "{% for m in messages %}never closed");
  EXPECT_FALSE(t.has_chat_template());
  EXPECT_FALSE(t.encode("still encodes").empty());
  try {
    t.chat_prompt("x");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("Tokenizer.chat_prompt: the chat template cannot be used"), std::string::npos) << m;
    EXPECT_NE(m.find("model/tokenizer_config.json chat_template line 1, column 4: 'for' is never closed with 'endfor'"),
              std::string::npos)
        << m;
  }
}

TEST(ChatTemplates, NoTemplateFallsBackToChatML) {
  const Tokenizer t = tokenizer_with(llm::TokenizerFlavor::Qwen, nullptr);
  EXPECT_EQ(t.chat_prompt("Hi", "S", false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
            "<think>\n\n</think>\n\n");
  EXPECT_THROW(t.apply_chat_template("[]", true), Error);
  // A template given for the call works without one in the folder.
  EXPECT_EQ(t.apply_chat_template(R"([{"role": "user", "content": "u"}])", true, "{}",
                                  std::string_view("{{ messages[0].content }}{{ add_generation_prompt }}")),
            "uTrue");
}

TEST(ChatTemplates, ApplyChatTemplateArguments) {
  const Tokenizer t = tokenizer_with(llm::TokenizerFlavor::Qwen,
                                     "{{ tools }}|{{ documents }}|{{ eos_token }}|{{ bos_token is defined }}|{{ x }}");
  EXPECT_EQ(t.apply_chat_template("[]", false, R"({"x": [1, "é"]})"), "None|None|<|im_end|>|False|[1, 'é']");
  // Keyword arguments win over the special tokens.
  EXPECT_EQ(t.apply_chat_template("[]", false, R"({"eos_token": "E"})"), "None|None|E|False|");
  EXPECT_THROW(t.apply_chat_template("{not json", false), Error);
  EXPECT_THROW(t.apply_chat_template("{}", false), Error);
  EXPECT_THROW(t.apply_chat_template("[]", false, "[1]"), Error);
}

TEST(ChatTemplates, FolderTemplateFilesWinOverTheConfig) {
  testing::TempDir dir;
  const llm::SyntheticTokenizer files = llm::make_synthetic_tokenizer(llm::TokenizerFlavor::Qwen, 400);
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name), std::ios::binary) << text;
  };
  write("tokenizer.json", files.tokenizer_json);
  write("tokenizer_config.json", files.tokenizer_config_json);
  EXPECT_EQ(Tokenizer::load(dir.str()).chat_prompt("u"), "<|im_start|>user\nu<|im_end|>\n<|im_start|>assistant\n");
  write("chat_template.json", R"({"chat_template": "JSON {{ messages[0].content }}"})");
  EXPECT_EQ(Tokenizer::load(dir.str()).chat_prompt("u"), "JSON u");
  write("chat_template.jinja", "JINJA {{ messages[0].content }}\n");
  EXPECT_EQ(Tokenizer::load(dir.str()).chat_prompt("u"), "JINJA u");
  std::filesystem::remove(dir.file("chat_template.jinja"));
  write("chat_template.json", R"({"other": 1})");
  EXPECT_THROW(Tokenizer::load(dir.str()), Error);
}

}  // namespace
}  // namespace kiln
