// Encoding, decoding and ChatML prompts (the model's own template: tokenizer_chat.cpp)
// over a loaded tokenizer (tokenizer_load.cpp
// builds it): added tokens, then NFC, then the pre-tokenizer, then byte-level BPE.
#include "llm/tokenizer.h"

#include "kiln/error.h"
#include "llm/tokenizer_impl.h"
#include "llm/tokenizer_utf8.h"

namespace kiln::llm {
namespace {

const Tokenizer::Impl& loaded(const std::shared_ptr<const Tokenizer::Impl>& impl) {
  if (!impl) fail(ErrorKind::Runtime, "Tokenizer", "not loaded: create it with Tokenizer::load or Tokenizer::from_json");
  return *impl;
}

// Ordinary text: NFC, then normalized added tokens, then pre-tokens through BPE.
void encode_plain(const Tokenizer::Impl& m, std::string_view text, std::vector<int32_t>& ids) {
  const std::string normalized = m.nfc ? tok::nfc(text) : std::string(text);
  const auto encode_pieces = [&](std::string_view segment) {
    for (const std::string& piece : m.pre_tokenizer.split(segment)) m.bpe->encode_piece(piece, ids);
  };
  if (m.normalized_added.empty()) {
    encode_pieces(normalized);
    return;
  }
  for (const auto& segment : m.normalized_added.split(normalized)) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
    } else {
      encode_pieces(std::string_view(normalized).substr(segment.begin, segment.end - segment.begin));
    }
  }
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& m = loaded(impl_);
  const size_t bad = tok::find_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    fail(ErrorKind::Value, "Tokenizer.encode", "text is not valid UTF-8: byte 0x{:02X} at offset {} of {}",
         static_cast<uint8_t>(text[bad]), bad, text.size());
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  if (add_special_tokens) ids.insert(ids.end(), m.prefix_ids.begin(), m.prefix_ids.end());
  for (const auto& segment : m.raw_added.split(text)) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
    } else {
      encode_plain(m, text.substr(segment.begin, segment.end - segment.begin), ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), m.suffix_ids.begin(), m.suffix_ids.end());
  return ids;
}

std::string Tokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& m = loaded(impl_);
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= m.kind.size()) continue;
    if (skip_special_tokens && m.kind[static_cast<size_t>(id)] == Impl::Kind::Special) continue;
    bytes += m.token_bytes[static_cast<size_t>(id)];
  }
  return bytes;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return tok::utf8_lossy(decode_bytes(ids, skip_special_tokens));
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(loaded(impl_).kind.size()); }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  const Impl& m = loaded(impl_);
  const auto it = m.id_of_token.find(std::string(token));
  if (it == m.id_of_token.end()) return std::nullopt;
  return it->second;
}

std::string Tokenizer::id_to_token(int32_t id) const {
  const Impl& m = loaded(impl_);
  if (id < 0 || static_cast<size_t>(id) >= m.token_text.size()) return {};
  return m.token_text[static_cast<size_t>(id)];
}

bool Tokenizer::is_special(int32_t id) const {
  const Impl& m = loaded(impl_);
  return id >= 0 && static_cast<size_t>(id) < m.kind.size() && m.kind[static_cast<size_t>(id)] == Impl::Kind::Special;
}

std::optional<int32_t> Tokenizer::bos_id() const { return loaded(impl_).bos; }

std::vector<int32_t> Tokenizer::eos_ids() const { return loaded(impl_).eos; }

std::string Tokenizer::chat_prompt(std::string_view user, std::string_view system, bool enable_thinking) const {
  const Impl& m = loaded(impl_);
  if (m.chat_template || !m.chat_template_problem.empty()) return template_chat_prompt(m, user, system, enable_thinking);
  for (const char* marker : {"<|im_start|>", "<|im_end|>"}) {
    const auto it = m.id_of_token.find(marker);
    if (it == m.id_of_token.end() || m.kind[static_cast<size_t>(it->second)] == Impl::Kind::Vocab) {
      fail(ErrorKind::Value, "Tokenizer.chat_prompt", "{} has no added token {}; ChatML prompts need it", m.source,
           marker);
    }
  }
  std::string prompt;
  prompt.reserve(user.size() + system.size() + 96);
  for (int32_t id : m.prefix_ids) {
    // Only an added token's text is sure to encode back to the same id.
    if (m.kind[static_cast<size_t>(id)] == Impl::Kind::Vocab) {
      fail(ErrorKind::Value, "Tokenizer.chat_prompt", "{}: the BOS id {} ('{}') is not an added token", m.source, id,
           m.token_text[static_cast<size_t>(id)]);
    }
    prompt += m.token_text[static_cast<size_t>(id)];
  }
  if (!system.empty()) {
    prompt.append("<|im_start|>system\n").append(system).append("<|im_end|>\n");
  }
  prompt.append("<|im_start|>user\n").append(user).append("<|im_end|>\n<|im_start|>assistant\n");
  if (!enable_thinking) prompt.append("<think>\n\n</think>\n\n");
  return prompt;
}

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_(skip_special_tokens) {}

std::string StreamingDecoder::push(int32_t id) {
  const int32_t one[1] = {id};
  pending_ += tokenizer_->decode_bytes(one, skip_special_);
  // Hold back only a character that may still be completed by the next token; bytes that
  // can never form a character are released now as U+FFFD.
  const size_t complete = tok::complete_utf8_prefix(pending_);
  std::string out = tok::utf8_lossy(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string StreamingDecoder::flush() {
  std::string out = tok::utf8_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace kiln::llm
