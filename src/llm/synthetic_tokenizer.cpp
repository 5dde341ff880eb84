// make_synthetic_tokenizer: a small but genuine byte-level BPE tokenizer.json, shaped like
// the real Qwen / LFM2 files, for models `kiln make-model` invents. Its merges come from
// a tiny BPE trainer run on the built-in text below, so it tokenizes English like a real
// (if small) vocabulary, and it is the same every run.
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/error.h"
#include "llm/synthetic_tokenizer.h"
#include "llm/tokenizer.h"
#include "llm/tokenizer_byte_level.h"
#include "llm/tokenizer_pretokenizer.h"

namespace kiln::llm {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kQwenPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The training text: plain English prose with the contractions, numbers, punctuation and
// line breaks the pre-tokenizer regexes treat specially.
constexpr std::string_view kTrainingText = R"(The river ran past the old mill at the edge of the town, and every morning the miller
opened the great wooden doors to let the light fall across the floor. He had worked there
for 32 years, and his father for 41 years before him. "It's a good life," he would say to
anyone who asked, "if you don't mind the flour in your hair and the noise of the wheel."

In the spring of 1887 the water rose higher than anyone could remember. It came over the
banks on a Tuesday night, filled the lower fields, and reached the first step of the mill
by morning. The miller and his two sons carried the sacks of grain up to the loft, one at
a time, until their arms ached. They'd moved 250 sacks by noon and 412 by nightfall. When
the water went down again the town counted the damage: three bridges, eleven barns, and
the long stone wall along the road to the north.

We're told that the people of the town were patient and kind to one another in those
weeks. They shared bread, they shared dry clothes, and they shared the work of clearing
the mud from the streets. The school was closed for 9 days; the children spent them
carrying buckets, and they'll tell you even now that it was the best holiday they ever had.
Nobody was paid for the work, and nobody asked to be.

A letter from that summer survives. It says: "Dear Anna, the fields are green again and
the wheel turns as it always did. I've planted beans by the south wall, where the water
stood longest, and they are growing faster than I can pick them. The price of flour is
up to 3 shillings and 6 pence; the price of everything is up. Still, we are well, and
we'll be glad to see you in the autumn. Write soon, and tell me about the city!"

Today the mill is a museum. Visitors walk through the rooms, read the small cards beside
the tools, and stand by the window where the miller used to stand. The wheel still turns
on the first Sunday of every month, at 10:30 in the morning, and the children of the town
still come to watch it. Some of them are the great-great-grandchildren of the boys who
carried the sacks; most of them don't know it, and it doesn't matter. The river runs on.

On the other side of the square stood the workshop of a clockmaker named Thomas Reed.
He was a quiet man who liked numbers better than people, or so he said, though the
children of the town knew better: he kept a jar of sweets on the counter and never
counted how many were taken. His clocks hung on every wall, and at noon they all struck
together, twelve times each, so that the whole street seemed to ring like a bell.

"A clock is only a river you can hold in your hand," he told a visitor once. "The water
turns the wheel, the spring turns the gears, and the hands go round. Nothing is lost;
it's only moved from one place to another." The visitor wrote this down in a notebook,
and the notebook is now kept in a glass case at the museum, open at page 17.

In the winter of 1903 the snow lay so deep that the road to the city was closed for
nearly six weeks. Bread was baked in the mill's old oven, and the clockmaker repaired
lamps, kettles and even a broken violin, because there were no clocks to mend. People
gathered in the evenings to read aloud, to sing, and to argue about the weather. When
the road opened again, on the 14th of February, the first cart brought letters, salt,
tea, and a newspaper that was already a month old. Everyone read it anyway.

Some notes on the mill, written by a visitor in 1952:
- The wheel is 6 metres across and has 48 paddles.
- The stones weigh about 900 kilograms each.
- In a good year the mill ground 3,000 sacks of wheat.
- The building has been repaired at least 5 times since 1800.

Questions for the reader:
1. Why did the miller carry the grain to the loft?
2. How many sacks were moved by nightfall?
3. What did the clockmaker mean when he said that nothing is lost?
4. What would you have done in their place?
)";

std::vector<std::string> special_tokens_of(TokenizerFlavor flavor) {
  if (flavor == TokenizerFlavor::Lfm2) {
    return {"<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  }
  return {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
}

struct Trained {
  std::vector<std::string> vocab;  // id -> byte-level spelling
  std::vector<std::pair<int32_t, int32_t>> merges;
};

// Classic BPE training: split the text into pre-tokens with the flavour's regex, then
// repeatedly merge the most frequent adjacent pair (ties: lowest pair of ids, so the
// result never depends on hash order) until the vocabulary is full or no pair repeats.
Trained train_bpe(std::string_view pattern, size_t vocab_target) {
  const tok::ByteLevelMap& bytes_map = tok::ByteLevelMap::get();
  Trained trained;
  int32_t id_of_byte[256];
  for (int i = 0; i < 256; ++i) {
    const uint8_t byte = bytes_map.vocab_order()[static_cast<size_t>(i)];
    id_of_byte[byte] = i;
    trained.vocab.push_back(bytes_map.spelling(byte));
  }
  std::unordered_map<std::string, int32_t> id_of_spelling;
  for (int32_t i = 0; i < 256; ++i) id_of_spelling.emplace(trained.vocab[static_cast<size_t>(i)], i);

  const tok::Regex regex(pattern, false, "synthetic tokenizer");
  std::vector<std::string_view> pieces;
  regex.split_isolated(kTrainingText, pieces);
  std::map<std::string_view, int64_t> piece_counts;  // ordered: word order is fixed
  for (std::string_view piece : pieces) ++piece_counts[piece];
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> counts;
  for (const auto& [piece, count] : piece_counts) {
    std::vector<int32_t> word;
    for (char c : piece) word.push_back(id_of_byte[static_cast<uint8_t>(c)]);
    words.push_back(std::move(word));
    counts.push_back(count);
  }

  std::unordered_map<uint64_t, int64_t> pair_counts;
  while (trained.vocab.size() < vocab_target) {
    pair_counts.clear();
    for (size_t w = 0; w < words.size(); ++w) {
      const auto& word = words[w];
      for (size_t i = 0; i + 1 < word.size(); ++i) {
        pair_counts[(static_cast<uint64_t>(word[i]) << 32) | static_cast<uint32_t>(word[i + 1])] += counts[w];
      }
    }
    uint64_t best = 0;
    int64_t best_count = 0;
    for (const auto& [pair, count] : pair_counts) {
      if (count > best_count || (count == best_count && pair < best)) best = pair, best_count = count;
    }
    if (best_count < 2) break;
    const auto left = static_cast<int32_t>(best >> 32), right = static_cast<int32_t>(best & 0xFFFFFFFFu);
    const std::string spelling = trained.vocab[static_cast<size_t>(left)] + trained.vocab[static_cast<size_t>(right)];
    // Two different pairs can spell the same token; it keeps its first id.
    const auto [it, fresh] = id_of_spelling.emplace(spelling, static_cast<int32_t>(trained.vocab.size()));
    if (fresh) trained.vocab.push_back(spelling);
    trained.merges.emplace_back(left, right);
    for (auto& word : words) {
      size_t out = 0;
      for (size_t i = 0; i < word.size(); ++i) {
        if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
          word[out++] = it->second;
          ++i;
        } else {
          word[out++] = word[i];
        }
      }
      word.resize(out);
    }
  }
  return trained;
}

ordered_json byte_level_component(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", use_regex}};
}

// ChatML, as the fallback writes it, with Qwen3's enable_thinking=False switch: kiln's
// chat prompts for these folders are the same through the template as without it.
ordered_json chat_template(bool with_bos) {
  std::string text = with_bos ? "{{- bos_token -}}" : "";
  text +=
      "{%- for message in messages -%}"
      "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
      "{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
      "{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}"
      "{%- endif -%}";
  return text;
}

}  // namespace

std::string_view tok::synthetic_training_text() { return kTrainingText; }

SyntheticTokenizer make_synthetic_tokenizer(TokenizerFlavor flavor, int64_t vocab_size) {
  const bool lfm2 = flavor == TokenizerFlavor::Lfm2;
  const std::vector<std::string> specials = special_tokens_of(flavor);
  const auto minimum = static_cast<int64_t>(256 + specials.size());
  if (vocab_size < minimum) {
    fail(ErrorKind::Value, "make_synthetic_tokenizer",
         "vocab_size {} is too small: a byte-level {} tokenizer needs at least {} ids (256 bytes + {} special tokens)",
         vocab_size, lfm2 ? "LFM2" : "Qwen", minimum, specials.size());
  }
  const Trained trained = train_bpe(lfm2 ? kLlama3Pattern : kQwenPattern,
                                    static_cast<size_t>(vocab_size) - specials.size());

  ordered_json vocab = ordered_json::object();
  for (size_t id = 0; id < trained.vocab.size(); ++id) vocab[trained.vocab[id]] = id;
  ordered_json merges = ordered_json::array();
  for (const auto& [left, right] : trained.merges) {
    merges.push_back({trained.vocab[static_cast<size_t>(left)], trained.vocab[static_cast<size_t>(right)]});
  }
  ordered_json added = ordered_json::array();
  ordered_json added_decoder = ordered_json::object();
  const auto first_special = static_cast<int64_t>(trained.vocab.size());
  for (size_t i = 0; i < specials.size(); ++i) {
    const int64_t id = first_special + static_cast<int64_t>(i);
    ordered_json entry = {{"id", id},          {"content", specials[i]}, {"single_word", false}, {"lstrip", false},
                          {"rstrip", false},   {"normalized", false},    {"special", true}};
    added.push_back(entry);
    entry.erase("id");
    added_decoder[std::to_string(id)] = entry;
  }

  ordered_json post_processor = byte_level_component(false);
  if (lfm2) {
    // Like Llama-3 style files: ByteLevel, then a template that puts BOS first.
    const std::string bos = "<|startoftext|>";
    const ordered_json bos_piece = {{"SpecialToken", {{"id", bos}, {"type_id", 0}}}};
    const ordered_json bos_piece_b = {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}};
    const ordered_json template_processing = {
        {"type", "TemplateProcessing"},
        {"single", {bos_piece, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {bos_piece, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, bos_piece_b,
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{bos, {{"id", bos}, {"ids", {first_special + 1}}, {"tokens", {bos}}}}}}};
    post_processor = {{"type", "Sequence"}, {"processors", {byte_level_component(false), template_processing}}};
  }

  ordered_json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", lfm2 ? ordered_json(nullptr) : ordered_json{{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", std::string(lfm2 ? kLlama3Pattern : kQwenPattern)}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          byte_level_component(false)}}}},
      {"post_processor", post_processor},
      {"decoder", byte_level_component(false)},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", lfm2},
        {"vocab", vocab},
        {"merges", merges}}}};

  ordered_json config = {
      {"add_bos_token", lfm2},
      {"add_eos_token", false},
      {"added_tokens_decoder", added_decoder},
      {"bos_token", lfm2 ? ordered_json("<|startoftext|>") : ordered_json(nullptr)},
      {"eos_token", "<|im_end|>"},
      {"pad_token", lfm2 ? "<|pad|>" : "<|endoftext|>"},
      {"chat_template", chat_template(lfm2)},
      {"clean_up_tokenization_spaces", false},
      {"model_max_length", 32768},
      {"tokenizer_class", "PreTrainedTokenizerFast"}};

  return {tokenizer.dump(2), config.dump(2)};
}

}  // namespace kiln::llm
