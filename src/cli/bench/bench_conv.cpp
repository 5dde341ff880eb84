// `kiln bench --filter conv`: conv2d 3x3, stride 1, padding 1, [8, 64, 56, 56] -> 64
// channels, float32 (a ResNet stage), forward and backward (input, weight and bias
// gradients through convolution_backward), channels-last and contiguous.
// FLOPs: forward 2 N O H W C 9; backward twice that (input and weight gradients; the
// bias gradient is lower order). The figure is compared with the compute peak measured
// in the same run. The target (backward, channels-last, >= PyTorch 1.13 in the
// same run) is a same-process comparison: `make bench-torch FILTER=conv`.
#include <fmt/core.h>

#include <cstdint>

#include "cli/bench/harness.h"
#include "kiln/generator.h"
#include "kiln/ops/conv.h"
#include "kiln/ops/creation.h"

namespace kiln::bench {

namespace {

constexpr int64_t kN = 8, kC = 64, kO = 64, kH = 56, kW = 56;

Tensor channels_last(const Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}); }

void add_row(Table& table, const char* group, bool cl, const Timing& t, double flops) {
  Row row;
  row.group = group;
  row.shape = fmt::format("[{},{},{},{}] -> {}, 3x3 pad 1, {}", kN, kC, kH, kW, kO,
                          cl ? "channels-last" : "contiguous");
  row.timing = t;
  row.flops = flops;
  table.add(row);
}

void run(Table& table, bool quick) {
  Generator gen(13);
  const double forward_flops = 2.0 * kN * kO * kH * kW * kC * 9;
  const int runs = quick ? 2 : 10;
  const double seconds = quick ? 0.05 : 0.5;
  for (bool cl : {true, false}) {
    Tensor x = randn({kN, kC, kH, kW}, DType::Float32, &gen);
    Tensor w = randn({kO, kC, 3, 3}, DType::Float32, &gen);
    Tensor g = randn({kN, kO, kH, kW}, DType::Float32, &gen);
    if (cl) {
      x = channels_last(x);
      g = channels_last(g);
    }
    const Timing fwd = measure([&](int) { conv2d(x, w, std::nullopt, {1}, {1}); }, runs, seconds);
    add_row(table, "conv2d f32 forward", cl, fwd, forward_flops);
    const Timing bwd = measure(
        [&](int) { convolution_backward(g, x, w, {1}, {1}, {1}, false, {0}, 1, {true, true, true}); }, runs, seconds);
    add_row(table, "conv2d f32 backward (input+weight+bias)", cl, bwd, 2.0 * forward_flops);
    if (quick) break;
  }
}

const Registrar kRegisterConv{Suite{
    "conv", "conv2d 3x3 [8,64,56,56] -> 64 f32, forward and backward, channels-last and contiguous, vs compute peak",
    [](ThreadPool&, Table& table, bool quick) { run(table, quick); }}};

}  // namespace
}  // namespace kiln::bench
