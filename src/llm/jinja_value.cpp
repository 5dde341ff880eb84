// Jinja values: construction, Python truthiness and equality, str/repr and json.dumps
// formatting (jinja_value.h).
#include "llm/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "kiln/error.h"
#include "llm/jinja_text.h"

namespace kiln::llm::jinja {

namespace {

// The depth a container holding `item` gets, or a kiln::Error for an item it may not hold.
int checked_item_depth(const Value& item) {
  if (item.is_namespace()) {
    fail(ErrorKind::Value, "chat template",
         "a namespace cannot be stored in a list, dict or namespace (values stay acyclic)");
  }
  const int depth = item.depth() + 1;
  if (depth > kMaxValueDepth) {
    fail(ErrorKind::Value, "chat template", "a value nests deeper than the limit of {} levels", kMaxValueDepth);
  }
  return depth;
}

}  // namespace

const Value* DictData::find(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

void DictData::set(Value key, Value value) {
  depth = std::max({depth, checked_item_depth(key), checked_item_depth(value)});
  for (auto& [k, v] : items) {
    if (equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::undefined(std::string name) {
  Value v;
  v.s_ = std::make_shared<const std::string>(std::move(name));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}

Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  return v;
}

Value Value::string(std::string s, bool safe) {
  Value v;
  v.kind_ = Kind::String;
  v.safe_ = safe;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::list(ValueList items, bool tuple) {
  Value v;
  v.kind_ = Kind::List;
  auto data = std::make_shared<ListData>();
  for (const Value& item : items) data->depth = std::max(data->depth, checked_item_depth(item));
  data->items = std::move(items);
  data->tuple = tuple;
  v.list_ = std::move(data);
  return v;
}

Value Value::dict(std::shared_ptr<DictData> d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = d ? std::move(d) : std::make_shared<DictData>();
  for (const auto& [key, value] : v.dict_->items) {
    v.dict_->depth = std::max({v.dict_->depth, checked_item_depth(key), checked_item_depth(value)});
  }
  return v;
}

Value Value::namespace_(std::shared_ptr<DictData> d) {
  Value v = dict(std::move(d));
  v.kind_ = Kind::Namespace;
  return v;
}

Value Value::callable(std::string name, std::function<Value(Evaluator&, CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::Callable;
  v.fn_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

int Value::depth() const {
  if (kind_ == Kind::List) return list_->depth;
  if (kind_ == Kind::Dict || kind_ == Kind::Namespace) return dict_->depth;
  return 0;
}

double Value::as_double() const {
  switch (kind_) {
    case Kind::Float: return f_;
    case Kind::Int: return static_cast<double>(i_);
    case Kind::Bool: return b_ ? 1.0 : 0.0;
    default: return 0.0;
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b_;
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0.0;
    case Kind::String: return !s_->empty();
    case Kind::List: return !list_->items.empty();
    case Kind::Dict: return !dict_->items.empty();
    case Kind::Namespace:
    case Kind::Callable: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return list_->tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Callable: return "function";
  }
  return "object";
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.str() == b.str();
    case Value::Kind::List: {
      const ValueList& x = a.items();
      const ValueList& y = b.items();
      if (x.size() != y.size() || a.list_data().tuple != b.list_data().tuple) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::Dict: {
      const auto& x = a.dict_data().items;
      const auto& y = b.dict_data().items;
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = b.dict_data().find(k);
        if (other == nullptr || !equal(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::Namespace: return &a.dict_data() == &b.dict_data();
    case Value::Kind::Callable: return &a.fn() == &b.fn();
    default: return false;
  }
}

std::string python_float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form, then Python's layout: positional for
  // exponents in [-4, 16), scientific otherwise, and a ".0" on integral positionals.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      const auto int_len = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_len) {
        out += digits + std::string(int_len - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, int_len) + "." + digits.substr(int_len);
      }
    } else {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

namespace {

void append_repr_string(std::string& out, const std::string& s) {
  // Python picks single quotes unless the text has a ' and no ".
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out += quote;
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    const char32_t cp = decode_code_point(s, pos, len);
    const bool stray = len == 1 && static_cast<unsigned char>(s[pos]) >= 0x80;
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || cp == 0x7F || stray || (cp >= 0x80 && cp < 0xA0)) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", static_cast<unsigned>(stray ? static_cast<unsigned char>(s[pos]) : cp));
      out += hex;
    } else {
      out.append(s, pos, len);
    }
    pos += len;
  }
  out += quote;
}

void append_repr(std::string& out, const Value& v, int depth);

void append_str(std::string& out, const Value& v, int depth) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return;  // str(Undefined) is ""
    case Value::Kind::String: out += v.str(); return;
    default: append_repr(out, v, depth);
  }
}

void append_repr(std::string& out, const Value& v, int depth) {
  // Self-containing values cannot be built (lists are immutable here), but a deep one
  // can: past this depth Python would print the same ellipsis it prints for recursion.
  if (depth > 200) {
    out += "...";
    return;
  }
  switch (v.kind()) {
    case Value::Kind::Undefined: out += "Undefined"; return;  // repr(jinja2.Undefined)
    case Value::Kind::None: out += "None"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "True" : "False"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: out += python_float_repr(v.as_double()); return;
    case Value::Kind::String:
      if (v.safe()) out += "Markup(";
      append_repr_string(out, v.str());
      if (v.safe()) out += ")";
      return;
    case Value::Kind::List: {
      const bool tuple = v.list_data().tuple;
      out += tuple ? '(' : '[';
      const ValueList& items = v.items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ", ";
        append_repr(out, items[i], depth + 1);
      }
      if (tuple && items.size() == 1) out += ',';
      out += tuple ? ')' : ']';
      return;
    }
    case Value::Kind::Dict:
    case Value::Kind::Namespace: {
      const bool ns = v.kind() == Value::Kind::Namespace;
      out += ns ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, val] : v.dict_data().items) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, k, depth + 1);
        out += ": ";
        append_repr(out, val, depth + 1);
      }
      out += ns ? "}>" : "}";
      return;
    }
    case Value::Kind::Callable: out += "<function " + v.fn().name + ">"; return;
  }
}

void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    const char32_t cp = decode_code_point(s, pos, len);
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        char hex[16];
        if (cp < 0x20 || (ensure_ascii && cp == 0x7F)) {
          std::snprintf(hex, sizeof(hex), "\\u%04x", static_cast<unsigned>(cp));
          out += hex;
        } else if (ensure_ascii && cp >= 0x80) {
          if (cp >= 0x10000) {
            const char32_t v = cp - 0x10000;
            std::snprintf(hex, sizeof(hex), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(hex, sizeof(hex), "\\u%04x", static_cast<unsigned>(cp));
          }
          out += hex;
        } else {
          out.append(s, pos, len);
        }
      }
    }
    pos += len;
  }
  out += '"';
}

void json_newline(std::string& out, const JsonOptions& o, int level) {
  if (o.indent < 0) return;
  out += '\n';
  out.append(static_cast<size_t>(o.indent) * static_cast<size_t>(level), ' ');
}

}  // namespace

std::string to_str(const Value& v) {
  std::string out;
  append_str(out, v, 0);
  return out;
}

std::string to_repr(const Value& v) {
  std::string out;
  append_repr(out, v, 0);
  return out;
}

bool to_json(const Value& v, const JsonOptions& o, std::string& out, std::string& what, int depth) {
  if (depth > 200) {
    what = "a value nested deeper than 200 levels";
    return false;
  }
  switch (v.kind()) {
    case Value::Kind::None: out += "null"; return true;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return true;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return true;
    case Value::Kind::Float: {
      const double f = v.as_double();
      out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity") : python_float_repr(f);
      return true;
    }
    case Value::Kind::String: append_json_string(out, v.str(), o.ensure_ascii); return true;
    case Value::Kind::List: {
      const ValueList& items = v.items();
      if (items.empty()) {
        out += "[]";
        return true;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += o.item_separator;
        json_newline(out, o, depth + 1);
        if (!to_json(items[i], o, out, what, depth + 1)) return false;
      }
      json_newline(out, o, depth);
      out += ']';
      return true;
    }
    case Value::Kind::Dict: {
      std::vector<const std::pair<Value, Value>*> entries;
      for (const auto& entry : v.dict_data().items) entries.push_back(&entry);
      if (entries.empty()) {
        out += "{}";
        return true;
      }
      if (o.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
          return to_str(a->first) < to_str(b->first);
        });
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out += o.item_separator;
        json_newline(out, o, depth + 1);
        const Value& key = entries[i]->first;
        // json.dumps turns int, float, bool and None keys into strings; others are errors.
        if (key.is_string()) {
          append_json_string(out, key.str(), o.ensure_ascii);
        } else if (key.is_none()) {
          out += "\"null\"";
        } else if (key.is_bool()) {
          out += key.as_bool() ? "\"true\"" : "\"false\"";
        } else if (key.is_int() || key.is_float()) {
          out += '"' + to_str(key) + '"';
        } else {
          what = "a dict key of type " + key.type_name();
          return false;
        }
        out += o.key_separator;
        if (!to_json(entries[i]->second, o, out, what, depth + 1)) return false;
      }
      json_newline(out, o, depth);
      out += '}';
      return true;
    }
    default: what = "an object of type " + v.type_name(); return false;
  }
}

}  // namespace kiln::llm::jinja
