// `kiln bench --filter attention`: GQA decode attention against the memory roofline and
// a causal prefill against a time target.
//
// Decode: 32 query heads, 8 KV heads, head dim 80, 4096 cached positions, one token,
// bf16 and float32 caches. bytes = the K and V bytes read (q and out are noise). Each
// call reads a different rotated copy of the cache (768 MB in all), so the cache is
// cold as in a real decode step that walks every layer. Baseline: PyTorch 1.13 CPU SDPA
// with K/V pre-expanded to 32 heads, ~2.3 ms bf16 / ~12 ms float32.
//
// Prefill: 8 heads, L = S = 4096, head dim 40, float32, is_causal. FLOPs counted as
// the causal half of QK^T and PV: 2 * 2 * H * E * L * (L + 1) / 2. Baseline: PyTorch
// ~0.35 s. Then a 512-token GQA prompt in bf16 at head dims 128 and 256 (LLM prefill).
#include <fmt/core.h>

#include <cstdint>
#include <vector>

#include "cli/bench/harness.h"
#include "kiln/allocator.h"
#include "kiln/ops/attention.h"
#include "kiln/ops/creation.h"

namespace kiln::bench {

namespace {

constexpr double kDecodeRooflineTarget = 0.75;
constexpr double kPrefillTargetS = 0.080;

// Values in [-1, 1) from a cheap generator: timing does not depend on them.
Tensor pseudo_random(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor t = empty(shape, DType::Float32);
  float* p = t.data<float>();
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = static_cast<float>(static_cast<int32_t>(state >> 32)) * (1.0f / 2147483648.0f);
  }
  return t.to(dtype);
}

void run_decode(DType dtype, Table& table, bool quick) {
  const int64_t Hq = 32, Hkv = 8, E = 80, S = 4096;
  const Tensor q = pseudo_random({1, Hq, E}, dtype, 1);
  const Tensor k0 = pseudo_random({1, Hkv, S, E}, dtype, 2), v0 = pseudo_random({1, Hkv, S, E}, dtype, 3);
  struct Cache {
    Tensor k, v;
  };
  const size_t bytes = k0.nbytes() + v0.nbytes();
  const std::vector<Cache> caches = rotated_copies<Cache>(
      bytes, [&] { return Cache{k0.clone(), v0.clone()}; }, quick ? size_t{128} << 20 : size_t{768} << 20);
  const auto call = [&](int i) {
    const Cache& c = caches[static_cast<size_t>(i) % caches.size()];
    attention_decode(q, c.k, c.v, S);
  };
  Row row;
  row.group = fmt::format("decode GQA {}", dtype == DType::BFloat16 ? "bf16" : "f32");
  row.shape = "32q/8kv h80 ctx4096";
  row.timing = measure(call, quick ? 5 : 50, quick ? 0.05 : 0.5);
  row.bytes = static_cast<double>(bytes);
  row.flops = 4.0 * Hq * E * S;
  row.baseline_s = dtype == DType::BFloat16 ? 2.3e-3 : 12e-3;
  row.baseline_label = "PyTorch 1.13 (K/V expanded)";
  row.target = fmt::format(">= {:.2f} of roofline", kDecodeRooflineTarget);
  row.has_target = true;
  row.target_met = table.roofline_gbps() > 0 && table.roofline_fraction(row) >= kDecodeRooflineTarget;
  table.add(row);
  empty_cache();
}

void run_prefill(Table& table, bool quick) {
  const int64_t H = 8, E = 40, L = quick ? 1024 : 4096;
  const Tensor q = pseudo_random({1, H, L, E}, DType::Float32, 4);
  const Tensor k = pseudo_random({1, H, L, E}, DType::Float32, 5);
  const Tensor v = pseudo_random({1, H, L, E}, DType::Float32, 6);
  Row row;
  row.group = "prefill causal f32";
  row.shape = fmt::format("8h L=S={} h40", L);
  row.timing = measure([&](int) { scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, true); },
                       quick ? 2 : 5, quick ? 0.05 : 1.0);
  row.flops = 4.0 * H * E * static_cast<double>(L) * static_cast<double>(L + 1) / 2.0;
  if (!quick) {
    row.baseline_s = 0.35;
    row.baseline_label = "PyTorch ~0.35 s";
    row.target = fmt::format("<= {:.0f} ms", kPrefillTargetS * 1e3);
    row.has_target = true;
    row.target_met = row.timing.median_s <= kPrefillTargetS;
  }
  table.add(row);
}

// The prompt of an LLM prefill: 512 tokens, is_causal, GQA, bf16 (the KV cache's dtype
// for bf16 and FP8 weights): Qwen3-30B-A3B's 32 query / 4 KV heads of 128 and
// Qwen3.5's 16 / 2 of 256. FLOPs as above, the causal half; `of peak` is the fraction
// of the compute roofline.
void run_prefill_gqa(Table& table, bool quick, int64_t hq, int64_t hkv, int64_t E) {
  const int64_t L = 512;
  const Tensor q = pseudo_random({1, hq, L, E}, DType::BFloat16, 7);
  const Tensor k = pseudo_random({1, hkv, L, E}, DType::BFloat16, 8);
  const Tensor v = pseudo_random({1, hkv, L, E}, DType::BFloat16, 9);
  Row row;
  row.group = "prefill causal GQA bf16";
  row.shape = fmt::format("{}q/{}kv L=S={} h{}", hq, hkv, L, E);
  row.timing =
      measure([&](int) { scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, true, std::nullopt, true); },
              quick ? 2 : 5, quick ? 0.05 : 0.5);
  row.flops = 4.0 * hq * E * static_cast<double>(L) * static_cast<double>(L + 1) / 2.0;
  table.add(row);
}

const Registrar kRegisterAttention{Suite{
    "attention",
    "GQA decode attention (32q/8kv, h80, ctx 4096, bf16 and f32 caches), causal prefill (8h, 4096, h40, f32) and "
    "512-token GQA prefill (bf16, h128 and h256)",
    [](ThreadPool&, Table& table, bool quick) {
      run_decode(DType::BFloat16, table, quick);
      run_decode(DType::Float32, table, quick);
      run_prefill(table, quick);
      run_prefill_gqa(table, quick, 32, 4, 128);
      run_prefill_gqa(table, quick, 16, 2, 256);
    }}};

}  // namespace

}  // namespace kiln::bench
