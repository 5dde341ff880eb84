// Jinja template evaluation (jinja_eval.h): statements, expressions, scopes, macros and
// the bounds that keep a hostile template from hanging or exhausting memory.
#include "llm/jinja_eval.h"

#include <cmath>
#include <limits>

#include "kiln/error.h"
#include "kiln/int_math.h"
#include "llm/jinja_builtins.h"
#include "llm/jinja_lexer.h"

namespace kiln::llm::jinja {

const Value* CallArgs::get(size_t index, std::string_view name) const {
  for (const auto& [key, value] : kwargs) {
    if (key == name) return &value;
  }
  return index < args.size() ? &args[index] : nullptr;
}

const Value* Evaluator::Scope::find(const std::string& name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent) {
    const auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

Evaluator::Frame::Frame(Evaluator& e, size_t offset) : ev(e), saved_offset(e.offset_) {
  ev.offset_ = offset;
  if (++ev.steps_ > ev.limits_.max_steps) {
    ev.fail_here("rendering took more than the limit of {} steps (a loop or recursion that does not end?)",
                 ev.limits_.max_steps);
  }
  if (++ev.depth_ > ev.limits_.max_eval_depth) {
    --ev.depth_;
    ev.fail_here("evaluation nests deeper than the limit of {} levels", ev.limits_.max_eval_depth);
  }
}

Evaluator::Frame::~Frame() {
  --ev.depth_;
  ev.offset_ = saved_offset;
}

Evaluator::Evaluator(const Template& tmpl, std::string_view op, const RenderLimits& limits)
    : tmpl_(tmpl), op_(op), limits_(limits) {
  for (auto& [name, value] : builtin_globals()) globals_.vars[name] = std::move(value);
}

void Evaluator::raise(const std::string& message) const {
  const SourcePosition p = position_of(tmpl_.source, offset_);
  fail(ErrorKind::Value, op_, "{} line {}, column {}: {}", tmpl_.name, p.line, p.column, message);
}

void Evaluator::undefined_error(const Value& v) const {
  const std::string& hint = v.undefined_name();
  raise(hint.empty() ? std::string("the value is undefined") : hint);
}

void Evaluator::charge_bytes(size_t bytes) {
  if (bytes > limits_.max_output_bytes) {
    fail_here("a string or list of {} bytes is past the limit of {} bytes", bytes, limits_.max_output_bytes);
  }
  built_bytes_ += bytes;
  if (built_bytes_ > limits_.max_built_bytes) {
    fail_here("rendering built more than the limit of {} bytes of strings and lists", limits_.max_built_bytes);
  }
}

void Evaluator::charge_items(size_t count) {
  // A nominal 16 bytes an item: what the list would cost in a compact representation.
  if (count > limits_.max_built_bytes / 16) {
    fail_here("a list of {} items is past the limit of {} bytes built", count, limits_.max_built_bytes);
  }
  built_bytes_ += count * 16;
  if (built_bytes_ > limits_.max_built_bytes) {
    fail_here("rendering built more than the limit of {} bytes of strings and lists", limits_.max_built_bytes);
  }
}

void Evaluator::charge_steps(int64_t steps) {
  steps_ += steps;
  if (steps_ > limits_.max_steps) {
    fail_here("rendering took more than the limit of {} steps (a loop or recursion that does not end?)",
              limits_.max_steps);
  }
}

void Evaluator::emit(std::string_view text) {
  if (out_.size() + text.size() > limits_.max_output_bytes) {
    fail_here("the output grows past the limit of {} bytes", limits_.max_output_bytes);
  }
  built_bytes_ += text.size();
  if (built_bytes_ > limits_.max_built_bytes) {
    fail_here("rendering built more than the limit of {} bytes of strings and lists", limits_.max_built_bytes);
  }
  out_ += text;
}

std::string Evaluator::render(const std::vector<std::pair<std::string, Value>>& variables) {
  Scope context;
  context.parent = &globals_;
  for (const auto& [name, value] : variables) context.vars[name] = value;
  Scope top;
  top.parent = &context;
  root_ = &top;
  out_.clear();
  exec_body(tmpl_.body, top);
  root_ = nullptr;
  return std::move(out_);
}

std::string Evaluator::render_to_string(const Body& body, Scope& scope) {
  std::string saved = std::move(out_);
  out_.clear();
  try {
    exec_body(body, scope);
  } catch (...) {
    out_ = std::move(saved);
    throw;
  }
  std::string rendered = std::move(out_);
  out_ = std::move(saved);
  return rendered;
}

Evaluator::Flow Evaluator::exec_body(const Body& body, Scope& scope) {
  for (const StmtPtr& s : body) {
    const Flow flow = exec(*s, scope);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

void Evaluator::assign(Scope& scope, const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    scope.vars[targets[0]] = v;
    return;
  }
  if (!v.is_list()) fail_here("cannot unpack a {} into {} names", v.type_name(), targets.size());
  if (v.items().size() != targets.size()) {
    fail_here("cannot unpack {} values into {} names", v.items().size(), targets.size());
  }
  for (size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = v.items()[i];
}

Evaluator::Flow Evaluator::exec(const Stmt& s, Scope& scope) {
  Frame frame(*this, s.offset);
  switch (s.type) {
    case Stmt::Type::Text: emit(s.text); return Flow::Normal;
    case Stmt::Type::Output: {
      const Value v = eval(*s.expr, scope);
      if (v.is_string()) {
        emit(v.str());
      } else {
        const std::string text = to_str(v);
        charge_bytes(text.size());
        emit(text);
      }
      return Flow::Normal;
    }
    case Stmt::Type::If: {
      for (size_t i = 0; i < s.conditions.size(); ++i) {
        if (eval(*s.conditions[i], scope).truthy()) return exec_body(s.bodies[i], scope);
      }
      if (s.bodies.size() > s.conditions.size()) return exec_body(s.bodies.back(), scope);
      return Flow::Normal;
    }
    case Stmt::Type::For: return exec_for(s, scope);
    case Stmt::Type::Set: exec_set(s, scope); return Flow::Normal;
    case Stmt::Type::Macro: scope.vars[s.text] = define_macro(s); return Flow::Normal;
    case Stmt::Type::With: {
      Scope inner;
      inner.parent = &scope;
      for (size_t i = 0; i < s.targets.size(); ++i) inner.vars[s.targets[i]] = eval(*s.values[i], scope);
      return exec_body(s.bodies[0], inner);
    }
    case Stmt::Type::FilterBlock: {
      Scope inner;
      inner.parent = &scope;
      Value v = Value::string(render_to_string(s.bodies[0], inner));
      // The filter chain was parsed over a null target: apply it innermost first.
      std::vector<const Expr*> chain;
      for (const Expr* f = s.expr.get(); f != nullptr; f = f->args[0].get()) chain.push_back(f);
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        CallArgs args;
        eval_args(**it, 1, scope, args);
        v = apply_filter(*this, (*it)->name, v, args);
      }
      if (v.is_string()) {
        emit(v.str());
      } else {
        emit(to_str(v));
      }
      return Flow::Normal;
    }
    case Stmt::Type::Break: return Flow::Break;
    case Stmt::Type::Continue: return Flow::Continue;
    case Stmt::Type::Scope: return exec_body(s.bodies[0], scope);
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::exec_for(const Stmt& s, Scope& scope) {
  const Value iterable = eval(*s.expr, scope);
  // A list is walked in place; anything else (dict keys, string characters, a filtered
  // selection) is materialised first.
  ValueList materialised;
  const ValueList* items = &materialised;
  if (iterable.is_list() && !s.filter) {
    items = &iterable.items();
  } else {
    materialised = iterate(*this, iterable);
  }
  if (s.filter) {
    ValueList kept;
    Scope probe;
    probe.parent = &scope;
    for (const Value& item : materialised) {
      charge_steps(1);
      probe.vars.clear();
      assign(probe, s.targets, item);
      if (eval(*s.filter, probe).truthy()) kept.push_back(item);
    }
    materialised = std::move(kept);
  }
  if (items->empty()) {
    if (s.bodies.size() > 1) return exec_body(s.bodies[1], scope);
    return Flow::Normal;
  }
  const auto length = static_cast<int64_t>(items->size());
  // One loop object for the whole loop, updated in place each iteration (jinja2's
  // LoopContext is one object too). Its depth bound covers the items it will hold.
  auto loop = std::make_shared<DictData>();
  auto index_cell = std::make_shared<int64_t>(0);
  // loop.cycle(a, b, ...) picks by the current index, read from a shared cell.
  const Value cycle = Value::callable("loop.cycle", [index_cell](Evaluator& ev, CallArgs& args) {
    if (args.args.empty()) ev.fail_here("loop.cycle() needs at least one value");
    return args.args[static_cast<size_t>(*index_cell % static_cast<int64_t>(args.args.size()))];
  });
  static const char* const kKeys[] = {"index", "index0",   "revindex", "revindex0", "first", "last",
                                      "length", "previtem", "nextitem", "depth",     "depth0", "cycle"};
  for (const char* key : kKeys) loop->items.emplace_back(Value::string(key), Value());
  loop->items[6].second = Value::integer(length);
  loop->items[9].second = Value::integer(1);
  loop->items[10].second = Value::integer(0);
  loop->items[11].second = cycle;
  loop->depth = std::max(iterable.depth(), 1) + 1;
  const Value loop_value = Value::dict(loop);
  Scope body_scope;
  body_scope.parent = &scope;
  for (int64_t i = 0; i < length; ++i) {
    charge_steps(1);
    *index_cell = i;
    const auto idx = static_cast<size_t>(i);
    auto& slots = loop->items;
    slots[0].second = Value::integer(i + 1);
    slots[1].second = Value::integer(i);
    slots[2].second = Value::integer(length - i);
    slots[3].second = Value::integer(length - i - 1);
    slots[4].second = Value::boolean(i == 0);
    slots[5].second = Value::boolean(i == length - 1);
    slots[7].second = i > 0 ? (*items)[idx - 1] : Value::undefined("there is no previous item (loop.previtem)");
    slots[8].second =
        i + 1 < length ? (*items)[idx + 1] : Value::undefined("there is no next item (loop.nextitem)");
    // Each iteration starts from a clean scope: a `set` in the body does not carry over.
    body_scope.vars.clear();
    assign(body_scope, s.targets, (*items)[idx]);
    body_scope.vars["loop"] = loop_value;
    if (exec_body(s.bodies[0], body_scope) == Flow::Break) break;
  }
  return Flow::Normal;
}

void Evaluator::exec_set(const Stmt& s, Scope& scope) {
  if (!s.expr) {
    Scope inner;
    inner.parent = &scope;
    scope.vars[s.targets[0]] = Value::string(render_to_string(s.bodies[0], inner));
    return;
  }
  Value v = eval(*s.expr, scope);
  if (s.attr.empty()) {
    assign(scope, s.targets, v);
    return;
  }
  const Value* ns = scope.find(s.targets[0]);
  if (ns == nullptr || !ns->is_namespace()) {
    fail_here("cannot assign attribute '{}' on {} '{}': only a namespace() takes attributes", s.attr,
              ns == nullptr ? "undefined" : ns->type_name(), s.targets[0]);
  }
  ns->mutable_dict().set(Value::string(s.attr), std::move(v));
}

Value Evaluator::define_macro(const Stmt& s) {
  const Stmt* macro = &s;
  return Value::callable("macro '" + s.text + "'",
                         [macro](Evaluator& ev, CallArgs& args) { return ev.call_macro(*macro, args); });
}

Value Evaluator::call_macro(const Stmt& macro, CallArgs& args) {
  if (call_depth_ >= limits_.max_call_depth) {
    fail_here("macro calls nest deeper than the limit of {} (recursion that does not end?)", limits_.max_call_depth);
  }
  const size_t params = macro.targets.size();
  if (args.args.size() > params) {
    fail_here("macro '{}' takes not more than {} argument(s), got {}", macro.text, params, args.args.size());
  }
  Scope scope;
  scope.parent = root_;
  for (const auto& [key, value] : args.kwargs) {
    bool known = false;
    for (size_t i = 0; i < params; ++i) known = known || macro.targets[i] == key;
    if (!known) fail_here("macro '{}' takes no keyword argument '{}'", macro.text, key);
  }
  for (size_t i = 0; i < params; ++i) {
    const Value* given = args.get(i, macro.targets[i]);
    if (given != nullptr) {
      scope.vars[macro.targets[i]] = *given;
    } else if (macro.values[i]) {
      scope.vars[macro.targets[i]] = eval(*macro.values[i], scope);
    } else {
      scope.vars[macro.targets[i]] =
          Value::undefined("'" + macro.targets[i] + "' is undefined (macro '" + macro.text + "' was not given it)");
    }
  }
  ++call_depth_;
  std::string rendered;
  try {
    rendered = render_to_string(macro.bodies[0], scope);
  } catch (...) {
    --call_depth_;
    throw;
  }
  --call_depth_;
  return Value::string(std::move(rendered));
}

Value Evaluator::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) undefined_error(callee);
  if (!callee.is_callable()) fail_here("'{}' object is not callable", callee.type_name());
  return callee.fn().call(*this, args);
}

void Evaluator::eval_args(const Expr& e, size_t first, const Scope& scope, CallArgs& out) {
  for (size_t i = first; i < e.args.size(); ++i) out.args.push_back(eval(*e.args[i], scope));
  for (const auto& [key, value] : e.kwargs) out.kwargs.emplace_back(key, eval(*value, scope));
}

Value Evaluator::eval_call(const Expr& e, const Scope& scope) {
  const Value callee = eval(*e.args[0], scope);
  CallArgs args;
  eval_args(e, 1, scope, args);
  offset_ = e.offset;
  return call(callee, args);
}

Value Evaluator::eval(const Expr& e, const Scope& scope) {
  Frame frame(*this, e.offset);
  switch (e.type) {
    case Expr::Type::Literal: return e.value;
    case Expr::Type::Name: {
      const Value* v = scope.find(e.name);
      return v != nullptr ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case Expr::Type::ListLit:
    case Expr::Type::TupleLit: {
      ValueList items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a, scope));
      charge_items(items.size());
      return Value::list(std::move(items), e.type == Expr::Type::TupleLit);
    }
    case Expr::Type::DictLit: {
      auto d = std::make_shared<DictData>();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value key = eval(*e.args[i], scope);
        Value value = eval(*e.args[i + 1], scope);
        offset_ = e.offset;
        if ((key.is_list() && !key.list_data().tuple) || key.is_dict()) fail_here("unhashable type: '{}'", key.type_name());
        d->set(std::move(key), std::move(value));
      }
      return Value::dict(std::move(d));
    }
    case Expr::Type::Attr: {
      const Value obj = eval(*e.args[0], scope);
      offset_ = e.offset;
      return get_attribute(*this, obj, e.name);
    }
    case Expr::Type::Item: {
      const Value obj = eval(*e.args[0], scope);
      const Value key = eval(*e.args[1], scope);
      offset_ = e.offset;
      return get_item(*this, obj, key);
    }
    case Expr::Type::Slice: {
      const Value obj = eval(*e.args[0], scope);
      const auto part = [&](size_t i) { return e.args[i] ? eval(*e.args[i], scope) : Value::none(); };
      const Value start = part(1);
      const Value stop = part(2);
      const Value step = part(3);
      offset_ = e.offset;
      return get_slice(*this, obj, start, stop, step);
    }
    case Expr::Type::Call: return eval_call(e, scope);
    case Expr::Type::Filter: {
      const Value target = eval(*e.args[0], scope);
      CallArgs args;
      eval_args(e, 1, scope, args);
      offset_ = e.offset;
      return apply_filter(*this, e.name, target, args);
    }
    case Expr::Type::Test: {
      const Value target = eval(*e.args[0], scope);
      CallArgs args;
      eval_args(e, 1, scope, args);
      offset_ = e.offset;
      return Value::boolean(apply_test(*this, e.name, target, args) != e.negated);
    }
    case Expr::Type::Unary: {
      const Value v = eval(*e.args[0], scope);
      offset_ = e.offset;
      if (e.name == "not") return Value::boolean(!v.truthy());
      if (v.is_undefined()) undefined_error(v);
      if (v.is_float()) return Value::number(e.name == "-" ? -v.as_double() : v.as_double());
      if (v.is_int() || v.is_bool()) {
        if (e.name == "+") return Value::integer(v.as_int());
        if (v.as_int() == std::numeric_limits<int64_t>::min()) fail_here("integer overflow in -{}", v.as_int());
        return Value::integer(-v.as_int());
      }
      fail_here("bad operand type for unary {}: '{}'", e.name, v.type_name());
    }
    case Expr::Type::Binary: return eval_binary(e, scope);
    case Expr::Type::Compare: return eval_compare(e, scope);
    case Expr::Type::Conditional: {
      if (eval(*e.args[1], scope).truthy()) return eval(*e.args[0], scope);
      if (e.args[2]) return eval(*e.args[2], scope);
      return Value::undefined("the conditional expression has no else branch");
    }
  }
  return Value();
}

namespace {

// Python's floor division and modulo for ints.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Value Evaluator::eval_binary(const Expr& e, const Scope& scope) {
  const std::string& op = e.name;
  if (op == "and" || op == "or") {
    Value left = eval(*e.args[0], scope);
    if ((op == "and") != left.truthy()) return left;
    return eval(*e.args[1], scope);
  }
  const Value a = eval(*e.args[0], scope);
  const Value b = eval(*e.args[1], scope);
  offset_ = e.offset;
  if (op == "~") {
    std::string s = to_str(a);
    const std::string t = to_str(b);
    charge_bytes(s.size() + t.size());
    return Value::string(s + t);
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  const auto unsupported = [&]() {
    fail_here("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name());
  };
  const bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
  const bool numbers = a.is_number() && b.is_number();
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      charge_bytes(a.str().size() + b.str().size());
      // Markup + str and str + Markup escape the plain str (Markup.__add__ / __radd__; a
      // subclass's reflected method goes first) and stay Markup.
      if (a.safe() != b.safe()) {
        const std::string left = a.safe() ? a.str() : html_escape(a.str());
        const std::string right = b.safe() ? b.str() : html_escape(b.str());
        return Value::string(left + right, true);
      }
      return Value::string(a.str() + b.str(), a.safe() && b.safe());
    }
    if (a.is_list() && b.is_list()) {
      if (a.list_data().tuple != b.list_data().tuple) unsupported();
      ValueList items = a.items();
      charge_items(items.size() + b.items().size());
      items.insert(items.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(items), a.list_data().tuple);
    }
    if (a.is_string() && !b.is_string()) fail_here("can only concatenate str (not \"{}\") to str", b.type_name());
    if (a.is_list() && !b.is_list()) {
      fail_here("can only concatenate {} (not \"{}\") to {}", a.type_name(), b.type_name(), a.type_name());
    }
    if (ints) {
      int64_t r = 0;
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) fail_here("integer overflow in {} + {}", a.as_int(), b.as_int());
      return Value::integer(r);
    }
    if (numbers) return Value::number(a.as_double() + b.as_double());
    unsupported();
  }
  if (op == "-") {
    if (ints) {
      int64_t r = 0;
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) fail_here("integer overflow in {} - {}", a.as_int(), b.as_int());
      return Value::integer(r);
    }
    if (numbers) return Value::number(a.as_double() - b.as_double());
    unsupported();
  }
  if (op == "*") {
    if (ints) {
      int64_t r = 0;
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) fail_here("integer overflow in {} * {}", a.as_int(), b.as_int());
      return Value::integer(r);
    }
    if (numbers) return Value::number(a.as_double() * b.as_double());
    // Sequence repetition: str * int, list * int (either order).
    const Value& seq = (a.is_string() || a.is_list()) ? a : b;
    const Value& count = (a.is_string() || a.is_list()) ? b : a;
    if ((seq.is_string() || seq.is_list()) && (count.is_int() || count.is_bool())) {
      const int64_t n = std::max<int64_t>(0, count.as_int());
      if (seq.is_string()) {
        const size_t unit = seq.str().size();
        if (unit != 0 && static_cast<uint64_t>(n) > limits_.max_output_bytes / unit + 1) {
          fail_here("repeating a str of {} bytes {} times is past the limit of {} bytes", unit, n,
                    limits_.max_output_bytes);
        }
        charge_bytes(unit * static_cast<size_t>(n));
      } else {
        const size_t unit = seq.items().size();
        if (unit != 0 && static_cast<uint64_t>(n) > limits_.max_built_bytes / 16 / unit + 1) {
          fail_here("repeating a list of {} items {} times is past the limit of {} bytes built", unit, n,
                    limits_.max_built_bytes);
        }
        charge_items(unit * static_cast<size_t>(n));
      }
      if (seq.is_string()) {
        if (seq.str().empty()) return Value::string("", seq.safe());  // n may be huge
        std::string out;
        out.reserve(seq.str().size() * static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) out += seq.str();
        return Value::string(std::move(out), seq.safe());
      }
      if (seq.items().empty()) return Value::list({}, seq.list_data().tuple);
      ValueList out;
      for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
      return Value::list(std::move(out), seq.list_data().tuple);
    }
    unsupported();
  }
  if (op == "/") {
    if (!numbers) unsupported();
    if (b.as_double() == 0.0) fail_here("division by zero");
    return Value::number(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.is_string()) {
      const ValueList values = b.is_list() && b.list_data().tuple ? b.items() : ValueList{b};
      const bool mapping_like = b.is_dict() || (b.is_list() && !b.list_data().tuple);
      return Value::string(percent_format(*this, a.str(), values, mapping_like), a.safe());
    }
    if (!numbers) unsupported();
    if (b.as_double() == 0.0) fail_here("integer division or modulo by zero");
    if (ints) {
      if (a.as_int() == std::numeric_limits<int64_t>::min() && b.as_int() == -1) fail_here("integer overflow in {}", op);
      const int64_t q = floor_div(a.as_int(), b.as_int());
      return Value::integer(op == "//" ? q : a.as_int() - q * b.as_int());
    }
    const double x = a.as_double();
    const double y = b.as_double();
    const double q = std::floor(x / y);
    if (op == "//") return Value::number(q);
    double m = std::fmod(x, y);
    if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
    return Value::number(m);
  }
  if (op == "**") {
    if (!numbers) unsupported();
    if (ints && b.as_int() >= 0) {
      int64_t result = 1;
      int64_t base = a.as_int();
      int64_t exp = b.as_int();
      while (exp > 0) {
        charge_steps(1);
        if ((exp & 1) && __builtin_mul_overflow(result, base, &result)) fail_here("integer overflow in **");
        exp >>= 1;
        if (exp > 0 && __builtin_mul_overflow(base, base, &base)) fail_here("integer overflow in **");
      }
      return Value::integer(result);
    }
    return Value::number(std::pow(a.as_double(), b.as_double()));
  }
  fail_here("unknown operator '{}'", op);
}

Value Evaluator::eval_compare(const Expr& e, const Scope& scope) {
  Value left = eval(*e.args[0], scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i + 1], scope);
    offset_ = e.offset;
    const std::string& op = e.ops[i];
    bool ok = false;
    if (op == "==") {
      ok = equal(left, right);
    } else if (op == "!=") {
      ok = !equal(left, right);
    } else if (op == "in") {
      ok = contains(*this, right, left);
    } else if (op == "not in") {
      ok = !contains(*this, right, left);
    } else if (op == "<") {
      ok = less_than(*this, left, right);
    } else if (op == ">") {
      ok = less_than(*this, right, left);
    } else if (op == "<=") {
      ok = !less_than(*this, right, left);
    } else if (op == ">=") {
      ok = !less_than(*this, left, right);
    }
    if (!ok) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

}  // namespace kiln::llm::jinja
