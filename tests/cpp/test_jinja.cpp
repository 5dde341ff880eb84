// kiln's Jinja evaluator beyond the jinja2-checked cases (test_jinja_cases.cpp): error
// positions, the bounds that make hostile templates safe, value printing, and random
// corruptions of real templates.
#include <gtest/gtest.h>
#include <pthread.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "jinja_test_util.h"
#include "kiln/error.h"
#include "llm/jinja_text.h"
#include "llm/jinja_value.h"
#include "sanitizer_build.h"

namespace kiln {
namespace {

using llm::jinja::ParseLimits;
using llm::jinja::RenderLimits;
using testing::render_jinja;

// The message of the kiln::Error `fn` raises (fails the test when it raises none).
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no kiln::Error";
  return {};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Jinja, SyntaxErrorsNameLineAndColumn) {
  std::string m = error_of([] { render_jinja("line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}"); });
  EXPECT_TRUE(contains(m, "chat template: test.jinja line 3, column 10: expected an expression")) << m;
  m = error_of([] { render_jinja("{% for x in y %}\nno end"); });
  EXPECT_TRUE(contains(m, "line 1, column 4: 'for' is never closed with 'endfor'")) << m;
  m = error_of([] { render_jinja("ab\n  {{ 'unterminated }}"); });
  EXPECT_TRUE(contains(m, "line 2, column 6: unterminated string literal")) << m;
  m = error_of([] { render_jinja("{% include 'x' %}"); });
  EXPECT_TRUE(contains(m, "the 'include' tag is not supported")) << m;
  m = error_of([] { render_jinja("{{ x \x01 }}"); });
  EXPECT_TRUE(contains(m, "unexpected character U+0001")) << m;
  m = error_of([] { render_jinja("{{ 99999999999999999999 }}"); });
  EXPECT_TRUE(contains(m, "does not fit in 64 bits")) << m;
}

TEST(Jinja, RuntimeErrorsNameWhereAndWhat) {
  std::string m = error_of([] { render_jinja("ok\n{{ raise_exception('No messages provided.') }}"); });
  EXPECT_TRUE(contains(m, "line 2, column 4: the template raised an exception: No messages provided.")) << m;
  m = error_of([] { render_jinja("{{ message.role }}"); });
  EXPECT_TRUE(contains(m, "'message' is undefined")) << m;
  m = error_of([] { render_jinja("{{ m.content.x.y }}", R"({"m": {}})"); });
  EXPECT_TRUE(contains(m, "'dict object' has no attribute 'content'")) << m;
  m = error_of([] { render_jinja("{{ 'a' + 1 }}"); });
  EXPECT_TRUE(contains(m, "can only concatenate str (not \"int\") to str")) << m;
  m = error_of([] { render_jinja("{{ 9223372036854775807 + 1 }}"); });
  EXPECT_TRUE(contains(m, "integer overflow")) << m;
  m = error_of([] { render_jinja("{{ 2 ** 64 }}"); });
  EXPECT_TRUE(contains(m, "integer overflow")) << m;
}

TEST(Jinja, StepLimitStopsEndlessWork) {
  RenderLimits limits;
  limits.max_steps = 20000;
  const auto start = std::chrono::steady_clock::now();
  const std::string m = error_of([&] {
    render_jinja("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", "{}", limits);
  });
  EXPECT_TRUE(contains(m, "more than the limit of 20000 steps")) << m;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(Jinja, OutputAndStringLimits) {
  RenderLimits limits;
  limits.max_output_bytes = 1000;
  std::string m = error_of([&] { render_jinja("{% for i in range(200) %}0123456789{% endfor %}", "{}", limits); });
  EXPECT_TRUE(contains(m, "the output grows past the limit of 1000 bytes")) << m;
  EXPECT_EQ(render_jinja("[{{ '' * 9223372036854775807 }}{{ [] * 9223372036854775807 }}]"), "[[]]");
  m = error_of([] { render_jinja("{{ [1, 2] * 9223372036854775807 }}"); });
  EXPECT_TRUE(contains(m, "past the limit")) << m;
  m = error_of([&] { render_jinja("{% set s = 'x' * 5000 %}", "{}", limits); });
  EXPECT_TRUE(contains(m, "past the limit of 1000 bytes")) << m;
  // Doubling a string: stopped by the size bound long before memory runs out.
  m = error_of([] {
    render_jinja("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}");
  });
  EXPECT_TRUE(contains(m, "past the limit")) << m;
  // Quadratic growth (append to a long string many times): the total-bytes bound.
  limits = RenderLimits{};
  limits.max_built_bytes = 1 << 20;
  m = error_of([&] {
    render_jinja("{% set ns = namespace(s='') %}{% for i in range(10000) %}{% set ns.s = ns.s ~ 'abcdefgh' %}"
                 "{% endfor %}",
                 "{}", limits);
  });
  EXPECT_TRUE(contains(m, "built more than the limit")) << m;
}

TEST(Jinja, RecursionLimits) {
  std::string m = error_of([] { render_jinja("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"); });
  EXPECT_TRUE(contains(m, "macro calls nest deeper than the limit of 32")) << m;
  // Parse-time nesting: brackets, unary operators, blocks.
  ParseLimits parse_limits;
  m = error_of([] { render_jinja("{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}"); });
  EXPECT_TRUE(contains(m, "nesting deeper than the limit of 64")) << m;
  m = error_of([] { render_jinja("{{ " + std::string(100000, '-') + "1 }}"); });
  EXPECT_TRUE(contains(m, "nesting deeper")) << m;
  m = error_of([] { render_jinja("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}"); });
  EXPECT_TRUE(contains(m, "nesting deeper")) << m;
  std::string blocks;
  for (int i = 0; i < 100; ++i) blocks += "{% if true %}";
  m = error_of([&] { render_jinja(blocks); });
  EXPECT_TRUE(contains(m, "nesting deeper")) << m;
  // A long flat chain builds a deep tree: refused rather than recursed through.
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  m = error_of([&] { render_jinja(chain + " }}"); });
  EXPECT_TRUE(contains(m, "expression nests deeper than the limit of 128")) << m;
  std::string chain_ok = "{{ 1";
  for (int i = 0; i < 100; ++i) chain_ok += " + 1";
  EXPECT_EQ(render_jinja(chain_ok + " }}"), "101");
}

TEST(Jinja, ValuesStayShallowAndAcyclic) {
  std::string m = error_of([] {
    render_jinja("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}");
  });
  EXPECT_TRUE(contains(m, "nests deeper than the limit of 100 levels")) << m;
  m = error_of([] { render_jinja("{% set ns = namespace() %}{% set ns.self = ns %}"); });
  EXPECT_TRUE(contains(m, "a namespace cannot be stored")) << m;
  m = error_of([] { render_jinja("{% set ns = namespace() %}{{ [ns] }}"); });
  EXPECT_TRUE(contains(m, "a namespace cannot be stored")) << m;
  // JSON input nested too deep is refused before it becomes a value.
  m = error_of([] { render_jinja("{{ x }}", R"({"x": )" + std::string(200, '[') + std::string(200, ']') + "}"); });
  EXPECT_TRUE(contains(m, "nests deeper than 100 levels")) << m;
}

TEST(Jinja, TemplateSizeLimit) {
  ParseLimits limits;
  limits.max_source_bytes = 100;
  const std::string m = error_of([&] { render_jinja(std::string(101, 'x'), "{}", {}, limits); });
  EXPECT_TRUE(contains(m, "past the limit of 100 bytes")) << m;
}

TEST(Jinja, RangeIsBoundedLikeTheSandbox) {
  EXPECT_EQ(render_jinja("{{ range(100000)|length }}"), "100000");
  EXPECT_TRUE(contains(error_of([] { render_jinja("{{ range(100001) }}"); }), "range too big"));
  EXPECT_TRUE(contains(error_of([] { render_jinja("{{ range(-9223372036854775807, 9223372036854775807) }}"); }),
                       "range too big"));
  EXPECT_EQ(render_jinja("{{ range(5, 5)|list }} {{ range(0, -3, -1)|list }}"), "[] [0, -1, -2]");
}

TEST(Jinja, PythonFloatRepr) {
  using llm::jinja::python_float_repr;
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(-2.5), "-2.5");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(1e-5), "1e-05");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(1.5e300), "1.5e+300");
  EXPECT_EQ(python_float_repr(0.0), "0.0");
  EXPECT_EQ(python_float_repr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(python_float_repr(std::nan("")), "nan");
}

TEST(Jinja, PythonStringHelpers) {
  using namespace llm::jinja;
  EXPECT_EQ(code_point_count("h\xC3\xA9llo"), 5);
  EXPECT_EQ(code_point_count("\xFF\xFE"), 2);  // stray bytes count one each
  EXPECT_EQ(python_strip("\xC2\xA0 a \xE3\x80\x80", StripSide::Both, nullptr), "a");
  const std::string chars = "\xC3\xA9";
  EXPECT_EQ(python_strip("\xC3\xA9" "a\xC3\xA9", StripSide::Left, &chars), "a\xC3\xA9");
  EXPECT_EQ(python_split("  a  b ", nullptr, 1), (std::vector<std::string>{"a", "b "}));
  EXPECT_EQ(python_rsplit("  a  b c ", nullptr, 1), (std::vector<std::string>{"  a  b", "c"}));
  EXPECT_EQ(python_rsplit(" a b ", nullptr, 0), (std::vector<std::string>{" a b"}));
  EXPECT_EQ(python_split(" a ", nullptr, 0), (std::vector<std::string>{"a "}));
  const std::string sep = ",";
  EXPECT_EQ(python_rsplit("a,b,c", &sep, 1), (std::vector<std::string>{"a,b", "c"}));
  EXPECT_EQ(python_split("", &sep, -1), (std::vector<std::string>{""}));
}

TEST(Jinja, InvalidUtf8InTemplatesAndValuesDoesNotCrash) {
  EXPECT_EQ(render_jinja("a\xFF{{ 'b\xFE' }}"), "a\xFF" "b\xFE");
  EXPECT_EQ(render_jinja("{{ s|length }} {{ s[::-1]|length }} {{ s.strip() }}", "{\"s\": \"\\u00e9x\"}"), "2 2 \xC3\xA9x");
}

// Random corruptions of a real template (bytes flipped, cut, repeated): each either
// renders or raises kiln::Error, never crashes or hangs.
TEST(Jinja, CorruptedRealTemplatesFailCleanly) {
  const std::string original = testing::read_test_data("chat_templates/qwen3_5.jinja");
  const std::string vars = R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
      {"role": "assistant", "content": "<think>r</think>a", "tool_calls": [{"function": {"name": "f",
      "arguments": {"x": [1, 2]}}}]}, {"role": "tool", "content": "t"}], "tools": [{"name": "f"}],
      "add_generation_prompt": true})";
  std::mt19937 rng(1234);
  const char alphabet[] = "{}%#-+()[]|.:,'\"~ \nabcdefghijklmnopqrstuvwxyz0123456789=<>*/!_";
  const auto start = std::chrono::steady_clock::now();
  int rendered = 0;
  for (int round = 0; round < 300; ++round) {
    std::string t = original;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % t.size();
      switch (rng() % 3) {
        case 0: t[pos] = alphabet[rng() % (sizeof(alphabet) - 1)]; break;
        case 1: t.erase(pos, 1 + rng() % 20); break;
        default: t.insert(pos, t.substr(rng() % t.size(), 1 + rng() % 40)); break;
      }
      if (t.empty()) t = "x";
    }
    try {
      render_jinja(t, vars);
      ++rendered;
    } catch (const Error&) {
    }
  }
  EXPECT_GT(rendered, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// ASan's instrumented frames (and the -O0 test build) take several times the stack of a
// release build, so the bound is checked against a proportionally larger stack there.
#if defined(KILN_TEST_ASAN)
constexpr size_t kSmallStack = size_t{16} << 20;
#else
constexpr size_t kSmallStack = size_t{1} << 20;
#endif

// The evaluation-depth bound keeps the deepest template within a small thread stack: 32
// nested macro calls, each 60 `not`s deep, run on a thread with 1 MiB of stack.
TEST(Jinja, DeepestEvaluationFitsASmallStack) {
  std::string nots;
  for (int i = 0; i < 60; ++i) nots += "not ";
  const std::string source = "{% macro f(n) %}{% if n > 0 %}{{ " + nots + "f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}";
  struct Job {
    std::string source;
    std::string message;
  } job{source, {}};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kSmallStack);
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attr,
                [](void* p) -> void* {
                  auto* j = static_cast<Job*>(p);
                  try {
                    render_jinja(j->source);
                  } catch (const Error& e) {
                    j->message = e.what();
                  }
                  return nullptr;
                },
                &job),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  EXPECT_TRUE(contains(job.message, "evaluation nests deeper than the limit of 1000 levels")) << job.message;
}

}  // namespace
}  // namespace kiln
