// `kiln bench --filter softmax`: softmax and log_softmax over one 128256-wide row (a
// Llama-3 vocabulary of logits), the decode sampler's shape. The row fits in cache, so
// the target is a time, not a roofline fraction.
#include <fmt/core.h>

#include "cli/bench/harness.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/nn.h"

namespace kiln::bench {
namespace {

constexpr double kTargetSeconds = 10e-6;
constexpr double kPyTorchSeconds = 93e-6;  // PyTorch 1.13 CPU on this machine class

void run_row(bool log, Table& table, bool quick) {
  Generator gen(7);
  const Tensor logits = randn({1, 128256}, DType::Float32, &gen);
  Row row;
  row.group = log ? "log_softmax f32" : "softmax f32";
  row.shape = "[1,128256]";
  // Outputs come from the caching allocator, so every call reuses the same block.
  row.timing = measure([&](int) { log ? log_softmax(logits, -1) : softmax(logits, -1); }, quick ? 20 : 500,
                       quick ? 0.05 : 0.5);
  // No bytes: the row lives in cache, so a fraction of the DRAM roofline would mislead.
  row.baseline_s = kPyTorchSeconds;
  row.baseline_label = "PyTorch 1.13 CPU ~93 us";
  row.target = "<= 10 us";
  row.has_target = true;
  row.target_met = row.timing.median_s <= kTargetSeconds;
  table.add(row);
}

const Registrar kRegisterSoftmax{Suite{
    "softmax", "softmax and log_softmax over [1, 128256] f32 (target <= 10 us)",
    [](ThreadPool&, Table& table, bool quick) {
      run_row(false, table, quick);
      run_row(true, table, quick);
    }}};

}  // namespace
}  // namespace kiln::bench
