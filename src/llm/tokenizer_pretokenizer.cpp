#define PCRE2_CODE_UNIT_WIDTH 8
#include "llm/tokenizer_pretokenizer.h"

#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "kiln/error.h"
#include "llm/tokenizer_regex_syntax.h"

namespace kiln::llm::tok {
namespace {

// PCRE2's match limit counts backtracking steps. Legitimate pre-tokenizer patterns need
// about one per byte they scan (measured: 20,017 for \s+(?!\S) over 20,000 spaces) and a
// few tens for a short piece; catastrophic ones need a power of the length (1.4 million
// for `a*a*a*a*b|.` on 200 characters, 10^8 on 1000). So each call gets a fixed budget
// plus a generous allowance per byte of the text being split.
constexpr uint64_t kMatchStepsBase = 100'000;
constexpr uint64_t kMatchStepsPerByte = 32;
// The interpreter (used when JIT is unavailable or its stack runs out) nests a frame per
// open backtracking point: bounded in count and in heap.
constexpr uint32_t kDepthLimit = 100'000;
constexpr uint32_t kHeapLimitKiB = 64 * 1024;

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  return n < 0 ? "error " + std::to_string(code) : std::string(reinterpret_cast<const char*>(buffer));
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};
struct MatchContextDeleter {
  void operator()(pcre2_match_context* c) const { pcre2_match_context_free(c); }
};

uint32_t match_limit_for(size_t text_bytes) {
  const uint64_t steps = kMatchStepsBase + kMatchStepsPerByte * static_cast<uint64_t>(text_bytes);
  return static_cast<uint32_t>(std::min<uint64_t>(steps, UINT32_MAX));
}

}  // namespace

Regex::Regex(std::string_view pattern, bool literal, std::string_view what) : pattern_(pattern), what_(what) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // UCP only changes what classes match, and PCRE2 refuses it with a literal pattern.
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  const Pcre2Pattern compiled = literal ? Pcre2Pattern{pattern_, {}} : pcre2_pattern(pattern_);
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.text.data()), compiled.text.size(), options,
                        &error_code, &error_offset, nullptr);
  if (code_ == nullptr) {
    if (!literal) error_offset = compiled.source_offset[std::min<size_t>(error_offset, compiled.text.size())];
    fail(ErrorKind::Value, "Tokenizer", "{}: invalid regex '{}' at offset {}: {}", what_, pattern_, error_offset,
         pcre2_message(error_code));
  }
  // JIT is an accelerator only: where the platform lacks it pcre2_match interprets the
  // same compiled pattern with identical results.
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() { pcre2_code_free(code_); }

void Regex::split_isolated(std::string_view text, std::vector<std::string_view>& pieces) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(pcre2_match_data_create_from_pattern(code_, nullptr));
  std::unique_ptr<pcre2_match_context, MatchContextDeleter> context(pcre2_match_context_create(nullptr));
  if (!match || !context) fail(ErrorKind::Runtime, "Tokenizer", "out of memory for regex match data");
  const uint32_t match_limit = match_limit_for(text.size());
  pcre2_set_match_limit(context.get(), match_limit);
  pcre2_set_depth_limit(context.get(), kDepthLimit);
  pcre2_set_heap_limit(context.get(), kHeapLimitKiB);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t gap_start = 0;  // end of the last match: where unmatched text begins
  size_t search = 0;
  while (search < text.size()) {
    // The text was validated once up front, so PCRE2 need not re-check it per call.
    int rc = pcre2_match(code_, subject, text.size(), search, PCRE2_NO_UTF_CHECK, match.get(), context.get());
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // JIT code runs on a small fixed stack; the interpreter keeps its frames on the
      // heap under the depth and heap limits, so it can finish what JIT could not.
      rc = pcre2_match(code_, subject, text.size(), search, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, match.get(),
                       context.get());
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT) {
      const std::string limit = rc == PCRE2_ERROR_MATCHLIMIT ? fmt::format("match limit of {} steps", match_limit)
                                : rc == PCRE2_ERROR_DEPTHLIMIT ? fmt::format("depth limit of {}", kDepthLimit)
                                                               : fmt::format("heap limit of {} KiB", kHeapLimitKiB);
      fail(ErrorKind::Value, "Tokenizer",
           "{}: regex '{}' exceeded PCRE2's {} on a {}-byte text: the pattern backtracks catastrophically and cannot "
           "be run safely", what_, pattern_, limit, text.size());
    }
    if (rc < 0) {
      fail(ErrorKind::Runtime, "Tokenizer", "{}: regex '{}' failed on a {}-byte text: {}", what_, pattern_,
           text.size(), pcre2_message(rc));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    const size_t begin = ovector[0], end = ovector[1];
    if (end == begin) {
      // An empty match cuts nothing; resume one character later.
      search = begin + 1;
      while (search < text.size() && (static_cast<unsigned char>(text[search]) & 0xC0) == 0x80) ++search;
      continue;
    }
    if (begin > gap_start) pieces.push_back(text.substr(gap_start, begin - gap_start));
    pieces.push_back(text.substr(begin, end - begin));
    gap_start = search = end;
  }
  if (gap_start < text.size()) pieces.push_back(text.substr(gap_start));
}

void PreTokenizer::add_split(std::shared_ptr<const Regex> regex) { steps_.push_back({std::move(regex), false}); }

void PreTokenizer::add_byte_level(bool add_prefix_space, bool use_regex) {
  static const std::shared_ptr<const Regex> gpt2 =
      std::make_shared<const Regex>(kGpt2Pattern, false, "ByteLevel pre-tokenizer");
  steps_.push_back({use_regex ? gpt2 : nullptr, add_prefix_space});
  has_byte_level_ = true;
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string> pieces;
  if (text.empty()) return pieces;
  pieces.emplace_back(text);
  std::vector<std::string> next;
  std::vector<std::string_view> views;
  for (const Step& step : steps_) {
    next.clear();
    for (std::string& piece : pieces) {
      // ByteLevel(add_prefix_space) prefixes every piece that does not already start with
      // a space, as Hugging Face does per split.
      if (step.add_prefix_space && piece.front() != ' ') piece.insert(piece.begin(), ' ');
      if (!step.regex) {
        next.push_back(std::move(piece));
        continue;
      }
      views.clear();
      step.regex->split_isolated(piece, views);
      for (std::string_view v : views) next.emplace_back(v);
    }
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace kiln::llm::tok
