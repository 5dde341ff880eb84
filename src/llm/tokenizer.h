// Hugging Face tokenizer.json: byte-level BPE (GPT-2 byte map) with the Split-regex
// pre-tokenizers of Qwen2/3, Qwen3.5 and Llama-3/LFM2 (spec: models.md §6), run through
// PCRE2 with Unicode properties; NFC normalisation through utf8proc; added and special
// tokens matched as whole strings before the regex; ignore_merges; decoding back to text
// that is safe to stream across multi-byte UTF-8 splits; ChatML prompts.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::llm {

class Tokenizer {
 public:
  // DIR/tokenizer.json (required), DIR/tokenizer_config.json (optional: add_bos_token,
  // bos/eos token names, chat_template) and DIR/chat_template.jinja or
  // DIR/chat_template.json (optional).
  static Tokenizer load(const std::string& dir);
  // From the texts of the two files; `source` names them in errors. chat_template_file
  // is the text of a chat_template.jinja (or chat_template.json's template), which wins
  // over tokenizer_config's "chat_template".
  struct ChatTemplateFile {
    std::string text;
    std::string name;  // for errors
  };
  static Tokenizer from_json(const std::string& tokenizer_json, const std::string& tokenizer_config_json = "",
                             const std::string& source = "tokenizer.json",
                             const std::optional<ChatTemplateFile>& chat_template_file = std::nullopt);

  // Text -> ids. add_special_tokens adds the BOS the tokenizer's post-processor or
  // tokenizer_config asks for (LFM2: <|startoftext|>; Qwen: none). Text that is not
  // valid UTF-8 is a Value error. Safe to call from several threads at once.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Ids -> text; invalid UTF-8 from a partial sequence is replaced by U+FFFD. An id that
  // names no token (negative, past the vocabulary, or an unused id) decodes to nothing,
  // as in Hugging Face tokenizers.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  // The raw bytes the ids stand for, without the U+FFFD repair (StreamingDecoder's input).
  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int64_t vocab_size() const;  // highest id + 1 over the vocabulary and added tokens
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // the vocabulary string ("" when unknown)
  bool is_special(int32_t id) const;
  std::optional<int32_t> bos_id() const;
  // tokenizer_config's eos_token, then <|im_end|> and <|endoftext|> when present.
  std::vector<int32_t> eos_ids() const;

  // The prompt for one user turn (and a system message when `system` is not empty), with
  // the generation prompt: the model's chat template when it has one (rendered with
  // add_generation_prompt=True, and enable_thinking=False when enable_thinking is
  // false), otherwise ChatML:
  // [BOS] <|im_start|>system\n{system}<|im_end|>\n (only when system is not
  // empty) <|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n
  // [BOS] is the text of the token(s) encode's add_special_tokens would put first (LFM2:
  // "<|startoftext|>"; Qwen: nothing), as Hugging Face chat templates write it: encode the
  // prompt with add_special_tokens=false, or the BOS appears twice. A tokenizer without
  // <|im_start|> and <|im_end|> added tokens is a Value error.
  // enable_thinking = false appends the empty think block Qwen3 / Qwen3.5 chat templates
  // pre-fill for `enable_thinking=False` ("<think>\n\n</think>\n\n" after the
  // generation prompt), so a thinking model answers directly.
  std::string chat_prompt(std::string_view user, std::string_view system = "", bool enable_thinking = true) const;

  // Whether the folder has a chat template kiln can render; when there is one that it
  // cannot, chat_template_problem() says why (and rendering raises it).
  bool has_chat_template() const;
  std::string chat_template_problem() const;
  // transformers' apply_chat_template(conversation, tools=..., add_generation_prompt=...,
  // tokenize=False, **kwargs) with the model's template: `messages_json` is the JSON
  // list of messages, `kwargs_json` a JSON object of further variables (tools,
  // enable_thinking, ...). `chat_template` replaces the model's template for this call
  // (transformers' chat_template=). No template is a Value error naming the tokenizer.
  std::string apply_chat_template(std::string_view messages_json, bool add_generation_prompt,
                                  std::string_view kwargs_json = "{}",
                                  std::optional<std::string_view> chat_template = std::nullopt) const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

// Turns generated ids into text piece by piece: push() returns only complete UTF-8
// characters, holding back the bytes of a character split across tokens.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = true);
  std::string push(int32_t id);
  std::string flush();  // whatever is held back (an incomplete character becomes U+FFFD)

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;
};

// Flavours of synthetic tokenizer `kiln make-model` writes.
enum class TokenizerFlavor { Qwen, Lfm2 };

// A deterministic byte-level BPE tokenizer.json of `vocab_size` ids at most (256 byte
// tokens, merges learned from a built-in English text, then the flavour's special tokens
// (<|endoftext|>, <|im_start|>, <|im_end|>; LFM2 also <|pad|>, <|startoftext|>) and the
// flavour's pre-tokenizer regex. Returns {tokenizer.json, tokenizer_config.json}.
struct SyntheticTokenizer {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
};
SyntheticTokenizer make_synthetic_tokenizer(TokenizerFlavor flavor, int64_t vocab_size);

}  // namespace kiln::llm
