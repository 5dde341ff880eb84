// `kiln bench --filter linear`: one-row linear (decode GEMV) over the 96 weight shapes of
// spec/models.md §7, bf16 and FP8 (row-wise scales, bf16 activations), against this
// run's memory roofline and PyTorch 1.13's bf16 CPU GEMV (~26 GB/s).
//
// Every call reads cold weights: the suite cycles through rotated copies, at least
// 768 MB in all (one copy for weights that large). Smaller rotations still hit in this
// VM's caches: a 1024x2048 bf16 GEMV ran 4% faster cycling through 256 MB, 10% through
// 96 MB, than through 768 MB. Shapes that repeat in the table (runtime-fused and
// alternative rows share an N x K) are timed once and reported on each of their rows.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/bench/harness.h"
#include "kiln/allocator.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/linear.h"
#include "kiln/thread_pool.h"

namespace kiln::bench {

namespace {

struct DecodeShape {
  int id;  // row of the table in spec/models.md §7
  const char* model;
  const char* name;
  int64_t N;
  int64_t K;
};

// spec/models.md §7, transcribed: y[1, N] = x[1, K] W[N, K]^T.
constexpr DecodeShape kDecodeShapes[] = {
    {1, "Llama-3-8B", "q_proj", 4096, 4096},
    {2, "Llama-3-8B", "k_proj", 1024, 4096},
    {3, "Llama-3-8B", "v_proj", 1024, 4096},
    {4, "Llama-3-8B", "qkv fused", 6144, 4096},
    {5, "Llama-3-8B", "o_proj", 4096, 4096},
    {6, "Llama-3-8B", "gate_proj", 14336, 4096},
    {7, "Llama-3-8B", "up_proj", 14336, 4096},
    {8, "Llama-3-8B", "gate_up fused", 28672, 4096},
    {9, "Llama-3-8B", "down_proj", 4096, 14336},
    {10, "Llama-3-8B", "lm_head", 128256, 4096},
    {11, "Qwen2.5-7B", "q_proj (+bias)", 3584, 3584},
    {12, "Qwen2.5-7B", "k_proj (+bias)", 512, 3584},
    {13, "Qwen2.5-7B", "v_proj (+bias)", 512, 3584},
    {14, "Qwen2.5-7B", "qkv fused (+bias)", 4608, 3584},
    {15, "Qwen2.5-7B", "o_proj", 3584, 3584},
    {16, "Qwen2.5-7B", "gate_proj", 18944, 3584},
    {17, "Qwen2.5-7B", "up_proj", 18944, 3584},
    {18, "Qwen2.5-7B", "gate_up fused", 37888, 3584},
    {19, "Qwen2.5-7B", "down_proj", 3584, 18944},
    {20, "Qwen2.5-7B", "lm_head", 152064, 3584},
    {21, "Qwen3-8B", "q_proj", 4096, 4096},
    {22, "Qwen3-8B", "k_proj", 1024, 4096},
    {23, "Qwen3-8B", "v_proj", 1024, 4096},
    {24, "Qwen3-8B", "qkv fused", 6144, 4096},
    {25, "Qwen3-8B", "o_proj", 4096, 4096},
    {26, "Qwen3-8B", "gate_proj", 12288, 4096},
    {27, "Qwen3-8B", "up_proj", 12288, 4096},
    {28, "Qwen3-8B", "gate_up fused", 24576, 4096},
    {29, "Qwen3-8B", "down_proj", 4096, 12288},
    {30, "Qwen3-8B", "lm_head", 151936, 4096},
    {31, "Qwen3-30B-A3B", "q_proj", 4096, 2048},
    {32, "Qwen3-30B-A3B", "k_proj", 512, 2048},
    {33, "Qwen3-30B-A3B", "v_proj", 512, 2048},
    {34, "Qwen3-30B-A3B", "qkv fused", 5120, 2048},
    {35, "Qwen3-30B-A3B", "o_proj", 2048, 4096},
    {36, "Qwen3-30B-A3B", "router mlp.gate", 128, 2048},
    {37, "Qwen3-30B-A3B", "expert gate_proj", 768, 2048},
    {38, "Qwen3-30B-A3B", "expert up_proj", 768, 2048},
    {39, "Qwen3-30B-A3B", "expert gate_up fused", 1536, 2048},
    {40, "Qwen3-30B-A3B", "expert down_proj", 2048, 768},
    {41, "Qwen3-30B-A3B", "lm_head", 151936, 2048},
    {42, "Qwen3-Next-80B-A3B", "attn q_proj (q+gate)", 8192, 2048},
    {43, "Qwen3-Next-80B-A3B", "attn k_proj", 512, 2048},
    {44, "Qwen3-Next-80B-A3B", "attn v_proj", 512, 2048},
    {45, "Qwen3-Next-80B-A3B", "attn o_proj", 2048, 4096},
    {46, "Qwen3-Next-80B-A3B", "gdn in_proj_qkvz", 12288, 2048},
    {47, "Qwen3-Next-80B-A3B", "gdn in_proj_ba", 64, 2048},
    {48, "Qwen3-Next-80B-A3B", "gdn out_proj", 2048, 4096},
    {49, "Qwen3-Next-80B-A3B", "router mlp.gate", 512, 2048},
    {50, "Qwen3-Next-80B-A3B", "expert gate_proj", 512, 2048},
    {51, "Qwen3-Next-80B-A3B", "expert up_proj", 512, 2048},
    {52, "Qwen3-Next-80B-A3B", "expert gate_up fused", 1024, 2048},
    {53, "Qwen3-Next-80B-A3B", "expert down_proj", 2048, 512},
    {54, "Qwen3-Next-80B-A3B", "shared_expert gate_proj", 512, 2048},
    {55, "Qwen3-Next-80B-A3B", "shared_expert up_proj", 512, 2048},
    {56, "Qwen3-Next-80B-A3B", "shared_expert down_proj", 2048, 512},
    {57, "Qwen3-Next-80B-A3B", "shared_expert_gate", 1, 2048},
    {58, "Qwen3-Next-80B-A3B", "lm_head", 151936, 2048},
    {59, "Qwen3.5-35B-A3B", "attn q_proj (q+gate)", 8192, 2048},
    {60, "Qwen3.5-35B-A3B", "attn k_proj", 512, 2048},
    {61, "Qwen3.5-35B-A3B", "attn v_proj", 512, 2048},
    {62, "Qwen3.5-35B-A3B", "attn q+k+v fused", 9216, 2048},
    {63, "Qwen3.5-35B-A3B", "attn o_proj", 2048, 4096},
    {64, "Qwen3.5-35B-A3B", "gdn in_proj_qkv", 8192, 2048},
    {65, "Qwen3.5-35B-A3B", "gdn in_proj_z", 4096, 2048},
    {66, "Qwen3.5-35B-A3B", "gdn in_proj_b", 32, 2048},
    {67, "Qwen3.5-35B-A3B", "gdn in_proj_a", 32, 2048},
    {68, "Qwen3.5-35B-A3B", "gdn qkv+z fused", 12288, 2048},
    {69, "Qwen3.5-35B-A3B", "gdn b+a fused", 64, 2048},
    {70, "Qwen3.5-35B-A3B", "gdn out_proj", 2048, 4096},
    {71, "Qwen3.5-35B-A3B", "router mlp.gate", 256, 2048},
    {72, "Qwen3.5-35B-A3B", "expert gate_up (checkpoint 3D)", 1024, 2048},
    {73, "Qwen3.5-35B-A3B", "expert down (checkpoint 3D)", 2048, 512},
    {74, "Qwen3.5-35B-A3B", "shared_expert gate_proj", 512, 2048},
    {75, "Qwen3.5-35B-A3B", "shared_expert up_proj", 512, 2048},
    {76, "Qwen3.5-35B-A3B", "shared_expert gate_up fused", 1024, 2048},
    {77, "Qwen3.5-35B-A3B", "shared_expert down_proj", 2048, 512},
    {78, "Qwen3.5-35B-A3B", "shared_expert_gate", 1, 2048},
    {79, "Qwen3.5-35B-A3B", "lm_head", 248320, 2048},
    {80, "LFM2-8B-A1B", "conv in_proj (B,C,x)", 6144, 2048},
    {81, "LFM2-8B-A1B", "conv out_proj", 2048, 2048},
    {82, "LFM2-8B-A1B", "attn q_proj", 2048, 2048},
    {83, "LFM2-8B-A1B", "attn k_proj", 512, 2048},
    {84, "LFM2-8B-A1B", "attn v_proj", 512, 2048},
    {85, "LFM2-8B-A1B", "attn qkv fused", 3072, 2048},
    {86, "LFM2-8B-A1B", "attn out_proj", 2048, 2048},
    {87, "LFM2-8B-A1B", "dense w1 (gate)", 7168, 2048},
    {88, "LFM2-8B-A1B", "dense w3 (up)", 7168, 2048},
    {89, "LFM2-8B-A1B", "dense w2 (down)", 2048, 7168},
    {90, "LFM2-8B-A1B", "router feed_forward.gate", 32, 2048},
    {91, "LFM2-8B-A1B", "expert w1 (gate)", 1792, 2048},
    {92, "LFM2-8B-A1B", "expert w3 (up)", 1792, 2048},
    {93, "LFM2-8B-A1B", "expert w1+w3 fused", 3584, 2048},
    {94, "LFM2-8B-A1B", "expert w2 (down)", 2048, 1792},
    {95, "LFM2-8B-A1B", "lm_head (tied to embed)", 65536, 2048},
    {96, "LFM2.5-8B-A1B", "lm_head (tied, vocab 128000)", 128000, 2048},
};
static_assert(std::size(kDecodeShapes) == 96);

// Rows of the table `--quick` runs: small, expert, router, gate and large shapes.
constexpr int kQuickIds[] = {2, 9, 37, 40, 57, 64};

constexpr double kPyTorchBf16Gbps = 26.0;
constexpr double kGeomeanTarget = 0.80;
constexpr double kLargeShapeTarget = 0.85;
constexpr double kLargeShapeBytes = 4.0 * (1 << 20);
// Bytes the rotated copies of a weight add up to at least (--quick: fewer).
constexpr size_t kRotationBytes = size_t{768} << 20;
constexpr size_t kQuickRotationBytes = size_t{128} << 20;

enum class WeightKind { Bf16, Fp8 };

const char* kind_name(WeightKind k) { return k == WeightKind::Bf16 ? "bf16" : "fp8"; }

// Finite bf16 values of both signs and magnitudes in [2^-8, 2) from a cheap generator
// (timing does not depend on the values; filling a gigabyte with randn would).
Tensor pseudo_random_bf16(const Shape& shape, uint64_t seed) {
  Tensor t = empty(shape, DType::BFloat16);
  uint16_t* p = t.data<uint16_t>();
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t r = static_cast<uint32_t>(state >> 33);
    p[i] = static_cast<uint16_t>((r & 0x8000u) | (0x3B80u + (r >> 16) % 0x480u));  // 0x3B80 = 2^-8, 0x4000 = 2
  }
  return t;
}

struct Measured {
  Timing timing;
  double bytes = 0;
  double weight_bytes = 0;
};

Measured measure_shape(WeightKind kind, int64_t N, int64_t K, bool quick) {
  const Tensor x = pseudo_random_bf16({1, K}, 7);
  Tensor base = pseudo_random_bf16({N, K}, 11);
  Tensor scale;
  if (kind == WeightKind::Fp8) {
    std::tie(base, scale) = quantize_fp8_rowwise(base);
  }
  const size_t weight_bytes = base.nbytes();
  std::vector<Tensor> weights;
  const size_t min_total = quick ? kQuickRotationBytes : kRotationBytes;
  if (weight_bytes >= min_total) {
    weights.push_back(base);
  } else {
    weights = rotated_copies<Tensor>(weight_bytes, [&] { return base.clone(); }, min_total);
  }
  const size_t copies = weights.size();
  Measured m;
  const auto call = [&](int i) {
    const Tensor& w = weights[static_cast<size_t>(i) % copies];
    if (kind == WeightKind::Bf16) {
      linear(x, w);
    } else {
      linear_fp8(x, w, scale);
    }
  };
  m.timing = measure(call, quick ? 5 : 30, quick ? 0.05 : 0.3);
  m.weight_bytes = static_cast<double>(weight_bytes);
  // Weights, x and y (bf16), plus the per-row float32 scales for FP8.
  m.bytes = m.weight_bytes + 2.0 * static_cast<double>(K) + 2.0 * static_cast<double>(N) +
            (kind == WeightKind::Fp8 ? 4.0 * static_cast<double>(N) : 0.0);
  return m;
}

void run_kind(WeightKind kind, Table& table, bool quick) {
  const double roofline = table.roofline_gbps();
  std::map<std::pair<int64_t, int64_t>, Measured> by_shape;
  double log_time_sum = 0, log_bytes_sum = 0;
  int rows = 0, large_rows = 0;
  const Row* worst_large = nullptr;
  std::vector<Row> added;
  added.reserve(std::size(kDecodeShapes));
  for (const DecodeShape& s : kDecodeShapes) {
    if (quick && std::find(std::begin(kQuickIds), std::end(kQuickIds), s.id) == std::end(kQuickIds)) continue;
    auto it = by_shape.find({s.N, s.K});
    if (it == by_shape.end()) {
      it = by_shape.emplace(std::make_pair(s.N, s.K), measure_shape(kind, s.N, s.K, quick)).first;
      empty_cache();  // the rotated copies of one shape are not reused by the next
    }
    const Measured& m = it->second;
    Row row;
    row.group = fmt::format("{} #{} {}", kind_name(kind), s.id, s.model);
    row.shape = fmt::format("{}x{}", s.N, s.K);
    row.timing = m.timing;
    row.bytes = m.bytes;
    if (kind == WeightKind::Bf16) {
      row.baseline_s = m.bytes / (kPyTorchBf16Gbps * 1e9);
      row.baseline_label = "PyTorch 1.13 bf16 ~26 GB/s";
    }
    added.push_back(row);
    log_time_sum += std::log(m.timing.median_s);
    log_bytes_sum += std::log(m.bytes);
    ++rows;
    if (m.weight_bytes >= kLargeShapeBytes) {
      ++large_rows;
      const double frac = table.roofline_fraction(row);
      if (worst_large == nullptr || frac < table.roofline_fraction(*worst_large)) worst_large = &added.back();
    }
  }
  for (const Row& r : added) table.add(r);
  if (rows == 0) return;

  // The geometric mean of the fractions is the fraction of the geometric means.
  Row geo;
  geo.group = fmt::format("{} geomean of {} shapes", kind_name(kind), rows);
  geo.shape = "-";
  geo.timing.median_s = std::exp(log_time_sum / rows);
  geo.bytes = std::exp(log_bytes_sum / rows);
  geo.target = fmt::format(">= {:.2f} of roofline", kGeomeanTarget);
  geo.has_target = true;
  geo.target_met = roofline > 0 && table.roofline_fraction(geo) >= kGeomeanTarget;
  if (kind == WeightKind::Bf16) {
    geo.baseline_s = geo.bytes / (kPyTorchBf16Gbps * 1e9);
    geo.baseline_label = "PyTorch 1.13 bf16 ~26 GB/s";
  }
  table.add(geo);
  if (worst_large != nullptr) {
    Row worst = *worst_large;
    worst.group = fmt::format("{} worst of {} >=4MB: {}", kind_name(kind), large_rows,
                              worst_large->group.substr(worst_large->group.find('#')));
    worst.target = fmt::format(">= {:.2f} of roofline", kLargeShapeTarget);
    worst.has_target = true;
    worst.target_met = roofline > 0 && table.roofline_fraction(worst) >= kLargeShapeTarget;
    table.add(worst);
  }
}

// Which weight each #id is, model by model, wrapped to a terminal's width.
void print_legend(bool quick) {
  constexpr size_t kWidth = 110;
  std::string line;
  const char* model = nullptr;
  for (const DecodeShape& s : kDecodeShapes) {
    if (quick && std::find(std::begin(kQuickIds), std::end(kQuickIds), s.id) == std::end(kQuickIds)) continue;
    std::string entry = fmt::format(" #{} {};", s.id, s.name);
    if (model == nullptr || std::string_view(model) != s.model) {
      if (!line.empty()) fmt::print("{}\n", line);
      model = s.model;
      line = fmt::format("  {}:", s.model);
    } else if (line.size() + entry.size() > kWidth) {
      fmt::print("{}\n", line);
      line = "   ";
    }
    line += entry;
  }
  if (!line.empty()) fmt::print("{}\n", line);
}

// The 1-minute load average (Linux), since other work on the machine moves every figure.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string first;
  return in >> first ? first : "unknown";
}

const Registrar kRegisterLinear{Suite{
    "linear",
    "one-row linear (decode GEMV), bf16 and FP8 row-wise, over the 96 shapes of spec/models.md §7",
    [](ThreadPool& pool, Table& table, bool quick) {
      fmt::print("linear: rows are spec/models.md §7; bf16 and FP8 weights (row-wise scales) with bf16 x; "
                 "bytes = weights + x + y (+ scales); {} threads; load average {} at the start\n",
                 pool.num_threads(), load_average());
      print_legend(quick);
      run_kind(WeightKind::Bf16, table, quick);
      run_kind(WeightKind::Fp8, table, quick);
      fmt::print("linear: load average {} at the end\n", load_average());
    }}};

}  // namespace

}  // namespace kiln::bench
