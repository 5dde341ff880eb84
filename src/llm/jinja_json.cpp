// JSON text -> Jinja values through nlohmann's SAX parser (jinja_json.h): one pass, no
// intermediate tree, the depth checked as containers open.
#include "llm/jinja_json.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/error.h"
#include "llm/tokenizer_utf8.h"

namespace kiln::llm::jinja {
namespace {

class ValueBuilder : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return place(Value::none()); }
  bool boolean(bool v) override { return place(Value::boolean(v)); }
  bool number_integer(number_integer_t v) override { return place(Value::integer(v)); }
  bool number_unsigned(number_unsigned_t v) override {
    // Past int64: Python would keep the int; kiln keeps its value as a float.
    if (v > static_cast<number_unsigned_t>(INT64_MAX)) return place(Value::number(static_cast<double>(v)));
    return place(Value::integer(static_cast<int64_t>(v)));
  }
  bool number_float(number_float_t v, const string_t&) override { return place(Value::number(v)); }
  bool string(string_t& s) override { return place(Value::string(std::move(s))); }
  bool binary(binary_t&) override { return true; }
  bool key(string_t& k) override {
    stack_.back().key = std::move(k);
    return true;
  }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    problem = "not valid JSON: " + tok::utf8_lossy(e.what());
    return false;
  }

  Value result;
  std::string problem;

 private:
  struct Open {
    bool object;
    ValueList items;
    std::shared_ptr<DictData> dict;
    std::string key;
  };

  bool open(bool object) {
    if (static_cast<int>(stack_.size()) >= kMaxValueDepth) {
      problem = "JSON nests deeper than " + std::to_string(kMaxValueDepth) + " levels";
      return false;
    }
    stack_.push_back({object, {}, object ? std::make_shared<DictData>() : nullptr, {}});
    return true;
  }

  bool close() {
    Open top = std::move(stack_.back());
    stack_.pop_back();
    return place(top.object ? Value::dict(std::move(top.dict)) : Value::list(std::move(top.items)));
  }

  bool place(Value v) {
    if (stack_.empty()) {
      result = std::move(v);
      return true;
    }
    Open& parent = stack_.back();
    if (parent.object) {
      parent.dict->set(Value::string(std::move(parent.key)), std::move(v));
    } else {
      parent.items.push_back(std::move(v));
    }
    return true;
  }

  std::vector<Open> stack_;
};

}  // namespace

Value value_from_json(std::string_view text, std::string_view op, std::string_view what) {
  ValueBuilder builder;
  if (!nlohmann::json::sax_parse(text.begin(), text.end(), &builder)) {
    fail(ErrorKind::Value, op, "{}{}", what, builder.problem.empty() ? "not valid JSON" : builder.problem);
  }
  return builder.result;
}

}  // namespace kiln::llm::jinja
