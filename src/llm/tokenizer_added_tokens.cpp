#include "llm/tokenizer_added_tokens.h"

#include "llm/tokenizer_utf8.h"

namespace kiln::llm::tok {

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  token_at_node_.push_back(-1);  // the root
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    const std::string& content = tokens_[i].content;
    if (content.empty()) continue;  // an empty token can never be matched
    uint32_t node = 0;
    for (size_t k = 0; k < content.size(); ++k) {
      const auto byte = static_cast<uint8_t>(content[k]);
      uint32_t& child = node == 0 ? root_children_[byte] : children_[(uint64_t{node} << 8) | byte];
      if (child == 0) {
        child = static_cast<uint32_t>(token_at_node_.size());
        token_at_node_.push_back(-1);
      }
      node = child;
    }
    // Of two tokens with the same content, the first listed wins.
    if (token_at_node_[node] < 0) token_at_node_[node] = static_cast<int32_t>(i);
  }
}

int32_t AddedTokenMatcher::longest_at(std::string_view text, size_t pos, size_t& end) const {
  uint32_t node = root_children_[static_cast<uint8_t>(text[pos])];
  int32_t best = -1;
  for (size_t k = pos + 1; node != 0; ++k) {
    if (token_at_node_[node] >= 0) {
      best = token_at_node_[node];
      end = k;
    }
    if (k == text.size()) break;
    const auto it = children_.find((uint64_t{node} << 8) | static_cast<uint8_t>(text[k]));
    node = it == children_.end() ? 0 : it->second;
  }
  return best;
}

std::vector<AddedTokenMatcher::Segment> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<Segment> segments;
  size_t plain_start = 0;  // where the pending run of ordinary text begins
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = pos;
    const int32_t index = longest_at(text, pos, end);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken* hit = &tokens_[static_cast<size_t>(index)];
    size_t begin = pos;
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
