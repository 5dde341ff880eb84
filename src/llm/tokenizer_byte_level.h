// GPT-2's reversible byte <-> character map. Byte-level BPE vocabularies spell every
// byte as a printable character so that tokens are readable strings: the printable
// Latin-1 bytes (33..126, 161..172, 174..255) stand for themselves and the other 68
// bytes (controls, space, 127..160, 173) become U+0100.. in byte order (space -> 'Ġ').
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::llm::tok {

class ByteLevelMap {
 public:
  static const ByteLevelMap& get();

  // The UTF-8 spelling of the character that stands for `byte`.
  const std::string& spelling(uint8_t byte) const { return spelling_[byte]; }
  // Bytes -> their byte-level spelling (the form vocabulary strings use).
  std::string encode(std::string_view bytes) const;
  // A vocabulary string -> the bytes it stands for; false when some character of it is
  // not in the map (then `bytes` is unspecified).
  bool decode(std::string_view token, std::string& bytes) const;
  // The order real byte-level vocabularies give the 256 byte tokens ids 0..255: the
  // bytes that stand for themselves first, then the remapped ones.
  const std::array<uint8_t, 256>& vocab_order() const { return vocab_order_; }

 private:
  ByteLevelMap();
  std::array<std::string, 256> spelling_;
  std::array<int16_t, 324> byte_of_char_;  // characters U+0000..U+0143; -1 = not in the map
  std::array<uint8_t, 256> vocab_order_;
};

}  // namespace kiln::llm::tok
