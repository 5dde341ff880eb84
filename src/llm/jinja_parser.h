// Parses a Jinja template into a syntax tree (jinja_ast.h): the statements chat templates
// use (if/elif/else, for with loop.* / else / break / continue, set and block set,
// namespace attribute set, macro, with, filter blocks, raw, comments, transformers'
// {% generation %}) and jinja2's full expression grammar (literals, arithmetic, string
// concatenation, comparisons, and/or/not, in, is-tests, filters, attribute and item
// access, slices, calls with keyword arguments, conditional expressions).
#pragma once

#include <memory>
#include <string_view>

#include "llm/jinja_ast.h"

namespace kiln::llm::jinja {

struct ParseLimits {
  size_t max_source_bytes = 1 << 20;  // real chat templates are under 20 KB
  int max_nesting = 64;               // blocks inside blocks, brackets inside brackets
};

// Syntax errors, unsupported tags (include, import, extends, block, call) and templates
// past the limits are kiln::Error (Value) under `op`, naming `name`, line and column.
std::shared_ptr<const Template> parse_template(std::string_view source, std::string_view op, std::string_view name,
                                               const ParseLimits& limits = {});

}  // namespace kiln::llm::jinja
