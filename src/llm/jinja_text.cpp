// Python str semantics over UTF-8 (jinja_text.h).
#include "llm/jinja_text.h"

#include <utf8proc.h>

#include <utility>

namespace kiln::llm::jinja {

char32_t decode_code_point(std::string_view s, size_t pos, size_t& length) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(pos);
  length = 1;
  if (lead < 0x80) return lead;
  size_t n = 0;
  char32_t cp = 0;
  if ((lead & 0xE0) == 0xC0) {
    n = 2;
    cp = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    n = 3;
    cp = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    n = 4;
    cp = lead & 0x07;
  } else {
    return lead;  // a stray continuation or invalid lead byte counts as one
  }
  if (pos + n > s.size()) return lead;
  for (size_t i = 1; i < n; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return lead;
    cp = (cp << 6) | (byte(pos + i) & 0x3F);
  }
  length = n;
  return cp;
}

int64_t code_point_count(std::string_view s) {
  int64_t count = 0;
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    if (static_cast<unsigned char>(s[pos]) >= 0x80) decode_code_point(s, pos, len);
    pos += len;
    ++count;
  }
  return count;
}

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t pos = 0; pos < s.size();) {
    offsets.push_back(pos);
    size_t len = 1;
    if (static_cast<unsigned char>(s[pos]) >= 0x80) decode_code_point(s, pos, len);
    pos += len;
  }
  offsets.push_back(s.size());
  return offsets;
}

bool is_python_space(char32_t cp) {
  if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F)) return true;
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

size_t leading_space_bytes(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t len = 1;
    if (!is_python_space(decode_code_point(s, pos, len))) break;
    pos += len;
  }
  return pos;
}

size_t trailing_space_bytes(std::string_view s) {
  // Walk forward remembering where the last run of whitespace began: UTF-8 is decoded
  // front to back.
  size_t run_start = s.size();
  bool in_run = false;
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    const bool space = is_python_space(decode_code_point(s, pos, len));
    if (space && !in_run) run_start = pos;
    in_run = space;
    pos += len;
  }
  return in_run ? s.size() - run_start : 0;
}

namespace {

bool in_set(char32_t cp, const std::vector<char32_t>& set) {
  for (char32_t c : set) {
    if (c == cp) return true;
  }
  return false;
}

std::vector<char32_t> code_points(std::string_view s) {
  std::vector<char32_t> out;
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    out.push_back(decode_code_point(s, pos, len));
    pos += len;
  }
  return out;
}

}  // namespace

std::string python_strip(std::string_view s, StripSide side, const std::string* chars) {
  if (chars == nullptr) {
    const size_t lead = side == StripSide::Right ? 0 : leading_space_bytes(s);
    if (lead == s.size()) return {};
    const size_t trail = side == StripSide::Left ? 0 : trailing_space_bytes(s);
    return std::string(s.substr(lead, s.size() - lead - trail));
  }
  const std::vector<char32_t> set = code_points(*chars);
  const std::vector<size_t> offsets = code_point_offsets(s);
  size_t first = 0;
  size_t last = offsets.size() - 1;  // code points in [first, last)
  const auto at = [&](size_t i) {
    size_t len = 1;
    return decode_code_point(s, offsets[i], len);
  };
  if (side != StripSide::Right) {
    while (first < last && in_set(at(first), set)) ++first;
  }
  if (side != StripSide::Left) {
    while (last > first && in_set(at(last - 1), set)) --last;
  }
  return std::string(s.substr(offsets[first], offsets[last] - offsets[first]));
}

namespace {

// [begin, end) byte spans of the whitespace-separated words of s.
std::vector<std::pair<size_t, size_t>> word_spans(std::string_view s) {
  std::vector<std::pair<size_t, size_t>> spans;
  size_t pos = leading_space_bytes(s);
  while (pos < s.size()) {
    size_t end = pos;
    while (end < s.size()) {
      size_t len = 1;
      if (is_python_space(decode_code_point(s, end, len))) break;
      end += len;
    }
    spans.emplace_back(pos, end);
    pos = end + leading_space_bytes(s.substr(end));
  }
  return spans;
}

}  // namespace

std::vector<std::string> python_split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep == nullptr) {
    const auto spans = word_spans(s);
    for (size_t i = 0; i < spans.size(); ++i) {
      if (maxsplit >= 0 && static_cast<int64_t>(i) == maxsplit) {
        parts.emplace_back(s.substr(spans[i].first));  // the rest keeps its trailing whitespace
        break;
      }
      parts.emplace_back(s.substr(spans[i].first, spans[i].second - spans[i].first));
    }
    return parts;
  }
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    const size_t hit = s.find(*sep, pos);
    if (hit == std::string_view::npos) break;
    parts.emplace_back(s.substr(pos, hit - pos));
    pos = hit + sep->size();
  }
  parts.emplace_back(s.substr(pos));
  return parts;
}

std::vector<std::string> python_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  if (maxsplit < 0) return python_split(s, sep, -1);
  if (sep == nullptr) {
    const auto spans = word_spans(s);
    if (static_cast<int64_t>(spans.size()) <= maxsplit + 1) return python_split(s, nullptr, -1);
    const size_t first_kept = spans.size() - static_cast<size_t>(maxsplit);
    std::vector<std::string> parts;
    parts.emplace_back(s.substr(0, spans[first_kept - 1].second));  // the head keeps its leading whitespace
    for (size_t i = first_kept; i < spans.size(); ++i) {
      parts.emplace_back(s.substr(spans[i].first, spans[i].second - spans[i].first));
    }
    return parts;
  }
  std::vector<std::string> parts;
  size_t end = s.size();
  while (static_cast<int64_t>(parts.size()) < maxsplit && end >= sep->size()) {
    const size_t hit = s.rfind(*sep, end - sep->size());
    if (hit == std::string_view::npos) break;
    parts.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
    end = hit;
  }
  parts.emplace_back(s.substr(0, end));
  return {parts.rbegin(), parts.rend()};
}

namespace {

bool is_cased(char32_t cp) {
  const utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}

// Rewrites each code point of s with map(code point, index of the code point, whether the
// previous code point was cased). Stray bytes pass through.
template <typename Map>
std::string map_code_points(std::string_view s, Map map) {
  std::string out;
  out.reserve(s.size());
  bool previous_cased = false;
  size_t index = 0;
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    const char32_t cp = decode_code_point(s, pos, len);
    if (len == 1 && static_cast<unsigned char>(s[pos]) >= 0x80) {
      out += s[pos];
      previous_cased = false;
    } else {
      append_utf8(out, map(cp, index, previous_cased));
      previous_cased = is_cased(cp);
    }
    pos += len;
    ++index;
  }
  return out;
}

char32_t to_upper(char32_t cp) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp))); }
char32_t to_lower(char32_t cp) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))); }
char32_t to_title(char32_t cp) { return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp))); }

}  // namespace

std::string python_upper(std::string_view s) {
  return map_code_points(s, [](char32_t cp, size_t, bool) { return to_upper(cp); });
}

std::string python_lower(std::string_view s) {
  return map_code_points(s, [](char32_t cp, size_t, bool) { return to_lower(cp); });
}

std::string python_title(std::string_view s) {
  return map_code_points(s, [](char32_t cp, size_t, bool previous_cased) {
    return previous_cased ? to_lower(cp) : to_title(cp);
  });
}

std::string python_capitalize(std::string_view s) {
  return map_code_points(s, [](char32_t cp, size_t index, bool) { return index == 0 ? to_title(cp) : to_lower(cp); });
}

std::string jinja_title(std::string_view s) {
  // jinja2's do_title: split before runs of "-", whitespace, "(", "{", "[" or "<"; each
  // piece gets its first character upper-cased and the rest lower-cased.
  std::string out;
  out.reserve(s.size());
  bool at_piece_start = true;
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    const char32_t cp = decode_code_point(s, pos, len);
    const bool separator = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || is_python_space(cp);
    if (len == 1 && static_cast<unsigned char>(s[pos]) >= 0x80) {
      out += s[pos];
    } else if (separator) {
      append_utf8(out, cp);
    } else {
      append_utf8(out, at_piece_start ? to_upper(cp) : to_lower(cp));
    }
    // A piece starts after a run of separators (the run itself is its own piece).
    at_piece_start = separator;
    pos += len;
  }
  return out;
}

bool python_is_lower(std::string_view s) {
  bool cased = false;
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    const char32_t cp = decode_code_point(s, pos, len);
    const utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    if (c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LT) return false;
    cased = cased || c == UTF8PROC_CATEGORY_LL;
    pos += len;
  }
  return cased;
}

bool python_is_upper(std::string_view s) {
  bool cased = false;
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    const char32_t cp = decode_code_point(s, pos, len);
    const utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    if (c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT) return false;
    cased = cased || c == UTF8PROC_CATEGORY_LU;
    pos += len;
  }
  return cased;
}

}  // namespace kiln::llm::jinja
