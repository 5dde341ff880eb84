// `kiln run --model DIR --prompt TEXT [-n N] [--dtype ...] [--chat] [sampling options]`:
// loads a Hugging Face folder, streams the generated text to stdout, and ends with the
// figures that say how close decode came to the memory roofline (on stderr, so stdout
// carries only the text).
#include <fmt/core.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/seed_option.h"
#include "kiln/allocator.h"
#include "kiln/context.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/llm.h"
#include "kiln/profiler.h"
#include "kiln/runtime.h"
#include "kiln/vulkan.h"

namespace kiln::cli {

namespace {

struct RunOptions {
  std::string model_dir;
  std::string prompt;
  int64_t max_new_tokens = 128;
  std::string dtype = "as-stored";
  std::string cache_dtype;
  int64_t max_context = 0;
  bool chat = false;
  bool no_thinking = false;
  std::string system;
  llm::SamplingParams sampling;
  bool no_probe = false;
  bool profile = false;
  std::string device = "cpu";
};

double gib(double bytes) { return bytes / double(1 << 30); }

// Peak resident set size of this process (Linux reports ru_maxrss in KiB).
double peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;
}

// Progress on stderr: one rewritten line on a terminal, a line per quarter otherwise.
void show_progress(std::string_view stage, int64_t done, int64_t total) {
  static const bool tty = isatty(STDERR_FILENO) != 0;
  static int64_t last_quarter = 0;
  static int64_t last_done = -1;
  if (done == last_done) return;  // repeated reports of the same count
  last_done = done;
  const int64_t percent = total > 0 ? done * 100 / total : 100;
  if (tty) {
    fmt::print(stderr, "\rloading {}: {}/{} ({}%)", stage, done, total, percent);
    if (done == total) fmt::print(stderr, "\n");
  } else if (percent / 25 > last_quarter) {
    fmt::print(stderr, "loading {}: {}/{} ({}%)\n", stage, done, total, percent);
  }
  last_quarter = done == total ? 0 : percent / 25;
  std::fflush(stderr);
}

// --cache-dtype through kiln's dtype table, so every name and alias it knows for float32
// and bfloat16 works ("float32", "float", "f32", "bfloat16", "bf16").
DType parse_cache_dtype(const std::string& name) {
  std::optional<DType> dtype;
  try {
    dtype = dtype_from_name(name);
  } catch (const Error&) {
    // Not a dtype at all: the error below lists what is accepted here.
  }
  KILN_CHECK_KIND(dtype == DType::Float32 || dtype == DType::BFloat16, Value, "kiln run",
                  "--cache-dtype must be f32 or bf16 (float32, float, f32, bfloat16 or bf16), got '{}'", name);
  return *dtype;
}

int run(const RunOptions& o) {
  llm::LoadOptions load;
  load.weights = llm::weight_format_from_name(o.dtype);
  if (!o.cache_dtype.empty()) load.cache_dtype = parse_cache_dtype(o.cache_dtype);
  load.max_context = o.max_context;
  load.progress = show_progress;
  load.device = device_from_string(o.device);
  const std::unique_ptr<llm::Model> model = llm::Model::load(o.model_dir, load);
  const llm::ModelInfo& info = model->info();
  if (info.device != kCPU) fmt::print(stderr, "device: {} (weights and per-sequence state)\n", info.device.str());
  fmt::print(stderr, "model: {} ({}), {} layers, {} experts (top {}), {:.2f} B parameters, weights {} ({:.2f} GiB)\n",
             info.model_type, info.arch, info.num_layers, info.num_experts, info.experts_per_token,
             info.parameter_count / 1e9, info.weight_dtypes, gib(static_cast<double>(info.resident_weight_bytes)));
  fmt::print(stderr, "state: {:.3f} GiB per sequence (K/V cache for {} tokens {:.3f} GiB, fixed conv and recurrent "
             "state {:.3f} GiB)\n", gib(static_cast<double>(info.kv_cache_bytes + info.fixed_state_bytes)),
             info.max_context, gib(static_cast<double>(info.kv_cache_bytes)),
             gib(static_cast<double>(info.fixed_state_bytes)));
  if (info.fp8_quantization.has_value()) {
    const llm::Fp8QuantizationReport& q = *info.fp8_quantization;
    fmt::print(stderr, "fp8: quantised {} tensors, relative error max {:.4f}, rms {:.4f}\n", q.tensors,
               q.max_relative_error, q.rms_relative_error);
  }

  llm::GenerateOptions gen;
  gen.max_new_tokens = o.max_new_tokens;
  gen.sampling = o.sampling;
  gen.chat = o.chat;
  gen.enable_thinking = !o.no_thinking;
  gen.system = o.system;
  gen.on_text = [](std::string_view text) {
    fmt::print("{}", text);
    std::fflush(stdout);
    return true;
  };
  if (o.profile) profiler::start();
  const VulkanQueueStats queue_before = vulkan_queue_stats();
  const llm::GenerateResult r = llm::generate(*model, o.prompt, gen);
  const VulkanQueueStats queue_after = vulkan_queue_stats();
  const profiler::Report profile = o.profile ? profiler::stop() : profiler::Report{};
  fmt::print("\n");
  std::fflush(stdout);
  const double peak_rss = peak_rss_bytes();
  const AllocatorStats alloc = allocator_stats();

  const int64_t decode_steps = r.generated_tokens > 0 ? r.generated_tokens - 1 : 0;
  fmt::print(stderr, "\nstop: {} after {} tokens\n", r.stop_reason, r.generated_tokens);
  fmt::print(stderr, "load: {:.2f} s\n", info.load_seconds);
  fmt::print(stderr, "prefill: {} tokens in {:.3f} s ({:.1f} tokens/s)\n", r.prompt_tokens, r.prefill_seconds,
             r.prefill_seconds > 0 ? r.prompt_tokens / r.prefill_seconds : 0.0);
  if (decode_steps > 0 && r.decode_seconds > 0) {
    const double gbps = r.decode_bytes / r.decode_seconds / 1e9;
    fmt::print(stderr, "decode: {} tokens in {:.3f} s ({:.2f} tokens/s), {:.2f} GB/s of weights and KV cache\n",
               decode_steps, r.decode_seconds, decode_steps / r.decode_seconds, gbps);
  } else {
    fmt::print(stderr, "decode: no decode steps (one token or none generated)\n");
  }
  if (info.device.type == DeviceType::Vulkan) {
    // --profile splits these by phase and per token.
    fmt::print(stderr, "vulkan: {} commands in {} submits, {} host waits (prefill and decode)\n",
               queue_after.commands - queue_before.commands, queue_after.submits - queue_before.submits,
               queue_after.waits - queue_before.waits);
  }
  double roofline_gbps = 0;
  if (!o.no_probe && (o.profile || (decode_steps > 0 && r.decode_seconds > 0))) {
    // Probed after generation so it cannot slow the first token; same process, same hour.
    const ExecutionContext context = current_context();  // holds its pool for the probe
    const BandwidthResult roof = measure_memory_bandwidth(context.pool(), 0, 3);
    roofline_gbps = roof.read_gbps_all;
    fmt::print(stderr, "roofline: {:.1f} GB/s read ({} threads)", roof.read_gbps_all, roof.threads);
    if (decode_steps > 0 && r.decode_seconds > 0 && roof.read_gbps_all > 0) {
      fmt::print(stderr, ": decode runs at {:.2f} of it", r.decode_bytes / r.decode_seconds / 1e9 / roof.read_gbps_all);
    }
    fmt::print(stderr, "\n");
  }
  if (o.profile) {
    double peak_gflops = 0;
    if (!o.no_probe) {
      const ExecutionContext context = current_context();
      const ComputeResult peak = measure_peak_compute(context.pool());
      // bf16 and FP8 weights multiply with the bf16 dot instruction where kiln uses it
      // (FP8 decoded exactly to bf16), so that peak is their roofline; float32 weights run
      // float32 FMAs.
      const bool bf16_dot = peak.bf16_dot_used && (info.weight_dtypes.rfind("bfloat16", 0) == 0 ||
                                                   info.weight_dtypes.rfind("float8_e4m3fn", 0) == 0);
      peak_gflops = bf16_dot ? peak.bf16_dot_gflops_all : peak.f32_gflops_all;
      fmt::print(stderr, "compute roofline: {:.1f} GFLOP/s {} ({} threads); float32 FMA {:.1f}, bf16 dot {}\n",
                 peak_gflops, bf16_dot ? "bf16 dot (vdpbf16ps)" : "float32 FMA", peak.threads, peak.f32_gflops_all,
                 peak.bf16_dot_available ? fmt::format("{:.1f}{}", peak.bf16_dot_gflops_all,
                                                       peak.bf16_dot_used ? "" : " (off: KILN_BF16_DOT=0)")
                                         : std::string("absent"));
    }
    fmt::print(stderr, "{}", profile.format(roofline_gbps, peak_gflops));
  }
  fmt::print(stderr, "memory: peak resident {:.2f} GiB, peak kiln allocations {:.2f} GiB\n", gib(peak_rss),
             gib(static_cast<double>(alloc.peak_allocated_bytes)));
  return 0;
}

}  // namespace

void register_run_command(CLI::App& app, CommandList& commands) {
  CLI::App* cmd = app.add_subcommand("run", "Generate text with a Hugging Face checkpoint (qwen3_moe, lfm2_moe, qwen3, qwen3_next, qwen3_5_moe)");
  auto o = std::make_shared<RunOptions>();
  cmd->add_option("--model,-m", o->model_dir, "Folder with config.json, *.safetensors and tokenizer.json")->required();
  cmd->add_option("--prompt,-p", o->prompt, "Prompt text")->required();
  cmd->add_option("-n,--max-new-tokens", o->max_new_tokens, "Most tokens to generate")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--dtype", o->dtype, "Weights in memory: as-stored, bf16, f32 or fp8 (quantised at load)");
  cmd->add_option("--cache-dtype", o->cache_dtype, "KV cache dtype: f32 or bf16 (default follows the weights)");
  cmd->add_option("--max-context", o->max_context, "KV cache length in tokens (default min(model's, 4096))")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_flag("--chat", o->chat, "Wrap the prompt in the model's chat template (ChatML when the folder has none)");
  cmd->add_option("--system", o->system, "System message for --chat");
  cmd->add_flag("--no-thinking", o->no_thinking,
                "With --chat: enable_thinking=False (Qwen3 / Qwen3.5 templates then pre-fill the empty think block)");
  cmd->add_option("--temperature", o->sampling.temperature, "0 = greedy (default)")->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", o->sampling.top_k, "Keep the k most likely tokens (0 = off)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("--top-p", o->sampling.top_p, "Nucleus sampling mass (1 = off)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", o->sampling.min_p, "Drop tokens below min-p x the top probability (0 = off)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--repetition-penalty", o->sampling.repetition_penalty, "Penalty for repeated tokens (1 = off)")
      ->check(CLI::Range(0.01, 100.0));
  add_seed_option(*cmd, o->sampling.seed, "Sampling seed (default 0)");
  cmd->add_option("--device", o->device, "Where the model runs: cpu (default) or vulkan (docs/gpu.md)");
  cmd->add_flag("--no-roofline", o->no_probe, "Skip the memory-bandwidth probe after generation");
  cmd->add_flag("--profile", o->profile,
                "Print each op's time, bytes, GB/s and share of prefill and of decode, and the time between kernels");
  commands.push_back({cmd, [o] { return run(*o); }});
}

}  // namespace kiln::cli
