// Pre-tokenizer regexes of the supported families (spec: models.md §6) run through PCRE2:
// each expected split below is what Hugging Face tokenizers' Oniguruma engine (and
// Python's `regex` module) produce for the same pattern and text.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llm/tokenizer_pretokenizer.h"
#include "pretokenize_test_util.h"
#include "test_util.h"

namespace kiln::llm::tok {
namespace {

using testing_util::kQwen;
using testing_util::Pieces;
using testing_util::split;
constexpr std::string_view kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";


TEST(TokenizerPretokenize, QwenContractionsKeepTheirCase) {
  EXPECT_EQ(split(kQwen, "I'm here, it's OK. DON'T"),
            (Pieces{"I", "'m", " here", ",", " it", "'s", " OK", ".", " DON", "'T"}));
}

TEST(TokenizerPretokenize, QwenDigitsOneAtATime) {
  EXPECT_EQ(split(kQwen, "abc 12345 x"), (Pieces{"abc", " ", "1", "2", "3", "4", "5", " x"}));
}

TEST(TokenizerPretokenize, QwenSpacesAttachToTheNextWord) {
  // Of a run of spaces, the last one goes with the word after it.
  EXPECT_EQ(split(kQwen, "hello   world"), (Pieces{"hello", "  ", " world"}));
  EXPECT_EQ(split(kQwen, " leading"), (Pieces{" leading"}));
  EXPECT_EQ(split(kQwen, "\tfoo"), (Pieces{"\tfoo"}));
}

TEST(TokenizerPretokenize, QwenNewlinesAndTrailingSpaces) {
  EXPECT_EQ(split(kQwen, "line1\n\nline2"), (Pieces{"line", "1", "\n\n", "line", "2"}));
  EXPECT_EQ(split(kQwen, "a\r\nb"), (Pieces{"a", "\r\n", "b"}));
  EXPECT_EQ(split(kQwen, "trailing   "), (Pieces{"trailing", "   "}));
}

TEST(TokenizerPretokenize, QwenPunctuationRuns) {
  EXPECT_EQ(split(kQwen, "wow!!! ...?\n\n"), (Pieces{"wow", "!!!", " ...?\n\n"}));
  EXPECT_EQ(split(kQwen, "x = f(y) + 42;\n  return"),
            (Pieces{"x", " =", " f", "(y", ")", " +", " ", "4", "2", ";\n", " ", " return"}));
}

TEST(TokenizerPretokenize, UnicodeLettersCjkAndEmoji) {
  EXPECT_EQ(split(kQwen, "café naïve"), (Pieces{"café", " naïve"}));
  EXPECT_EQ(split(kQwen, "你好世界, 你好"), (Pieces{"你好世界", ",", " 你好"}));
  // An emoji (and its skin-tone modifier) is neither letter nor digit: a punctuation run.
  EXPECT_EQ(split(kQwen, "hi 👋🏽!"), (Pieces{"hi", " 👋🏽!"}));
}

TEST(TokenizerPretokenize, CombiningMarksSplitInQwen3ButNotQwen35) {
  const std::string decomposed = "cafe\xCC\x81 ok";  // e + U+0301 COMBINING ACUTE ACCENT
  EXPECT_EQ(split(kQwen, decomposed), (Pieces{"cafe", "\xCC\x81", " ok"}));
  EXPECT_EQ(split(kQwen35, decomposed), (Pieces{"cafe\xCC\x81", " ok"}));
}

TEST(TokenizerPretokenize, Llama3DigitRunsOfThree) {
  EXPECT_EQ(split(kLlama3, "12345 year 2024!"), (Pieces{"123", "45", " year", " ", "202", "4", "!"}));
  EXPECT_EQ(split(kLlama3, "x = f(y) + 42;"), (Pieces{"x", " =", " f", "(y", ")", " +", " ", "42", ";"}));
}

TEST(TokenizerPretokenize, Gpt2ByteLevelRegex) {
  EXPECT_EQ(split(kGpt2Pattern, "I'm DON'T 12345\tfoo"),
            (Pieces{"I", "'m", " DON", "'", "T", " 12345", "\t", "foo"}));
}

TEST(TokenizerPretokenize, GapsBetweenMatchesArePieces) {
  // Isolated keeps the unmatched text as pieces of its own.
  EXPECT_EQ(split("[0-9]+", "ab12cd345"), (Pieces{"ab", "12", "cd", "345"}));
  EXPECT_EQ(split("x*", "abxxc"), (Pieces{"ab", "xx", "c"}));  // empty matches cut nothing
}

TEST(TokenizerPretokenize, LongRunsDoNotOverflow) {
  // Long runs stress the engine's backtracking (\s+(?!\S)) and repetition limits.
  const std::string spaces(200000, ' ');
  EXPECT_EQ(split(kQwen, spaces + "x"), (Pieces{std::string(199999, ' '), " x"}));
  const std::string letters(200000, 'a');
  EXPECT_EQ(split(kQwen, letters), (Pieces{letters}));
}

TEST(TokenizerPretokenize, ByteLevelPrefixSpaceAndRegexSteps) {
  PreTokenizer pre;
  pre.add_byte_level(/*add_prefix_space=*/true, /*use_regex=*/true);
  EXPECT_EQ(pre.split("hello world"), (Pieces{" hello", " world"}));
  EXPECT_EQ(pre.split(" x"), (Pieces{" x"}));  // already starts with a space
  PreTokenizer qwen;
  qwen.add_split(std::make_shared<const Regex>(kQwen, false, "test"));
  qwen.add_byte_level(false, false);
  EXPECT_EQ(qwen.split("it's 42"), (Pieces{"it", "'s", " ", "4", "2"}));
  EXPECT_TRUE(qwen.split("").empty());
}

TEST(TokenizerPretokenize, LiteralPattern) {
  EXPECT_EQ(split("a.b", "xa.bya+b"), (Pieces{"x", "a.b", "y", "a+b"}));
  const Regex literal("a.b", /*literal=*/true, "test");
  std::vector<std::string_view> views;
  literal.split_isolated("xa.bya+b", views);
  EXPECT_EQ(Pieces(views.begin(), views.end()), (Pieces{"x", "a.b", "ya+b"}));
}

TEST(TokenizerPretokenize, BadRegexIsAValueError) {
  testing::expect_error([] { Regex("(?i:'s|[a-", false, "pre_tokenizer.pretokenizers[0]"); }, ErrorKind::Value,
                        "pre_tokenizer.pretokenizers[0]: invalid regex");
}

}  // namespace
}  // namespace kiln::llm::tok
