// Recursive-descent Jinja parser (jinja_parser.h), with jinja2's operator precedence:
// conditional < or < and < not < comparisons and in < + - < ~ < * / // % < ** < unary -
// < postfix (. [] ()) and filters / tests.
#include "llm/jinja_parser.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "kiln/error.h"
#include "llm/jinja_lexer.h"

namespace kiln::llm::jinja {
namespace {

// Expression trees deeper than this are refused: evaluating and freeing them recurses.
constexpr int kMaxExprDepth = 128;

class Parser {
 public:
  Parser(std::vector<Token> tokens, const Template& tmpl, std::string_view op, const ParseLimits& limits)
      : tokens_(std::move(tokens)), tmpl_(tmpl), op_(op), limits_(limits) {}

  Body parse_top() {
    Body body = parse_body({});
    if (cur().type != Token::Type::End) error(cur().offset, "unexpected '{}'", cur().value);
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek(size_t ahead = 1) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  void advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool is_op(std::string_view op) const { return cur().type == Token::Type::Operator && cur().value == op; }
  bool is_name(std::string_view name) const { return cur().type == Token::Type::Name && cur().value == name; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }

  template <typename... Args>
  [[noreturn]] void error(size_t offset, fmt::format_string<Args...> f, Args&&... args) const {
    const SourcePosition p = position_of(tmpl_.source, offset);
    fail(ErrorKind::Value, op_, "{} line {}, column {}: {}", tmpl_.name, p.line, p.column,
         fmt::format(f, std::forward<Args>(args)...));
  }

  std::string describe(const Token& t) const {
    switch (t.type) {
      case Token::Type::End: return "end of template";
      case Token::Type::VarEnd: return "'}}'";
      case Token::Type::BlockEnd: return "'%}'";
      case Token::Type::VarBegin: return "'{{'";
      case Token::Type::BlockBegin: return "'{%'";
      case Token::Type::Text: return "text";
      case Token::Type::String: return "a string";
      default: return "'" + t.value + "'";
    }
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) error(cur().offset, "expected '{}', got {}", op, describe(cur()));
  }
  std::string expect_name(std::string_view what) {
    if (cur().type != Token::Type::Name) error(cur().offset, "expected {}, got {}", what, describe(cur()));
    std::string name = cur().value;
    advance();
    return name;
  }
  void expect_block_end() {
    if (cur().type != Token::Type::BlockEnd) error(cur().offset, "expected '%}}', got {}", describe(cur()));
    advance();
  }

  // Bounds recursion: every nested block, bracket, unary operator and conditional.
  struct Nest {
    Parser& p;
    Nest(Parser& parser, size_t offset) : p(parser) {
      if (++p.nesting_ > p.limits_.max_nesting) {
        p.error(offset, "nesting deeper than the limit of {} levels", p.limits_.max_nesting);
      }
    }
    ~Nest() { --p.nesting_; }
  };

  ExprPtr node(Expr::Type type, size_t offset) {
    auto e = std::make_unique<Expr>();
    e->type = type;
    e->offset = offset;
    return e;
  }
  // Checks the depth of a node once its children are attached.
  ExprPtr done(ExprPtr e) {
    int depth = 0;
    for (const auto& a : e->args) {
      if (a) depth = std::max(depth, depth_of(*a));
    }
    for (const auto& [k, v] : e->kwargs) depth = std::max(depth, depth_of(*v));
    e->depth = depth + 1;
    if (depth + 1 > kMaxExprDepth) error(e->offset, "expression nests deeper than the limit of {} levels", kMaxExprDepth);
    return e;
  }
  static int depth_of(const Expr& e) { return e.depth; }

  // ---- statements ----
  // Parses until a block tag whose name is in `ends` (left current) or the end.
  Body parse_body(std::initializer_list<std::string_view> ends) {
    Body body;
    while (true) {
      const Token& t = cur();
      switch (t.type) {
        case Token::Type::End: return body;
        case Token::Type::Text: {
          auto s = std::make_unique<Stmt>();
          s->type = Stmt::Type::Text;
          s->offset = t.offset;
          s->text = t.value;
          body.push_back(std::move(s));
          advance();
          break;
        }
        case Token::Type::VarBegin: {
          const size_t offset = t.offset;
          advance();
          auto s = std::make_unique<Stmt>();
          s->type = Stmt::Type::Output;
          s->offset = offset;
          s->expr = parse_tuple(true);
          if (cur().type != Token::Type::VarEnd) error(cur().offset, "expected '}}}}', got {}", describe(cur()));
          advance();
          body.push_back(std::move(s));
          break;
        }
        case Token::Type::BlockBegin: {
          const Token& name = peek();
          if (name.type == Token::Type::Name &&
              std::find(ends.begin(), ends.end(), std::string_view(name.value)) != ends.end()) {
            advance();  // leave the end tag's name current
            return body;
          }
          advance();
          body.push_back(parse_statement());
          break;
        }
        default: error(t.offset, "unexpected {}", describe(t));
      }
    }
  }

  // After a body: the end tag's name is current.
  void end_block(std::string_view end, std::string_view opened, size_t open_offset) {
    if (cur().type == Token::Type::End) error(open_offset, "'{}' is never closed with '{}'", opened, end);
    advance();
    expect_block_end();
  }

  Body parse_block_body(std::initializer_list<std::string_view> ends, std::string_view opened, size_t offset) {
    Nest nest(*this, offset);
    Body body = parse_body(ends);
    // The last end names the closing tag ("else" may come first).
    if (cur().type == Token::Type::End) error(offset, "'{}' is never closed with '{}'", opened, *(ends.end() - 1));
    return body;
  }

  StmtPtr parse_statement() {
    const Token& t = cur();
    if (t.type != Token::Type::Name) error(t.offset, "expected a tag name after '{{%', got {}", describe(t));
    const std::string tag = t.value;
    const size_t offset = t.offset;
    advance();
    auto s = std::make_unique<Stmt>();
    s->offset = offset;
    if (tag == "if") return parse_if(std::move(s));
    if (tag == "for") return parse_for(std::move(s));
    if (tag == "set") return parse_set(std::move(s));
    if (tag == "macro") return parse_macro(std::move(s));
    if (tag == "with") return parse_with(std::move(s));
    if (tag == "filter") return parse_filter_block(std::move(s));
    if (tag == "generation") {
      s->type = Stmt::Type::Scope;
      expect_block_end();
      s->bodies.push_back(parse_block_body({"endgeneration"}, "generation", offset));
      end_block("endgeneration", "generation", offset);
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) error(offset, "'{}' outside a for loop", tag);
      s->type = tag == "break" ? Stmt::Type::Break : Stmt::Type::Continue;
      expect_block_end();
      return s;
    }
    for (const char* unsupported : {"include", "import", "from", "extends", "block", "call", "autoescape", "do"}) {
      if (tag == unsupported) error(offset, "the '{}' tag is not supported in chat templates", tag);
    }
    error(offset, "unknown tag '{}'", tag);
  }

  StmtPtr parse_if(StmtPtr s) {
    s->type = Stmt::Type::If;
    const size_t offset = s->offset;
    s->conditions.push_back(parse_expression(false));
    expect_block_end();
    while (true) {
      s->bodies.push_back(parse_block_body({"elif", "else", "endif"}, "if", offset));
      if (skip_name("elif")) {
        s->conditions.push_back(parse_expression(false));
        expect_block_end();
        continue;
      }
      if (skip_name("else")) {
        expect_block_end();
        s->bodies.push_back(parse_block_body({"endif"}, "if", offset));
      }
      end_block("endif", "if", offset);
      return s;
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    const bool paren = skip_op("(");
    do {
      if (paren && is_op(")")) break;
      names.push_back(expect_name("a variable name"));
    } while (skip_op(","));
    if (paren) expect_op(")");
    return names;
  }

  StmtPtr parse_for(StmtPtr s) {
    s->type = Stmt::Type::For;
    const size_t offset = s->offset;
    s->targets = parse_targets();
    if (!skip_name("in")) error(cur().offset, "expected 'in' in a for loop, got {}", describe(cur()));
    s->expr = parse_tuple(false);
    if (skip_name("if")) s->filter = parse_expression(true);
    if (is_name("recursive")) error(cur().offset, "recursive for loops are not supported in chat templates");
    expect_block_end();
    ++loop_depth_;
    s->bodies.push_back(parse_block_body({"else", "endfor"}, "for", offset));
    --loop_depth_;
    if (skip_name("else")) {
      expect_block_end();
      s->bodies.push_back(parse_block_body({"endfor"}, "for", offset));
    }
    end_block("endfor", "for", offset);
    return s;
  }

  StmtPtr parse_set(StmtPtr s) {
    s->type = Stmt::Type::Set;
    const size_t offset = s->offset;
    if (cur().type == Token::Type::Name && peek().type == Token::Type::Operator && peek().value == ".") {
      s->targets.push_back(cur().value);
      advance();
      advance();
      s->attr = expect_name("an attribute name");
    } else {
      s->targets = parse_targets();
    }
    if (skip_op("=")) {
      s->expr = parse_tuple(true);
      expect_block_end();
      return s;
    }
    if (s->targets.size() != 1 || !s->attr.empty()) error(offset, "a block set assigns one plain variable");
    if (is_op("|")) error(cur().offset, "filters on a block set are not supported");
    expect_block_end();
    s->bodies.push_back(parse_block_body({"endset"}, "set", offset));
    end_block("endset", "set", offset);
    return s;
  }

  StmtPtr parse_macro(StmtPtr s) {
    s->type = Stmt::Type::Macro;
    const size_t offset = s->offset;
    s->text = expect_name("a macro name");
    expect_op("(");
    while (!is_op(")")) {
      s->targets.push_back(expect_name("a parameter name"));
      s->values.push_back(skip_op("=") ? parse_expression(true) : nullptr);
      if (!skip_op(",")) break;
    }
    expect_op(")");
    expect_block_end();
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;  // break/continue do not reach through a macro
    s->bodies.push_back(parse_block_body({"endmacro"}, "macro", offset));
    loop_depth_ = saved_loops;
    end_block("endmacro", "macro", offset);
    return s;
  }

  StmtPtr parse_with(StmtPtr s) {
    s->type = Stmt::Type::With;
    const size_t offset = s->offset;
    while (cur().type != Token::Type::BlockEnd) {
      if (!s->targets.empty()) expect_op(",");
      s->targets.push_back(expect_name("a variable name"));
      expect_op("=");
      s->values.push_back(parse_expression(true));
    }
    expect_block_end();
    s->bodies.push_back(parse_block_body({"endwith"}, "with", offset));
    end_block("endwith", "with", offset);
    return s;
  }

  StmtPtr parse_filter_block(StmtPtr s) {
    s->type = Stmt::Type::FilterBlock;
    const size_t offset = s->offset;
    s->expr = parse_filter(nullptr);
    while (skip_op("|")) s->expr = parse_filter(std::move(s->expr));
    expect_block_end();
    s->bodies.push_back(parse_block_body({"endfilter"}, "filter", offset));
    end_block("endfilter", "filter", offset);
    return s;
  }

  // ---- expressions ----
  // A comma-separated list becomes a tuple ({{ a, b }}, {% set x = 1, 2 %}).
  ExprPtr parse_tuple(bool with_condexpr) {
    const size_t offset = cur().offset;
    ExprPtr first = parse_expression(with_condexpr);
    if (!is_op(",")) return first;
    auto t = node(Expr::Type::TupleLit, offset);
    t->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (at_expression_end()) break;
      t->args.push_back(parse_expression(with_condexpr));
    }
    return done(std::move(t));
  }

  bool at_expression_end() const {
    const Token& t = cur();
    return t.type == Token::Type::VarEnd || t.type == Token::Type::BlockEnd || t.type == Token::Type::End ||
           (t.type == Token::Type::Operator && (t.value == ")" || t.value == "]" || t.value == "}"));
  }

  ExprPtr parse_expression(bool with_condexpr) {
    ExprPtr e = parse_or();
    if (!with_condexpr) return e;
    while (is_name("if")) {
      const size_t offset = cur().offset;
      Nest nest(*this, offset);
      advance();
      auto c = node(Expr::Type::Conditional, offset);
      ExprPtr condition = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_expression(true) : nullptr;
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(condition));
      c->args.push_back(std::move(otherwise));
      e = done(std::move(c));
    }
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, size_t offset) {
    auto b = node(Expr::Type::Binary, offset);
    b->name = std::move(op);
    b->args.push_back(std::move(left));
    b->args.push_back(std::move(right));
    return done(std::move(b));
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const size_t offset = cur().offset;
      advance();
      left = binary("or", std::move(left), parse_and(), offset);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const size_t offset = cur().offset;
      advance();
      left = binary("and", std::move(left), parse_not(), offset);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      const size_t offset = cur().offset;
      Nest nest(*this, offset);
      advance();
      auto u = node(Expr::Type::Unary, offset);
      u->name = "not";
      u->args.push_back(parse_not());
      return done(std::move(u));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const size_t offset = cur().offset;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == Token::Type::Operator &&
          (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == "<=" ||
           cur().value == ">" || cur().value == ">=")) {
        op = cur().value;
        advance();
      } else if (is_name("in")) {
        op = "in";
        advance();
      } else if (is_name("not") && peek().type == Token::Type::Name && peek().value == "in") {
        op = "not in";
        advance();
        advance();
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(Expr::Type::Compare, offset);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(std::move(op));
      cmp->args.push_back(parse_math1());
    }
    return cmp ? done(std::move(cmp)) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const size_t offset = cur().offset;
      std::string op = cur().value;
      advance();
      left = binary(std::move(op), std::move(left), parse_concat(), offset);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const size_t offset = cur().offset;
      advance();
      left = binary("~", std::move(left), parse_math2(), offset);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const size_t offset = cur().offset;
      std::string op = cur().value;
      advance();
      left = binary(std::move(op), std::move(left), parse_pow(), offset);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const size_t offset = cur().offset;
      advance();
      left = binary("**", std::move(left), parse_unary(true), offset);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const size_t offset = cur().offset;
      Nest nest(*this, offset);
      auto u = node(Expr::Type::Unary, offset);
      u->name = cur().value;
      advance();
      u->args.push_back(parse_unary(false));
      e = done(std::move(u));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr literal(Value v, size_t offset) {
    auto e = node(Expr::Type::Literal, offset);
    e->value = std::move(v);
    return done(std::move(e));
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    const size_t offset = t.offset;
    switch (t.type) {
      case Token::Type::Name: {
        const std::string name = t.value;
        advance();
        if (name == "true" || name == "True") return literal(Value::boolean(true), offset);
        if (name == "false" || name == "False") return literal(Value::boolean(false), offset);
        if (name == "none" || name == "None") return literal(Value::none(), offset);
        auto e = node(Expr::Type::Name, offset);
        e->name = name;
        return done(std::move(e));
      }
      case Token::Type::String: {
        std::string s;
        while (cur().type == Token::Type::String) {  // adjacent literals concatenate
          s += cur().value;
          advance();
        }
        return literal(Value::string(std::move(s)), offset);
      }
      case Token::Type::Integer: {
        int64_t v = 0;
        const auto r = std::from_chars(t.value.data(), t.value.data() + t.value.size(), v);
        if (r.ec != std::errc() || r.ptr != t.value.data() + t.value.size()) {
          error(offset, "integer literal {} does not fit in 64 bits", t.value);
        }
        advance();
        return literal(Value::integer(v), offset);
      }
      case Token::Type::Float: {
        const double v = std::strtod(t.value.c_str(), nullptr);
        advance();
        return literal(Value::number(v), offset);
      }
      case Token::Type::Operator: {
        if (t.value == "(") return parse_paren();
        if (t.value == "[") return parse_list();
        if (t.value == "{") return parse_dict();
        break;
      }
      default: break;
    }
    error(offset, "expected an expression, got {}", describe(t));
  }

  ExprPtr parse_paren() {
    const size_t offset = cur().offset;
    Nest nest(*this, offset);
    advance();
    if (skip_op(")")) return done(node(Expr::Type::TupleLit, offset));
    ExprPtr first = parse_expression(true);
    if (skip_op(")")) return first;
    auto t = node(Expr::Type::TupleLit, offset);
    t->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (is_op(")")) break;
      t->args.push_back(parse_expression(true));
    }
    expect_op(")");
    return done(std::move(t));
  }

  ExprPtr parse_list() {
    const size_t offset = cur().offset;
    Nest nest(*this, offset);
    advance();
    auto l = node(Expr::Type::ListLit, offset);
    while (!is_op("]")) {
      l->args.push_back(parse_expression(true));
      if (!skip_op(",")) break;
    }
    expect_op("]");
    return done(std::move(l));
  }

  ExprPtr parse_dict() {
    const size_t offset = cur().offset;
    Nest nest(*this, offset);
    advance();
    auto d = node(Expr::Type::DictLit, offset);
    while (!is_op("}")) {
      d->args.push_back(parse_expression(true));
      expect_op(":");
      d->args.push_back(parse_expression(true));
      if (!skip_op(",")) break;
    }
    expect_op("}");
    return done(std::move(d));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        const size_t offset = cur().offset;
        advance();
        if (cur().type == Token::Type::Integer) {  // x.0 is x[0]
          auto i = node(Expr::Type::Item, offset);
          i->args.push_back(std::move(e));
          i->args.push_back(parse_primary());
          e = done(std::move(i));
          continue;
        }
        auto a = node(Expr::Type::Attr, offset);
        a->name = expect_name("an attribute name after '.'");
        a->args.push_back(std::move(e));
        e = done(std::move(a));
      } else if (is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr target) {
    const size_t offset = cur().offset;
    Nest nest(*this, offset);
    advance();
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_tuple(true);
      if (skip_op("]")) {
        auto i = node(Expr::Type::Item, offset);
        i->args.push_back(std::move(target));
        i->args.push_back(std::move(start));
        return done(std::move(i));
      }
    }
    expect_op(":");
    auto s = node(Expr::Type::Slice, offset);
    s->args.push_back(std::move(target));
    s->args.push_back(std::move(start));
    s->args.push_back(is_op(":") || is_op("]") ? nullptr : parse_expression(true));
    ExprPtr step;
    if (skip_op(":") && !is_op("]")) step = parse_expression(true);
    s->args.push_back(std::move(step));
    expect_op("]");
    return done(std::move(s));
  }

  void parse_call_args(Expr& call) {
    Nest nest(*this, cur().offset);
    expect_op("(");
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) error(cur().offset, "*args and **kwargs in calls are not supported");
      if (cur().type == Token::Type::Name && peek().type == Token::Type::Operator && peek().value == "=") {
        std::string key = cur().value;
        advance();
        advance();
        call.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!call.kwargs.empty()) error(cur().offset, "a positional argument follows a keyword argument");
        call.args.push_back(parse_expression(true));
      }
      if (!skip_op(",")) break;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = node(Expr::Type::Call, callee->offset);  // errors point at what is called
    c->args.push_back(std::move(callee));
    parse_call_args(*c);
    return done(std::move(c));
  }

  ExprPtr parse_filter(ExprPtr target) {
    auto f = node(Expr::Type::Filter, cur().offset);
    f->name = expect_name("a filter name");
    while (is_op(".") && peek().type == Token::Type::Name) {
      advance();
      f->name += "." + cur().value;
      advance();
    }
    f->args.push_back(std::move(target));
    if (is_op("(")) parse_call_args(*f);
    return done(std::move(f));
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (skip_op("|")) {
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_test(ExprPtr target) {
    auto t = node(Expr::Type::Test, cur().offset);
    advance();  // "is"
    t->negated = skip_name("not");
    t->name = expect_name("a test name after 'is'");
    t->args.push_back(std::move(target));
    if (is_op("(")) {
      parse_call_args(*t);
    } else {
      const Token& n = cur();
      const bool arg_follows =
          n.type == Token::Type::String || n.type == Token::Type::Integer || n.type == Token::Type::Float ||
          (n.type == Token::Type::Name && n.value != "else" && n.value != "or" && n.value != "and" &&
           n.value != "if" && n.value != "is" && n.value != "in" && n.value != "not") ||
          (n.type == Token::Type::Operator && (n.value == "[" || n.value == "{"));
      if (arg_follows) t->args.push_back(parse_postfix(parse_primary()));
    }
    return done(std::move(t));
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  const Template& tmpl_;
  std::string_view op_;
  const ParseLimits& limits_;
  int nesting_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

std::shared_ptr<const Template> parse_template(std::string_view source, std::string_view op, std::string_view name,
                                               const ParseLimits& limits) {
  if (source.size() > limits.max_source_bytes) {
    fail(ErrorKind::Value, op, "{} is {} bytes, past the limit of {} bytes for a template", name, source.size(),
         limits.max_source_bytes);
  }
  auto tmpl = std::make_shared<Template>();
  tmpl->name = std::string(name);
  tmpl->source = normalize_template_source(source);
  Parser parser(tokenize(tmpl->source, op, name), *tmpl, op, limits);
  tmpl->body = parser.parse_top();
  return tmpl;
}

}  // namespace kiln::llm::jinja
