// Tokenizer on a hand-written tokenizer.json whose expected ids are worked out by hand
// below: BPE merge order, added tokens (lstrip / rstrip / single_word / normalized), NFC,
// decoding, streaming, tokenizer_config, and every load and encode error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "llm/tokenizer.h"
#include "test_util.h"

namespace kiln::llm {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

// Vocabulary (byte-level spellings; "Ġ" is the space byte, "Ã" "©" the bytes C3 A9 of é):
//   0 h  1 e  2 l  3 o  4 Ġ  5 w  6 r  7 d  8 !  9 he  10 ll  11 hell  12 hello  13 Ġw
//   14 or  15 Ġwor  16 ld  17 Ġworld  26 Ã  27 ©  28 Ã©  29 lo (no merge makes it)
// Merges by rank: 0 h+e  1 l+l  2 he+ll  3 hell+o  4 Ġ+w  5 o+r  6 Ġw+or  7 l+d  8 Ġwor+ld
//   9 Ã+©
// Added: 18 <|endoftext|>, 19 <|im_start|>, 20 <|im_end|> (special); 21 <x> (plain);
//   22 <mask> (special, lstrip); 23 <r> (special, rstrip); 24 dd (plain, single_word);
//   25 café (plain, normalized: matched after NFC).
const char* kSmallTokenizer = R"({
  "version": "1.0",
  "added_tokens": [
    {"id": 18, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 19, "content": "<|im_start|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 20, "content": "<|im_end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 21, "content": "<x>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false},
    {"id": 22, "content": "<mask>", "single_word": false, "lstrip": true, "rstrip": false, "normalized": false, "special": true},
    {"id": 23, "content": "<r>", "single_word": false, "lstrip": false, "rstrip": true, "normalized": false, "special": true},
    {"id": 24, "content": "dd", "single_word": true, "lstrip": false, "rstrip": false, "normalized": false, "special": false},
    {"id": 25, "content": "café", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false}
  ],
  "normalizer": {"type": "NFC"},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]},
  "post_processor": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
  "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
  "model": {
    "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "", "end_of_word_suffix": "",
    "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
    "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "Ġ": 4, "w": 5, "r": 6, "d": 7, "!": 8, "he": 9, "ll": 10,
              "hell": 11, "hello": 12, "Ġw": 13, "or": 14, "Ġwor": 15, "ld": 16, "Ġworld": 17,
              "Ã": 26, "©": 27, "Ã©": 28, "lo": 29},
    "merges": ["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "Ã ©"]
  }
})";

Tokenizer small(const std::string& config = "") { return Tokenizer::from_json(kSmallTokenizer, config); }

// The small tokenizer with `edit` applied to its JSON.
template <typename Edit>
Tokenizer small_edited(Edit edit) {
  json j = json::parse(kSmallTokenizer);
  edit(j);
  return Tokenizer::from_json(j.dump());
}

TEST(Tokenizer, BpeAppliesMergesByRank) {
  const Tokenizer t = small();
  // "hello": h e l l o -> (h,e) rank 0 -> he l l o -> (l,l) 1 -> he ll o -> (he,ll) 2
  //   -> hell o -> (hell,o) 3 -> hello = 12.
  // " world": Ġ w o r l d -> (Ġ,w) 4 -> (o,r) 5 -> (Ġw,or) 6 -> (l,d) 7 -> (Ġwor,ld) 8 = 17.
  EXPECT_EQ(t.encode("hello world!"), (Ids{12, 17, 8}));
  // "ello": only (l,l) applies -> e ll o.
  EXPECT_EQ(t.encode("ello"), (Ids{1, 10, 3}));
  // "old": (o,l) has no merge, (l,d) does -> o ld.
  EXPECT_EQ(t.encode("old"), (Ids{3, 16}));
  EXPECT_EQ(t.encode("wor"), (Ids{5, 14}));
  // "lo" is in the vocabulary but no merge makes it.
  EXPECT_EQ(t.encode("lo"), (Ids{2, 3}));
  EXPECT_EQ(t.encode(""), Ids{});
}

TEST(Tokenizer, IgnoreMergesEmitsVocabularyPreTokensWhole) {
  const Tokenizer t = small_edited([](json& j) { j["model"]["ignore_merges"] = true; });
  EXPECT_EQ(t.encode("lo"), (Ids{29}));
  EXPECT_EQ(t.encode("ello"), (Ids{1, 10, 3}));  // not in the vocabulary: merges as before
}

TEST(Tokenizer, MergesAsPairsEqualMergesAsStrings) {
  const Tokenizer t = small_edited([](json& j) {
    json pairs = json::array();
    for (const auto& m : j["model"]["merges"]) {
      const std::string s = m.get<std::string>();
      pairs.push_back({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
    }
    j["model"]["merges"] = pairs;
  });
  EXPECT_EQ(t.encode("hello world!"), (Ids{12, 17, 8}));
}

TEST(Tokenizer, AddedTokensInsideText) {
  const Tokenizer t = small();
  EXPECT_EQ(t.encode("<|im_start|>hello<|im_end|>"), (Ids{19, 12, 20}));
  EXPECT_EQ(t.encode("hello<x>!"), (Ids{12, 21, 8}));
  // lstrip: <mask> swallows the space before it; " world" keeps its own.
  EXPECT_EQ(t.encode("hello <mask> world"), (Ids{12, 22, 17}));
  // rstrip: <r> swallows the spaces after it.
  EXPECT_EQ(t.encode("<r>  hello"), (Ids{23, 12}));
  // single_word: "dd" only matches where no word character (regex \w) touches it.
  EXPECT_EQ(t.encode("dd!"), (Ids{24, 8}));
  EXPECT_EQ(t.encode("odd"), (Ids{3, 7, 7}));
}

TEST(Tokenizer, NfcComposesBeforeBpe) {
  const Tokenizer t = small();
  // e + U+0301 composes to U+00E9 = bytes C3 A9 = Ã © -> merge 9 -> 28.
  EXPECT_EQ(t.encode("e\xCC\x81"), (Ids{28}));
  EXPECT_EQ(t.encode("\xC3\xA9"), (Ids{28}));
  // A normalized added token matches the NFC form of decomposed input.
  EXPECT_EQ(t.encode("cafe\xCC\x81"), (Ids{25}));
  EXPECT_EQ(t.encode("caf\xC3\xA9"), (Ids{25}));
}

TEST(Tokenizer, Decode) {
  const Tokenizer t = small();
  EXPECT_EQ(t.decode(Ids{12, 17, 8}), "hello world!");
  EXPECT_EQ(t.decode(Ids{19, 12, 20}), "<|im_start|>hello<|im_end|>");
  EXPECT_EQ(t.decode(Ids{19, 12, 20}, /*skip_special_tokens=*/true), "hello");
  EXPECT_EQ(t.decode(Ids{21, 24, 22}, true), "<x>dd");  // non-special added tokens stay
  // Added tokens decode to their text; é here is not read as the byte-map character for 0xE9.
  EXPECT_EQ(t.decode(Ids{25, 8}), "café!");
  EXPECT_EQ(t.decode(Ids{26, 27}), "\xC3\xA9");
  EXPECT_EQ(t.decode(Ids{26}), "\xEF\xBF\xBD");            // a cut character becomes U+FFFD
  EXPECT_EQ(t.decode(Ids{26, 12}), "\xEF\xBF\xBDhello");
  EXPECT_EQ(t.decode(Ids{-5, 12, 1000}), "hello");        // ids naming no token decode to nothing
  EXPECT_EQ(t.decode_bytes(Ids{26}), "\xC3");
}

TEST(Tokenizer, VocabularyQueries) {
  const Tokenizer t = small();
  EXPECT_EQ(t.vocab_size(), 30);
  EXPECT_EQ(t.token_to_id("hello"), 12);
  EXPECT_EQ(t.token_to_id("Ġworld"), 17);
  EXPECT_EQ(t.token_to_id("<|im_end|>"), 20);
  EXPECT_EQ(t.token_to_id("nope"), std::nullopt);
  EXPECT_EQ(t.id_to_token(4), "Ġ");
  EXPECT_EQ(t.id_to_token(19), "<|im_start|>");
  EXPECT_EQ(t.id_to_token(100), "");
  EXPECT_EQ(t.id_to_token(-1), "");
  EXPECT_TRUE(t.is_special(19));
  EXPECT_FALSE(t.is_special(21));
  EXPECT_FALSE(t.is_special(12));
  EXPECT_EQ(t.bos_id(), std::nullopt);
  EXPECT_EQ(t.eos_ids(), (Ids{20, 18}));
}

TEST(Tokenizer, ConfigAddsBosAndNamesEos) {
  const Tokenizer t = small(R"({"add_bos_token": true, "bos_token": "<|endoftext|>",
                                "eos_token": {"content": "<|endoftext|>", "special": true}})");
  EXPECT_EQ(t.encode("hello"), (Ids{18, 12}));
  EXPECT_EQ(t.encode("hello", /*add_special_tokens=*/false), (Ids{12}));
  EXPECT_EQ(t.bos_id(), 18);
  EXPECT_EQ(t.eos_ids(), (Ids{18, 20}));
}

TEST(Tokenizer, TemplateProcessingAddsItsSpecialTokens) {
  const Tokenizer t = small_edited([](json& j) {
    j["post_processor"] = json::parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": "<|im_end|>", "type_id": 0}}],
       "pair": [],
       "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [18], "tokens": ["<|endoftext|>"]},
                          "<|im_end|>": {"id": "<|im_end|>", "ids": [20], "tokens": ["<|im_end|>"]}}}]})");
  });
  EXPECT_EQ(t.encode("hello"), (Ids{18, 12, 20}));
  EXPECT_EQ(t.encode("hello", false), (Ids{12}));
  EXPECT_EQ(t.bos_id(), 18);
}

TEST(Tokenizer, UnkTokenStandsInForMissingBytes) {
  const Tokenizer t = small_edited([](json& j) { j["model"]["unk_token"] = "!"; });
  EXPECT_EQ(t.encode("hz"), (Ids{0, 8}));
}

TEST(Tokenizer, ByteLevelPreTokenizerWithPrefixSpace) {
  // GPT-2 style: no Split, ByteLevel does the regex and adds a leading space.
  const Tokenizer t = small_edited([](json& j) {
    j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  });
  EXPECT_EQ(t.encode("world"), (Ids{17}));
  EXPECT_EQ(t.encode("hello world"), (Ids{4, 12, 17}));  // no merge joins Ġ and h
}

TEST(Tokenizer, StreamingDecoderHoldsBackCutCharacters) {
  const Tokenizer t = small();
  StreamingDecoder stream(t);
  EXPECT_EQ(stream.push(12), "hello");
  EXPECT_EQ(stream.push(26), "");            // C3: the first byte of é
  EXPECT_EQ(stream.push(27), "\xC3\xA9");    // A9 completes it
  EXPECT_EQ(stream.push(20), "");            // special, skipped by default
  EXPECT_EQ(stream.push(26), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");  // never completed
  EXPECT_EQ(stream.flush(), "");
  // A byte that cannot start or continue a character is released at once, not held.
  StreamingDecoder keep_special(t, /*skip_special_tokens=*/false);
  EXPECT_EQ(keep_special.push(27), "\xEF\xBF\xBD");
  EXPECT_EQ(keep_special.push(20), "<|im_end|>");
  EXPECT_EQ(keep_special.push(26), "");
  EXPECT_EQ(keep_special.push(8), "\xEF\xBF\xBD!");
}

TEST(Tokenizer, ChatPrompt) {
  const Tokenizer t = small();
  EXPECT_EQ(t.chat_prompt("hi"), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.chat_prompt("hi", "be brief"),
            "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  // With a BOS to add, the prompt starts with its text (encode it without special tokens).
  const Tokenizer with_bos = small(R"({"add_bos_token": true, "bos_token": "<|endoftext|>"})");
  EXPECT_EQ(with_bos.chat_prompt("hi"), "<|endoftext|><|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  const Tokenizer vocab_bos = small(R"({"add_bos_token": true, "bos_token": "hello"})");
  testing::expect_error([&] { vocab_bos.chat_prompt("hi"); }, ErrorKind::Value,
                        "the BOS id 12 ('hello') is not an added token");
  const Tokenizer no_chatml = small_edited([](json& j) { j["added_tokens"].erase(1); });
  testing::expect_error([&] { no_chatml.chat_prompt("hi"); }, ErrorKind::Value, "no added token <|im_start|>");
}

TEST(Tokenizer, LoadFromDirectory) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_tokenizer_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << kSmallTokenizer;
  std::ofstream(dir / "tokenizer_config.json") << R"({"add_bos_token": true, "bos_token": "<|endoftext|>"})";
  const Tokenizer t = Tokenizer::load(dir.string());
  EXPECT_EQ(t.encode("hello"), (Ids{18, 12}));
  std::filesystem::remove(dir / "tokenizer.json");
  testing::expect_error([&] { Tokenizer::load(dir.string()); }, ErrorKind::Runtime, "cannot open");
  std::filesystem::remove_all(dir);
}

TEST(Tokenizer, EncodeErrors) {
  const Tokenizer t = small();
  testing::expect_error([&] { t.encode("he\xFFllo"); }, ErrorKind::Value,
                        "not valid UTF-8: byte 0xFF at offset 2");
  testing::expect_error([&] { t.encode("abc\xC3"); }, ErrorKind::Value, "offset 3");
  testing::expect_error([&] { t.encode("\xED\xA0\x80"); }, ErrorKind::Value, "not valid UTF-8");  // a surrogate
  testing::expect_error([&] { t.encode("hz"); }, ErrorKind::Value, "byte 0x7A has no token in model.vocab");
  const Tokenizer unloaded{};
  testing::expect_error([&] { unloaded.encode("x"); }, ErrorKind::Runtime, "not loaded");
}

template <typename Edit>
void expect_load_error(Edit edit, ErrorKind kind, const std::string& needle) {
  testing::expect_error([&] { small_edited(edit); }, kind, needle);
}

TEST(Tokenizer, LoadErrors) {
  using E = ErrorKind;
  testing::expect_error([] { Tokenizer::from_json("{\"model\": ", "", "x/tokenizer.json"); }, E::Value,
                        "x/tokenizer.json: not valid JSON");
  testing::expect_error([] { Tokenizer::from_json("[1, 2]"); }, E::Value, "a JSON object at the top level");
  expect_load_error([](json& j) { j.erase("model"); }, E::Value, "tokenizer.model must be an object");
  expect_load_error([](json& j) { j["model"]["type"] = "WordPiece"; }, E::NotImplemented,
                    "model.type 'WordPiece' is not supported (expected BPE)");
  expect_load_error([](json& j) { j["model"]["byte_fallback"] = true; }, E::NotImplemented, "byte_fallback");
  expect_load_error([](json& j) { j["model"]["dropout"] = 0.1; }, E::NotImplemented, "model.dropout");
  expect_load_error([](json& j) { j["model"]["end_of_word_suffix"] = "</w>"; }, E::NotImplemented,
                    "end_of_word_suffix");
  expect_load_error([](json& j) { j["model"]["vocab"]["x"] = 3; }, E::Value, "gives id 3 to both");
  expect_load_error([](json& j) { j["model"]["vocab"]["x"] = -1; }, E::Value, "model.vocab['x'] = -1 is not a token id");
  expect_load_error([](json& j) { j["model"]["vocab"]["x"] = "7"; }, E::Value,
                    "model.vocab['x'] = \"7\" is not a token id (an integer in [0, 16777215])");
  expect_load_error([](json& j) { j["model"]["vocab"]["x"] = 1 << 24; }, E::Value, "= 16777216 is not a token id");
  expect_load_error([](json& j) { j["model"]["merges"].push_back("h z"); }, E::Value,
                    "model.merges[10] = ('h', 'z') uses 'z', which is not in model.vocab");
  expect_load_error([](json& j) { j["model"]["merges"].push_back("o d"); }, E::Value, "uses 'od'");
  expect_load_error([](json& j) { j["model"]["merges"].push_back("he l lo"); }, E::Value,
                    "model.merges[10] = 'he l lo' is not two tokens");
  expect_load_error([](json& j) { j["model"]["merges"].push_back(7); }, E::Value, "model.merges[10] holds 7");
  expect_load_error([](json& j) { j["model"]["merges"].push_back({"h", "e", "l"}); }, E::Value,
                    "model.merges[10] has 3 entries");
  expect_load_error([](json& j) { j["model"]["merges"] = "h e"; }, E::Value, "model.merges must be an array");
  expect_load_error([](json& j) { j["model"]["vocab"] = json::array(); }, E::Value, "model.vocab must be an object");
  expect_load_error([](json& j) { j["model"]["vocab"]["x"] = {1}; }, E::Value, "model.vocab['x'] is an array");
  expect_load_error([](json& j) { j["model"]["unk_token"] = "<unk>"; }, E::Value, "unk_token '<unk>'");
  expect_load_error([](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }, E::NotImplemented,
                    "normalizer type 'NFKC' is not supported");
  expect_load_error(
      [](json& j) {
        j["normalizer"] = json::parse(R"({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]})");
      },
      E::NotImplemented, "normalizer.normalizers[1] type 'Lowercase'");
  expect_load_error([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(\\p{L"; },
                    E::Value, "pre_tokenizer.pretokenizers[0]: invalid regex '(\\p{L'");
  expect_load_error([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; },
                    E::NotImplemented, "behavior 'Removed'");
  expect_load_error([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["invert"] = true; }, E::NotImplemented,
                    "invert = true");
  expect_load_error([](json& j) { j["pre_tokenizer"]["pretokenizers"].erase(1); }, E::NotImplemented,
                    "no ByteLevel step");
  expect_load_error([](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }, E::NotImplemented,
                    "pre_tokenizer type 'Whitespace'");
  expect_load_error([](json& j) { j["post_processor"] = {{"type", "BertProcessing"}}; }, E::NotImplemented,
                    "post_processor type 'BertProcessing'");
  expect_load_error(
      [](json& j) {
        j["post_processor"] = json::parse(R"({"type": "TemplateProcessing", "special_tokens": {},
                                               "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}]})");
      },
      E::Value, "post_processor.special_tokens has no ids for '<s>'");
  expect_load_error(
      [](json& j) {
        j["post_processor"] = json::parse(R"({"type": "TemplateProcessing",
          "special_tokens": {"<s>": {"id": "<s>", "ids": [77], "tokens": ["<s>"]}},
          "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]})");
      },
      E::Value, "post_processor adds id 77, which names no token");
  expect_load_error([](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }, E::NotImplemented,
                    "decoder type 'WordPiece'");
  expect_load_error([](json& j) { j["decoder"] = nullptr; }, E::NotImplemented, "decoder is null");
  expect_load_error([](json& j) { j["added_tokens"][0].erase("content"); }, E::Value,
                    "added_tokens[0].content must be a string");
  expect_load_error([](json& j) { j["added_tokens"][0]["special"] = "yes"; }, E::Value,
                    "added_tokens[0].special must be true or false");
}

TEST(Tokenizer, ConfigErrors) {
  testing::expect_error([] { small("{oops"); }, ErrorKind::Value, "tokenizer_config.json: not valid JSON");
  testing::expect_error([] { small(R"({"bos_token": "<s>"})"); }, ErrorKind::Value,
                        "tokenizer_config.json: bos_token '<s>' is not a token of tokenizer.json");
  testing::expect_error([] { small(R"({"add_bos_token": true})"); }, ErrorKind::Value,
                        "add_bos_token is true but no bos_token is named");
  testing::expect_error([] { small(R"({"eos_token": 5})"); }, ErrorKind::Value, "eos_token must be a string");
}

}  // namespace
}  // namespace kiln::llm
