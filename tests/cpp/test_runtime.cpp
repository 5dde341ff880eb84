// Runtime facts: CPU info, SIMD target, BLAS, the bandwidth probe, CUDA availability and
// the doctor report. No timing asserts: the probe's figures only have to be sane numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/allocator.h"
#include "kiln/error.h"
#include "kiln/cpu_features.h"
#include "kiln/runtime.h"
#include "kiln/thread_pool.h"

using namespace kiln;

TEST(Runtime, CpuInfoIsSane) {
  const CpuInfo info = cpu_info();
  EXPECT_FALSE(info.model.empty());
  EXPECT_FALSE(info.arch.empty());
  EXPECT_GE(info.physical_cores, 1);
  EXPECT_GE(info.logical_cpus, info.physical_cores);
  EXPECT_GT(info.total_memory_bytes, 0);
  EXPECT_GT(info.available_memory_bytes, 0);
  EXPECT_LE(info.available_memory_bytes, info.total_memory_bytes);
  EXPECT_GE(info.llc_bytes, 0);
#if defined(__x86_64__)
  EXPECT_EQ(info.arch, "x86_64");
  // Every x86-64 CPU since 2008 has SSE4.2, and the features we report use one spelling.
  EXPECT_NE(std::find(info.features.begin(), info.features.end(), "sse4_2"), info.features.end());
  const bool has_avx512f =
      std::find(info.features.begin(), info.features.end(), "avx512f") != info.features.end();
  const bool has_avx2 = std::find(info.features.begin(), info.features.end(), "avx2") != info.features.end();
  if (has_avx512f) EXPECT_TRUE(has_avx2);
#endif
}

TEST(Runtime, SimdTargetIsOneOfTheCompiledTargets) {
  const std::string target = simd_target_name();
  const std::vector<std::string> compiled = compiled_simd_targets();
  EXPECT_FALSE(target.empty());
  ASSERT_FALSE(compiled.empty());
  EXPECT_NE(std::find(compiled.begin(), compiled.end(), target), compiled.end()) << target;
}

TEST(Runtime, BlasInfoNamesTheLibraries) {
  const BlasInfo info = blas_info();
  EXPECT_FALSE(info.blas_library.empty());
  const std::string line = blas_library_info();
  EXPECT_NE(line.find(info.blas_library), std::string::npos);
  EXPECT_NE(line.find("LAPACK"), std::string::npos);
}

TEST(Runtime, BandwidthProbeOnSmallBuffer) {
  ThreadPool pool(2);
  const AllocatorStats before = allocator_stats();
  const BandwidthResult r = measure_memory_bandwidth(pool, size_t{8} << 20, 3);
  EXPECT_TRUE(std::isfinite(r.read_gbps_1thread));
  EXPECT_TRUE(std::isfinite(r.read_gbps_all));
  EXPECT_GT(r.read_gbps_1thread, 0.0);
  EXPECT_GT(r.read_gbps_all, 0.0);
  EXPECT_EQ(r.threads, 2);
  EXPECT_EQ(r.buffer_bytes, size_t{8} << 20);
  EXPECT_EQ(r.repeats, 3);
  // The buffer came from the caching allocator and went back to it.
  const AllocatorStats after = allocator_stats();
  EXPECT_GT(after.num_allocs, before.num_allocs);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
}

TEST(Runtime, BandwidthProbeRejectsBadArguments) {
  ThreadPool pool(2);
  EXPECT_THROW(measure_memory_bandwidth(pool, size_t{1} << 20, 0), Error);
  EXPECT_THROW(measure_memory_bandwidth(pool, 16, 1), Error);
  EXPECT_THROW(measure_read_bandwidth_gbps(pool, nullptr, 100), Error);
}

TEST(Runtime, ReadBandwidthHelperOnOddSizes) {
  ThreadPool pool(3);
  // Sizes that are not multiples of the vector width or the thread count, and an odd
  // start address, exercise the tails.
  std::vector<uint8_t> data(100003, 7);
  for (size_t bytes : {size_t{1}, size_t{63}, size_t{4097}, data.size() - 1}) {
    const double gbps = measure_read_bandwidth_gbps(pool, data.data() + 1, bytes);
    EXPECT_TRUE(std::isfinite(gbps) && gbps > 0) << bytes;
  }
}

TEST(Runtime, CudaAvailabilityExplainsItself) {
  const CudaAvailability cuda = cuda_availability();
  EXPECT_FALSE(cuda.built_with_cuda);
  // This build has no CUDA, so CUDA is never usable, whatever the machine has.
  EXPECT_FALSE(cuda.usable);
  EXPECT_FALSE(cuda.reason.empty());
  EXPECT_EQ(static_cast<size_t>(cuda.device_count), cuda.devices.size());
  if (cuda.device_count > 0 && cuda.driver_version >= 12000) {
    EXPECT_NE(cuda.reason.find("built without CUDA"), std::string::npos) << cuda.reason;
  }
}

TEST(Runtime, PeakComputeProbeMeasuresAndValidates) {
  ThreadPool pool(2);
  const ComputeResult r = measure_peak_compute(pool, 100'000, 3);
  EXPECT_GT(r.f32_gflops_1thread, 0.0);
  EXPECT_GT(r.f32_gflops_all, 0.0);
  EXPECT_EQ(r.threads, 2);
  EXPECT_EQ(r.repeats, 3);
  // The bf16 dot peak exists exactly where the instruction does, and is what bf16 prefill
  // is measured against when kiln's GEMMs use it.
  EXPECT_EQ(r.bf16_dot_available, cpu_has_bf16_dot());
  EXPECT_EQ(r.bf16_dot_used, bf16_dot_enabled());
  if (r.bf16_dot_available) {
    EXPECT_GT(r.bf16_dot_gflops_1thread, 0.0);
    EXPECT_GT(r.bf16_dot_gflops_all, 0.0);
  } else {
    EXPECT_EQ(r.bf16_dot_gflops_all, 0.0);
  }
  EXPECT_EQ(r.bf16_prefill_gflops(), r.bf16_dot_used ? r.bf16_dot_gflops_all : r.f32_gflops_all);
  EXPECT_THROW(measure_peak_compute(pool, 100, 0), Error);
  EXPECT_THROW(measure_peak_compute(pool, 0, 1), Error);
}

TEST(Runtime, DoctorReportHasTheKeyLines) {
  ThreadPool pool(2);
  const DoctorReport report = collect_doctor_report(pool, size_t{8} << 20, 3);
  const std::string text = format_doctor_report(report);
  for (const char* key : {"kiln ", "CPU", "ISA features", "SIMD target", "Threads", "Memory", "LLC", "BLAS",
                          "LAPACK", "Bandwidth", "GB/s", "roofline", "Compute", "GFLOP/s", "Allocator", "CUDA"}) {
    EXPECT_NE(text.find(key), std::string::npos) << key << " missing from:\n" << text;
  }
  EXPECT_NE(text.find(report.simd_target), std::string::npos);
  EXPECT_NE(text.find(report.cuda.reason), std::string::npos);
  EXPECT_EQ(report.pool_threads, 2);
  EXPECT_GT(report.bandwidth.read_gbps_all, 0.0);
  EXPECT_GT(report.compute.f32_gflops_all, 0.0);

  const nlohmann::json json = nlohmann::json::parse(doctor_report_json(report));
  EXPECT_EQ(json["version"], kiln_version());
  EXPECT_EQ(json["cpu"]["model"], report.cpu.model);
  EXPECT_EQ(json["simd"]["target"], report.simd_target);
  EXPECT_EQ(json["threads"]["pool"], 2);
  EXPECT_EQ(json["cuda"]["usable"], false);
  EXPECT_EQ(json["cuda"]["reason"], report.cuda.reason);
  EXPECT_GT(json["bandwidth"]["read_gbps_all"].get<double>(), 0.0);
  EXPECT_GT(json["compute"]["f32_gflops_all"].get<double>(), 0.0);
  EXPECT_EQ(json["compute"]["bf16_dot_available"].get<bool>(), report.compute.bf16_dot_available);
  EXPECT_EQ(json["compute"]["bf16_dot_used"].get<bool>(), report.compute.bf16_dot_used);
  EXPECT_EQ(json["compute"]["bf16_dot_gflops_all"].get<double>(), report.compute.bf16_dot_gflops_all);
  if (report.compute.bf16_dot_available) EXPECT_NE(text.find("bf16 dot (vdpbf16ps)"), std::string::npos) << text;
}
