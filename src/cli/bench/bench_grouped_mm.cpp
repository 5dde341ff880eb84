// `kiln bench --filter grouped_mm`: the MoE expert products of a Qwen3-30B-A3B-sized layer
// (128 experts, hidden 2048 -> intermediate 768).
//   prefill  512 tokens spread unevenly over the 128 experts, bf16, 2D x 3D, with the
//            weights as the Hugging Face [G, N, K] tensor seen through w.transpose(-2, -1)
//            (column-major, the MoE layout) and as a row-major [G, K, N] tensor. GFLOP/s
//            next to OpenBLAS sgemm (kiln's f32 mm) on the dense 512x2048 @ 2048x768
//            problem, the baseline row.
//   decode   8 token-expert pairs of one row each over 128 experts, bf16 and FP8
//            (grouped_mm_fp8, row-wise scales); bytes = the expert weights touched (plus
//            FP8 scales), shown against this run's memory roofline.
// Every call reads cold weights: all 128 experts are 384 MiB in bf16, and decode calls
// cycle through different experts.
#include <fmt/core.h>

#include <cstdint>
#include <vector>

#include "cli/bench/harness.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/grouped_mm.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/matmul.h"

namespace kiln::bench {

namespace {

constexpr int64_t kExperts = 128;
constexpr int64_t kHidden = 2048;        // K
constexpr int64_t kIntermediate = 768;   // N
constexpr int64_t kPrefillTokens = 512;  // rows of the prefill product
constexpr int64_t kDecodeRows = 8;       // token-expert pairs of one decode step
constexpr int kDecodePatterns = 16;      // distinct expert choices cycled over

// Finite bf16 values in [2^-8, 2) of both signs from a cheap generator (timing does not
// depend on the values).
Tensor pseudo_random_bf16(const Shape& shape, uint64_t seed) {
  Tensor t = empty(shape, DType::BFloat16);
  uint16_t* p = t.data<uint16_t>();
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t r = static_cast<uint32_t>(state >> 33);
    p[i] = static_cast<uint16_t>((r & 0x8000u) | (0x3B80u + (r >> 16) % 0x480u));
  }
  return t;
}

Tensor offs_from_counts(const std::vector<int32_t>& counts) {
  Tensor offs = empty({static_cast<int64_t>(counts.size())}, DType::Int32);
  int32_t end = 0;
  for (size_t g = 0; g < counts.size(); ++g) offs.data<int32_t>()[g] = end += counts[g];
  return offs;
}

// A deterministic, skewed routing of the prefill tokens: expert floor(128 u^2) for a
// uniform u, so low-numbered experts get many tokens and some experts none.
Tensor uneven_prefill_offs() {
  std::vector<int32_t> counts(kExperts, 0);
  uint64_t state = 12345;
  for (int64_t t = 0; t < kPrefillTokens; ++t) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(state >> 11) * 0x1p-53;
    ++counts[static_cast<size_t>(static_cast<double>(kExperts) * u * u)];
  }
  return offs_from_counts(counts);
}

// Decode: experts p, p + 16, p + 32, ... get one row each (8 of the 128).
Tensor decode_offs(int pattern) {
  std::vector<int32_t> counts(kExperts, 0);
  for (int64_t j = 0; j < kDecodeRows; ++j) counts[static_cast<size_t>(pattern + j * kDecodePatterns)] = 1;
  return offs_from_counts(counts);
}

void run_prefill(Table& table, bool quick) {
  const int runs = quick ? 3 : 10;
  const double seconds = quick ? 0.05 : 0.5;
  const double flops = 2.0 * kPrefillTokens * kHidden * kIntermediate;
  // The dense baseline: OpenBLAS sgemm over kiln's pool.
  const Tensor xf = pseudo_random_bf16({kPrefillTokens, kHidden}, 1).to(DType::Float32);
  const Tensor wf = pseudo_random_bf16({kHidden, kIntermediate}, 2).to(DType::Float32);
  Row dense;
  dense.group = "grouped_mm prefill baseline";
  dense.shape = fmt::format("dense {}x{} @ {}x{} f32", kPrefillTokens, kHidden, kHidden, kIntermediate);
  dense.timing = measure([&](int) { mm(xf, wf); }, runs, seconds);
  dense.flops = flops;
  dense.baseline_label = "OpenBLAS sgemm";
  table.add(dense);

  const Tensor x = pseudo_random_bf16({kPrefillTokens, kHidden}, 3);
  const Tensor offs = uneven_prefill_offs();
  int used = 0;
  for (int64_t g = 0; g < kExperts; ++g) {
    const int32_t prev = g == 0 ? 0 : offs.data<int32_t>()[g - 1];
    used += offs.data<int32_t>()[g] != prev;
  }
  const Tensor w_hf = pseudo_random_bf16({kExperts, kIntermediate, kHidden}, 4);  // [G, N, K]
  for (bool column_major : {true, false}) {
    const Tensor w = column_major ? w_hf.transpose(1, 2) : w_hf.view({kExperts, kHidden, kIntermediate});
    Row row;
    row.group = fmt::format("grouped_mm prefill bf16 {}", column_major ? "w.T view" : "row-major [G,K,N]");
    row.shape = fmt::format("{} tok / {} experts ({} used), {}->{}", kPrefillTokens, kExperts, used, kHidden,
                            kIntermediate);
    row.timing = measure([&](int) { grouped_mm(x, w, offs); }, runs, seconds);
    row.flops = flops;
    row.bytes = static_cast<double>(used) * kIntermediate * kHidden * 2.0;
    row.baseline_s = dense.timing.median_s;
    row.baseline_label = "dense OpenBLAS sgemm";
    table.add(row);
  }
}

void run_decode(Table& table, bool quick) {
  const int runs = quick ? 5 : 50;
  const double seconds = quick ? 0.05 : 0.3;
  const Tensor x = pseudo_random_bf16({kDecodeRows, kHidden}, 5);
  std::vector<Tensor> offs;
  for (int p = 0; p < kDecodePatterns; ++p) offs.push_back(decode_offs(p));
  const Tensor w_hf = pseudo_random_bf16({kExperts, kIntermediate, kHidden}, 6);
  const double flops = 2.0 * kDecodeRows * kHidden * kIntermediate;
  const double expert_weights = static_cast<double>(kIntermediate) * kHidden;

  Row bf16;
  bf16.group = "grouped_mm decode bf16 w.T view";
  bf16.shape = fmt::format("{} rows x 1 / {} experts, {}->{}", kDecodeRows, kExperts, kHidden, kIntermediate);
  const Tensor w = w_hf.transpose(1, 2);
  bf16.timing = measure([&](int i) { grouped_mm(x, w, offs[static_cast<size_t>(i % kDecodePatterns)]); }, runs, seconds);
  bf16.flops = flops;
  bf16.bytes = kDecodeRows * expert_weights * 2.0;
  table.add(bf16);

  // FP8 experts: each [N, K] expert quantised row-wise.
  Tensor w8 = empty({kExperts, kIntermediate, kHidden}, DType::Float8_e4m3fn);
  Tensor scale = empty({kExperts, kIntermediate}, DType::Float32);
  for (int64_t g = 0; g < kExperts; ++g) {
    auto [q, s] = quantize_fp8_rowwise(w_hf.select(0, g));
    w8.select(0, g).copy_(q);
    scale.select(0, g).copy_(s);
  }
  Row fp8 = bf16;
  fp8.group = "grouped_mm_fp8 decode (bf16 x)";
  fp8.timing =
      measure([&](int i) { grouped_mm_fp8(x, w8, scale, offs[static_cast<size_t>(i % kDecodePatterns)]); }, runs,
              seconds);
  fp8.bytes = kDecodeRows * (expert_weights + kIntermediate * 4.0);
  table.add(fp8);
}

const Registrar kRegisterGroupedMm{Suite{
    "grouped_mm",
    "MoE grouped_mm: prefill (512 tokens over 128 experts, 2048->768, bf16) vs dense sgemm; decode (8 rows, "
    "bf16 and FP8) vs the memory roofline",
    [](ThreadPool&, Table& table, bool quick) {
      fmt::print("grouped_mm: prefill GFLOP/s vs dense OpenBLAS sgemm (the baseline row); decode bytes = expert "
                 "weights touched (+ FP8 scales)\n");
      run_prefill(table, quick);
      run_decode(table, quick);
    }}};

}  // namespace

}  // namespace kiln::bench
