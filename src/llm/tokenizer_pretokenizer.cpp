#define PCRE2_CODE_UNIT_WIDTH 8
#include "llm/tokenizer_pretokenizer.h"

#include <pcre2.h>

#include <memory>

#include "kiln/error.h"

namespace kiln::llm::tok {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  return n < 0 ? "error " + std::to_string(code) : std::string(reinterpret_cast<const char*>(buffer));
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

}  // namespace

Regex::Regex(std::string_view pattern, bool literal, std::string_view what) : pattern_(pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // UCP only changes what classes match, and PCRE2 refuses it with a literal pattern.
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(), options, &error_code,
                        &error_offset, nullptr);
  if (code_ == nullptr) {
    fail(ErrorKind::Value, "Tokenizer", "{}: invalid regex '{}' at offset {}: {}", what, pattern_, error_offset,
         pcre2_message(error_code));
  }
  // JIT is an accelerator only: where the platform lacks it pcre2_match interprets the
  // same compiled pattern with identical results.
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() { pcre2_code_free(code_); }

void Regex::split_isolated(std::string_view text, std::vector<std::string_view>& pieces) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(pcre2_match_data_create_from_pattern(code_, nullptr));
  if (!match) fail(ErrorKind::Runtime, "Tokenizer", "out of memory for regex match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t gap_start = 0;  // end of the last match: where unmatched text begins
  size_t search = 0;
  while (search < text.size()) {
    // The text was validated once up front, so PCRE2 need not re-check it per call.
    const int rc = pcre2_match(code_, subject, text.size(), search, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      fail(ErrorKind::Runtime, "Tokenizer", "regex '{}' failed on a {}-byte text: {}", pattern_, text.size(),
           pcre2_message(rc));
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
