// Helpers shared by the builtins (jinja_builtins.cpp) and the str/dict methods
// (jinja_methods.cpp): argument checks, value construction, Python slicing (internal).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "llm/jinja_eval.h"
#include "llm/jinja_text.h"
#include "llm/jinja_value.h"

namespace kiln::llm::jinja {

// jinja2's sandbox refuses larger ranges (MAX_RANGE).
inline constexpr int64_t kMaxRange = 100000;

inline Value arg_or(const CallArgs& args, size_t index, std::string_view name, const Value& fallback) {
  const Value* v = args.get(index, name);
  return v != nullptr ? *v : fallback;
}

inline std::string require_string(Evaluator& ev, const Value& v, std::string_view what) {
  if (v.is_undefined()) ev.undefined_error(v);
  if (!v.is_string()) ev.fail_here("{} must be a str, got {}", what, v.type_name());
  return v.str();
}

inline int64_t require_int(Evaluator& ev, const Value& v, std::string_view what) {
  if (v.is_undefined()) ev.undefined_error(v);
  if (!v.is_int() && !v.is_bool()) ev.fail_here("{} must be an int, got {}", what, v.type_name());
  return v.as_int();
}

inline std::string soft_str(const Value& v) { return v.is_string() ? v.str() : to_str(v); }

inline Value make_string(Evaluator& ev, std::string s, bool safe = false) {
  ev.charge_bytes(s.size());
  return Value::string(std::move(s), safe);
}

inline Value make_list(Evaluator& ev, ValueList items, bool tuple = false) {
  ev.charge_items(items.size());
  return Value::list(std::move(items), tuple);
}

inline Value string_list(Evaluator& ev, std::vector<std::string> parts, bool safe = false) {
  ValueList items;
  items.reserve(parts.size());
  size_t bytes = 0;
  for (auto& p : parts) {
    bytes += p.size();
    items.push_back(Value::string(std::move(p), safe));
  }
  ev.charge_bytes(bytes);
  return make_list(ev, std::move(items));
}


// Python slice indices over a sequence of `n` items.
struct SliceRange {
  int64_t start, stop, step;
};
inline SliceRange slice_range(Evaluator& ev, int64_t n, const Value& start, const Value& stop, const Value& step) {
  const int64_t st = step.is_none() ? 1 : require_int(ev, step, "a slice step");
  if (st == 0) ev.fail_here("slice step cannot be zero");
  const auto clamp = [&](const Value& v, int64_t fallback) {
    if (v.is_none()) return fallback;
    int64_t i = require_int(ev, v, "a slice index");
    if (i < 0) i = std::max<int64_t>(i + n, st > 0 ? 0 : -1);
    return std::min<int64_t>(i, st > 0 ? n : n - 1);
  };
  return {clamp(start, st > 0 ? 0 : n - 1), clamp(stop, st > 0 ? n : -1), st};
}

template <typename Take>
void walk_slice(const SliceRange& r, Take take) {
  if (r.step > 0) {
    for (int64_t i = r.start; i < r.stop; i += r.step) take(i);
  } else {
    for (int64_t i = r.start; i > r.stop; i += r.step) take(i);
  }
}

inline int64_t checked_length(Evaluator& ev, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return code_point_count(v.str());
    case Value::Kind::List: return static_cast<int64_t>(v.items().size());
    case Value::Kind::Dict:
    case Value::Kind::Namespace: return static_cast<int64_t>(v.dict_data().items.size());
    default: ev.fail_here("object of type '{}' has no len()", v.type_name());
  }
}

// Python's str.replace (count < 0: every occurrence; "" inserts between code points).
std::string python_replace(Evaluator& ev, const std::string& s, const std::string& old, const std::string& repl,
                           int64_t count);
// `s.name` and `d.name` bound as callables (jinja_methods.cpp); undefined when Python's
// str or dict has no such method kiln supports.
Value string_method(Evaluator& ev, const Value& self, const std::string& name);
Value dict_method(Evaluator& ev, const Value& self, const std::string& name);

}  // namespace kiln::llm::jinja
