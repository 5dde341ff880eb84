// Synthetic Hugging Face checkpoints, the public face of `kiln make-model`: a folder
// with config.json, generation_config.json, tokenizer.json, tokenizer_config.json and
// safetensors holding exactly the tensor names, shapes and dtypes of the real
// architecture, filled with deterministic random weights (so any text is meaningless).
// Lets everything from loading to decoding run at real shapes without a download.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::llm {

struct SyntheticModelProgress {
  int64_t tensors_done = 0;
  int64_t tensors_total = 0;
  uint64_t bytes_done = 0;   // tensor data written so far
  uint64_t bytes_total = 0;
};

struct SyntheticModelOptions {
  std::string arch = "qwen3_moe";  // "qwen3_moe" or "lfm2_moe"
  std::string preset = "tiny";
  std::optional<int64_t> num_layers;
  bool fp8 = false;  // Hugging Face FP8 block-scaled checkpoint
  std::string out_dir;
  uint64_t seed = 0;
  // Tensor data above this is split into model-0000i-of-0000n.safetensors shards with a
  // model.safetensors.index.json, as transformers' save_pretrained does.
  uint64_t max_shard_bytes = 2'000'000'000;
  // Called after each tensor is written.
  std::function<void(const SyntheticModelProgress&)> progress;
};

// What make_synthetic_model wrote.
struct SyntheticModelSummary {
  std::string model_type;           // "qwen3_moe", "lfm2_moe"
  int64_t num_layers = 0;
  std::vector<std::string> shards;  // safetensors files written (paths)
  uint64_t tensor_bytes = 0;        // total tensor data
};

// Writes the folder (created if needed); the presets are listed by `kiln make-model
// --help` (tiny, demo, and the real geometries). Stale model*.safetensors files and the
// index of an earlier run in the folder are replaced. The same options give
// byte-identical files on every machine and thread count.
SyntheticModelSummary make_synthetic_model(const SyntheticModelOptions& options);

}  // namespace kiln::llm
