// `kiln doctor`: every fact about this machine that decides how fast kiln can be, as text
// for people and as JSON for scripts.
#include <fmt/core.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/runtime.h"
#include "runtime/vulkan_report.h"
#include "kiln/thread_pool.h"

// The build may pass the project version; this is the fallback for other builds.
#ifndef KILN_VERSION
#define KILN_VERSION "0.1.0"
#endif

namespace kiln {
namespace {

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

std::string cuda_line(const CudaAvailability& cuda) {
  std::string line = cuda.usable ? "usable: " + cuda.reason : "not usable: " + cuda.reason;
  if (cuda.driver_version > 0) {
    line += fmt::format("; driver {}.{}", cuda.driver_version / 1000, cuda.driver_version % 1000 / 10);
  }
  if (!cuda.devices.empty()) line += "; devices: " + join(cuda.devices, ", ");
  return line;
}

}  // namespace

const char* kiln_version() { return KILN_VERSION; }

DoctorReport collect_doctor_report(ThreadPool& pool, size_t bandwidth_buffer_bytes, int bandwidth_repeats) {
  DoctorReport report;
  report.version = kiln_version();
  report.cpu = cpu_info();
  report.simd_target = simd_target_name();
  report.compiled_simd_targets = compiled_simd_targets();
  report.pool_threads = pool.num_threads();
  if (const char* env = std::getenv("KILN_NUM_THREADS")) report.kiln_num_threads_env = env;
  report.blas = blas_info();
  report.bandwidth = measure_memory_bandwidth(pool, bandwidth_buffer_bytes, bandwidth_repeats);
  // Tests probe a small buffer; they get a short compute probe too.
  report.compute = bandwidth_buffer_bytes != 0 ? measure_peak_compute(pool, 200'000, 3) : measure_peak_compute(pool);
  report.allocator = allocator_stats();
  report.cuda = cuda_availability();
  report.vulkan = vulkan_availability();
  report.vulkan_memory = vulkan_memory_stats();
  return report;
}

std::string format_doctor_report(const DoctorReport& r) {
  const BandwidthResult& bw = r.bandwidth;
  const AllocatorStats& a = r.allocator;
  std::string text;
  const auto line = [&](const char* label, const std::string& value) {
    text += fmt::format("{:<14}{}\n", label, value);
  };
  text += fmt::format("kiln {}\n", r.version);
  line("CPU", fmt::format("{} ({})", r.cpu.model, r.cpu.arch));
  line("ISA features", r.cpu.features.empty() ? "none detected" : join(r.cpu.features, " "));
  line("SIMD target", fmt::format("{} (compiled: {})", r.simd_target, join(r.compiled_simd_targets, " ")));
  line("Threads", fmt::format("pool {}, physical cores {}, logical CPUs {}, KILN_NUM_THREADS {}",
                              r.pool_threads, r.cpu.physical_cores, r.cpu.logical_cpus,
                              r.kiln_num_threads_env.empty() ? "unset" : "=" + r.kiln_num_threads_env));
  line("Memory", fmt::format("{} total, {} available", format_bytes(r.cpu.total_memory_bytes),
                             format_bytes(r.cpu.available_memory_bytes)));
  line("LLC", r.cpu.llc_bytes > 0 ? format_bytes(r.cpu.llc_bytes) : "unknown");
  std::string blas = r.blas.blas_library.empty() ? "unknown" : r.blas.blas_library;
  if (!r.blas.openblas_config.empty()) {
    blas += fmt::format(" ({}; core {}; {} threads)", r.blas.openblas_config, r.blas.openblas_core,
                        r.blas.blas_threads);
  }
  line("BLAS", blas);
  line("LAPACK", r.blas.lapack_library.empty() ? "not loaded" : r.blas.lapack_library);
  line("Bandwidth",
       fmt::format("read {:.1f} GB/s (1 thread), {:.1f} GB/s ({} threads); median of {} passes over {}",
                   bw.read_gbps_1thread, bw.read_gbps_all, bw.threads, bw.repeats,
                   format_bytes(static_cast<int64_t>(bw.buffer_bytes))));
  text += fmt::format("{:<14}(the roofline every benchmark reports against)\n", "");
  const ComputeResult& c = r.compute;
  line("Compute", fmt::format("float32 FMA {:.1f} GFLOP/s (1 thread), {:.1f} GFLOP/s ({} threads); median of {} "
                              "passes",
                              c.f32_gflops_1thread, c.f32_gflops_all, c.threads, c.repeats));
  if (c.bf16_dot_available) {
    text += fmt::format("{:<14}bf16 dot (vdpbf16ps) {:.1f} GFLOP/s (1 thread), {:.1f} GFLOP/s ({} threads)\n", "",
                        c.bf16_dot_gflops_1thread, c.bf16_dot_gflops_all, c.threads);
    text += fmt::format("{:<14}(the compute roofline of prefill: bf16 dot for bf16 weights{}, float32 FMA otherwise)\n",
                        "", c.bf16_dot_used ? "" : " if enabled; switched off by KILN_BF16_DOT=0");
  } else {
    text += fmt::format("{:<14}(the compute roofline of prefill; no bf16 dot instruction: kiln's bf16 kernels widen "
                        "to float32)\n",
                        "");
  }
  line("Allocator",
       fmt::format("allocated {} (peak {}), reserved {} (peak {}), {} allocations, {} cache hits",
                   format_bytes(a.allocated_bytes), format_bytes(a.peak_allocated_bytes),
                   format_bytes(a.reserved_bytes), format_bytes(a.peak_reserved_bytes), a.num_allocs,
                   a.num_cache_hits));
  line("CUDA", cuda_line(r.cuda));
  text += format_vulkan_lines(r.vulkan, r.vulkan_memory);
  return text;
}

std::string doctor_report_json(const DoctorReport& r) {
  using nlohmann::json;
  const json report = {
      {"version", r.version},
      {"cpu",
       {{"model", r.cpu.model},
        {"arch", r.cpu.arch},
        {"features", r.cpu.features},
        {"physical_cores", r.cpu.physical_cores},
        {"logical_cpus", r.cpu.logical_cpus},
        {"total_memory_bytes", r.cpu.total_memory_bytes},
        {"available_memory_bytes", r.cpu.available_memory_bytes},
        {"llc_bytes", r.cpu.llc_bytes}}},
      {"simd", {{"target", r.simd_target}, {"compiled_targets", r.compiled_simd_targets}}},
      {"threads",
       {{"pool", r.pool_threads},
        {"kiln_num_threads", r.kiln_num_threads_env.empty() ? json(nullptr) : json(r.kiln_num_threads_env)}}},
      {"blas",
       {{"library", r.blas.blas_library},
        {"openblas_config", r.blas.openblas_config},
        {"openblas_core", r.blas.openblas_core},
        {"threads", r.blas.blas_threads},
        {"lapack_library", r.blas.lapack_library}}},
      {"bandwidth",
       {{"read_gbps_1thread", r.bandwidth.read_gbps_1thread},
        {"read_gbps_all", r.bandwidth.read_gbps_all},
        {"threads", r.bandwidth.threads},
        {"buffer_bytes", r.bandwidth.buffer_bytes},
        {"repeats", r.bandwidth.repeats}}},
      {"compute",
       {{"f32_gflops_1thread", r.compute.f32_gflops_1thread},
        {"f32_gflops_all", r.compute.f32_gflops_all},
        {"threads", r.compute.threads},
        {"repeats", r.compute.repeats},
        {"bf16_dot_available", r.compute.bf16_dot_available},
        {"bf16_dot_gflops_1thread", r.compute.bf16_dot_gflops_1thread},
        {"bf16_dot_gflops_all", r.compute.bf16_dot_gflops_all},
        {"bf16_dot_used", r.compute.bf16_dot_used}}},
      {"allocator",
       {{"allocated_bytes", r.allocator.allocated_bytes},
        {"peak_allocated_bytes", r.allocator.peak_allocated_bytes},
        {"reserved_bytes", r.allocator.reserved_bytes},
        {"peak_reserved_bytes", r.allocator.peak_reserved_bytes},
        {"num_allocs", r.allocator.num_allocs},
        {"num_cache_hits", r.allocator.num_cache_hits}}},
      {"cuda",
       {{"usable", r.cuda.usable},
        {"reason", r.cuda.reason},
        {"device_count", r.cuda.device_count},
        {"driver_version", r.cuda.driver_version},
        {"devices", r.cuda.devices},
        {"built_with_cuda", r.cuda.built_with_cuda}}},
      {"vulkan", vulkan_json(r.vulkan, r.vulkan_memory)},
  };
  return report.dump(2);
}

std::string doctor_report(ThreadPool& pool) { return format_doctor_report(collect_doctor_report(pool)); }

}  // namespace kiln
