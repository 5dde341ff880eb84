// What a loaded tokenizer holds; built by tokenizer_load.cpp from tokenizer.json, used by
// tokenizer.cpp to encode and decode.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "llm/chat_template.h"
#include "llm/tokenizer.h"
#include "llm/tokenizer_added_tokens.h"
#include "llm/tokenizer_bpe.h"
#include "llm/tokenizer_pretokenizer.h"

namespace kiln::llm {

struct Tokenizer::Impl {
  std::string source;  // names the file(s) in errors

  bool nfc = false;
  tok::AddedTokenMatcher raw_added;         // added tokens matched before normalisation
  tok::AddedTokenMatcher normalized_added;  // added tokens with normalized=true
  tok::PreTokenizer pre_tokenizer;
  std::unique_ptr<tok::BpeModel> bpe;

  // add_special_tokens: ids around the text (the post-processor's template, or the BOS
  // tokenizer_config asks for).
  std::vector<int32_t> prefix_ids;
  std::vector<int32_t> suffix_ids;
  std::optional<int32_t> bos;
  std::vector<int32_t> eos;

  // Per id, over [0, vocab_size): the token string ("" for an unused id), the bytes it
  // decodes to, and what kind of token it is.
  enum class Kind : uint8_t { Unused, Vocab, Added, Special };
  std::vector<std::string> token_text;
  std::vector<std::string> token_bytes;
  std::vector<Kind> kind;
  std::unordered_map<std::string, int32_t> id_of_token;  // vocabulary strings and added contents

  // The model's chat template, when its folder has one; chat_template_problem says why a
  // template that is there cannot be used (raised when a chat prompt is asked for).
  std::shared_ptr<const ChatTemplate> chat_template;
  std::string chat_template_problem;
  // tokenizer_config's bos_token, eos_token, pad_token and unk_token texts: variables of
  // the template, as transformers passes its special_tokens_map.
  std::vector<std::pair<std::string, std::string>> template_special_tokens;
};

// Parses `text` as impl's chat template (tokenizer_load.cpp); a parse error is kept in
// chat_template_problem rather than raised.
void set_chat_template(Tokenizer::Impl& impl, std::string_view text, const std::string& name);

// Tokenizer::chat_prompt through the model's chat template (tokenizer_chat.cpp).
std::string template_chat_prompt(const Tokenizer::Impl& impl, std::string_view user, std::string_view system,
                                 bool enable_thinking);

}  // namespace kiln::llm
