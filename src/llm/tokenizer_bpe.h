// Byte-level BPE: a pre-token's bytes start as one token each and the adjacent pair with
// the lowest merge rank is merged (leftmost first among equal ranks) until no pair has a
// merge, exactly as Hugging Face tokenizers' BPE model does. A priority queue keeps this
// O(n log n) per pre-token, and results for short pre-tokens are cached.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::llm::tok {

class BpeModel {
 public:
  struct Options {
    bool ignore_merges = false;    // a pre-token that is itself a vocabulary token is emitted whole
    std::optional<int32_t> unk_id;  // emitted for a byte with no token; none: encoding it is an error
  };

  // vocab: byte-level spelling -> id; merges: pairs of spellings in rank order.
  // Merges naming a token (or producing a concatenation) missing from the vocabulary are a
  // Value error naming `source` and the merge.
  BpeModel(const std::unordered_map<std::string, int32_t>& vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, Options options,
           const std::string& source);

  // Appends the ids of one pre-token given as raw bytes.
  void encode_piece(std::string_view bytes, std::vector<int32_t>& out) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void merge_bytes(std::string_view bytes, std::vector<int32_t>& out) const;

  std::string source_;
  Options options_;
  int32_t byte_id_[256];                                   // -1: the byte has no token
  std::unordered_map<uint64_t, Merge> merges_;             // (left id, right id) -> rank, result
  std::unordered_map<std::string, int32_t> id_of_bytes_;   // only filled for ignore_merges

  // Pre-tokens repeat a lot in real text (words, spaces), so a bounded cache of their
  // encodings pays; cleared whole when full, which keeps it simple and bounded.
  static constexpr size_t kCacheEntries = 32768;
  static constexpr size_t kCacheMaxPieceBytes = 64;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace kiln::llm::tok
