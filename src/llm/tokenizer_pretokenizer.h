// Pre-tokenization: cutting normalised text into the pieces BPE runs on, as the
// tokenizer.json `pre_tokenizer` says. Supported steps are Split (a regex or literal
// pattern, behaviour Isolated: every match and every gap between matches is a piece) and
// ByteLevel (optional prefix space, optional GPT-2 regex split); the byte-level character
// mapping itself is left to BPE, which works on raw bytes.
//
// Regexes run through PCRE2 in UTF + UCP mode, so \p{L}, \p{N}, \p{M} and (?i:...)
// follow Unicode like the Oniguruma engine Hugging Face tokenizers uses, and \s is
// rewritten to the White_Space class those engines use (tokenizer_regex_syntax.h);
// JIT-compiled when the platform supports it (same matches, only faster).
//
// A pattern comes from the file, so it may backtrack catastrophically (`a*a*a*a*b|.`
// took tens of seconds on a 1000-character prompt). Every match runs under PCRE2 limits:
// a match limit that grows with the text (legitimate patterns cost a few steps per byte)
// and depth and heap limits for the interpreter; exceeding one is a Value error naming
// the pattern and where it came from.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace kiln::llm::tok {

// The regex GPT-2's ByteLevel pre-tokenizer uses when use_regex is true.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class Regex {
 public:
  // literal: match `pattern` as a plain string. A pattern PCRE2 rejects is a Value error
  // naming `what` (where the pattern came from), the offset and PCRE2's reason; `what`
  // also names the pattern in errors while matching.
  Regex(std::string_view pattern, bool literal, std::string_view what);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the Isolated split of `text` (valid UTF-8): matches and the non-empty gaps
  // between them, in order, as views into `text`. Empty matches split nothing.
  void split_isolated(std::string_view text, std::vector<std::string_view>& pieces) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  std::string what_;
  pcre2_real_code_8* code_ = nullptr;
};

class PreTokenizer {
 public:
  void add_split(std::shared_ptr<const Regex> regex);
  void add_byte_level(bool add_prefix_space, bool use_regex);
  bool has_byte_level() const { return has_byte_level_; }

  // Pieces of one normalised text segment (valid UTF-8), in order, none empty.
  std::vector<std::string> split(std::string_view text) const;

 private:
  struct Step {
    std::shared_ptr<const Regex> regex;  // null: no regex split in this step
    bool add_prefix_space = false;
  };
  std::vector<Step> steps_;
  bool has_byte_level_ = false;
};

}  // namespace kiln::llm::tok
