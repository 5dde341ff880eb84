#include "llm/tokenizer_byte_level.h"

#include "llm/tokenizer_utf8.h"

namespace kiln::llm::tok {
namespace {

bool stands_for_itself(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

}  // namespace

ByteLevelMap::ByteLevelMap() {
  byte_of_char_.fill(-1);
  int order = 0;
  for (int b = 0; b < 256; ++b) {
    if (stands_for_itself(b)) vocab_order_[order++] = static_cast<uint8_t>(b);
  }
  int remapped = 0;
  for (int b = 0; b < 256; ++b) {
    char32_t ch = static_cast<char32_t>(b);
    if (!stands_for_itself(b)) {
      ch = static_cast<char32_t>(256 + remapped++);
      vocab_order_[order++] = static_cast<uint8_t>(b);
    }
    append_utf8(spelling_[b], ch);
    byte_of_char_[ch] = static_cast<int16_t>(b);
  }
}

const ByteLevelMap& ByteLevelMap::get() {
  static const ByteLevelMap map;
  return map;
}

std::string ByteLevelMap::encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += spelling_[static_cast<uint8_t>(c)];
  return out;
}

bool ByteLevelMap::decode(std::string_view token, std::string& bytes) const {
  bytes.clear();
  size_t pos = 0;
  while (pos < token.size()) {
    // Every character of the map is below U+0144, i.e. one or two UTF-8 bytes.
    const auto b0 = static_cast<unsigned char>(token[pos]);
    char32_t ch;
    if (b0 < 0x80) {
      ch = b0;
      pos += 1;
    } else if (b0 >= 0xC2 && b0 <= 0xC5 && pos + 1 < token.size() &&
               (static_cast<unsigned char>(token[pos + 1]) & 0xC0) == 0x80) {
      ch = (static_cast<char32_t>(b0 & 0x1F) << 6) | (static_cast<unsigned char>(token[pos + 1]) & 0x3F);
      pos += 2;
    } else {
      return false;
    }
    if (ch >= byte_of_char_.size() || byte_of_char_[ch] < 0) return false;
    bytes += static_cast<char>(byte_of_char_[ch]);
  }
  return true;
}

}  // namespace kiln::llm::tok
