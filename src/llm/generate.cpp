// generate(): prompt -> prefill -> sample/decode loop with streaming text.
#include <algorithm>
#include <chrono>

#include "kiln/error.h"
#include "kiln/llm.h"
#include "kiln/profiler.h"
#include "llm/sampler.h"
#include "llm/tokenizer.h"

namespace kiln::llm {
namespace {

constexpr const char* kOp = "generate";
// Prompts longer than this run as several forward passes, bounding the [T, hidden]
// and [T, experts * ...] activations of one pass.
constexpr int64_t kPrefillChunk = 512;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::span<const float> last_row(const Tensor& logits) {
  const int64_t vocab = logits.size(-1);
  return {logits.data<float>() + (logits.numel() - vocab), static_cast<size_t>(vocab)};
}

}  // namespace

GenerateResult generate(Model& model, std::string_view prompt, const GenerateOptions& options) {
  KILN_CHECK_KIND(options.max_new_tokens >= 0, Value, kOp, "max_new_tokens must be >= 0, got {}",
                  options.max_new_tokens);
  Sampler sampler(options.sampling);
  // The chat template writes its own BOS text, so it is encoded without adding another.
  const std::vector<int32_t> prompt_ids =
      options.chat ? model.encode(model.chat_prompt(prompt, options.system, options.enable_thinking), /*add_special_tokens=*/false)
                   : model.encode(prompt, /*add_special_tokens=*/true);
  const int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());
  KILN_CHECK_KIND(prompt_len > 0, Value, kOp, "the prompt encodes to no tokens");
  KILN_CHECK_KIND(prompt_len <= model.max_context(), Value, kOp,
                  "the prompt is {} tokens but the context holds {} (LoadOptions::max_context)", prompt_len,
                  model.max_context());

  GenerateResult result;
  result.prompt_tokens = prompt_len;
  // One turn on the model from the reset to the last token: another thread's call
  // landing in between would change the sequence this loop extends.
  Model::Session session(model);
  session.reset();

  Clock::time_point start = Clock::now();
  Tensor logits;
  {
    profiler::PhaseScope phase("prefill");
    phase.add_tokens(prompt_len);
    for (int64_t begin = 0; begin < prompt_len; begin += kPrefillChunk) {
      const int64_t count = std::min(kPrefillChunk, prompt_len - begin);
      logits = session.forward(std::span<const int32_t>(prompt_ids).subspan(begin, count));
    }
  }
  result.prefill_seconds = seconds_since(start);

  start = Clock::now();
  const std::vector<int32_t>& eos = model.eos_ids();
  std::vector<int32_t> history = prompt_ids;
  StreamingDecoder stream(model.tokenizer());
  auto emit = [&](const std::string& piece) {
    if (piece.empty()) return true;
    result.text += piece;
    return !options.on_text || options.on_text(piece);
  };

  // Sampling and detokenising count as decode: they are part of every token's time.
  profiler::PhaseScope phase("decode");
  while (true) {
    if (result.generated_tokens == options.max_new_tokens) {
      result.stop_reason = "max_tokens";
      break;
    }
    const int32_t next = sampler.sample(last_row(logits), history);
    history.push_back(next);
    result.tokens.push_back(next);
    ++result.generated_tokens;
    if (std::binary_search(eos.begin(), eos.end(), next)) {
      result.stop_reason = "eos";
      break;
    }
    if (!emit(stream.push(next))) {
      result.stop_reason = "callback";
      break;
    }
    if (result.generated_tokens == options.max_new_tokens) {
      result.stop_reason = "max_tokens";
      break;
    }
    if (session.position() >= model.max_context()) {
      result.stop_reason = "context_full";
      break;
    }
    result.decode_bytes += static_cast<double>(session.decode_bytes_per_token());
    logits = session.forward(std::span<const int32_t>(&next, 1));
    phase.add_tokens(1);
  }
  if (result.stop_reason != "callback") emit(stream.flush());
  result.decode_seconds = seconds_since(start);
  return result;
}

}  // namespace kiln::llm
