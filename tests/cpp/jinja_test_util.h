// Rendering helpers for the Jinja and chat-template tests: templates from text, variables
// from JSON, fixture files from tests/data.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "llm/jinja_eval.h"
#include "llm/jinja_json.h"
#include "llm/jinja_parser.h"

namespace kiln::testing {

inline std::string read_test_data(const std::string& relative) {
  std::ifstream in(std::string(KILN_TEST_DATA_DIR) + "/" + relative, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read test data " + relative);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Renders `source` with the variables of the JSON object `vars_json`.
inline std::string render_jinja(std::string_view source, std::string_view vars_json = "{}",
                                const llm::jinja::RenderLimits& limits = {},
                                const llm::jinja::ParseLimits& parse_limits = {}) {
  using namespace llm::jinja;
  const auto tmpl = parse_template(source, "chat template", "test.jinja", parse_limits);
  const Value vars = value_from_json(vars_json, "test", "vars: ");
  std::vector<std::pair<std::string, Value>> variables;
  for (const auto& [k, v] : vars.dict_data().items) variables.emplace_back(k.str(), v);
  Evaluator evaluator(*tmpl, "chat template", limits);
  return evaluator.render(variables);
}

}  // namespace kiln::testing
