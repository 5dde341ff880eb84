#include "llm/tokenizer_added_tokens.h"

#include <algorithm>

#include "llm/tokenizer_utf8.h"

namespace kiln::llm::tok {

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;  // an empty token can never be matched
    by_first_byte_[static_cast<uint8_t>(tokens_[i].content[0])].push_back(i);
  }
  for (auto& bucket : by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(),
                     [&](uint32_t a, uint32_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
  }
}

std::vector<AddedTokenMatcher::Segment> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<Segment> segments;
  size_t plain_start = 0;  // where the pending run of ordinary text begins
  size_t pos = 0;
  while (pos < text.size()) {
    const auto& bucket = by_first_byte_[static_cast<uint8_t>(text[pos])];
    const AddedToken* hit = nullptr;
    for (uint32_t index : bucket) {
      const std::string& content = tokens_[index].content;
      if (text.compare(pos, content.size(), content) == 0) {
        hit = &tokens_[index];
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos, end = pos + hit->content.size();
    if (hit->single_word) {
      size_t unused;
      const bool word_before = begin > 0 && is_word_character(previous_codepoint(text, begin, unused));
      size_t after = end;
      const bool word_after = end < text.size() && is_word_character(next_codepoint(text, after));
      if (word_before || word_after) {
        // Not a match; like a non-overlapping matcher, scanning resumes after it.
        pos = end;
        continue;
      }
    }
    if (hit->lstrip) {
      size_t start;
      while (begin > plain_start && is_unicode_whitespace(previous_codepoint(text, begin, start))) begin = start;
    }
    if (hit->rstrip) {
      size_t after = end;
      while (end < text.size() && is_unicode_whitespace(next_codepoint(text, after))) end = after;
    }
    if (begin > plain_start) segments.push_back({plain_start, begin, -1});
    segments.push_back({begin, end, hit->id});
    plain_start = pos = end;
  }
  if (plain_start < text.size()) segments.push_back({plain_start, text.size(), -1});
  return segments;
}

}  // namespace kiln::llm::tok
