// `kiln bench --llm`: whole-model decode and prefill on synthetic real-shape checkpoints.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {
class ThreadPool;
}

namespace kiln::bench {

struct LlmBenchOptions {
  std::string filter;          // runs models whose arch or preset contains it (all when empty)
  int64_t layers = 0;          // cut every model to at most this many layers (0: the preset's bench depth)
  std::string dir;             // where the checkpoints are written and kept; empty: a temporary folder
  int64_t prefill_tokens = 512;
  int64_t decode_steps = 32;
  int repeats = 3;
  bool quick = false;          // short probes
};

// Prints each model's rows and profiles; returns the process exit code.
int run_llm_bench(ThreadPool& pool, const LlmBenchOptions& options);

}  // namespace kiln::bench
