// Added tokens (<|im_start|>, <think>, ...) are found as whole strings before any
// normalisation or regex runs, as Hugging Face's AddedVocabulary does: at each position
// the leftmost, then longest, token matches; lstrip / rstrip swallow the whitespace
// beside a match; single_word rejects a match glued to a word character.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::llm::tok {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;  // matched in the normalised text instead of the raw text
  bool single_word = false;
};

class AddedTokenMatcher {
 public:
  struct Segment {
    size_t begin;
    size_t end;
    int32_t id;  // the added token's id; -1 for ordinary text
  };

  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
  bool empty() const { return tokens_.empty(); }

  // Cuts valid UTF-8 `text` into ordinary-text and added-token segments, in order; no
  // segment is empty.
  std::vector<Segment> split(std::string_view text) const;

 private:
  std::vector<AddedToken> tokens_;
  // Indices into tokens_ by first byte, longest first, so the first hit is the longest.
  std::array<std::vector<uint32_t>, 256> by_first_byte_;
};

}  // namespace kiln::llm::tok
