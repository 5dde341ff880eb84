// Python str semantics over UTF-8 bytes, for the chat-template evaluator: Python indexes,
// slices and measures strings in code points and strips Unicode whitespace, and templates
// rely on both (`content[:n]` with n from `|length`, `.strip()` on model text).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "llm/tokenizer_utf8.h"

namespace kiln::llm::jinja {

// Code points in `s` (bytes that are not valid UTF-8 count one each).
int64_t code_point_count(std::string_view s);
// Byte offset of each code point start, plus s.size() at the end (size count + 1).
std::vector<size_t> code_point_offsets(std::string_view s);
// The code point starting at byte `pos` and its length in bytes (1 for a stray byte).
char32_t decode_code_point(std::string_view s, size_t pos, size_t& length);
using llm::tok::append_utf8;  // the tokenizer's encoder (tokenizer_utf8.h)

// Python's str.isspace() for one code point.
bool is_python_space(char32_t cp);
// Bytes of whitespace at the start / end of s (Python's str.strip() set).
size_t leading_space_bytes(std::string_view s);
size_t trailing_space_bytes(std::string_view s);

// str.strip/lstrip/rstrip: with `chars` empty-and-absent the Python whitespace set,
// otherwise any code point of `chars`.
enum class StripSide { Both, Left, Right };
std::string python_strip(std::string_view s, StripSide side, const std::string* chars);

// str.split(): on runs of whitespace (sep == nullptr) or on `sep`, at most maxsplit
// times (-1: all).
std::vector<std::string> python_split(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> python_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit);

// str.upper() / lower() / title() / capitalize() with Unicode's simple case mappings
// (utf8proc), and str.islower() / isupper().
std::string python_upper(std::string_view s);
std::string python_lower(std::string_view s);
std::string python_title(std::string_view s);
std::string python_capitalize(std::string_view s);
bool python_is_lower(std::string_view s);
bool python_is_upper(std::string_view s);
// jinja2's |title filter (not str.title(): it starts words after "-", whitespace and
// opening brackets only).
std::string jinja_title(std::string_view s);

}  // namespace kiln::llm::jinja
