// The synthetic tokenizers `kiln make-model` writes, and the BPE implementation checked
// against a naive reference on them: round trips over many strings (multi-byte
// characters included), streaming over random ids, determinism and the special ids.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <limits>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "llm/synthetic_tokenizer.h"
#include "llm/tokenizer.h"
#include "llm/tokenizer_pretokenizer.h"
#include "llm/tokenizer_utf8.h"
#include "test_util.h"

namespace kiln::llm {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

using tok::append_utf8;

// Naive byte-level BPE straight from the definition: spell each byte with GPT-2's map
// (rebuilt here from its description), then repeatedly merge the leftmost adjacent pair
// of lowest rank until none has a merge.
class ReferenceBpe {
 public:
  explicit ReferenceBpe(const std::string& tokenizer_json) {
    const json j = json::parse(tokenizer_json);
    for (const auto& [token, id] : j["model"]["vocab"].items()) vocab_[token] = id.get<int32_t>();
    int rank = 0;
    for (const auto& m : j["model"]["merges"]) rank_[{m[0].get<std::string>(), m[1].get<std::string>()}] = rank++;
    ignore_merges_ = j["model"]["ignore_merges"].get<bool>();
    pattern_ = j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"].get<std::string>();
    std::vector<int> printable;
    for (int b = 0; b < 256; ++b) {
      if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) printable.push_back(b);
    }
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool self = std::find(printable.begin(), printable.end(), b) != printable.end();
      append_utf8(spelling_[b], self ? char32_t(b) : char32_t(256 + extra++));
    }
  }

  Ids encode(const std::string& text) const {
    const tok::Regex regex(pattern_, false, "reference");
    std::vector<std::string_view> pieces;
    regex.split_isolated(text, pieces);
    Ids ids;
    for (std::string_view piece : pieces) {
      std::vector<std::string> symbols;
      std::string whole;
      for (char c : piece) {
        symbols.push_back(spelling_[static_cast<uint8_t>(c)]);
        whole += symbols.back();
      }
      if (ignore_merges_ && vocab_.count(whole)) {
        ids.push_back(vocab_.at(whole));
        continue;
      }
      while (true) {
        int best_rank = std::numeric_limits<int>::max();
        size_t best = 0;
        for (size_t i = 0; i + 1 < symbols.size(); ++i) {
          const auto it = rank_.find({symbols[i], symbols[i + 1]});
          if (it != rank_.end() && it->second < best_rank) best_rank = it->second, best = i;
        }
        if (best_rank == std::numeric_limits<int>::max()) break;
        symbols[best] += symbols[best + 1];
        symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
      }
      for (const auto& s : symbols) ids.push_back(vocab_.at(s));
    }
    return ids;
  }

 private:
  std::map<std::string, int32_t> vocab_;
  std::map<std::pair<std::string, std::string>, int> rank_;
  bool ignore_merges_ = false;
  std::string pattern_;
  std::string spelling_[256];
};

// Random text in NFC (so encode's normalisation leaves it unchanged): English words and
// fragments, digits, punctuation, whitespace runs, and characters of 2, 3 and 4 bytes.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> parts = {
      "the", " river", " mill", "It's", " DON'T", " they'll", " we're", "water", " sacks", " 1887", " 42", "3.14",
      "!", "?!", " ...", ", ", ".", "\n", "\n\n", "  ", "   ", "\t", " (x)", " \"quoted\"", " naïve", " café",
      " Ωμέγα", " 你好", "世界", " 👋🏽", "🙂", " Привет", "한국어", " x_y", "==", " -", "\r\n", "über"};
  std::uniform_int_distribution<size_t> pick(0, parts.size() - 1);
  std::uniform_int_distribution<int> count(1, 40), letter('a', 'z'), coin(0, 3);
  std::string text;
  for (int i = count(rng); i > 0; --i) {
    if (coin(rng) == 0) {
      for (int n = count(rng) % 8 + 1; n > 0; --n) text += static_cast<char>(letter(rng));
    } else {
      text += parts[pick(rng)];
    }
  }
  return text;
}

// Random valid UTF-8 from ranges with no canonical decomposition or composition, so the
// string is its own NFC.
std::string random_nfc_characters(std::mt19937& rng) {
  static const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x20, 0x7E}, {0x09, 0x0A}, {0xA0, 0xFF}, {0x391, 0x3A1}, {0x410, 0x44F},
      {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3}, {0x1F600, 0x1F64F}};
  std::uniform_int_distribution<size_t> range(0, ranges.size() - 1);
  std::uniform_int_distribution<int> length(0, 30);
  std::string text;
  for (int i = length(rng); i > 0; --i) {
    const auto [lo, hi] = ranges[range(rng)];
    append_utf8(text, std::uniform_int_distribution<char32_t>(lo, hi)(rng));
  }
  return text;
}

struct Synthetic {
  SyntheticTokenizer files;
  Tokenizer tokenizer;
};

const Synthetic& synthetic(TokenizerFlavor flavor) {
  // Built once per flavour: training the merges is the slow part of these tests.
  static const auto make = [](TokenizerFlavor f) {
    SyntheticTokenizer files = make_synthetic_tokenizer(f, 400);
    Tokenizer tokenizer = Tokenizer::from_json(files.tokenizer_json, files.tokenizer_config_json);
    return Synthetic{std::move(files), std::move(tokenizer)};
  };
  static const Synthetic qwen = make(TokenizerFlavor::Qwen), lfm2 = make(TokenizerFlavor::Lfm2);
  return flavor == TokenizerFlavor::Qwen ? qwen : lfm2;
}

TEST(TokenizerSynthetic, QwenShapeAndSpecialIds) {
  const Tokenizer& t = synthetic(TokenizerFlavor::Qwen).tokenizer;
  EXPECT_EQ(t.vocab_size(), 400);
  EXPECT_EQ(t.token_to_id("<|endoftext|>"), 397);
  EXPECT_EQ(t.token_to_id("<|im_start|>"), 398);
  EXPECT_EQ(t.token_to_id("<|im_end|>"), 399);
  EXPECT_TRUE(t.is_special(397) && t.is_special(398) && t.is_special(399));
  EXPECT_FALSE(t.is_special(396));
  EXPECT_EQ(t.bos_id(), std::nullopt);
  EXPECT_EQ(t.eos_ids(), (Ids{399, 397}));
  // Byte tokens sit where GPT-2 and Qwen vocabularies put them.
  EXPECT_EQ(t.token_to_id("!"), 0);
  EXPECT_EQ(t.token_to_id("Ċ"), 198);  // newline
  EXPECT_EQ(t.token_to_id("Ġ"), 220);  // space
  EXPECT_EQ(t.encode("hi", true), t.encode("hi", false));  // Qwen adds no BOS
}

TEST(TokenizerSynthetic, Lfm2ShapeAndSpecialIds) {
  const Tokenizer& t = synthetic(TokenizerFlavor::Lfm2).tokenizer;
  EXPECT_EQ(t.vocab_size(), 400);
  const char* specials[] = {"<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(t.token_to_id(specials[i]), 395 + i) << specials[i];
  EXPECT_EQ(t.bos_id(), 396);
  EXPECT_EQ(t.eos_ids(), (Ids{399, 397}));
  const Ids ids = t.encode("hi");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 396);  // the template's BOS, added once though the config also asks
  EXPECT_EQ(Ids(ids.begin() + 1, ids.end()), t.encode("hi", false));
}

TEST(TokenizerSynthetic, FilesHaveTheHuggingFaceShape) {
  for (auto flavor : {TokenizerFlavor::Qwen, TokenizerFlavor::Lfm2}) {
    const bool lfm2 = flavor == TokenizerFlavor::Lfm2;
    const json j = json::parse(synthetic(flavor).files.tokenizer_json);
    const json config = json::parse(synthetic(flavor).files.tokenizer_config_json);
    EXPECT_EQ(j["model"]["type"], "BPE");
    EXPECT_EQ(j["model"]["ignore_merges"], lfm2);
    EXPECT_EQ(j["model"]["vocab"].size() + j["added_tokens"].size(), 400u);
    EXPECT_EQ(j["model"]["merges"].size(), 400u - 256u - j["added_tokens"].size());  // no spelling repeated here
    EXPECT_TRUE(j["model"]["merges"][0].is_array());
    EXPECT_EQ(j["pre_tokenizer"]["pretokenizers"][0]["behavior"], "Isolated");
    const std::string regex = j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"];
    EXPECT_NE(regex.find(lfm2 ? "\\p{N}{1,3}" : "|\\p{N}|"), std::string::npos) << regex;
    EXPECT_EQ(j["normalizer"].is_null(), lfm2);
    EXPECT_EQ(config["add_bos_token"], lfm2);
    EXPECT_EQ(config["eos_token"], "<|im_end|>");
    EXPECT_EQ(config["bos_token"].is_null(), !lfm2);
  }
}

TEST(TokenizerSynthetic, Deterministic) {
  const SyntheticTokenizer a = make_synthetic_tokenizer(TokenizerFlavor::Qwen, 300);
  const SyntheticTokenizer b = make_synthetic_tokenizer(TokenizerFlavor::Qwen, 300);
  EXPECT_EQ(a.tokenizer_json, b.tokenizer_json);
  EXPECT_EQ(a.tokenizer_config_json, b.tokenizer_config_json);
  EXPECT_EQ(Tokenizer::from_json(a.tokenizer_json).vocab_size(), 300);
}

TEST(TokenizerSynthetic, SizesAtTheEdges) {
  // Just the bytes and the specials: no merges at all.
  const SyntheticTokenizer bare = make_synthetic_tokenizer(TokenizerFlavor::Lfm2, 261);
  const Tokenizer t = Tokenizer::from_json(bare.tokenizer_json, bare.tokenizer_config_json);
  EXPECT_EQ(t.vocab_size(), 261);
  EXPECT_EQ(t.encode("ab", false), (Ids{64, 65}));  // 'a' is byte 97 = id 97 - 33
  // Far more ids than the text can fill: training stops when no pair repeats.
  const SyntheticTokenizer big = make_synthetic_tokenizer(TokenizerFlavor::Qwen, 100000);
  const Tokenizer tb = Tokenizer::from_json(big.tokenizer_json, big.tokenizer_config_json);
  EXPECT_GT(tb.vocab_size(), 400);
  EXPECT_LT(tb.vocab_size(), 100000);
  EXPECT_EQ(tb.token_to_id("<|im_end|>"), tb.vocab_size() - 1);
  testing::expect_error([] { make_synthetic_tokenizer(TokenizerFlavor::Qwen, 258); }, ErrorKind::Value,
                        "vocab_size 258 is too small: a byte-level Qwen tokenizer needs at least 259 ids");
  testing::expect_error([] { make_synthetic_tokenizer(TokenizerFlavor::Lfm2, 260); }, ErrorKind::Value,
                        "at least 261 ids");
}

TEST(TokenizerSynthetic, BuiltInTextRoundTripsAndCompresses) {
  const std::string text(tok::synthetic_training_text());
  for (auto flavor : {TokenizerFlavor::Qwen, TokenizerFlavor::Lfm2}) {
    const Tokenizer& t = synthetic(flavor).tokenizer;
    const Ids ids = t.encode(text, false);
    EXPECT_EQ(t.decode(ids), text);
    // ~140 merges learned from this very text: well under half a token per byte.
    EXPECT_LT(ids.size(), text.size() / 2);
  }
}

TEST(TokenizerSynthetic, MatchesReferenceBpe) {
  for (auto flavor : {TokenizerFlavor::Qwen, TokenizerFlavor::Lfm2}) {
    const Synthetic& s = synthetic(flavor);
    const ReferenceBpe reference(s.files.tokenizer_json);
    std::mt19937 rng(1234);
    for (int i = 0; i < 150; ++i) {
      const std::string text = random_text(rng);
      ASSERT_EQ(s.tokenizer.encode(text, false), reference.encode(text)) << text;
    }
    const std::string built_in(tok::synthetic_training_text());
    EXPECT_EQ(s.tokenizer.encode(built_in, false), reference.encode(built_in));
  }
}

TEST(TokenizerSynthetic, RoundTripsManyStrings) {
  std::mt19937 rng(99);
  for (auto flavor : {TokenizerFlavor::Qwen, TokenizerFlavor::Lfm2}) {
    const Tokenizer& t = synthetic(flavor).tokenizer;
    for (int i = 0; i < 200; ++i) {
      const std::string text = i % 2 ? random_text(rng) : random_nfc_characters(rng);
      ASSERT_EQ(t.decode(t.encode(text), /*skip_special_tokens=*/true), text) << text;
    }
  }
  // Qwen normalises to NFC, so decomposed input comes back composed; LFM2 has no
  // normaliser and returns it unchanged.
  const std::string decomposed = "Cafe\xCC\x81 n\xCC\x83";
  const Tokenizer& qwen = synthetic(TokenizerFlavor::Qwen).tokenizer;
  const Tokenizer& lfm2 = synthetic(TokenizerFlavor::Lfm2).tokenizer;
  EXPECT_EQ(qwen.decode(qwen.encode(decomposed)), "Caf\xC3\xA9 \xC3\xB1");
  EXPECT_EQ(lfm2.decode(lfm2.encode(decomposed), true), decomposed);
}

TEST(TokenizerSynthetic, SpecialTokensInsideText) {
  const Tokenizer& t = synthetic(TokenizerFlavor::Qwen).tokenizer;
  const Ids ids = t.encode("the mill<|im_end|>\n<|endoftext|>");
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids[ids.size() - 3], 399);
  EXPECT_EQ(ids.back(), 397);
  EXPECT_EQ(t.decode(ids, true), "the mill\n");
  // A cut-off marker is ordinary text.
  const Ids partial = t.encode("<|im_end|");
  EXPECT_EQ(std::count(partial.begin(), partial.end(), 399), 0);
  EXPECT_EQ(t.decode(partial), "<|im_end|");
}

TEST(TokenizerSynthetic, ChatPromptEncodesMarkersAsSpecialTokens) {
  for (auto flavor : {TokenizerFlavor::Qwen, TokenizerFlavor::Lfm2}) {
    const Tokenizer& t = synthetic(flavor).tokenizer;
    const std::string prompt = t.chat_prompt("Why did the miller carry the grain?", "Answer briefly.");
    const Ids ids = t.encode(prompt, /*add_special_tokens=*/false);
    const int32_t im_start = *t.token_to_id("<|im_start|>"), im_end = *t.token_to_id("<|im_end|>");
    EXPECT_EQ(std::count(ids.begin(), ids.end(), im_start), 3);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), im_end), 2);
    // The prompt text carries the BOS, once, and only for LFM2.
    const bool lfm2 = flavor == TokenizerFlavor::Lfm2;
    EXPECT_EQ(prompt.rfind("<|startoftext|>", 0) == 0, lfm2);
    const size_t first = lfm2 ? 1 : 0;
    if (lfm2) {
      EXPECT_EQ(ids[0], *t.bos_id());
    }
    EXPECT_EQ(ids[first], im_start);
    EXPECT_EQ(t.decode(ids), prompt);
  }
}

TEST(TokenizerSynthetic, ConcurrentEncodesAgree) {
  // The BPE cache is shared; threads encoding at once must see the same results.
  const Tokenizer& t = synthetic(TokenizerFlavor::Lfm2).tokenizer;
  std::mt19937 rng(3);
  std::vector<std::string> texts;
  for (int i = 0; i < 40; ++i) texts.push_back(random_text(rng));
  std::vector<Ids> expected;
  for (const auto& text : texts) expected.push_back(t.encode(text));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) mismatches[w] += t.encode(texts[i]) != expected[i];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(TokenizerSynthetic, StreamingEqualsWholeDecode) {
  // Random ids cut characters anywhere and include bytes that never form one; the pieces
  // a StreamingDecoder releases must add up to decoding everything at once.
  const Tokenizer& t = synthetic(TokenizerFlavor::Qwen).tokenizer;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> any_id(0, 399), length(1, 40);
  for (int trial = 0; trial < 200; ++trial) {
    Ids ids;
    for (int i = length(rng); i > 0; --i) ids.push_back(any_id(rng));
    StreamingDecoder stream(t);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    ASSERT_EQ(streamed, t.decode(ids, true));
  }
  // Text split into single-byte tokens streams out character by character.
  const std::string text = "a👋é你";
  StreamingDecoder stream(t);
  std::vector<std::string> released;
  for (int32_t id : t.encode(text)) released.push_back(stream.push(id));
  EXPECT_EQ(released, (std::vector<std::string>{"a", "", "", "", "👋", "", "é", "", "", "你"}));
}

}  // namespace
}  // namespace kiln::llm
