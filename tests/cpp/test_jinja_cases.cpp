// Every case of tests/data/jinja_cases.json (each Jinja construct, with the text jinja2
// renders for it under transformers' settings, or jinja2's refusal) rendered by kiln.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "jinja_test_util.h"
#include "kiln/error.h"

namespace kiln {
namespace {

using nlohmann::ordered_json;

ordered_json load_cases() { return ordered_json::parse(testing::read_test_data("jinja_cases.json")); }

TEST(JinjaCases, FileHasRenderAndErrorCases) {
  const ordered_json cases = load_cases();
  size_t renders = 0;
  size_t errors = 0;
  for (const auto& c : cases) (c.contains("expected") ? renders : errors) += 1;
  EXPECT_GT(renders, 100u);
  EXPECT_GT(errors, 20u);
}

TEST(JinjaCases, RendersAsJinja2Does) {
  for (const auto& c : load_cases()) {
    if (!c.contains("expected")) continue;
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    std::string got;
    try {
      got = testing::render_jinja(c["template"].get<std::string>(), c["vars"].dump());
    } catch (const Error& e) {
      ADD_FAILURE() << name << ": " << e.what();
      continue;
    }
    EXPECT_EQ(got, c["expected"].get<std::string>()) << name << "\ntemplate: " << c["template"].get<std::string>();
  }
}

TEST(JinjaCases, RefusesWhatJinja2Refuses) {
  for (const auto& c : load_cases()) {
    if (!c.contains("error")) continue;
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    try {
      const std::string got = testing::render_jinja(c["template"].get<std::string>(), c["vars"].dump());
      ADD_FAILURE() << name << ": rendered '" << got << "' where jinja2 raises " << c["error"].get<std::string>();
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(e.kind(), ErrorKind::Value) << message;
      // Every message names the op, the template and where in it.
      EXPECT_NE(message.find("chat template: test.jinja line "), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace kiln
