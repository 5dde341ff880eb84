#include "llm/tokenizer_regex_syntax.h"

#include <fmt/format.h>

#include "llm/tokenizer_utf8.h"

namespace kiln::llm::tok {
namespace {

constexpr char32_t kMaxCodepoint = 0x10FFFF;

void append_range(std::string& out, char32_t first, char32_t last) {
  out += fmt::format("\\x{{{:x}}}", static_cast<uint32_t>(first));
  if (last != first) out += fmt::format("-\\x{{{:x}}}", static_cast<uint32_t>(last));
}

// The members of a class (no brackets) matching White_Space, or everything else.
std::string white_space_members(bool complement) {
  std::string out;
  if (!complement) {
    for (const CodepointRange& r : kWhiteSpaceRanges) append_range(out, r.first, r.last);
    return out;
  }
  char32_t next = 0;  // first code point not yet covered
  for (const CodepointRange& r : kWhiteSpaceRanges) {
    if (r.first > next) append_range(out, next, r.first - 1);
    next = r.last + 1;
  }
  if (next <= kMaxCodepoint) append_range(out, next, kMaxCodepoint);
  return out;
}

class Translator {
 public:
  explicit Translator(std::string_view pattern) : in_(pattern) {}

  Pcre2Pattern run() {
    static const std::string space = white_space_members(false);
    static const std::string non_space = white_space_members(true);
    bool in_class = false;
    size_t i = 0;
    while (i < in_.size()) {
      const char c = in_[i];
      if (c == '\\' && i + 1 < in_.size()) {
        const char e = in_[i + 1];
        if (e == 's' || e == 'S') {
          // Outside a class \S is the negated class; inside one, its members are the
          // complement, since a class cannot hold a negated class.
          if (in_class) {
            emit(e == 's' ? space : non_space, i);
          } else {
            emit((e == 's' ? "[" : "[^") + space + "]", i);
          }
          i += 2;
        } else if (e == 'Q') {
          // \Q...\E quotes its text literally: nothing inside is a class escape.
          const size_t end = in_.find("\\E", i + 2);
          const size_t stop = end == std::string_view::npos ? in_.size() : end + 2;
          copy(i, stop);
          i = stop;
        } else {
          copy(i, i + 2);
          i += 2;
        }
      } else if (!in_class && c == '[') {
        // A ']' right after '[' or '[^' is a literal member, not the end of the class.
        size_t j = i + 1;
        if (j < in_.size() && in_[j] == '^') ++j;
        if (j < in_.size() && in_[j] == ']') ++j;
        copy(i, j);
        i = j;
        in_class = true;
      } else if (in_class && c == '[' && i + 1 < in_.size() && in_[i + 1] == ':') {
        // A POSIX class such as [:alpha:] inside a class: copied whole.
        const size_t end = in_.find(":]", i + 2);
        const size_t stop = end == std::string_view::npos ? i + 1 : end + 2;
        copy(i, stop);
        i = stop;
      } else {
        if (in_class && c == ']') in_class = false;
        copy(i, i + 1);
        ++i;
      }
    }
    out_.source_offset.push_back(in_.size());
    return std::move(out_);
  }

 private:
  void copy(size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) {
      out_.text += in_[k];
      out_.source_offset.push_back(k);
    }
  }
  void emit(const std::string& text, size_t source) {
    out_.text += text;
    out_.source_offset.insert(out_.source_offset.end(), text.size(), source);
  }

  std::string_view in_;
  Pcre2Pattern out_;
};

}  // namespace

Pcre2Pattern pcre2_pattern(std::string_view pattern) { return Translator(pattern).run(); }

}  // namespace kiln::llm::tok
