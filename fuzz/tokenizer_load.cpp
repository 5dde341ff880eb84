// tokenizer.json loading: the input is tokenizer.json, then after a NUL byte
// tokenizer_config.json. Whatever the text, Tokenizer::from_json builds a tokenizer that
// can encode and decode, or raises kiln::Error. A tokenizer that loads is run on a short
// fixed text, so the regexes, added tokens and post-processor the file declared run too.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "kiln/error.h"
#include "llm/tokenizer.h"

namespace {

// Letters, digits, spaces, a newline, punctuation, an accent to compose and an emoji:
// something for every branch of the pre-tokenizer regexes.
constexpr const char* kSampleText = "Hello, world! It's 2024: cafe\xCC\x81 \xF0\x9F\x94\xA5  x\n<|im_end|>";

void exercise(const kiln::llm::Tokenizer& tokenizer) {
  for (const bool special : {false, true}) {
    const std::vector<int32_t> ids = tokenizer.encode(kSampleText, special);
    tokenizer.decode(ids, !special);
  }
  const int64_t vocab = tokenizer.vocab_size();
  for (const int64_t id : {int64_t{-1}, int64_t{0}, vocab - 1, vocab}) {
    tokenizer.id_to_token(static_cast<int32_t>(id));
    tokenizer.is_special(static_cast<int32_t>(id));
  }
  tokenizer.eos_ids();
  tokenizer.bos_id();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [tokenizer_json, config_json] = kiln::fuzz::split_at_nul(data, size);
  try {
    const auto tokenizer = kiln::llm::Tokenizer::from_json(tokenizer_json, config_json, "tokenizer.json");
    exercise(tokenizer);
  } catch (const kiln::Error&) {
  }
  return 0;
}
