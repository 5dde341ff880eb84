// The values a Jinja chat template computes with, modelled on the Python objects jinja2
// hands around: undefined, None, bool, int, float, str (with Markup's "safe" flag), list
// and tuple, dict (insertion-ordered, like Python's), namespace() and callables (macros,
// built-in functions, bound string/dict methods). Lists, dicts and namespaces are shared
// by reference, as in Python, so `{% set ns.x = ... %}` is seen by every holder of ns.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::llm::jinja {

class Value;
struct CallArgs;
class Evaluator;

using ValueList = std::vector<Value>;

// Values nest at most this deep. Containers never change once built (jinja2's immutable
// sandbox) and cannot hold namespaces, so values are acyclic and their depth, fixed at
// construction, bounds every recursion over them (printing, JSON, destruction).
inline constexpr int kMaxValueDepth = 100;

struct ListData {
  ValueList items;
  bool tuple = false;  // printed as (a, b); otherwise the same as a list
  int depth = 1;
};

// Keys are values (JSON gives strings; literals may give ints); lookup is linear, which
// is what small message dicts want, and every lookup is paid for by the step budget.
struct DictData {
  std::vector<std::pair<Value, Value>> items;
  int depth = 1;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Replaces or appends; refuses (kiln::Error) a namespace value or one too deep.
  void set(Value key, Value value);
};

struct Callable {
  std::string name;  // for errors: "macro 'render'", "range", "str.split"
  std::function<Value(Evaluator&, CallArgs&)> call;
};

class Value {
 public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Value() = default;  // undefined
  static Value undefined(std::string name = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s, bool safe = false);
  // Containers refuse namespace items and items nested kMaxValueDepth deep (kiln::Error).
  static Value list(ValueList items = {}, bool tuple = false);
  static Value dict(std::shared_ptr<DictData> d = nullptr);
  static Value namespace_(std::shared_ptr<DictData> d = nullptr);
  static Value callable(std::string name, std::function<Value(Evaluator&, CallArgs&)> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_namespace() const { return kind_ == Kind::Namespace; }
  bool is_callable() const { return kind_ == Kind::Callable; }
  // Python's "mapping" (dict) and "iterable" (str, list, tuple, dict).
  bool is_mapping() const { return kind_ == Kind::Dict; }
  bool is_iterable() const { return kind_ == Kind::String || kind_ == Kind::List || kind_ == Kind::Dict; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }
  double as_double() const;  // int, bool or float
  const std::string& str() const { return *s_; }
  bool safe() const { return safe_; }  // Markup: `|safe` output
  const ListData& list_data() const { return *list_; }
  const ValueList& items() const { return list_->items; }
  const DictData& dict_data() const { return *dict_; }
  DictData& mutable_dict() const { return *dict_; }  // namespaces only (set ns.x)
  const Callable& fn() const { return *fn_; }
  // Empty for an undefined made without a name (a missing optional argument's default).
  const std::string& undefined_name() const {
    static const std::string unnamed;
    return s_ ? *s_ : unnamed;
  }
  int depth() const;  // 0 for scalars, 1 + the deepest item for containers

  // Python truthiness: undefined, None, False, 0, 0.0, "", [], {} are false.
  bool truthy() const;
  // Python's type name, for errors: "str", "int", "list", "dict", "NoneType", ...
  std::string type_name() const;

 private:
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  bool safe_ = false;
  int64_t i_ = 0;
  double f_ = 0.0;
  std::shared_ptr<const std::string> s_;  // String, or the undefined variable's name
  std::shared_ptr<const ListData> list_;
  std::shared_ptr<DictData> dict_;
  std::shared_ptr<const Callable> fn_;
};

// Python ==: 1 == 1.0 == True, lists and dicts element-wise; undefined equals undefined.
bool equal(const Value& a, const Value& b);

// str(x) as jinja2 prints `{{ x }}`: None -> "None", True -> "True", floats as repr,
// lists and dicts as Python's repr; undefined prints nothing.
std::string to_str(const Value& v);
// repr(x): strings quoted the way Python quotes them.
std::string to_repr(const Value& v);

// json.dumps(x, ensure_ascii, indent, separators, sort_keys) — what transformers' tojson
// filter calls. indent < 0 means None (one line). Undefined and callables are errors
// (the caller names the template); `what` receives the offending type.
struct JsonOptions {
  bool ensure_ascii = false;
  int64_t indent = -1;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
bool to_json(const Value& v, const JsonOptions& options, std::string& out, std::string& what, int depth = 0);

// Python float repr (shortest round-trip, "1e+16", "1.0", "inf", "nan").
std::string python_float_repr(double f);

}  // namespace kiln::llm::jinja
