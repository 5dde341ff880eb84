// config.json (and generation_config.json) parsing: the input is config.json, then
// after a NUL byte generation_config.json. Whatever the text, parse_model_config returns
// a config whose per-layer tables match its layer count, or raises kiln::Error.
#include <cstdint>

#include "fuzz_input.h"
#include "kiln/error.h"
#include "llm/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [config_json, generation_json] = kiln::fuzz::split_at_nul(data, size);
  try {
    const kiln::llm::ModelConfig config = kiln::llm::parse_model_config(config_json, "config.json", generation_json);
    if (config.num_layers <= 0) kiln::fuzz::finding("config accepted without layers");
    const auto layers = static_cast<uint64_t>(config.num_layers);
    if (config.mixers.size() != layers || config.moe_layers.size() != layers) {
      kiln::fuzz::finding("config accepted with per-layer tables that do not match num_hidden_layers");
    }
    // What kiln writes for a config it accepted must read back (the writer spells out
    // every layer, so only for configs of a real model's size).
    if (config.num_layers <= 1024) {
      kiln::llm::parse_model_config(kiln::llm::model_config_to_json(config), "config.json (written back)");
    }
  } catch (const kiln::Error&) {
  }
  return 0;
}
