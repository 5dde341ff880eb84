// `kiln bench [--filter NAME] [--quick]`: every registered suite, one table, with the
// memory roofline measured in the same run (before and after the suites).
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/bench/harness.h"
#include "cli/bench/llm_bench.h"
#include "cli/bench/vulkan_bench.h"
#include "cli/commands.h"
#include "kiln/context.h"
#include "kiln/runtime.h"

namespace kiln::cli {

void register_bench_command(CLI::App& app, CommandList& commands) {
  CLI::App* cmd = app.add_subcommand("bench", "Benchmark kiln's kernels against this machine's memory roofline");
  auto filter = std::make_shared<std::string>();
  auto quick = std::make_shared<bool>(false);
  cmd->add_option("--filter", *filter, "Run only suites whose name contains this text");
  cmd->add_flag("--quick", *quick, "Fewer shapes and shorter timing");
  auto llm = std::make_shared<bool>(false);
  auto llm_options = std::make_shared<bench::LlmBenchOptions>();
  cmd->add_flag("--llm", *llm,
                "Whole-model decode and prefill on synthetic Qwen3-30B-A3B (12 layers), LFM2-8B-A1B and Qwen3.5-35B-A3B (8 layers) checkpoints, "
                "BF16 and FP8, instead of the kernel suites (--filter picks the model)");
  cmd->add_option("--llm-layers", llm_options->layers, "With --llm: at most this many layers per model")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  cmd->add_option("--llm-dir", llm_options->dir,
                  "With --llm: write the checkpoints here and keep them for later runs (default: a temporary folder)");
  cmd->add_option("--llm-prompt", llm_options->prefill_tokens, "With --llm: prefill length in tokens (default 512)")
      ->check(CLI::Range(int64_t{16}, int64_t{8192}));
  cmd->add_option("--llm-steps", llm_options->decode_steps, "With --llm: decode steps per run (default 32)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  auto device = std::make_shared<std::string>("cpu");
  cmd->add_option("--device", *device, "cpu, or vulkan: the decode kernels on the Vulkan device (docs/gpu.md)")
      ->check(CLI::IsMember({"cpu", "vulkan"}));
  commands.push_back({cmd, [filter, quick, llm, llm_options, device] {
                        if (*device == "vulkan") return bench::run_vulkan_bench(*filter, *quick);
                        if (*llm) {
                          const ExecutionContext context = current_context();
                          bench::LlmBenchOptions o = *llm_options;
                          o.filter = *filter;
                          o.quick = *quick;
                          if (*quick) o.repeats = 1;
                          return bench::run_llm_bench(context.pool(), o);
                        }
                        // Held for the whole run, so the suites and both probes share one pool.
                        const ExecutionContext context = current_context();
                        ThreadPool& pool = context.pool();
                        size_t probe_bytes = *quick ? size_t{64} << 20 : 0;
                        BandwidthResult before = measure_memory_bandwidth(pool, probe_bytes, *quick ? 3 : 7);
                        const ComputeResult compute = measure_peak_compute(pool, *quick ? 2'000'000 : 20'000'000);
                        bench::Table table(before.read_gbps_all, compute.f32_gflops_all,
                                           compute.bf16_dot_gflops_all);
                        int ran = 0;
                        for (const bench::Suite& s : bench::registry()) {
                          if (!filter->empty() && s.name.find(*filter) == std::string::npos) continue;
                          s.run(pool, table, *quick);
                          ++ran;
                        }
                        BandwidthResult after = measure_memory_bandwidth(pool, probe_bytes, *quick ? 3 : 7);
                        fmt::print("roofline: {:.1f} GB/s read with {} threads before the suites, {:.1f} GB/s after "
                                   "(fractions use the first)\n",
                                   before.read_gbps_all, before.threads, after.read_gbps_all);
                        fmt::print("compute roofline: {:.1f} GFLOP/s float32 FMA with {} threads ({:.1f} on one); "
                                   "\"of peak\" uses it\n",
                                   compute.f32_gflops_all, compute.threads, compute.f32_gflops_1thread);
                        if (compute.bf16_dot_available) {
                          fmt::print("bf16 dot roofline: {:.1f} GFLOP/s vdpbf16ps with {} threads ({:.1f} on one); "
                                     "rows whose kernel runs it are measured against it{}\n",
                                     compute.bf16_dot_gflops_all, compute.threads, compute.bf16_dot_gflops_1thread,
                                     compute.bf16_dot_used ? "" : " (kiln's use switched off: KILN_BF16_DOT=0)");
                        }
                        fmt::print("\n");
                        fmt::print("{}", table.format());
                        if (ran == 0) {
                          fmt::print(stderr, "kiln bench: no suite matches '{}'\n", *filter);
                          return 2;
                        }
                        return 0;
                      }});
}

}  // namespace kiln::cli
