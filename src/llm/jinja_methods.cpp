// Python's str and dict methods as chat templates call them (`s.startswith(...)`,
// `d.items()`), bound by get_attribute (jinja_builtins.cpp).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "llm/jinja_builtin_util.h"
#include "llm/jinja_builtins.h"
#include "llm/jinja_text.h"

namespace kiln::llm::jinja {
namespace {

// ---- str methods ----

bool matches_affix(Evaluator& ev, const std::string& s, const Value& affix, bool prefix) {
  const auto one = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_list()) {
    for (const Value& a : affix.items()) {
      if (one(require_string(ev, a, "a tuple item"))) return true;
    }
    return false;
  }
  return one(require_string(ev, affix, prefix ? "startswith's argument" : "endswith's argument"));
}


// str.format with positional {} / {0} and named {name} fields, no format specs.
std::string python_format(Evaluator& ev, const std::string& f, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '{' && i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    if (c == '}' && i + 1 < f.size() && f[i + 1] == '}') {
      out += '}';
      ++i;
      continue;
    }
    if (c == '}') ev.fail_here("Single '}}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) ev.fail_here("Single '{{' encountered in format string");
    const std::string field = f.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) {
      ev.fail_here("format field '{{{}}}' uses a conversion, spec or lookup kiln does not support", field);
    }
    const Value* v = nullptr;
    if (field.empty()) {
      v = auto_index < args.args.size() ? &args.args[auto_index] : nullptr;
      ++auto_index;
    } else if (field[0] >= '0' && field[0] <= '9') {
      size_t index = 0;
      std::from_chars(field.data(), field.data() + field.size(), index);
      v = index < args.args.size() ? &args.args[index] : nullptr;
    } else {
      for (const auto& [key, value] : args.kwargs) {
        if (key == field) v = &value;
      }
    }
    if (v == nullptr) ev.fail_here("format field '{{{}}}' has no argument", field);
    out += to_str(*v);
    i = close;
    ev.charge_bytes(out.size());
  }
  return out;
}

bool all_code_points(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    if (!pred(decode_code_point(s, pos, len))) return false;
    pos += len;
  }
  return true;
}

}  // namespace

std::string python_replace(Evaluator& ev, const std::string& s, const std::string& old, const std::string& repl,
                           int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    // Python inserts the replacement before every code point and at the end.
    const std::vector<size_t> offsets = code_point_offsets(s);
    for (size_t i = 0; i + 1 < offsets.size(); ++i) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      out.append(s, offsets[i], offsets[i + 1] - offsets[i]);
      if (out.size() > s.size() + repl.size() * 2 + 1024) ev.charge_bytes(0);  // pays per chunk below
    }
    if (count < 0 || done < count) out += repl;
    ev.charge_bytes(out.size());
    return out;
  }
  size_t pos = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += repl;
    pos = hit + old.size();
    ++done;
    if (out.size() > (size_t{1} << 20)) ev.charge_bytes(0);
  }
  out.append(s, pos);
  ev.charge_bytes(out.size());
  return out;
}

Value string_method(Evaluator& ev, const Value& self, const std::string& name) {
  const bool safe = self.safe();
  const auto method = [&](auto fn) {
    return Value::callable("str." + name, [self, fn](Evaluator& e, CallArgs& args) { return fn(e, self, args); });
  };
  const auto strip = [&](StripSide side) {
    return method([side, safe](Evaluator& e, const Value& s, CallArgs& args) {
      const Value chars = arg_or(args, 0, "chars", Value::none());
      if (chars.is_none()) return Value::string(python_strip(s.str(), side, nullptr), safe);
      const std::string set = require_string(e, chars, "strip's chars");
      return Value::string(python_strip(s.str(), side, &set), safe);
    });
  };
  if (name == "strip") return strip(StripSide::Both);
  if (name == "lstrip") return strip(StripSide::Left);
  if (name == "rstrip") return strip(StripSide::Right);
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return method([prefix](Evaluator& e, const Value& s, CallArgs& args) {
      if (args.args.empty()) e.fail_here("{}() takes at least 1 argument (0 given)", prefix ? "startswith" : "endswith");
      return Value::boolean(matches_affix(e, s.str(), args.args[0], prefix));
    });
  }
  if (name == "split" || name == "rsplit") {
    const bool right = name == "rsplit";
    return method([right](Evaluator& e, const Value& s, CallArgs& args) {
      const Value sep = arg_or(args, 0, "sep", Value::none());
      const int64_t maxsplit = require_int(e, arg_or(args, 1, "maxsplit", Value::integer(-1)), "maxsplit");
      e.charge_steps(static_cast<int64_t>(s.str().size() / 64));
      // Markup's split gives Markup pieces.
      if (sep.is_none()) {
        return string_list(e, right ? python_rsplit(s.str(), nullptr, maxsplit) : python_split(s.str(), nullptr, maxsplit),
                           s.safe());
      }
      const std::string sep_text = require_string(e, sep, "the separator");
      if (sep_text.empty()) e.fail_here("empty separator");
      return string_list(e, right ? python_rsplit(s.str(), &sep_text, maxsplit) : python_split(s.str(), &sep_text, maxsplit),
                         s.safe());
    });
  }
  if (name == "splitlines") {
    return method([](Evaluator& e, const Value& s, CallArgs&) {
      std::vector<std::string> lines;
      const std::string& t = s.str();
      size_t start = 0;
      for (size_t i = 0; i < t.size(); ++i) {
        if (t[i] == '\n' || t[i] == '\r') {
          lines.push_back(t.substr(start, i - start));
          if (t[i] == '\r' && i + 1 < t.size() && t[i + 1] == '\n') ++i;
          start = i + 1;
        }
      }
      if (start < t.size()) lines.push_back(t.substr(start));
      return string_list(e, std::move(lines));
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    const std::string which = name;
    return method([which, safe](Evaluator&, const Value& s, CallArgs&) {
      if (which == "upper") return Value::string(python_upper(s.str()), safe);
      if (which == "lower") return Value::string(python_lower(s.str()), safe);
      if (which == "title") return Value::string(python_title(s.str()), safe);
      return Value::string(python_capitalize(s.str()), safe);
    });
  }
  if (name == "replace") {
    return method([safe](Evaluator& e, const Value& s, CallArgs& args) {
      if (args.args.size() < 2) e.fail_here("replace() takes at least 2 arguments");
      const int64_t count = require_int(e, arg_or(args, 2, "count", Value::integer(-1)), "count");
      return Value::string(python_replace(e, s.str(), require_string(e, args.args[0], "replace's old"),
                                          require_string(e, args.args[1], "replace's new"), count),
                           safe);
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    const std::string which = name;
    return method([which](Evaluator& e, const Value& s, CallArgs& args) {
      if (args.args.empty()) e.fail_here("{}() takes at least 1 argument", which);
      const std::string sub = require_string(e, args.args[0], which + "'s argument");
      const std::string& t = s.str();
      if (which == "count") {
        if (sub.empty()) return Value::integer(code_point_count(t) + 1);
        int64_t n = 0;
        for (size_t pos = t.find(sub); pos != std::string::npos; pos = t.find(sub, pos + sub.size())) ++n;
        return Value::integer(n);
      }
      const bool right = which[0] == 'r';
      const size_t hit = right ? t.rfind(sub) : t.find(sub);
      if (hit == std::string::npos) {
        if (which == "index" || which == "rindex") e.fail_here("substring not found");
        return Value::integer(-1);
      }
      return Value::integer(code_point_count(std::string_view(t).substr(0, hit)));
    });
  }
  if (name == "join") {
    return method([](Evaluator& e, const Value& s, CallArgs& args) {
      if (args.args.empty()) e.fail_here("join() takes exactly one argument");
      std::string out;
      bool first = true;
      for (const Value& item : iterate(e, args.args[0])) {
        if (!first) out += s.str();
        first = false;
        out += require_string(e, item, "a joined item");
        e.charge_bytes(out.size());
      }
      return Value::string(std::move(out));
    });
  }
  if (name == "format") {
    return method([safe](Evaluator& e, const Value& s, CallArgs& args) {
      return Value::string(python_format(e, s.str(), args), safe);
    });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "isupper" ||
      name == "islower") {
    const std::string which = name;
    return method([which](Evaluator&, const Value& s, CallArgs&) {
      const std::string& t = s.str();
      if (which == "isdigit") return Value::boolean(all_code_points(t, [](char32_t c) { return c >= '0' && c <= '9'; }));
      if (which == "isspace") return Value::boolean(all_code_points(t, is_python_space));
      if (which == "isalpha") {
        return Value::boolean(
            all_code_points(t, [](char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }));
      }
      if (which == "isalnum") {
        return Value::boolean(all_code_points(t, [](char32_t c) {
          return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        }));
      }
      return Value::boolean(which == "isupper" ? python_is_upper(t) : python_is_lower(t));
    });
  }
  return Value::undefined("'str object' has no attribute '" + name + "'");
}

Value dict_method(Evaluator&, const Value& self, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    const std::string which = name;
    return Value::callable("dict." + name, [self, which](Evaluator& e, CallArgs&) {
      ValueList out;
      out.reserve(self.dict_data().items.size());
      for (const auto& [k, v] : self.dict_data().items) {
        if (which == "items") {
          out.push_back(Value::list({k, v}, true));
        } else {
          out.push_back(which == "keys" ? k : v);
        }
      }
      return make_list(e, std::move(out));
    });
  }
  if (name == "get") {
    return Value::callable("dict.get", [self](Evaluator& e, CallArgs& args) {
      if (args.args.empty()) e.fail_here("get expected at least 1 argument, got 0");
      const Value* v = self.dict_data().find(args.args[0]);
      if (v != nullptr) return *v;
      return args.args.size() > 1 ? args.args[1] : Value::none();
    });
  }
  return Value();  // not a method: the caller looks the name up as a key
}

}  // namespace kiln::llm::jinja
