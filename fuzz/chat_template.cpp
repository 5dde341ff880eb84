// Chat templates: the input is a Jinja template, then after a NUL byte the JSON object of
// its variables (a default conversation when absent or not an object). Parsing and
// rendering either succeed or raise kiln::Error; the bounds are set low so that an input
// that loops or grows is stopped in milliseconds, and rendering the same template twice
// must give the same text (the evaluator keeps no state between renders).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_input.h"
#include "kiln/error.h"
#include "llm/jinja_eval.h"
#include "llm/jinja_json.h"
#include "llm/jinja_parser.h"

namespace {

constexpr const char* kDefaultVariables =
    R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u <think>"},
        {"role": "assistant", "content": "<think>r</think>a", "tool_calls": [{"function": {"name": "f",
        "arguments": {"x": [1, "y"]}}}]}, {"role": "tool", "content": "t"}],
       "tools": [{"type": "function", "function": {"name": "f"}}], "add_generation_prompt": true,
       "enable_thinking": false, "bos_token": "<s>", "eos_token": "</s>"})";

std::string render(const kiln::llm::jinja::Template& tmpl, const std::vector<std::pair<std::string,
                   kiln::llm::jinja::Value>>& variables) {
  kiln::llm::jinja::RenderLimits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = 1 << 20;
  limits.max_built_bytes = 8 << 20;
  kiln::llm::jinja::Evaluator evaluator(tmpl, "chat template", limits);
  return evaluator.render(variables);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::llm::jinja;
  const auto [source, variables_json] = kiln::fuzz::split_at_nul(data, size);
  std::vector<std::pair<std::string, Value>> variables;
  try {
    const Value vars = value_from_json(variables_json.empty() ? kDefaultVariables : variables_json, "fuzz", "");
    if (vars.is_dict()) {
      for (const auto& [k, v] : vars.dict_data().items) variables.emplace_back(k.str(), v);
    }
  } catch (const kiln::Error&) {
  }
  try {
    const auto tmpl = parse_template(source, "chat template", "fuzz.jinja");
    const std::string first = render(*tmpl, variables);
    if (render(*tmpl, variables) != first) kiln::fuzz::finding("two renders of one template differ");
  } catch (const kiln::Error&) {
  }
  return 0;
}
