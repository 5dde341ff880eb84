// Added tokens (<|im_start|>, <think>, ...) are found as whole strings before any
// normalisation or regex runs, as Hugging Face's AddedVocabulary does: at each position
// the leftmost, then longest, token matches; lstrip / rstrip swallow the whitespace
// beside a match; single_word rejects a match glued to a word character.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
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
  // The token whose content starts at text[pos] and is longest, as an index into tokens_
  // (-1: none); `end` receives where it ends.
  int32_t longest_at(std::string_view text, size_t pos, size_t& end) const;

  std::vector<AddedToken> tokens_;
  // A byte trie of the contents, so finding the longest token at a position walks at
  // most the matched length, however many tokens there are (scanning every token that
  // shares the first byte cost text length x tokens: 100,000 added tokens made a short
  // prompt take seconds). Node 0 is the root.
  std::array<uint32_t, 256> root_children_{};         // 0: no token starts with the byte
  std::unordered_map<uint64_t, uint32_t> children_;  // (node << 8 | byte) -> child, below the root
  std::vector<int32_t> token_at_node_;                 // per node: the token ending there, or -1
};

}  // namespace kiln::llm::tok
