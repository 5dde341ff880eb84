// `kiln bench --llm`: whole-model decode and prefill on synthetic checkpoints of real
// shapes, against this run's memory roofline (decode) and compute roofline (prefill).
//
// Each model is written once by make_synthetic_model (the `kiln make-model` presets:
// Qwen3-30B-A3B cut to 12 layers, LFM2-8B-A1B with all 24, Qwen3.5-35B-A3B cut to 8), loaded with BF16 and with FP8
// weights, and measured with the profiler on, so every row comes with the table of where
// its time went. The bandwidth and compute probes run right before and right after each
// measurement, and the fractions are printed against both readings: this machine's
// bandwidth swings up to 2x within the hour.
#include "cli/bench/llm_bench.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cli/bench/harness.h"
#include "kiln/context.h"
#include "kiln/llm.h"
#include "kiln/llm_synthetic.h"
#include "kiln/profiler.h"
#include "kiln/runtime.h"

namespace kiln::bench {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct BenchModel {
  const char* arch;
  const char* preset;
  int64_t layers;
};

constexpr BenchModel kModels[] = {
    {"qwen3_moe", "qwen3-30b-a3b", 12},
    {"lfm2_moe", "lfm2-8b-a1b", 24},
    // The hybrid (Gated DeltaNet + gated attention) model at the depth issue 11 compares
    // with Qwen3-MoE's fraction of the roofline.
    {"qwen3_5_moe", "qwen3.5-35b-a3b", 8},
};

struct Probes {
  double gbps = 0;
  double gflops = 0;       // float32 FMA peak
  double bf16_gflops = 0;  // bf16 dot peak (0 without the instruction)
  bool bf16_used = false;  // kiln's bf16-weight GEMMs run the bf16 dot instruction
};

Probes probe(ThreadPool& pool, bool quick) {
  Probes p;
  p.gbps = measure_memory_bandwidth(pool, quick ? size_t{64} << 20 : 0, 3).read_gbps_all;
  const ComputeResult c = measure_peak_compute(pool, quick ? 2'000'000 : 20'000'000, 3);
  p.gflops = c.f32_gflops_all;
  p.bf16_gflops = c.bf16_dot_gflops_all;
  p.bf16_used = c.bf16_dot_used;
  return p;
}

// The compute roofline of a prefill: with bf16 or FP8 weights on the bf16 dot path its
// GEMMs (linear, the MoE expert tiles) run vdpbf16ps, so the bf16 dot peak; otherwise
// (float32 weights, no instruction, KILN_BF16_DOT=0) they run float32 FMAs.
bool prefill_on_bf16_dot(const Probes& p, llm::WeightFormat format) {
  return (format == llm::WeightFormat::BFloat16 || format == llm::WeightFormat::Fp8) && p.bf16_used;
}
double prefill_roof(const Probes& p, llm::WeightFormat format) {
  return prefill_on_bf16_dot(p, format) ? p.bf16_gflops : p.gflops;
}

// Deterministic ids spread over the vocabulary (the weights are random; any ids do).
std::vector<int32_t> prompt_ids(int64_t count, int64_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(count));
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int32_t& id : ids) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(vocab));
  }
  return ids;
}

std::string fraction(double value, double roof) { return roof > 0 ? fmt::format("{:.2f}", value / roof) : "-"; }

// The folder of one model: written unless an earlier complete run left it there.
std::string ensure_model(const LlmBenchOptions& o, const BenchModel& m, int64_t layers) {
  const fs::path dir = fs::path(o.dir) / fmt::format("{}-{}-L{}", m.arch, m.preset, layers);
  const fs::path done = dir / ".kiln-bench-complete";
  if (fs::exists(done)) return dir.string();
  fmt::print("llm: writing {} ({} layers) to {}\n", m.preset, layers, dir.string());
  std::fflush(stdout);
  llm::SyntheticModelOptions s;
  s.arch = m.arch;
  s.preset = m.preset;
  s.num_layers = layers;
  s.out_dir = dir.string();
  const llm::SyntheticModelSummary summary = llm::make_synthetic_model(s);
  fmt::print("llm: {:.2f} GB of tensors written\n", static_cast<double>(summary.tensor_bytes) / 1e9);
  std::FILE* f = std::fopen(done.c_str(), "w");
  if (f != nullptr) std::fclose(f);
  return dir.string();
}

void run_model(ThreadPool& pool, const LlmBenchOptions& o, const std::string& dir, const BenchModel& m,
               int64_t layers, llm::WeightFormat format) {
  const std::string label = fmt::format("{} L{} {}", m.arch, layers, llm::weight_format_name(format));
  llm::LoadOptions load;
  load.weights = format;
  load.max_context = std::max<int64_t>(o.prefill_tokens + 64, 1024);
  const std::unique_ptr<llm::Model> model = llm::Model::load(dir, load);
  const llm::ModelInfo& info = model->info();
  fmt::print("\n{}: weights {} ({:.2f} GB resident), load {:.1f} s\n", label, info.weight_dtypes,
             static_cast<double>(info.resident_weight_bytes) / 1e9, info.load_seconds);

  // Prefill: the whole prompt in one forward, the median of a few.
  const std::vector<int32_t> prompt = prompt_ids(o.prefill_tokens, info.vocab_size);
  model->reset();
  model->forward(std::span<const int32_t>(prompt).subspan(0, std::min<size_t>(prompt.size(), 16)));  // warm-up
  const Probes prefill_before = probe(pool, o.quick);
  std::vector<double> prefill_s;
  profiler::Report prefill_profile;
  double prefill_flops = 0;
  for (int r = 0; r < o.repeats; ++r) {
    model->reset();
    profiler::start();
    const Clock::time_point t0 = Clock::now();
    {
      profiler::PhaseScope phase("prefill");
      phase.add_tokens(static_cast<int64_t>(prompt.size()));
      model->forward(prompt);
    }
    prefill_s.push_back(seconds_since(t0));
    prefill_profile = profiler::stop();
    prefill_flops = 0;
    for (const profiler::OpRecord& op : prefill_profile.ops) prefill_flops += op.flops;
  }
  const Probes prefill_after = probe(pool, o.quick);
  const double prefill_time = summarize(prefill_s).median_s;
  const double prefill_gflops = prefill_flops / prefill_time / 1e9;

  // Decode: a short prompt, then one token at a time, every step timed.
  const Probes decode_before = probe(pool, o.quick);
  std::vector<double> step_s;
  double bytes_sum = 0;
  profiler::Report decode_profile;
  for (int r = 0; r < o.repeats; ++r) {
    model->reset();
    model->forward(std::span<const int32_t>(prompt).subspan(0, std::min<size_t>(prompt.size(), 16)));
    int32_t next = prompt[0];
    profiler::start();
    {
      profiler::PhaseScope phase("decode");
      for (int64_t s = 0; s < o.decode_steps; ++s) {
        bytes_sum += static_cast<double>(model->decode_bytes_per_token());
        const Clock::time_point t0 = Clock::now();
        const Tensor logits = model->forward(std::span<const int32_t>(&next, 1));
        step_s.push_back(seconds_since(t0));
        phase.add_tokens(1);
        next = static_cast<int32_t>((next + 7919) % info.vocab_size);
      }
    }
    decode_profile = profiler::stop();
  }
  const Probes decode_after = probe(pool, o.quick);
  const double step_time = summarize(step_s).median_s;
  const double bytes_per_token = bytes_sum / static_cast<double>(step_s.size());
  const double decode_gbps = bytes_per_token / step_time / 1e9;

  const double roof_before = prefill_roof(prefill_before, format), roof_after = prefill_roof(prefill_after, format);
  fmt::print("{} prefill {} tokens: {:.1f} tok/s, {:.1f} GFLOP/s = {} of the {} compute roofline before "
             "({:.1f} GFLOP/s), {} after ({:.1f}); {} of the float32 FMA peak before ({:.1f})\n",
             label, prompt.size(), static_cast<double>(prompt.size()) / prefill_time, prefill_gflops,
             fraction(prefill_gflops, roof_before), prefill_on_bf16_dot(prefill_before, format) ? "bf16 dot" : "float32 FMA",
             roof_before, fraction(prefill_gflops, roof_after), roof_after, fraction(prefill_gflops, prefill_before.gflops),
             prefill_before.gflops);
  fmt::print("{} decode: {:.2f} tok/s, {:.1f} GB/s ({:.1f} MB per token) = {} of the memory roofline before "
             "({:.1f} GB/s), {} after ({:.1f})\n",
             label, 1.0 / step_time, decode_gbps, bytes_per_token / 1e6, fraction(decode_gbps, decode_before.gbps),
             decode_before.gbps, fraction(decode_gbps, decode_after.gbps), decode_after.gbps);
  fmt::print("{}", prefill_profile.format(prefill_before.gbps, roof_before));
  fmt::print("{}", decode_profile.format(decode_before.gbps, decode_before.gflops));
  std::fflush(stdout);
}

}  // namespace

int run_llm_bench(ThreadPool& pool, const LlmBenchOptions& options) {
  LlmBenchOptions o = options;
  bool temporary = false;
  if (o.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    o.dir = (fs::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") / fmt::format("kiln-bench-llm-{}", getpid()))
                .string();
    temporary = true;
  }
  fmt::print("llm: {} threads; prefill {} tokens, decode {} steps x {} runs (median step); profiler on\n",
             pool.num_threads(), o.prefill_tokens, o.decode_steps, o.repeats);
  int ran = 0;
  for (const BenchModel& m : kModels) {
    if (!o.filter.empty() && std::string(m.arch).find(o.filter) == std::string::npos &&
        std::string(m.preset).find(o.filter) == std::string::npos) {
      continue;
    }
    const int64_t layers = o.layers > 0 ? std::min(o.layers, m.layers) : m.layers;
    const std::string dir = ensure_model(o, m, layers);
    for (const llm::WeightFormat format : {llm::WeightFormat::BFloat16, llm::WeightFormat::Fp8}) {
      run_model(pool, o, dir, m, layers, format);
    }
    ++ran;
  }
  if (temporary) {
    std::error_code ec;
    fs::remove_all(o.dir, ec);
  }
  if (ran == 0) {
    fmt::print(stderr, "kiln bench --llm: no model matches '{}' (qwen3_moe, lfm2_moe, qwen3_5_moe)\n", o.filter);
    return 2;
  }
  return 0;
}

}  // namespace kiln::bench
