// Hostile model folders: every file a folder holds is bounded (nesting depth, size, entry
// counts, ids, config counts, regex work, context size) and only regular files are read.
// Each case must end in a typed error naming the file, quickly: a regression shows as a
// crash, a hang or a suite that runs for minutes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/llm.h"
#include "llm/checkpoint.h"
#include "llm/kv_cache.h"
#include "llm/model_files.h"
#include "llm/tokenizer.h"
#include "llm_model_test_util.h"
#include "llm_test_files.h"
#include "test_util.h"

namespace kiln::llm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using kiln::testing::expect_error;
using kiln::testing::read_file;
using kiln::testing::TempDir;
using kiln::testing::tiny_model_dir;
using kiln::testing::write_file;
using kiln::testing::write_safetensors_bytes;

// A copy of the tiny qwen3_moe folder to break.
void copy_tiny_model(const TempDir& dir) {
  fs::copy(tiny_model_dir("qwen3_moe"), dir.str(), fs::copy_options::recursive | fs::copy_options::overwrite_existing);
}

json read_json(const std::string& path) { return json::parse(read_file(path)); }
void write_json(const std::string& path, const json& j) { write_file(path, j.dump()); }

// `key` of the JSON object in `path` replaced by arrays nested `levels` deep.
void nest_member(const std::string& path, const std::string& key, size_t levels) {
  std::string text = read_json(path).dump();
  const std::string member = "\"" + key + "\":";
  std::string deep = std::string(levels, '[') + std::string(levels, ']');
  text.insert(1, member + deep + ",");
  write_file(path, text);
}

TEST(HostileModelFiles, DeepJsonInEveryFileIsRefused) {
  // A few hundred thousand levels crashed the process (recursive dump and destruction).
  for (const std::string name : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                                 "model.safetensors.index.json"}) {
    SCOPED_TRACE(name);
    TempDir dir;
    copy_tiny_model(dir);
    if (name == "model.safetensors.index.json") write_json(dir.file(name), {{"weight_map", json::object()}});
    nest_member(dir.file(name), "zz", 300'000);
    expect_error([&] { Model::load(dir.str()); }, ErrorKind::Value, name + ": JSON nests deeper than 64 levels");
  }
}

TEST(HostileModelFiles, DeepJsonAsAValueIsRefusedBeforeItIsQuoted) {
  // The error for a wrong type quotes the value: a deep one must never get that far.
  TempDir dir;
  copy_tiny_model(dir);
  json config = read_json(dir.file("config.json"));
  config.erase("vocab_size");
  write_json(dir.file("config.json"), config);
  nest_member(dir.file("config.json"), "vocab_size", 300'000);
  expect_error([&] { Model::load(dir.str()); }, ErrorKind::Value, "nests deeper than 64 levels");
}

TEST(HostileModelFiles, FifoInPlaceOfAFileIsNamedNotOpened) {
  // Opening a FIFO for reading blocks until a writer comes: the load hung.
  for (const std::string name : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                                 "model.safetensors", "model.safetensors.index.json"}) {
    SCOPED_TRACE(name);
    TempDir dir;
    copy_tiny_model(dir);
    fs::remove(dir.file(name));
    ASSERT_EQ(::mkfifo(dir.file(name).c_str(), 0600), 0);
    expect_error([&] { Model::load(dir.str()); }, ErrorKind::Runtime, name + " is a FIFO, expected a regular file");
  }
}

TEST(HostileModelFiles, FifoOrDirectoryShardIsNotCalledMissing) {
  for (const bool fifo : {true, false}) {
    SCOPED_TRACE(fifo ? "FIFO" : "directory");
    TempDir dir;
    copy_tiny_model(dir);
    fs::rename(dir.file("model.safetensors"), dir.file("a.safetensors"));
    write_json(dir.file("model.safetensors.index.json"), {{"weight_map", {{"w", "b.safetensors"}}}});
    if (fifo) {
      ASSERT_EQ(::mkfifo(dir.file("b.safetensors").c_str(), 0600), 0);
    } else {
      fs::create_directory(dir.file("b.safetensors"));
    }
    expect_error([&] { Checkpoint::open(dir.str()); }, ErrorKind::Runtime,
                 std::string("b.safetensors is ") + (fifo ? "a FIFO" : "a directory") + ", expected a regular file");
  }
  // Without an index, a *.safetensors that is not a file is named too, not skipped.
  TempDir dir;
  copy_tiny_model(dir);
  fs::create_directory(dir.file("extra.safetensors"));
  fs::rename(dir.file("model.safetensors"), dir.file("a.safetensors"));
  expect_error([&] { Checkpoint::open(dir.str()); }, ErrorKind::Runtime,
               "extra.safetensors is a directory, expected a regular file");
}

TEST(HostileModelFiles, OversizedJsonFileIsRefusedBeforeReading) {
  TempDir dir;
  copy_tiny_model(dir);
  // A sparse file: its size is what counts, nothing is written.
  fs::resize_file(dir.file("config.json"), kMaxConfigFileBytes + 1);
  expect_error([&] { Model::load(dir.str()); }, ErrorKind::Value,
               "config.json is 16777217 bytes, more than the 16777216-byte limit");
}

TEST(HostileModelFiles, ManyZeroSizeEntriesOpenInLinearTime) {
  // 50,000 zero-size tensors: the header parser rescanned the top-level object each time
  // an entry closed, quadratic in the entries (4 s for 10,000, minutes for 50,000 on a
  // busy 2-core machine). Nothing is timed: the count is chosen so that the quadratic
  // step would stall the suite.
  constexpr int kEntries = 50'000;
  std::string header = "{";
  for (int i = 0; i < kEntries; ++i) {
    header += (i ? ",\"t" : "\"t") + std::to_string(i) + R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
  }
  header += "}";
  TempDir dir;
  write_safetensors_bytes(dir.file("model.safetensors"), header, "");
  const Checkpoint checkpoint = Checkpoint::open(dir.str());
  EXPECT_EQ(checkpoint.names().size(), static_cast<size_t>(kEntries));
  EXPECT_EQ(checkpoint.get("t49999").numel(), 0);
}

// The tiny tokenizer.json with its pre-tokenizer replaced by a Split on `pattern`.
std::string tokenizer_with_split(const std::string& pattern) {
  json tokenizer = read_json(tiny_model_dir("qwen3_moe") + "/tokenizer.json");
  tokenizer["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}};
  return tokenizer.dump();
}

TEST(HostileModelFiles, CatastrophicSplitRegexFailsFastNamingThePattern) {
  // Took tens of seconds on a 1000-character prompt; now PCRE2's match limit stops it.
  const Tokenizer tokenizer = Tokenizer::from_json(tokenizer_with_split("a*a*a*a*b|."), "", "t/tokenizer.json");
  expect_error([&] { tokenizer.encode(std::string(1000, 'a')); }, ErrorKind::Value,
               "t/tokenizer.json: pre_tokenizer.pretokenizers[0]: regex 'a*a*a*a*b|.' exceeded PCRE2's match limit");
  // Short texts that such a pattern handles within the budget still encode.
  EXPECT_EQ(tokenizer.encode("aab", false).empty(), false);
}

TEST(HostileModelFiles, LongTextsStayWithinTheRegexBudget) {
  // The budget grows with the text: a legitimate pattern on a long run never reaches it.
  const Tokenizer tokenizer = Tokenizer::from_json(
      tokenizer_with_split(R"(\s*[\r\n]+|\s+(?!\S)|\s+|[^\s]+)"), "", "t/tokenizer.json");
  EXPECT_FALSE(tokenizer.encode(std::string(200'000, ' ') + "x" + std::string(200'000, '\n'), false).empty());
}

TEST(HostileModelFiles, FarVocabularyIdIsRefusedBeforeTablesAreSized) {
  // One id near 2^24 sized per-id tables of 16 million entries (a gigabyte).
  json tokenizer = read_json(tiny_model_dir("qwen3_moe") + "/tokenizer.json");
  json far_vocab = tokenizer;
  far_vocab["model"]["vocab"]["zzzz"] = (1 << 24) - 1;
  expect_error([&] { Tokenizer::from_json(far_vocab.dump(), "", "t/tokenizer.json"); }, ErrorKind::Value,
               "model.vocab['zzzz'] = 16777215 is far past the");
  json far_added = tokenizer;
  far_added["added_tokens"].push_back({{"id", (1 << 24) - 1}, {"content", "qqq"}, {"special", true}});
  expect_error([&] { Tokenizer::from_json(far_added.dump(), "", "t/tokenizer.json"); }, ErrorKind::Value,
               ".id = 16777215 is far past the");
}

TEST(HostileModelFiles, ManyAddedTokensWithOneFirstByteMatchInLinearTime) {
  // Every position of the text was compared with every added token sharing its first
  // byte: 100,000 tokens "<tN>" x 100,000 '<' was 1e10 comparisons. Not timed; sized so
  // the old scan would stall the suite.
  json tokenizer = read_json(tiny_model_dir("qwen3_moe") + "/tokenizer.json");
  const int first_id = static_cast<int>(tokenizer["model"]["vocab"].size() + tokenizer["added_tokens"].size()) + 16;
  for (int i = 0; i < 100'000; ++i) {
    tokenizer["added_tokens"].push_back({{"id", first_id + i}, {"content", "<t" + std::to_string(i) + ">"}});
  }
  const Tokenizer t = Tokenizer::from_json(tokenizer.dump(), "", "t/tokenizer.json");
  const std::vector<int32_t> ids = t.encode(std::string(100'000, '<') + "<t99999><t7>", false);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[ids.size() - 2], first_id + 99'999);
  EXPECT_EQ(ids.back(), first_id + 7);
}

// The tiny folder with config.json keys changed.
void load_with_config(const json& changes, const std::string& needle, ErrorKind kind, int64_t max_context = 0) {
  TempDir dir;
  copy_tiny_model(dir);
  json config = read_json(dir.file("config.json"));
  for (const auto& [key, value] : changes.items()) {
    if (value.is_null()) {
      config.erase(key);
    } else {
      config[key] = value;
    }
  }
  write_json(dir.file("config.json"), config);
  LoadOptions options;
  options.max_context = max_context;
  expect_error([&] { Model::load(dir.str(), options); }, kind, needle);
}

TEST(HostileModelFiles, ConfigCountsAreBoundedBeforePerLayerWork) {
  // num_hidden_layers: 1e8 spent seconds building per-layer tables before failing.
  load_with_config({{"num_hidden_layers", 100'000'000}, {"mlp_only_layers", nullptr}},
                   "'num_hidden_layers' is 100000000, more than kiln's bound of 4096", ErrorKind::Value);
  load_with_config({{"num_experts", 100'000'000}}, "'num_experts' is 100000000, more than kiln's bound",
                   ErrorKind::Value);
  load_with_config({{"hidden_size", int64_t{1} << 40}}, "'hidden_size' is 1099511627776, more than kiln's bound",
                   ErrorKind::Value);
  // Within the bound but beyond the checkpoint: refused before the first layer loads.
  load_with_config({{"num_hidden_layers", 4000}, {"mlp_only_layers", nullptr}},
                   "num_hidden_layers is 4000 but the checkpoint holds no tensor of layer 3999", ErrorKind::Value);
}

TEST(HostileModelFiles, StopIdsOutsideTheVocabularyAreRefused) {
  // An id past int32 was silently wrapped to another token id.
  load_with_config({{"eos_token_id", json::array({511, int64_t{1} << 40})}},
                   "'eos_token_id' holds 1099511627776, outside the vocabulary [0, 512)", ErrorKind::Value);
}

TEST(HostileModelFiles, QuotedValuesAreExcerpts) {
  // A wrong value is quoted in the message, but never megabytes of it.
  std::vector<int> many(100'000, 7);
  TempDir dir;
  copy_tiny_model(dir);
  json config = read_json(dir.file("config.json"));
  config["model_type"] = many;
  write_json(dir.file("config.json"), config);
  try {
    Model::load(dir.str());
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'model_type' must be a string, got [7,7,7,"), std::string::npos) << message;
    EXPECT_LT(message.size(), 500u) << message;
    EXPECT_EQ(message.substr(message.size() - 3), "...");
  }
}

TEST(HostileModelFiles, PreTokenizerStepsAreBounded) {
  json tokenizer = read_json(tiny_model_dir("qwen3_moe") + "/tokenizer.json");
  json steps = json::array();
  for (int i = 0; i < 1000; ++i) {
    steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Isolated"}, {"invert", false}});
  }
  tokenizer["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", steps}};
  expect_error([&] { Tokenizer::from_json(tokenizer.dump(), "", "t/tokenizer.json"); }, ErrorKind::Value,
               "pre_tokenizer.pretokenizers[64]: the pre_tokenizer has more than 64 steps");
}

TEST(HostileModelFiles, ContextBeyondMemoryIsRefusedAtLoad) {
  // max_context 2^58 overflowed the cache's byte count and the first forward wrote past it.
  load_with_config({{"max_position_embeddings", int64_t{1} << 62}}, "'max_position_embeddings' is 4611686018427387904",
                   ErrorKind::Value, int64_t{1} << 58);
  // 3 attention layers x 2 (K, V) x 2 KV heads x 16 head_dim x 2 bytes per token.
  load_with_config({{"max_position_embeddings", int64_t{1} << 40}},
                   "a context of 1099511627776 tokens needs 422212465065984 bytes of K/V cache", ErrorKind::Runtime,
                   int64_t{1} << 40);
  const std::vector<MixerKind> one_layer = {MixerKind::Attention};
  expect_error([&] { check_kv_cache_fits(one_layer, 4096, 4096, 0, 0, int64_t{1} << 40, DType::Float32); },
               ErrorKind::Runtime, "a context of 1099511627776 tokens needs more than 2^63 bytes");
}

}  // namespace
}  // namespace kiln::llm
