// Jinja lexer (jinja_lexer.h), following jinja2's lexer with trim_blocks and
// lstrip_blocks on: "{%-" / "-%}" strip all whitespace on that side, "{%+" / "+%}" turn
// lstrip_blocks / trim_blocks off for that tag, a block or comment tag alone on its line
// loses the indentation before it and the newline after it.
#include "llm/jinja_lexer.h"

#include <algorithm>
#include <cstring>

#include "kiln/error.h"
#include "llm/jinja_text.h"

namespace kiln::llm::jinja {

SourcePosition position_of(std::string_view source, size_t offset) {
  offset = std::min(offset, source.size());
  int64_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (source[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return {line, static_cast<int64_t>(offset - line_start) + 1};
}

std::string normalize_template_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

namespace {

bool is_tag_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  Lexer(std::string_view src, std::string_view op, std::string_view name) : src_(src), op_(op), name_(name) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      std::string text(src_.substr(pos_, (tag == std::string_view::npos ? src_.size() : tag) - pos_));
      if (tag == std::string_view::npos) {
        emit_text(std::move(text), pos_);
        break;
      }
      const char kind = src_[tag + 1];
      const char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      const bool strip_left = sign == '-';
      const bool keep_indent = sign == '+' && kind != '{';
      if (strip_left) {
        text.resize(text.size() - trailing_space_bytes(text));
      } else if (kind != '{' && !keep_indent) {
        lstrip_block(text, pos_);
      }
      emit_text(std::move(text), pos_);
      const size_t inner = tag + 2 + ((strip_left || keep_indent) ? 1 : 0);
      if (kind == '#') {
        comment(tag, inner);
      } else if (kind == '%' && raw_block(tag, inner)) {
        // raw_block emitted the text and moved pos_
      } else {
        tag_contents(tag, inner, kind == '{');
      }
    }
    tokens_.push_back({Token::Type::End, "", src_.size()});
    return std::move(tokens_);
  }

 private:
  template <typename... Args>
  [[noreturn]] void error(size_t offset, fmt::format_string<Args...> f, Args&&... args) {
    const SourcePosition p = position_of(src_, offset);
    fail(ErrorKind::Value, op_, "{} line {}, column {}: {}", name_, p.line, p.column,
         fmt::format(f, std::forward<Args>(args)...));
  }

  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string_view::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string_view::npos;
  }

  void emit_text(std::string text, size_t offset) {
    if (!text.empty()) tokens_.push_back({Token::Type::Text, std::move(text), offset});
  }

  // lstrip_blocks: spaces and tabs between the start of the line and a block or comment
  // tag are dropped when nothing else stands before the tag on its line.
  void lstrip_block(std::string& text, size_t text_start) const {
    const size_t newline = text.rfind('\n');
    const size_t line_start = newline == std::string::npos ? 0 : newline + 1;
    const bool line_starting = text_start == 0 || src_[text_start - 1] == '\n';
    if (line_start == 0 && !line_starting) return;
    if (line_start == text.size()) return;
    const std::string_view tail = std::string_view(text).substr(line_start);
    if (leading_space_bytes(tail) == tail.size()) text.resize(line_start);
  }

  // After a closing delimiter at `end` (just past it): "-" before it eats all following
  // whitespace; a block or comment end eats one newline (trim_blocks) unless "+" precedes it.
  size_t after_close(size_t end, char sign, bool trims_newline) const {
    if (sign == '-') return end + leading_space_bytes(src_.substr(end));
    if (trims_newline && sign != '+' && end < src_.size() && src_[end] == '\n') return end + 1;
    return end;
  }

  void comment(size_t tag, size_t inner) {
    const size_t close = src_.find("#}", inner);
    if (close == std::string_view::npos) error(tag, "unclosed comment: no '#}}' after '{{#'");
    const char sign = close > inner ? src_[close - 1] : '\0';
    pos_ = after_close(close + 2, sign, true);
  }

  // {% raw %}...{% endraw %}: the body is text, tags and all.
  bool raw_block(size_t tag, size_t inner) {
    size_t p = inner;
    while (p < src_.size() && is_tag_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && is_name_char(src_[p + 3]))) return false;
    p += 3;
    while (p < src_.size() && is_tag_space(src_[p])) ++p;
    char open_sign = '\0';
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) open_sign = src_[p++];
    if (src_.compare(p, 2, "%}") != 0) error(tag, "expected '%}}' after 'raw'");
    const size_t body_start = after_close(p + 2, open_sign == '-' ? '-' : '+', false);
    // Find {%[-+]? endraw [-+]?%}
    for (size_t q = src_.find("{%", body_start); q != std::string_view::npos; q = src_.find("{%", q + 2)) {
      size_t r = q + 2;
      char end_open_sign = '\0';
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) end_open_sign = src_[r++];
      while (r < src_.size() && is_tag_space(src_[r])) ++r;
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (r < src_.size() && is_tag_space(src_[r])) ++r;
      char close_sign = '\0';
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) close_sign = src_[r++];
      if (src_.compare(r, 2, "%}") != 0) continue;
      std::string body(src_.substr(body_start, q - body_start));
      if (end_open_sign == '-') body.resize(body.size() - trailing_space_bytes(body));
      emit_text(std::move(body), body_start);
      pos_ = after_close(r + 2, close_sign, true);
      return true;
    }
    error(tag, "unclosed raw block: no '{{% endraw %}}'");
  }

  void tag_contents(size_t tag, size_t p, bool variable) {
    tokens_.push_back({variable ? Token::Type::VarBegin : Token::Type::BlockBegin, "", tag});
    const char close_char = variable ? '}' : '%';
    int depth = 0;  // open brackets: a "}}" inside {{ {'a': {'b': 1}} }} closes a dict
    while (true) {
      while (p < src_.size() && is_tag_space(src_[p])) ++p;
      if (p >= src_.size()) {
        error(tag, "unclosed tag: no '{}' after '{}'", variable ? "}}" : "%}", variable ? "{{" : "{%");
      }
      if (depth == 0) {
        char sign = '\0';
        size_t q = p;
        if (src_[q] == '-' || (src_[q] == '+' && !variable)) sign = src_[q++];
        if (q + 1 < src_.size() && src_[q] == close_char && src_[q + 1] == '}') {
          tokens_.push_back({variable ? Token::Type::VarEnd : Token::Type::BlockEnd, "", p});
          pos_ = after_close(q + 2, sign, !variable);
          return;
        }
      }
      p = lex_token(p, depth);
    }
  }

  size_t lex_token(size_t p, int& depth) {
    const char c = src_[p];
    if (is_name_start(c)) {
      size_t e = p;
      while (e < src_.size() && is_name_char(src_[e])) ++e;
      tokens_.push_back({Token::Type::Name, std::string(src_.substr(p, e - p)), p});
      return e;
    }
    if (is_digit(c)) return lex_number(p);
    if (c == '\'' || c == '"') return lex_string(p);
    static constexpr const char* kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwoChar) {
      if (src_.compare(p, 2, op) == 0) {
        tokens_.push_back({Token::Type::Operator, op, p});
        return p + 2;
      }
    }
    if (std::strchr("+-*/%~<>=()[]{},.:|;", c) != nullptr && c != '\0') {
      if (c == '(' || c == '[' || c == '{') ++depth;
      if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
      tokens_.push_back({Token::Type::Operator, std::string(1, c), p});
      return p + 1;
    }
    size_t len = 1;
    const char32_t cp = decode_code_point(src_, p, len);
    error(p, "unexpected character U+{:04X} '{}' in a tag", static_cast<uint32_t>(cp), src_.substr(p, len));
  }

  size_t digits(size_t p) const {
    // \d+(_\d+)*
    while (p < src_.size() && (is_digit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1]))))
      ++p;
    return p;
  }

  size_t lex_number(size_t p) {
    size_t e = digits(p);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      e = digits(e + 1);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && is_digit(src_[x])) {
        e = digits(x);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = p; i < e; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    tokens_.push_back({is_float ? Token::Type::Float : Token::Type::Integer, std::move(text), p});
    return e;
  }

  size_t lex_string(size_t p) {
    const char quote = src_[p];
    std::string value;
    size_t i = p + 1;
    while (true) {
      if (i >= src_.size()) error(p, "unterminated string literal");
      const char c = src_[i];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) error(p, "unterminated string literal");
      i = unescape(i, value);
    }
    tokens_.push_back({Token::Type::String, std::move(value), p});
    return i + 1;
  }

  // Python's unicode-escape decoding of one backslash sequence starting at `i`.
  size_t unescape(size_t i, std::string& out) {
    const char e = src_[i + 1];
    const auto hex_escape = [&](size_t count) -> size_t {
      char32_t cp = 0;
      for (size_t k = 0; k < count; ++k) {
        const int h = i + 2 + k < src_.size() ? hex_value(src_[i + 2 + k]) : -1;
        if (h < 0) error(i, "truncated \\{}{} escape in a string literal", e, std::string(count, 'X'));
        cp = cp * 16 + static_cast<char32_t>(h);
      }
      if (cp > 0x10FFFF) error(i, "escape \\{} names no Unicode character", e);
      append_utf8(out, cp);
      return i + 2 + count;
    };
    switch (e) {
      case '\n': return i + 2;  // line continuation
      case '\\': out += '\\'; return i + 2;
      case '\'': out += '\''; return i + 2;
      case '"': out += '"'; return i + 2;
      case 'a': out += '\a'; return i + 2;
      case 'b': out += '\b'; return i + 2;
      case 'f': out += '\f'; return i + 2;
      case 'n': out += '\n'; return i + 2;
      case 'r': out += '\r'; return i + 2;
      case 't': out += '\t'; return i + 2;
      case 'v': out += '\v'; return i + 2;
      case 'x': return hex_escape(2);
      case 'u': return hex_escape(4);
      case 'U': return hex_escape(8);
      default: break;
    }
    if (e >= '0' && e <= '7') {
      char32_t cp = 0;
      size_t k = i + 1;
      for (int n = 0; n < 3 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7'; ++n, ++k) {
        cp = cp * 8 + static_cast<char32_t>(src_[k] - '0');
      }
      append_utf8(out, cp);
      return k;
    }
    out += '\\';  // unknown escapes stay as written, as in Python
    return i + 1;
  }

  std::string_view src_;
  std::string_view op_;
  std::string_view name_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, std::string_view op, std::string_view name) {
  return Lexer(source, op, name).run();
}

}  // namespace kiln::llm::jinja
