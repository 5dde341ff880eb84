// Splits a Jinja template into tokens: text between tags (whitespace control already
// applied, with transformers' trim_blocks=True and lstrip_blocks=True), tag delimiters,
// and the tokens of the expressions and statements inside tags. {# comments #} and the
// contents of {% raw %} blocks are resolved here, so the parser sees neither.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::llm::jinja {

struct Token {
  enum class Type : uint8_t {
    Text,        // literal template text
    VarBegin,    // {{
    VarEnd,      // }}
    BlockBegin,  // {%
    BlockEnd,    // %}
    Name,        // identifiers and keywords
    String,      // value: the unescaped literal
    Integer,
    Float,
    Operator,  // value: "+", "//", "==", "(", ...
    End,       // end of the template
  };
  Type type;
  std::string value;
  size_t offset;  // byte offset in the (newline-normalised) source, for line:column
};

// Where `offset` lies in `source`: 1-based line and column (columns count bytes).
struct SourcePosition {
  int64_t line;
  int64_t column;
};
SourcePosition position_of(std::string_view source, size_t offset);

// The source as the lexer reads it: \r\n and \r become \n, and one trailing newline is
// dropped (jinja2's keep_trailing_newline=False).
std::string normalize_template_source(std::string_view source);

// Tokens of a normalised source. Malformed input (an unclosed tag, string or comment, a
// character no token starts with) is a kiln::Error under `op` naming `name`, the line
// and the column.
std::vector<Token> tokenize(std::string_view source, std::string_view op, std::string_view name);

}  // namespace kiln::llm::jinja
