// `kiln bench --filter moe`: the MoE expert block for one decode token.
//   Qwen3-30B-A3B   8 of 128 experts, hidden 2048, intermediate 768
//   Qwen3.5-35B-A3B 8 of 256 experts + the shared expert (sigmoid-gated), hidden 2048,
//                   intermediate 512
// each with bf16 experts and FP8 experts (row-wise scales), three rows per case:
//   moe_experts          the expert op alone, weights in kiln's allocator (huge pages);
//   moe_block_decode     the fused decode block (norm, router, top-k, experts, residual)
//                        that a model's decode step runs, same weights;
//   moe_block_decode 4K  the same block with the weights in 4 KiB pages, as a checkpoint
//                        mapped from disk holds them (anonymous memory advised
//                        MADV_NOHUGEPAGE stands in for the file mapping: the TLB sees the
//                        same pages).
// Bytes = the expert weights the token touches (+ FP8 scales, + the shared expert and its
// gate; + the router for the block rows), against this run's memory roofline; the bf16
// Qwen3-30B expert row also against PyTorch's per-expert loop.
// Every call reads cold weights: calls cycle through disjoint sets of 8 experts covering
// all of them (0.6-1.6 GB), and through 16 copies of the shared expert. The block rows
// pick their experts through the router: its row e is the unit vector e, and the input
// of call i is 1 on the experts of set i mod (E / 8), so top-k selects exactly that set.
// Weights are filled expert by expert from a few random matrices (timing does not depend
// on the values), so a case never holds more than its own weights.
#include <fmt/core.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "cli/bench/harness.h"
#include "kiln/allocator.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/decode_block.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/moe.h"

namespace kiln::bench {

namespace {

constexpr double kRooflineTarget = 0.85;
// PyTorch 1.13 CPU's per-expert loop for one token through 8 of 128 experts (H 2048,
// I 768, bf16) on this machine class, as the issue gives it.
constexpr double kTorchExpertLoopS = 5.6e-3;
constexpr int64_t kHidden = 2048;
constexpr int64_t kTopK = 8;
constexpr int kSharedCopies = 16;
constexpr int kDistinctSources = 4;  // random matrices the experts are filled from

struct Shape3 {
  const char* model;
  int64_t experts;
  int64_t inter;
  bool shared;
};

// Uniform values of magnitude ~1/sqrt(fan_in).
Tensor random_weights(const Shape& shape, int64_t fan_in, DType dt, uint64_t seed) {
  Generator g(seed);
  return mul(sub(rand(shape, DType::Float32, &g), Scalar(0.5)), Scalar(2.0 / std::sqrt(double(fan_in)))).to(dt);
}

// A tensor in kiln's allocator (huge pages for blocks this large), or in 4 KiB pages.
Tensor placed(const Shape& shape, DType dt, bool small_pages) {
  if (!small_pages) return empty(shape, dt);
  size_t bytes = itemsize(dt);
  for (int64_t s : shape) bytes *= static_cast<size_t>(s);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail(ErrorKind::Runtime, "bench moe", "could not map {} bytes", bytes);
#ifdef MADV_NOHUGEPAGE
  ::madvise(p, bytes, MADV_NOHUGEPAGE);
#endif
  std::shared_ptr<void> mapping(p, [bytes](void* q) { ::munmap(q, bytes); });
  return Tensor::from_storage(Storage::borrow(p, bytes, mapping), shape, contiguous_strides(shape), 0, dt);
}

// E experts as views of fused [E, 2I, H] / [E, H, I] tensors, bf16 or FP8 (row scales).
MoeExperts make_experts(const Shape3& s, bool fp8, bool small_pages, uint64_t seed) {
  const DType dt = fp8 ? DType::Float8_e4m3fn : DType::BFloat16;
  Tensor gate_up = placed({s.experts, 2 * s.inter, kHidden}, dt, small_pages);
  Tensor down = placed({s.experts, kHidden, s.inter}, dt, small_pages);
  std::optional<Tensor> gate_up_scale, down_scale;
  if (fp8) {
    gate_up_scale = empty({s.experts, 2 * s.inter}, DType::Float32);
    down_scale = empty({s.experts, kHidden}, DType::Float32);
  }
  const int sources = static_cast<int>(std::min<int64_t>(kDistinctSources, s.experts));
  for (int src = 0; src < sources; ++src) {
    Tensor gu = random_weights({2 * s.inter, kHidden}, kHidden, DType::BFloat16, seed + 2 * src);
    Tensor d = random_weights({kHidden, s.inter}, s.inter, DType::BFloat16, seed + 2 * src + 1);
    Tensor gu_scale, d_scale;
    if (fp8) {
      std::tie(gu, gu_scale) = quantize_fp8_rowwise(gu);
      std::tie(d, d_scale) = quantize_fp8_rowwise(d);
    }
    for (int64_t e = src; e < s.experts; e += sources) {
      gate_up.select(0, e).copy_(gu);
      down.select(0, e).copy_(d);
      if (fp8) {
        gate_up_scale->select(0, e).copy_(gu_scale);
        down_scale->select(0, e).copy_(d_scale);
      }
    }
  }
  return MoeExperts::from_fused(gate_up, down, gate_up_scale, down_scale);
}

std::vector<SharedExpert> make_shared(const Shape3& s, bool fp8, bool small_pages) {
  std::vector<SharedExpert> copies;
  for (int c = 0; c < kSharedCopies; ++c) {
    MoeExperts one = make_experts({s.model, 1, s.inter, false}, fp8, small_pages, 100 + 2 * c);
    copies.push_back({one.experts[0], random_weights({1, kHidden}, kHidden, DType::BFloat16, 200 + c)});
  }
  return copies;
}

struct Case {
  Shape3 shape;
  bool fp8;
  int64_t patterns() const { return shape.experts / kTopK; }
  double item() const { return fp8 ? 1.0 : 2.0; }
  // Weights (and scales) of one expert; of a token's experts, shared expert included.
  double per_expert() const {
    return 3.0 * shape.inter * kHidden * item() + (fp8 ? (2.0 * shape.inter + kHidden) * 4.0 : 0.0);
  }
  double token_bytes() const { return kTopK * per_expert() + (shape.shared ? per_expert() + kHidden * 2.0 : 0.0); }
  std::string shape_label() const {
    return fmt::format("{}: {} of {}{}, H {} I {}", shape.model, kTopK, shape.experts, shape.shared ? " + shared" : "",
                       kHidden, shape.inter);
  }
};

Row make_row(const Table& table, const Case& c, const std::string& what, Timing timing, double bytes) {
  Row row;
  row.group = fmt::format("{} {}", what, c.fp8 ? "fp8 (row scales)" : "bf16");
  row.shape = c.shape_label();
  row.timing = timing;
  row.bytes = bytes;
  row.flops = 2.0 * c.token_bytes() / c.item();
  row.target = fmt::format(">= {:.2f} of roofline", kRooflineTarget);
  row.has_target = true;
  row.target_met = table.roofline_gbps() > 0 && table.roofline_fraction(row) >= kRooflineTarget;
  return row;
}

void run_expert_op(Table& table, const Case& c, const MoeExperts& experts, const std::vector<SharedExpert>& shared,
                   bool quick) {
  const Tensor x = random_weights({1, kHidden}, 1, DType::BFloat16, 7);
  // Call i uses experts p, p + P, p + 2P, ... (p = i mod P, P = E / 8): disjoint sets.
  std::vector<Tensor> ids;
  for (int64_t p = 0; p < c.patterns(); ++p) {
    Tensor id = empty({1, kTopK}, DType::Int32);
    for (int64_t j = 0; j < kTopK; ++j) id.data<int32_t>()[j] = static_cast<int32_t>(p + j * c.patterns());
    ids.push_back(id);
  }
  const Tensor weights = full({1, kTopK}, Scalar(1.0 / kTopK), DType::Float32);
  const Timing timing = measure(
      [&](int i) {
        const Tensor& id = ids[static_cast<size_t>(i % c.patterns())];
        if (c.shape.shared) {
          moe_experts(x, weights, id, experts, shared[static_cast<size_t>(i % kSharedCopies)]);
        } else {
          moe_experts(x, weights, id, experts);
        }
      },
      quick ? 5 : 60, quick ? 0.05 : 0.4);
  Row row = make_row(table, c, "moe_experts decode", timing, c.token_bytes());
  if (!c.fp8 && !c.shape.shared) {
    row.baseline_s = kTorchExpertLoopS;
    row.baseline_label = "PyTorch 1.13 per-expert loop";
  }
  table.add(row);
}

void run_block(Table& table, const Case& c, const MoeExperts& experts, const std::vector<SharedExpert>& shared,
               bool small_pages, bool quick) {
  const int64_t E = c.shape.experts;
  MoeBlockDecodeConfig config;
  config.norm_weight = ones({kHidden}, DType::Float32);
  config.router = zeros({E, kHidden}, DType::BFloat16);
  for (int64_t e = 0; e < E; ++e) config.router.select(0, e).select(0, e).fill_(Scalar(1.0));
  config.top_k = kTopK;
  config.renormalize = true;
  config.experts = experts;
  // One block per shared-expert copy (they share the routed experts).
  std::vector<MoeBlockDecode> blocks;
  for (int b = 0; b < (c.shape.shared ? kSharedCopies : 1); ++b) {
    if (c.shape.shared) config.shared = shared[static_cast<size_t>(b)];
    std::optional<MoeBlockDecode> block = MoeBlockDecode::prepare(config);
    KILN_CHECK(block.has_value(), "bench moe", "no fused MoE decode kernel on this device");
    blocks.push_back(*block);
  }
  std::vector<Tensor> xs;
  for (int64_t p = 0; p < c.patterns(); ++p) {
    Tensor x = zeros({1, kHidden}, DType::Float32);
    for (int64_t j = 0; j < kTopK; ++j) x.data<float>()[p + j * c.patterns()] = 1.0f;
    xs.push_back(x);
  }
  const Tensor out = empty({1, kHidden}, DType::Float32);
  const Timing timing = measure(
      [&](int i) {
        blocks[static_cast<size_t>(i) % blocks.size()](xs[static_cast<size_t>(i % c.patterns())], out);
      },
      quick ? 5 : 60, quick ? 0.05 : 0.4);
  const double router_bytes = static_cast<double>(E) * kHidden * 2.0;
  table.add(make_row(table, c, small_pages ? "moe_block_decode 4K pages" : "moe_block_decode", timing,
                     c.token_bytes() + router_bytes));
}

void run_case(Table& table, const Case& c, bool quick) {
  for (bool small_pages : {false, true}) {
    {
      const MoeExperts experts = make_experts(c.shape, c.fp8, small_pages, 1);
      const std::vector<SharedExpert> shared =
          c.shape.shared ? make_shared(c.shape, c.fp8, small_pages) : std::vector<SharedExpert>{};
      if (!small_pages) run_expert_op(table, c, experts, shared, quick);
      run_block(table, c, experts, shared, small_pages, quick);
    }
    empty_cache();  // the next case's weights take the memory these held
  }
}

const Registrar kRegisterMoe{Suite{
    "moe",
    "MoE expert block, one decode token: Qwen3-30B-A3B (8/128, I 768) and Qwen3.5-35B-A3B (8/256 + shared, I 512), "
    "bf16 and FP8; the expert op and the fused decode block, in huge pages and in 4 KiB pages; vs the memory roofline",
    [](ThreadPool&, Table& table, bool quick) {
      fmt::print("moe: bytes = expert weights one token touches (+ scales, + shared expert; + router for the block)\n");
      for (const Shape3& s : {Shape3{"Qwen3-30B-A3B", 128, 768, false}, Shape3{"Qwen3.5-35B-A3B", 256, 512, true}}) {
        for (bool fp8 : {false, true}) run_case(table, Case{s, fp8}, quick);
      }
    }}};

}  // namespace

}  // namespace kiln::bench
