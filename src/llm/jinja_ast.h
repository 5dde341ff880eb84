// The syntax tree of a parsed Jinja template (jinja_parser.cpp builds it,
// jinja_eval.cpp walks it). Every node keeps its byte offset for line:column errors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "llm/jinja_value.h"

namespace kiln::llm::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Type : uint8_t {
    Literal,    // value
    Name,       // name
    ListLit,    // args
    TupleLit,   // args
    DictLit,    // args: key, value, key, value, ...
    Attr,       // a.name
    Item,       // a[b]
    Slice,      // a[b:c:d] (args: target, start, stop, step; null when absent)
    Call,       // a(args, kwargs)
    Filter,     // a|name(args, kwargs)
    Test,       // a is [not] name(args)
    Unary,      // name: "-", "+", "not"
    Binary,     // name: "+", "-", "*", "/", "//", "%", "**", "~", "and", "or", "in", "not in"
    Compare,    // args: operands; ops: the comparison between each pair
    Conditional,  // args: value, condition, else-value (null: undefined)
  };
  Type type;
  size_t offset = 0;
  std::string name;
  Value value;
  bool negated = false;  // Test: "is not"
  int depth = 1;         // height of this subtree (the parser bounds it)
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // Compare
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Type : uint8_t {
    Text,      // text
    Output,    // {{ expr }}
    If,        // conditions[i] guards bodies[i]; bodies.size() == conditions.size() + 1 with else
    For,       // targets in expr [if filter]: bodies[0], else: bodies[1]
    Set,       // targets (or attribute target) = expr, or block body (bodies[0]) when expr is null
    Macro,     // name(params) body
    With,      // targets = values: bodies[0]
    FilterBlock,  // {% filter f %}: bodies[0] through expr (a Filter node over a null target)
    Break,
    Continue,
    Scope,     // {% generation %}: bodies[0] rendered as is
  };
  Type type;
  size_t offset = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;  // For: the "if" clause
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  std::vector<std::string> targets;  // For/Set/With names; Macro: parameter names
  std::string attr;                  // Set ns.attr: targets[0] is ns
  std::vector<ExprPtr> values;       // Macro: parameter defaults (null when none); With: values
};

struct Template {
  std::string name;    // names the template in errors
  std::string source;  // normalised source, for line:column
  Body body;
};

}  // namespace kiln::llm::jinja
