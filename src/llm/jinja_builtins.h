// The library a chat template calls into: jinja2's filters and tests, the methods of
// Python str and dict that templates use, and the globals transformers' environment
// provides (range, namespace, dict, raise_exception, strftime_now).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "llm/jinja_eval.h"
#include "llm/jinja_value.h"

namespace kiln::llm::jinja {

// `target|name(args)`; an unknown filter is an error.
Value apply_filter(Evaluator& ev, const std::string& name, const Value& target, CallArgs& args);
// `target is name(args)`; an unknown test is an error.
bool apply_test(Evaluator& ev, const std::string& name, const Value& target, CallArgs& args);
// `obj.name` with jinja2's rule (attribute first: bound str/dict methods; then item).
Value get_attribute(Evaluator& ev, const Value& obj, const std::string& name);
// `obj[key]`: lists, tuples and strings by (negative) int, dicts by key; a miss is
// undefined, as in jinja2.
Value get_item(Evaluator& ev, const Value& obj, const Value& key);
// Python slicing of lists, tuples and strings (by code point).
Value get_slice(Evaluator& ev, const Value& obj, const Value& start, const Value& stop, const Value& step);
// The items a for loop or filter walks: list items, dict keys, string code points; an
// undefined value is empty. Anything else is an error.
ValueList iterate(Evaluator& ev, const Value& v);
// `needle in haystack`.
bool contains(Evaluator& ev, const Value& haystack, const Value& needle);
// Python's <, for sorting and comparisons: numbers, strings, lists; else an error.
bool less_than(Evaluator& ev, const Value& a, const Value& b);

// `format % values` with %s, %r, %d, %i and %% (the % operator and the format filter).
// `mapping_like`: the values are one list or dict, which Python lets go unused.
std::string percent_format(Evaluator& ev, const std::string& format, const ValueList& values, bool mapping_like);

// Markup's HTML escaping (& < > " ').
std::string html_escape(std::string_view s);

// The built-in globals.
std::vector<std::pair<std::string, Value>> builtin_globals();

}  // namespace kiln::llm::jinja
