// Renders a parsed Jinja template (jinja_parser.h) the way jinja2 does with transformers'
// chat-template environment: jinja2's default Undefined (prints as "", is false, iterates
// as empty, fails on attribute access and arithmetic), autoescape off, the loopcontrols
// extension, and jinja2's scoping (a for-loop body is a new scope on each iteration, so
// `set` inside a loop is lost after it unless it goes through namespace(); if-blocks
// share their enclosing scope; macros see the template's top level and their arguments).
//
// A template is file-controlled input, so rendering is bounded: steps (expressions,
// statements and loop iterations evaluated), nested evaluation and macro-call depth,
// the size of the output and of every string built, and the total bytes built. Crossing
// a bound is a kiln::Error naming the template, the bound and the line:column.
#pragma once

#include <fmt/core.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "llm/jinja_ast.h"
#include "llm/jinja_value.h"

namespace kiln::llm::jinja {

struct RenderLimits {
  int64_t max_steps = 5'000'000;              // evaluations and loop iterations
  size_t max_output_bytes = size_t{16} << 20;  // the rendered text, and any one string
  size_t max_built_bytes = size_t{256} << 20;  // all strings and lists built, summed
  int max_call_depth = 32;                     // nested macro calls
  int max_eval_depth = 1000;                   // nested evaluation frames (stack use)
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;

  // The keyword `name`, else positional argument `index`, else nullptr.
  const Value* get(size_t index, std::string_view name) const;
};

class Evaluator {
 public:
  Evaluator(const Template& tmpl, std::string_view op, const RenderLimits& limits);

  // Renders with `variables` (messages, add_generation_prompt, ...) over the built-in
  // globals (range, namespace, dict, raise_exception, strftime_now, ...).
  std::string render(const std::vector<std::pair<std::string, Value>>& variables);

  // A kiln::Error (Value) at the node being evaluated: "<op>: <template> line L, column
  // C: <message>".
  template <typename... Args>
  [[noreturn]] void fail_here(fmt::format_string<Args...> f, Args&&... args) const {
    raise(fmt::format(f, std::forward<Args>(args)...));
  }
  [[noreturn]] void raise(const std::string& message) const;
  // The error an operation on an undefined value raises (jinja2's UndefinedError).
  [[noreturn]] void undefined_error(const Value& v) const;

  // Every string or list a builtin builds is paid for here: its size against
  // max_output_bytes, and its bytes against max_built_bytes.
  void charge_bytes(size_t bytes);
  // Lists are paid for by their item count, against max_built_bytes alone.
  void charge_items(size_t count);
  void charge_steps(int64_t steps);

  // For builtins that call back into templates (macros passed to map, cycle, ...).
  Value call(const Value& callee, CallArgs& args);
  const std::string& template_name() const { return tmpl_.name; }

 private:
  struct Scope {
    std::unordered_map<std::string, Value> vars;
    const Scope* parent = nullptr;
    const Value* find(const std::string& name) const;
  };
  enum class Flow { Normal, Break, Continue };

  Flow exec_body(const Body& body, Scope& scope);
  Flow exec(const Stmt& s, Scope& scope);
  Flow exec_for(const Stmt& s, Scope& scope);
  void exec_set(const Stmt& s, Scope& scope);
  Value eval(const Expr& e, const Scope& scope);
  Value eval_binary(const Expr& e, const Scope& scope);
  Value eval_compare(const Expr& e, const Scope& scope);
  Value eval_call(const Expr& e, const Scope& scope);
  void eval_args(const Expr& e, size_t first, const Scope& scope, CallArgs& out);
  Value define_macro(const Stmt& s);
  Value call_macro(const Stmt& macro, CallArgs& args);
  std::string render_to_string(const Body& body, Scope& scope);
  void emit(std::string_view text);
  void assign(Scope& scope, const std::vector<std::string>& targets, const Value& v);

  // Entered for every statement and expression: counts steps and depth.
  struct Frame {
    Evaluator& ev;
    size_t saved_offset;
    Frame(Evaluator& e, size_t offset);
    ~Frame();
  };

  const Template& tmpl_;
  std::string op_;
  RenderLimits limits_;
  std::string out_;
  int64_t steps_ = 0;
  size_t built_bytes_ = 0;
  int depth_ = 0;
  int call_depth_ = 0;
  size_t offset_ = 0;  // the node being evaluated, for errors
  Scope globals_;
  Scope* root_ = nullptr;  // the template's top-level scope (what macros see)
};

}  // namespace kiln::llm::jinja
