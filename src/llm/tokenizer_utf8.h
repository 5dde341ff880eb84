// UTF-8 handling the tokenizer needs: validation of input text, lossy repair of decoded
// bytes (U+FFFD per maximal invalid subpart, as Rust's String::from_utf8_lossy does, so
// decoded text matches Hugging Face tokenizers), finding where a stream of bytes stops
// being complete characters, NFC through utf8proc, and the Unicode character classes the
// added-token matcher uses.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln::llm::tok {

// Offset of the first byte that does not start a valid UTF-8 character, or npos.
size_t find_invalid_utf8(std::string_view bytes);

// bytes with every maximal invalid subpart replaced by U+FFFD.
std::string utf8_lossy(std::string_view bytes);

// Length of the longest prefix of `bytes` after which no character is left unfinished:
// a trailing sequence that is a valid start of a character but is cut short is excluded.
size_t complete_utf8_prefix(std::string_view bytes);

// Unicode NFC of valid UTF-8 text (canonical composition, stable across Unicode versions).
std::string nfc(std::string_view text);

void append_utf8(std::string& out, char32_t cp);
// Decodes the character at `pos` of valid UTF-8 and advances `pos` past it.
char32_t next_codepoint(std::string_view text, size_t& pos);
// The character ending just before `end` of valid UTF-8; sets `start` to where it begins.
char32_t previous_codepoint(std::string_view text, size_t end, size_t& start);

// Unicode White_Space: what Rust's char::is_whitespace and the regex crate's \s test, and
// Oniguruma's Unicode \s (Space_Separator, Line/Paragraph_Separator, \t-\r, U+0085).
// Stable since Unicode 6.3 moved U+180E out; PCRE2's \s still counts U+180E.
struct CodepointRange {
  char32_t first, last;
};
inline constexpr CodepointRange kWhiteSpaceRanges[] = {
    {0x09, 0x0D}, {0x20, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
};
// Used for lstrip/rstrip and translated regex \s.
bool is_unicode_whitespace(char32_t cp);
// Letters, marks, decimal and letter numbers, connector punctuation: regex \w, which
// Hugging Face uses to decide whether a single_word added token touches a word.
bool is_word_character(char32_t cp);

}  // namespace kiln::llm::tok
