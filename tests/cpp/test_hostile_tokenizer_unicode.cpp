// Pre-tokenizer regexes where PCRE2's Unicode tables disagree with the engines Hugging
// Face tokenizers uses (Oniguruma, the Rust regex crate): \s is White_Space there, and
// PCRE2's \s also takes U+180E MONGOLIAN VOWEL SEPARATOR (White_Space until Unicode 6.3).
// Expected splits are what the reference engines produce.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llm/tokenizer_pretokenizer.h"
#include "llm/tokenizer_regex_syntax.h"
#include "pretokenize_test_util.h"
#include "test_util.h"

namespace kiln::llm::tok {
namespace {

using testing_util::kQwen;
using testing_util::Pieces;
using testing_util::split;
constexpr const char* kMvs = "\u180E";  // MONGOLIAN VOWEL SEPARATOR: a format character (Cf)


TEST(HostileTokenizerUnicode, MongolianVowelSeparatorIsNotWhitespace) {
  // Not \s, \p{L} or \p{N}: " ?[^\s\p{L}\p{N}]+" takes it with the space before it. With
  // PCRE2's own \s the space split off alone and it went with the letter: " ", "\u180Eb".
  EXPECT_EQ(split(kQwen, std::string(" ") + kMvs + "b"), (Pieces{std::string(" ") + kMvs, "b"}));
  EXPECT_EQ(split(kGpt2Pattern, std::string("a ") + kMvs + kMvs + " b"),
            (Pieces{"a", std::string(" ") + kMvs + kMvs, " b"}));
  // \S and classes that exclude \s treat it as a visible character too.
  EXPECT_EQ(split(R"(\S+)", std::string("x") + kMvs + "y z"), (Pieces{std::string("x") + kMvs + "y", " ", "z"}));
  EXPECT_EQ(split(R"([\s]+)", std::string("x") + kMvs + " \t\n"), (Pieces{std::string("x") + kMvs, " \t\n"}));
}

TEST(HostileTokenizerUnicode, EveryWhiteSpaceCharacterStillSplits) {
  // U+0009-000D, U+0020, U+0085, U+00A0, U+1680, U+2000-200A, U+2028, U+2029, U+202F,
  // U+205F, U+3000: each is \s, so "\s+(?!\S)|\s+" sets it apart from the letters.
  for (const char* space : {"\t", "\n", "\v", "\f", "\r", " ", "\u0085", "\u00A0", "\u1680", "\u2000", "\u2005",
                            "\u200A", "\u2028", "\u2029", "\u202F", "\u205F", "\u3000"}) {
    SCOPED_TRACE(::testing::PrintToString(std::string(space)));
    EXPECT_EQ(split(R"(\s+|\S+)", std::string("a") + space + "b"), (Pieces{"a", space, "b"}));
    EXPECT_EQ(split(R"([^\s]+)", std::string("a") + space + "b"), (Pieces{"a", space, "b"}));
  }
  // Zero-width space U+200B is not White_Space in any engine.
  EXPECT_EQ(split(R"(\S+)", "a\u200Bb"), (Pieces{"a\u200Bb"}));
}

TEST(HostileTokenizerUnicode, TranslationLeavesQuotedTextAndOtherEscapesAlone) {
  EXPECT_EQ(pcre2_pattern(R"(\Q\s\E\d\p{L}[\]\w])").text, R"(\Q\s\E\d\p{L}[\]\w])");
  EXPECT_EQ(split(R"(\Q\s\E)", R"(a\sb)"), (Pieces{"a", R"(\s)", "b"}));
  // A PCRE2 error names the offset in the pattern as written, not in its translation.
  kiln::testing::expect_error([] { split(R"(\s\s(x)", "x"); }, ErrorKind::Value, "at offset 6");
}

}  // namespace
}  // namespace kiln::llm::tok
