// `kiln bench --filter nn`: issue 13's NN rows. PyTorch's figures for them come from
// the same-run comparison (scripts/bench_vs_torch/cases_nn.py, `make bench-torch`), since
// the shared build machines drift too much for a figure from another run to mean much.
//  - constant pad of a video-VAE activation [1,128,9,90,160] f32 with the causal 3-D
//    conv padding (1,1,1,1,2,0): <= 3.3 ms, and reserved memory flat over 100 calls;
//  - upsample nearest 2x of [8,64,64,64] f32, backward (the gradient of [8,64,128,128]).
#include <fmt/core.h>

#include "cli/bench/harness.h"
#include "kiln/allocator.h"
#include "kiln/autograd.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/interpolate.h"
#include "kiln/ops/pad.h"

namespace kiln::bench {
namespace {

constexpr double kPadTargetSeconds = 3.3e-3;

void pad_row(Table& table, bool quick) {
  Generator gen(13);
  const Shape shape = quick ? Shape{1, 16, 9, 90, 160} : Shape{1, 128, 9, 90, 160};
  const Tensor x = randn(shape, DType::Float32, &gen);
  const std::vector<int64_t> padding{1, 1, 1, 1, 2, 0};
  Row row;
  row.group = "pad constant f32";
  row.shape = fmt::format("{} (1,1,1,1,2,0)", shape_to_string(shape));
  // The output is the size of the call's traffic; outputs come back from the caching
  // allocator, so every call reuses one block (which the reserved check below asserts).
  row.timing = measure([&](int) { pad(x, padding); }, quick ? 5 : 30, quick ? 0.05 : 0.5);
  const Tensor y = pad(x, padding);
  row.bytes = static_cast<double>(x.nbytes() + y.nbytes());
  pad(x, padding);
  const int64_t after_two = allocator_stats().reserved_bytes;
  for (int i = 2; i < 100; ++i) pad(x, padding);
  const int64_t growth = allocator_stats().reserved_bytes - after_two;
  row.target = fmt::format("<= 3.3 ms, reserved +{} B over 100 calls", growth);
  row.has_target = true;
  row.target_met = row.timing.median_s <= kPadTargetSeconds && growth <= 0;
  table.add(row);
}

void upsample_backward_row(Table& table, bool quick) {
  Generator gen(14);
  const Shape shape = quick ? Shape{2, 8, 64, 64} : Shape{8, 64, 64, 64};
  Tensor x = randn(shape, DType::Float32, &gen);
  x.requires_grad_();
  const Tensor y = interpolate(x, {}, {2.0}, "nearest");
  const Tensor g = randn(y.sizes(), DType::Float32, &gen);
  Row row;
  row.group = "upsample nearest 2x bwd f32";
  row.shape = shape_to_string(shape);
  row.timing = measure([&](int) { autograd::grad({y}, {x}, {g}, /*retain_graph=*/true); }, quick ? 5 : 30,
                       quick ? 0.05 : 0.5);
  row.bytes = static_cast<double>(g.nbytes() + x.nbytes());
  row.target = ">= PyTorch 1.13 (make bench-torch)";
  table.add(row);
}

const Registrar kRegisterNn{Suite{
    "nn", "constant pad [1,128,9,90,160] f32 (<= 3.3 ms, flat reserved memory); upsample nearest 2x backward",
    [](ThreadPool&, Table& table, bool quick) {
      pad_row(table, quick);
      upsample_backward_row(table, quick);
    }}};

}  // namespace
}  // namespace kiln::bench
