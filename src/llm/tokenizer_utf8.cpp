#include "llm/tokenizer_utf8.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "kiln/error.h"

namespace kiln::llm::tok {
namespace {

// What one step of a UTF-8 scan found at a position.
struct Scan {
  enum Status { Valid, Truncated, Invalid } status;
  // Valid: the character's length. Truncated: bytes left (all a valid start).
  // Invalid: the maximal invalid subpart's length (at least 1).
  size_t length;
  char32_t cp;
};

// Well-formed sequences per the Unicode Standard, Table 3-7: the second byte's range
// depends on the lead byte (no overlongs, no surrogates, nothing above U+10FFFF).
Scan scan_one(const unsigned char* p, size_t n) {
  const unsigned lead = p[0];
  if (lead < 0x80) return {Scan::Valid, 1, lead};
  size_t need;
  unsigned lo = 0x80, hi = 0xBF;
  char32_t cp;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2, cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3, cp = lead & 0x0F;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4, cp = lead & 0x07;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return {Scan::Invalid, 1, 0};
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= n) return {Scan::Truncated, n, 0};
    const unsigned b = p[i];
    const unsigned min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
    if (b < min || b > max) return {Scan::Invalid, i, 0};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Scan::Valid, need, cp};
}

const unsigned char* bytes_of(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

}  // namespace

size_t find_invalid_utf8(std::string_view bytes) {
  const unsigned char* p = bytes_of(bytes);
  size_t pos = 0;
  while (pos < bytes.size()) {
    // ASCII runs are the common case; skip them without the full decoder.
    if (p[pos] < 0x80) {
      ++pos;
      continue;
    }
    const Scan s = scan_one(p + pos, bytes.size() - pos);
    if (s.status != Scan::Valid) return pos;
    pos += s.length;
  }
  return std::string_view::npos;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  const unsigned char* p = bytes_of(bytes);
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Scan s = scan_one(p + pos, bytes.size() - pos);
    if (s.status == Scan::Valid) {
      out.append(bytes.data() + pos, s.length);
    } else {
      out += "\xEF\xBF\xBD";
    }
    pos += s.length;
  }
  return out;
}

size_t complete_utf8_prefix(std::string_view bytes) {
  // A character is at most 4 bytes, so only a sequence starting in the last 3 bytes can
  // be cut short; scanning from the first lead byte there decides it.
  const unsigned char* p = bytes_of(bytes);
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t start = n - back;
    if ((p[start] & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const Scan s = scan_one(p + start, back);
    return s.status == Scan::Truncated ? start : n;
  }
  return n;
}

std::string nfc(std::string_view text) {
  if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
    return std::string(text);  // ASCII is always NFC
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t len =
      utf8proc_map(bytes_of(text), static_cast<utf8proc_ssize_t>(text.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  if (len < 0) {
    fail(ErrorKind::Value, "Tokenizer.encode", "NFC normalisation failed: {}", utf8proc_errmsg(len));
  }
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(len));
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

char32_t next_codepoint(std::string_view text, size_t& pos) {
  const Scan s = scan_one(bytes_of(text) + pos, text.size() - pos);
  pos += s.length;
  return s.cp;
}

char32_t previous_codepoint(std::string_view text, size_t end, size_t& start) {
  start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  size_t pos = start;
  return next_codepoint(text, pos);
}

bool is_unicode_whitespace(char32_t cp) {
  for (const CodepointRange& r : kWhiteSpaceRanges) {
    if (cp >= r.first && cp <= r.last) return true;
  }
  return false;
}

bool is_word_character(char32_t cp) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

}  // namespace kiln::llm::tok
