// What this machine offers kiln: CPU, SIMD target, BLAS, memory bandwidth (the roofline
// every benchmark reports against), CUDA availability with the reason it is refused, and
// the `kiln doctor` report that gathers them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/allocator.h"
#include "kiln/vulkan.h"

namespace kiln {

class ThreadPool;

// "0.1.0" and the like.
const char* kiln_version();

struct CpuInfo {
  std::string model;                  // brand string, e.g. "AMD EPYC 9B45"
  std::string arch;                   // "x86_64", "aarch64"
  std::vector<std::string> features;  // OS-enabled ISA extensions kiln cares about
  int physical_cores = 0;             // physical_core_count()
  int logical_cpus = 0;               // CPUs this process may run on
  int64_t total_memory_bytes = 0;
  int64_t available_memory_bytes = 0;
  int64_t llc_bytes = 0;  // last-level cache size as the system reports it; 0 if unknown
};
CpuInfo cpu_info();

// The Highway target that dynamic dispatch picks on this CPU, e.g. "AVX3".
std::string simd_target_name();
// The Highway targets kiln's kernels were compiled for, best first.
std::vector<std::string> compiled_simd_targets();

struct BlasInfo {
  std::string blas_library;     // resolved path of the shared object providing cblas_sgemm
  std::string openblas_config;  // openblas_get_config(); empty when BLAS is not OpenBLAS
  std::string openblas_core;    // openblas_get_corename()
  int blas_threads = 0;         // openblas_get_num_threads(); 0 when not OpenBLAS
  std::string lapack_library;   // resolved path of the shared object providing dgetrf_
};
BlasInfo blas_info();
// One line: provider, config, core, threads, LAPACK provider.
std::string blas_library_info();

struct BandwidthResult {
  double read_gbps_1thread = 0;  // median over repeats, 1 GB = 1e9 bytes
  double read_gbps_all = 0;      // median over repeats, every pool thread reading its slice
  int threads = 0;
  size_t buffer_bytes = 0;
  int repeats = 0;
};
// Vectorised read-only sum over a buffer far larger than the last-level cache, taken from
// the caching allocator. buffer_bytes = 0 picks max(256 MiB, 8 x LLC), capped at 1 GiB and
// a quarter of available memory.
BandwidthResult measure_memory_bandwidth(ThreadPool& pool, size_t buffer_bytes = 0, int repeats = 7);
// One timed pass reading `bytes` at `data` with every pool thread (each a static slice);
// GB/s. For benchmarks: the data is not touched first, so the caller decides whether it is
// cached.
double measure_read_bandwidth_gbps(ThreadPool& pool, const void* data, size_t bytes);

struct ComputeResult {
  double f32_gflops_1thread = 0;  // median over repeats, 1 GFLOP = 1e9 FLOPs, FMA = 2
  double f32_gflops_all = 0;      // every pool thread running FMAs at once
  int threads = 0;
  int repeats = 0;
  // The CPU has a bf16 dot instruction (AVX512_BF16, kiln/cpu_features.h), and its peak:
  // independent vdpbf16ps chains (32 multiply-adds each), measured like the FMA peak;
  // 0 without the instruction.
  bool bf16_dot_available = false;
  double bf16_dot_gflops_1thread = 0;
  double bf16_dot_gflops_all = 0;
  // kiln's prefill GEMMs with bfloat16 weights run on the instruction (kiln::
  // bf16_dot_enabled(): available and not switched off by KILN_BF16_DOT=0).
  bool bf16_dot_used = false;
  // The compute roofline of a prefill whose GEMMs have bf16 weights: the bf16 dot peak
  // where they use it, else the float32 FMA peak (their FMAs then widen to float32).
  double bf16_prefill_gflops() const { return bf16_dot_used ? bf16_dot_gflops_all : f32_gflops_all; }
};
// Peak float32 FMA rate: independent FMA chains on registers, on every pool thread at
// once, `iterations` rounds of 12 vector FMAs per pass (the default is ~50 ms a pass);
// with AVX512-BF16 also the bf16 dot rate, `iterations` rounds of 16 vdpbf16ps a pass.
ComputeResult measure_peak_compute(ThreadPool& pool, int64_t iterations = 20'000'000, int repeats = 5);

struct CudaAvailability {
  bool usable = false;
  std::string reason;  // why not usable, or a summary when usable
  int device_count = 0;
  int driver_version = 0;            // e.g. 12040 for 12.4; 0 when no driver
  std::vector<std::string> devices;  // "NVIDIA H200 (sm_90, 139.8 GiB)"
  bool built_with_cuda = false;
};
// Probes the NVIDIA driver through dlopen (no CUDA headers needed); cached after the
// first call.
CudaAvailability cuda_availability();

struct DoctorReport {
  std::string version;
  CpuInfo cpu;
  std::string simd_target;
  std::vector<std::string> compiled_simd_targets;
  int pool_threads = 0;
  std::string kiln_num_threads_env;  // empty when unset
  BlasInfo blas;
  BandwidthResult bandwidth;
  ComputeResult compute;
  AllocatorStats allocator;  // read after the bandwidth probe, so it shows its buffer
  CudaAvailability cuda;
  VulkanAvailability vulkan;
  AllocatorStats vulkan_memory;  // the Vulkan device pool's statistics
};
// Gathers every fact, running the bandwidth probe on `pool` (about a second with the
// defaults; tests pass a small buffer).
DoctorReport collect_doctor_report(ThreadPool& pool, size_t bandwidth_buffer_bytes = 0,
                                   int bandwidth_repeats = 7);
std::string format_doctor_report(const DoctorReport& report);
std::string doctor_report_json(const DoctorReport& report);  // pretty-printed JSON text
std::string doctor_report(ThreadPool& pool);                 // format(collect(pool))
// The report's "vulkan" object alone as JSON text (probe and device memory; no bandwidth
// probe), for kiln.vulkan.availability().
std::string vulkan_report_json();

}  // namespace kiln
