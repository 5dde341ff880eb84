// Tokenizer encode and decode on the two synthetic tokenizers `kiln make-model` writes
// (Qwen: NFC and single digits; LFM2: BOS and digit runs). The first byte picks the
// tokenizer and the mode; the rest is text, or token ids. Checked:
//   - encode of valid UTF-8 already in NFC decodes back to the same text (byte-level BPE
//     loses nothing), and the streaming decoder gives it piece by piece too;
//   - encode of invalid UTF-8 raises kiln::Error;
//   - decode of any ids (negative, past the vocabulary) returns valid UTF-8.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "kiln/error.h"
#include "llm/tokenizer.h"
#include "llm/tokenizer_utf8.h"

namespace {

using kiln::fuzz::finding;
using kiln::llm::Tokenizer;

struct Tokenizers {
  Tokenizer qwen;
  Tokenizer lfm2;
};

Tokenizer synthetic(kiln::llm::TokenizerFlavor flavor) {
  const auto files = kiln::llm::make_synthetic_tokenizer(flavor, 512);
  return Tokenizer::from_json(files.tokenizer_json, files.tokenizer_config_json);
}

const Tokenizers& tokenizers() {
  static const Tokenizers all{synthetic(kiln::llm::TokenizerFlavor::Qwen),
                              synthetic(kiln::llm::TokenizerFlavor::Lfm2)};
  return all;
}

bool valid_utf8(std::string_view s) { return kiln::llm::tok::find_invalid_utf8(s) == std::string_view::npos; }

void round_trip(const Tokenizer& tokenizer, bool nfc, std::string_view text, bool add_special) {
  if (!valid_utf8(text)) {
    try {
      tokenizer.encode(text, add_special);
    } catch (const kiln::Error&) {
      return;
    }
    finding("encode accepted invalid UTF-8");
  }
  const std::vector<int32_t> ids = tokenizer.encode(text, add_special);
  if (add_special) return;  // a BOS makes the text differ; the ids above still had to come out
  // Added tokens are matched before NFC, so NFC of the whole text is the expected result
  // only when NFC changes nothing (a combining mark after "<|im_end|>" stays separate).
  if (nfc && kiln::llm::tok::nfc(text) != text) return;
  const std::string expected(text);
  if (tokenizer.decode(ids) != expected) finding("decode(encode(text)) is not the text");

  kiln::llm::StreamingDecoder stream(tokenizer, /*skip_special_tokens=*/false);
  std::string streamed;
  for (const int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  if (streamed != expected) finding("the streaming decoder's text differs from decode's");
}

void decode_ids(const Tokenizer& tokenizer, kiln::fuzz::FuzzInput& in, bool skip_special) {
  std::vector<int32_t> ids;
  while (!in.empty() && ids.size() < 4096) {
    // Mostly ids near the vocabulary, sometimes any 32-bit value.
    ids.push_back(in.flag() ? static_cast<int32_t>(in.raw<uint16_t>() % 600) - 40 : in.raw<int32_t>());
  }
  const std::string text = tokenizer.decode(ids, skip_special);
  if (!valid_utf8(text)) finding("decode returned invalid UTF-8");
  kiln::llm::StreamingDecoder stream(tokenizer, skip_special);
  std::string streamed;
  for (const int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  if (!valid_utf8(streamed)) finding("the streaming decoder returned invalid UTF-8");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::FuzzInput in(data, size);
  const uint8_t mode = in.byte();
  const bool qwen = (mode & 1) != 0;
  const Tokenizer& tokenizer = qwen ? tokenizers().qwen : tokenizers().lfm2;
  switch ((mode >> 1) % 4) {
    case 0:
      round_trip(tokenizer, qwen, in.rest(), false);
      break;
    case 1:
      round_trip(tokenizer, qwen, in.rest(), true);
      break;
    case 2: {
      // A ChatML prompt around the text (and the text as system prompt too).
      const std::string_view text = in.rest();
      if (!valid_utf8(text)) break;
      round_trip(tokenizer, qwen, tokenizer.chat_prompt(text, (mode & 0x80) != 0 ? text : ""), false);
      break;
    }
    default:
      decode_ids(tokenizer, in, (mode & 0x80) != 0);
      break;
  }
  return 0;
}
