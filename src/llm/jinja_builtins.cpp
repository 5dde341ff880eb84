// jinja2's filters and tests, Python str/dict methods and transformers' globals
// (jinja_builtins.h). Semantics follow jinja2 3.1 and CPython; where kiln does less (no
// format specs in str.format, ASCII-only case mapping) the docs say so.
#include "llm/jinja_builtins.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <limits>

#include "llm/jinja_builtin_util.h"
#include "llm/jinja_text.h"

namespace kiln::llm::jinja {

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {


// ---- tests ----

bool run_test(Evaluator& ev, const std::string& name, const Value& v, CallArgs& args) {
  const auto arg = [&](size_t i) -> const Value& {
    if (i >= args.args.size()) ev.fail_here("the test '{}' needs an argument", name);
    return args.args[i];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_iterable() || v.is_undefined();
  if (name == "sequence") return v.is_iterable() || v.is_undefined();
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return v.is_string() && v.safe();
  if (name == "odd" || name == "even" || name == "divisibleby") {
    // value % n == (1 for odd, 0 otherwise), with Python's modulo on ints and floats.
    const Value n = name == "divisibleby" ? arg(0) : Value::integer(2);
    if (v.is_undefined()) ev.undefined_error(v);
    if (!v.is_number() || !n.is_number()) {
      ev.fail_here("unsupported operand type(s) for %: '{}' and '{}'", v.type_name(), n.type_name());
    }
    if (n.as_double() == 0.0) ev.fail_here("integer division or modulo by zero");
    const int want = name == "odd" ? 1 : 0;
    if (v.is_float() || n.is_float()) {
      double m = std::fmod(v.as_double(), n.as_double());
      if (m != 0.0 && ((m < 0) != (n.as_double() < 0))) m += n.as_double();
      return m == want;
    }
    int64_t m = v.as_int() % n.as_int();
    if (m != 0 && ((m < 0) != (n.as_int() < 0))) m += n.as_int();
    return m == want;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, arg(0));
  if (name == "ne" || name == "!=") return !equal(v, arg(0));
  if (name == "lt" || name == "lessthan" || name == "<") return less_than(ev, v, arg(0));
  if (name == "gt" || name == "greaterthan" || name == ">") return less_than(ev, arg(0), v);
  if (name == "le" || name == "<=") return !less_than(ev, arg(0), v);
  if (name == "ge" || name == ">=") return !less_than(ev, v, arg(0));
  if (name == "in") return contains(ev, arg(0), v);
  if (name == "sameas") {
    const Value& o = arg(0);
    if (v.is_list() && o.is_list()) return &v.list_data() == &o.list_data();
    if ((v.is_dict() || v.is_namespace()) && v.kind() == o.kind()) return &v.dict_data() == &o.dict_data();
    return v.kind() == o.kind() && equal(v, o);
  }
  if (name == "lower") return python_is_lower(soft_str(v));
  if (name == "upper") return python_is_upper(soft_str(v));
  ev.fail_here("no test named '{}'", name);
}

// ---- filters ----

Value filter_tojson(Evaluator& ev, const Value& v, CallArgs& args) {
  JsonOptions o;
  const Value indent = arg_or(args, 0, "indent", Value::none());
  if (!indent.is_none()) {
    o.indent = std::min<int64_t>(require_int(ev, indent, "tojson's indent"), 64);
    o.indent = std::max<int64_t>(o.indent, 0);
    o.item_separator = ",";
  }
  o.ensure_ascii = arg_or(args, 1, "ensure_ascii", Value::boolean(false)).truthy();
  const Value separators = arg_or(args, 2, "separators", Value::none());
  if (!separators.is_none()) {
    if (!separators.is_list() || separators.items().size() != 2) {
      ev.fail_here("tojson's separators must be a pair (item_separator, key_separator)");
    }
    o.item_separator = require_string(ev, separators.items()[0], "a separator");
    o.key_separator = require_string(ev, separators.items()[1], "a separator");
  }
  o.sort_keys = arg_or(args, 3, "sort_keys", Value::boolean(false)).truthy();
  std::string out;
  std::string what;
  if (!to_json(v, o, out, what, 0)) {
    if (v.is_undefined()) ev.fail_here("Object of type Undefined is not JSON serializable");
    ev.fail_here("{} is not JSON serializable", what);
  }
  return make_string(ev, std::move(out));
}

// A value's sort key: lowercased strings unless case-sensitive; an attribute when asked.
Value sort_key(Evaluator& ev, const Value& item, const Value& attribute, bool case_sensitive) {
  Value key = item;
  if (!attribute.is_none()) {
    if (attribute.is_int()) {
      key = get_item(ev, key, attribute);
    } else {
      std::string path = require_string(ev, attribute, "attribute");
      size_t start = 0;
      while (true) {
        const size_t dot = path.find('.', start);
        const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        key = get_item(ev, key, Value::string(part));
        if (dot == std::string::npos) break;
        start = dot + 1;
      }
    }
  }
  if (!case_sensitive && key.is_string()) return Value::string(python_lower(key.str()));
  return key;
}

ValueList sorted(Evaluator& ev, ValueList items, bool reverse, bool case_sensitive, const Value& attribute) {
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (Value& item : items) keyed.emplace_back(sort_key(ev, item, attribute, case_sensitive), std::move(item));
  ev.charge_steps(static_cast<int64_t>(keyed.size()) * 20);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? less_than(ev, b.first, a.first) : less_than(ev, a.first, b.first);
  });
  ValueList out;
  out.reserve(keyed.size());
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return out;
}

// select/reject/selectattr/rejectattr: args are [attribute,] test name, test args.
Value filter_select(Evaluator& ev, const Value& v, CallArgs& args, bool by_attr, bool keep) {
  size_t next = 0;
  Value attribute = Value::none();
  if (by_attr) {
    if (args.args.empty()) ev.fail_here("selectattr/rejectattr need an attribute name");
    attribute = args.args[next++];
  }
  const bool has_test = next < args.args.size();
  const std::string test = has_test ? require_string(ev, args.args[next++], "the test name") : "";
  CallArgs test_args;
  test_args.args.assign(args.args.begin() + static_cast<std::ptrdiff_t>(next), args.args.end());
  ValueList out;
  if (!v.truthy()) return make_list(ev, {});  // jinja2's `if value:` guard
  for (const Value& item : iterate(ev, v)) {
    ev.charge_steps(1);
    const Value subject = by_attr ? sort_key(ev, item, attribute, true) : item;
    const bool pass = has_test ? run_test(ev, test, subject, test_args) : subject.truthy();
    if (pass == keep) out.push_back(item);
  }
  return make_list(ev, std::move(out));
}

Value filter_map(Evaluator& ev, const Value& v, CallArgs& args) {
  ValueList out;
  if (!v.truthy()) return make_list(ev, {});  // jinja2's `if value:` guard
  const Value* attribute = args.get(static_cast<size_t>(-1), "attribute");
  if (attribute != nullptr) {
    const Value* fallback = args.get(static_cast<size_t>(-1), "default");
    for (const Value& item : iterate(ev, v)) {
      ev.charge_steps(1);
      Value got = sort_key(ev, item, *attribute, true);
      if (got.is_undefined() && fallback != nullptr) got = *fallback;
      out.push_back(std::move(got));
    }
    return make_list(ev, std::move(out));
  }
  if (args.args.empty()) ev.fail_here("map needs a filter name or attribute=");
  const std::string filter = require_string(ev, args.args[0], "the filter name");
  CallArgs rest;
  rest.args.assign(args.args.begin() + 1, args.args.end());
  rest.kwargs = args.kwargs;
  for (const Value& item : iterate(ev, v)) {
    ev.charge_steps(1);
    CallArgs copy = rest;
    out.push_back(apply_filter(ev, filter, item, copy));
  }
  return make_list(ev, std::move(out));
}

}  // namespace

// ---- shared operations ----

std::string percent_format(Evaluator& ev, const std::string& f, const ValueList& values, bool mapping_like) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) ev.fail_here("incomplete format");
    const char c = f[i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) ev.fail_here("not enough arguments for format string");
    const Value& x = values[next++];
    if (c == 's') {
      out += to_str(x);
    } else if (c == 'r') {
      out += to_repr(x);
    } else if ((c == 'd' || c == 'i') && x.is_number()) {
      out += std::to_string(x.is_float() ? static_cast<int64_t>(x.as_double()) : x.as_int());
    } else {
      ev.fail_here("unsupported format character '{}' (kiln supports %s, %r, %d, %i and %%)", c);
    }
    ev.charge_bytes(out.size());
  }
  // Python lets a lone list or dict go unused (it could have fed %(name)s fields).
  if (next < values.size() && !mapping_like) ev.fail_here("not all arguments converted during string formatting");
  return out;
}

ValueList iterate(Evaluator& ev, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.items();
    case Value::Kind::Dict: {
      ValueList keys;
      keys.reserve(v.dict_data().items.size());
      for (const auto& kv : v.dict_data().items) keys.push_back(kv.first);
      return keys;
    }
    case Value::Kind::String: {
      ValueList chars;
      const std::string& s = v.str();
      ev.charge_items(s.size());
      for (size_t pos = 0; pos < s.size();) {
        size_t len = 1;
        decode_code_point(s, pos, len);
        chars.push_back(Value::string(s.substr(pos, len)));
        pos += len;
      }
      return chars;
    }
    default: ev.fail_here("'{}' object is not iterable", v.type_name());
  }
}

bool contains(Evaluator& ev, const Value& haystack, const Value& needle) {
  switch (haystack.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!needle.is_string()) {
        if (needle.is_undefined()) ev.undefined_error(needle);
        ev.fail_here("'in <string>' requires string as left operand, not {}", needle.type_name());
      }
      return haystack.str().find(needle.str()) != std::string::npos;
    case Value::Kind::List:
      ev.charge_steps(static_cast<int64_t>(haystack.items().size() / 16));
      for (const Value& item : haystack.items()) {
        if (equal(item, needle)) return true;
      }
      return false;
    case Value::Kind::Dict:
    case Value::Kind::Namespace:
      if (needle.is_list() && !needle.list_data().tuple) ev.fail_here("unhashable type: 'list'");
      if (needle.is_dict()) ev.fail_here("unhashable type: 'dict'");
      ev.charge_steps(static_cast<int64_t>(haystack.dict_data().items.size() / 16));
      return haystack.dict_data().find(needle) != nullptr;
    default: ev.fail_here("argument of type '{}' is not iterable", haystack.type_name());
  }
}

bool less_than(Evaluator& ev, const Value& a, const Value& b) {
  if (a.is_undefined()) ev.undefined_error(a);
  if (b.is_undefined()) ev.undefined_error(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list()) {
    if (a.list_data().tuple != b.list_data().tuple) {
      ev.fail_here("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name());
    }
    const ValueList& x = a.items();
    const ValueList& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (less_than(ev, x[i], y[i])) return true;
      if (less_than(ev, y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  ev.fail_here("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name());
}

Value get_attribute(Evaluator& ev, const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::Undefined: ev.undefined_error(obj);
    case Value::Kind::String: return string_method(ev, obj, name);
    case Value::Kind::Dict: {
      Value method = dict_method(ev, obj, name);
      if (method.is_callable()) return method;
      const Value* v = obj.dict_data().find(std::string_view(name));
      return v != nullptr ? *v : Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    case Value::Kind::Namespace: {
      const Value* v = obj.dict_data().find(std::string_view(name));
      return v != nullptr ? *v : Value::undefined("'Namespace object' has no attribute '" + name + "'");
    }
    default: return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + name + "'");
  }
}

Value get_item(Evaluator& ev, const Value& obj, const Value& key) {
  const auto missing = [&]() {
    return Value::undefined("'" + obj.type_name() + " object' has no item " + to_repr(key));
  };
  switch (obj.kind()) {
    case Value::Kind::Undefined: ev.undefined_error(obj);
    case Value::Kind::List:
    case Value::Kind::String: {
      if (key.is_string()) return get_attribute(ev, obj, key.str());
      if (!key.is_int() && !key.is_bool()) {
        if (key.is_undefined()) ev.undefined_error(key);
        return missing();
      }
      int64_t i = key.as_int();
      if (obj.is_list()) {
        const auto n = static_cast<int64_t>(obj.items().size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return missing();
        return obj.items()[static_cast<size_t>(i)];
      }
      const std::vector<size_t> offsets = code_point_offsets(obj.str());
      const auto n = static_cast<int64_t>(offsets.size()) - 1;
      if (i < 0) i += n;
      if (i < 0 || i >= n) return missing();
      const auto u = static_cast<size_t>(i);
      return Value::string(obj.str().substr(offsets[u], offsets[u + 1] - offsets[u]));
    }
    case Value::Kind::Dict: {
      const Value* v = obj.dict_data().find(key);
      if (v != nullptr) return *v;
      if (key.is_string()) {
        Value method = dict_method(ev, obj, key.str());
        if (method.is_callable()) return method;
      }
      return missing();
    }
    case Value::Kind::Namespace: {
      const Value* v = obj.dict_data().find(key);
      return v != nullptr ? *v : missing();
    }
    default: return missing();
  }
}

Value get_slice(Evaluator& ev, const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) ev.undefined_error(obj);
  if (obj.is_list()) {
    const SliceRange r = slice_range(ev, static_cast<int64_t>(obj.items().size()), start, stop, step);
    ValueList out;
    walk_slice(r, [&](int64_t i) { out.push_back(obj.items()[static_cast<size_t>(i)]); });
    return make_list(ev, std::move(out), obj.list_data().tuple);
  }
  if (obj.is_string()) {
    const std::string& s = obj.str();
    const std::vector<size_t> offsets = code_point_offsets(s);
    const SliceRange r = slice_range(ev, static_cast<int64_t>(offsets.size()) - 1, start, stop, step);
    std::string out;
    if (r.step == 1) {
      if (r.start < r.stop) {
        out = s.substr(offsets[static_cast<size_t>(r.start)],
                       offsets[static_cast<size_t>(r.stop)] - offsets[static_cast<size_t>(r.start)]);
      }
    } else {
      walk_slice(r, [&](int64_t i) {
        const auto u = static_cast<size_t>(i);
        out.append(s, offsets[u], offsets[u + 1] - offsets[u]);
      });
    }
    return make_string(ev, std::move(out), obj.safe());
  }
  // Slices bypass jinja2's getitem, so Python's TypeError comes through.
  if (obj.is_dict()) ev.fail_here("unhashable type: 'slice'");
  ev.fail_here("'{}' object is not subscriptable", obj.type_name());
}

bool apply_test(Evaluator& ev, const std::string& name, const Value& target, CallArgs& args) {
  return run_test(ev, name, target, args);
}

Value apply_filter(Evaluator& ev, const std::string& name, const Value& v, CallArgs& args) {
  const auto str_of = [&]() { return soft_str(v); };
  if (name == "length" || name == "count") return Value::integer(checked_length(ev, v));
  if (name == "tojson") return filter_tojson(ev, v, args);
  if (name == "trim") {
    const Value chars = arg_or(args, 0, "chars", Value::none());
    if (chars.is_none()) return Value::string(python_strip(str_of(), StripSide::Both, nullptr), v.safe());
    const std::string set = require_string(ev, chars, "trim's chars");
    return Value::string(python_strip(str_of(), StripSide::Both, &set), v.safe());
  }
  if (name == "string") return v.is_string() ? v : make_string(ev, to_str(v));
  if (name == "safe") return make_string(ev, str_of(), true);
  if (name == "escape" || name == "e" || name == "forceescape") {
    if (v.is_string() && v.safe() && name != "forceescape") return v;
    return make_string(ev, html_escape(str_of()), true);
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list();
    if (!v.is_dict()) ev.fail_here("Can only get item pairs from a mapping, got {}", v.type_name());
    CallArgs none;
    return ev.call(dict_method(ev, v, "items"), none);
  }
  if (name == "default" || name == "d") {
    const bool boolean = arg_or(args, 1, "boolean", Value::boolean(false)).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return arg_or(args, 0, "default_value", Value::string(""));
    return v;
  }
  if (name == "join") {
    const std::string sep = soft_str(arg_or(args, 0, "d", Value::string("")));
    const Value attribute = arg_or(args, 1, "attribute", Value::none());
    std::string out;
    bool first = true;
    for (const Value& item : iterate(ev, v)) {
      if (!first) out += sep;
      first = false;
      out += soft_str(attribute.is_none() ? item : sort_key(ev, item, attribute, true));
      ev.charge_bytes(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "first" || name == "last") {
    if (v.is_undefined()) return Value::undefined("first/last of an undefined value");
    ValueList items = iterate(ev, v);
    if (items.empty()) return Value::undefined("'" + name + "' of an empty sequence");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "upper") return Value::string(python_upper(str_of()), v.safe());
  if (name == "lower") return Value::string(python_lower(str_of()), v.safe());
  if (name == "title") return Value::string(jinja_title(str_of()), v.safe());
  if (name == "capitalize") return Value::string(python_capitalize(str_of()), v.safe());
  if (name == "replace") {
    if (args.args.size() < 2) ev.fail_here("replace needs old and new");
    const int64_t count = require_int(ev, arg_or(args, 2, "count", Value::integer(-1)), "count");
    return Value::string(python_replace(ev, str_of(), soft_str(args.args[0]), soft_str(args.args[1]), count));
  }
  if (name == "list") return make_list(ev, iterate(ev, v));
  if (name == "reverse") {
    if (v.is_string()) {
      return get_slice(ev, v, Value::none(), Value::none(), Value::integer(-1));
    }
    ValueList items = iterate(ev, v);
    std::reverse(items.begin(), items.end());
    return make_list(ev, std::move(items));
  }
  if (name == "sort") {
    return make_list(ev, sorted(ev, iterate(ev, v), arg_or(args, 0, "reverse", Value::boolean(false)).truthy(),
                                arg_or(args, 1, "case_sensitive", Value::boolean(false)).truthy(),
                                arg_or(args, 2, "attribute", Value::none())));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) ev.fail_here("dictsort needs a dict, got {}", v.type_name());
    const bool case_sensitive = arg_or(args, 0, "case_sensitive", Value::boolean(false)).truthy();
    const std::string by = soft_str(arg_or(args, 1, "by", Value::string("key")));
    const bool reverse = arg_or(args, 2, "reverse", Value::boolean(false)).truthy();
    ValueList pairs;
    for (const auto& [k, val] : v.dict_data().items) pairs.push_back(Value::list({k, val}, true));
    return make_list(ev, sorted(ev, std::move(pairs), reverse, case_sensitive, Value::integer(by == "value" ? 1 : 0)));
  }
  if (name == "unique") {
    const bool case_sensitive = arg_or(args, 0, "case_sensitive", Value::boolean(false)).truthy();
    const Value attribute = arg_or(args, 1, "attribute", Value::none());
    ValueList out;
    ValueList seen;
    for (const Value& item : iterate(ev, v)) {
      ev.charge_steps(static_cast<int64_t>(seen.size() / 16) + 1);
      const Value key = sort_key(ev, item, attribute, case_sensitive);
      if ((key.is_list() && !key.list_data().tuple) || key.is_dict()) ev.fail_here("unhashable type: '{}'", key.type_name());
      bool dup = false;
      for (const Value& s : seen) dup = dup || equal(s, key);
      if (!dup) {
        seen.push_back(key);
        out.push_back(item);
      }
    }
    return make_list(ev, std::move(out));
  }
  if (name == "map") return filter_map(ev, v, args);
  if (name == "select") return filter_select(ev, v, args, false, true);
  if (name == "reject") return filter_select(ev, v, args, false, false);
  if (name == "selectattr") return filter_select(ev, v, args, true, true);
  if (name == "rejectattr") return filter_select(ev, v, args, true, false);
  if (name == "attr") {
    const Value attr_name = arg_or(args, 0, "name", Value());
    if (attr_name.is_undefined()) ev.fail_here("attr() missing 1 required positional argument: 'name'");
    return get_attribute(ev, v, require_string(ev, attr_name, "attr's name"));
  }
  if ((name == "int" || name == "float") && v.is_undefined()) ev.undefined_error(v);
  if (name == "int") {
    const Value fallback = arg_or(args, 0, "default", Value::integer(0));
    if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
    if (v.is_float()) {
      const double f = v.as_double();
      if (!std::isfinite(f) || std::fabs(f) >= 9.2e18) return fallback;
      return Value::integer(static_cast<int64_t>(f));
    }
    if (v.is_string()) {
      const std::string t = python_strip(v.str(), StripSide::Both, nullptr);
      int64_t i = 0;
      const auto r = std::from_chars(t.data(), t.data() + t.size(), i);
      if (r.ec == std::errc() && r.ptr == t.data() + t.size()) return Value::integer(i);
      char* end = nullptr;
      const double f = std::strtod(t.c_str(), &end);
      if (!t.empty() && end == t.c_str() + t.size() && std::isfinite(f) && std::fabs(f) < 9.2e18) {
        return Value::integer(static_cast<int64_t>(f));
      }
    }
    return fallback;
  }
  if (name == "float") {
    const Value fallback = arg_or(args, 0, "default", Value::number(0.0));
    if (v.is_number()) return Value::number(v.as_double());
    if (v.is_string()) {
      const std::string t = python_strip(v.str(), StripSide::Both, nullptr);
      char* end = nullptr;
      const double f = std::strtod(t.c_str(), &end);
      if (!t.empty() && end == t.c_str() + t.size()) return Value::number(f);
    }
    return fallback;
  }
  if (name == "abs") {
    if (v.is_float()) return Value::number(std::fabs(v.as_double()));
    const int64_t i = require_int(ev, v, "abs's value");
    if (i == std::numeric_limits<int64_t>::min()) ev.fail_here("integer overflow in abs");
    return Value::integer(i < 0 ? -i : i);
  }
  if (name == "round") {
    if (!v.is_number()) ev.fail_here("round needs a number, got {}", v.type_name());
    const int64_t precision = require_int(ev, arg_or(args, 0, "precision", Value::integer(0)), "precision");
    const std::string method = soft_str(arg_or(args, 1, "method", Value::string("common")));
    const double scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(precision, -300, 300)));
    const double x = v.as_double() * scale;
    // "common" is Python's round(): halves to even (the default rounding mode's nearbyint).
    const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
    return Value::number(r / scale);
  }
  if (name == "max" || name == "min" || name == "sum") {
    const ValueList items = iterate(ev, v);
    const Value attribute = arg_or(args, name == "sum" ? 0 : 1, "attribute", Value::none());
    if (name == "sum") {
      Value total = arg_or(args, 1, "start", Value::integer(0));
      for (const Value& item : items) {
        const Value x = sort_key(ev, item, attribute, true);
        if (!total.is_number() || !x.is_number()) ev.fail_here("sum needs numbers, got {}", x.type_name());
        if (total.is_float() || x.is_float()) {
          total = Value::number(total.as_double() + x.as_double());
        } else {
          int64_t r = 0;
          if (__builtin_add_overflow(total.as_int(), x.as_int(), &r)) ev.fail_here("integer overflow in sum");
          total = Value::integer(r);
        }
      }
      return total;
    }
    if (items.empty()) return Value::undefined("'" + name + "' of an empty sequence");
    const bool case_sensitive = arg_or(args, 0, "case_sensitive", Value::boolean(false)).truthy();
    const ValueList ordered = sorted(ev, items, false, case_sensitive, attribute);
    return name == "min" ? ordered.front() : ordered.back();
  }
  if (name == "indent") {
    const Value width_v = arg_or(args, 0, "width", Value::integer(4));
    const std::string pad = width_v.is_string() ? width_v.str() : std::string(static_cast<size_t>(std::clamp<int64_t>(
                                                                         require_int(ev, width_v, "width"), 0, 1024)),
                                                                     ' ');
    const bool first = arg_or(args, 1, "first", Value::boolean(false)).truthy();
    const bool blank = arg_or(args, 2, "blank", Value::boolean(false)).truthy();
    const std::string s = str_of();
    std::string out;
    size_t start = 0;
    bool is_first = true;
    while (start <= s.size()) {
      const size_t nl = s.find('\n', start);
      const std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      if ((is_first ? first : true) && (blank || !line.empty())) out += pad;
      out += line;
      if (nl == std::string::npos) break;
      out += '\n';
      start = nl + 1;
      is_first = false;
      ev.charge_bytes(out.size());
    }
    return make_string(ev, std::move(out));
  }
  if (name == "center") {
    const int64_t width = std::clamp<int64_t>(require_int(ev, arg_or(args, 0, "width", Value::integer(80)), "width"),
                                              0, 1 << 20);
    const std::string s = str_of();
    const int64_t len = code_point_count(s);
    if (len >= width) return Value::string(s);
    const int64_t total = width - len;
    const int64_t left = total / 2 + (total & width & 1);
    return make_string(ev, std::string(static_cast<size_t>(left), ' ') + s +
                               std::string(static_cast<size_t>(total - left), ' '));
  }
  if (name == "wordcount") {
    // len(re.findall(r"\w+", s)): runs of letters, digits and underscores (any non-ASCII
    // character counts as a letter here).
    int64_t words = 0;
    bool in_word = false;
    for (const char c : str_of()) {
      const auto u = static_cast<unsigned char>(c);
      const bool word = u >= 0x80 || u == '_' || (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z');
      if (word && !in_word) ++words;
      in_word = word;
    }
    return Value::integer(words);
  }
  if (name == "format") {
    const ValueList values = args.args.size() == 1 && args.args[0].is_list() && args.args[0].list_data().tuple
                                 ? args.args[0].items()
                                 : args.args;
    return Value::string(percent_format(ev, require_string(ev, v, "format's template"), values, false));
  }
  if (name == "pprint") return make_string(ev, to_repr(v));
  ev.fail_here("no filter named '{}'", name);
}

std::vector<std::pair<std::string, Value>> builtin_globals() {
  std::vector<std::pair<std::string, Value>> g;
  g.emplace_back("range", Value::callable("range", [](Evaluator& ev, CallArgs& args) {
    if (args.args.empty() || args.args.size() > 3) ev.fail_here("range expected 1 to 3 arguments, got {}", args.args.size());
    int64_t start = 0;
    int64_t stop = 0;
    int64_t step = 1;
    if (args.args.size() == 1) {
      stop = require_int(ev, args.args[0], "range's stop");
    } else {
      start = require_int(ev, args.args[0], "range's start");
      stop = require_int(ev, args.args[1], "range's stop");
      if (args.args.size() == 3) step = require_int(ev, args.args[2], "range's step");
    }
    if (step == 0) ev.fail_here("range() arg 3 must not be zero");
    const long double count_ld = step > 0 ? std::ceil((static_cast<long double>(stop) - start) / step)
                                          : std::ceil((static_cast<long double>(start) - stop) / -static_cast<long double>(step));
    const int64_t count = count_ld <= 0 ? 0 : (count_ld > kMaxRange ? kMaxRange + 1 : static_cast<int64_t>(count_ld));
    if (count > kMaxRange) ev.fail_here("range too big: the limit is {} items (as in jinja2's sandbox)", kMaxRange);
    ValueList items;
    items.reserve(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) items.push_back(Value::integer(start + i * step));
    ev.charge_steps(count / 16);
    return make_list(ev, std::move(items));
  }));
  const auto build_dict = [](Evaluator& ev, CallArgs& args, const char* what) {
    auto d = std::make_shared<DictData>();
    for (const Value& positional : args.args) {
      if (!positional.is_dict()) ev.fail_here("{}() takes a dict or keyword arguments, got {}", what, positional.type_name());
      for (const auto& [k, v] : positional.dict_data().items) d->set(k, v);
    }
    for (const auto& [k, v] : args.kwargs) d->set(Value::string(k), v);
    return d;
  };
  g.emplace_back("namespace", Value::callable("namespace", [build_dict](Evaluator& ev, CallArgs& args) {
    return Value::namespace_(build_dict(ev, args, "namespace"));
  }));
  g.emplace_back("dict", Value::callable("dict", [build_dict](Evaluator& ev, CallArgs& args) {
    return Value::dict(build_dict(ev, args, "dict"));
  }));
  g.emplace_back("raise_exception", Value::callable("raise_exception", [](Evaluator& ev, CallArgs& args) -> Value {
    const std::string message = args.args.empty() ? std::string() : soft_str(args.args[0]);
    ev.fail_here("the template raised an exception: {}", message);
  }));
  g.emplace_back("strftime_now", Value::callable("strftime_now", [](Evaluator& ev, CallArgs& args) {
    const std::string format = require_string(ev, arg_or(args, 0, "format", Value()), "strftime_now's format");
    if (format.size() > 256) ev.fail_here("strftime_now's format is longer than 256 bytes");
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buf[1024];
    const size_t n = std::strftime(buf, sizeof(buf), format.c_str(), &local);
    return Value::string(std::string(buf, n));
  }));
  g.emplace_back("joiner", Value::callable("joiner", [](Evaluator& ev, CallArgs& args) {
    const std::string sep = soft_str(arg_or(args, 0, "sep", Value::string(", ")));
    auto used = std::make_shared<bool>(false);
    (void)ev;
    return Value::callable("joiner", [sep, used](Evaluator&, CallArgs&) {
      if (!*used) {
        *used = true;
        return Value::string("");
      }
      return Value::string(sep);
    });
  }));
  return g;
}

}  // namespace kiln::llm::jinja
