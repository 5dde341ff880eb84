// Memory read bandwidth probe: the roofline every benchmark reports against.
//
// A read-only vectorised sum, compiled once per Highway target, over a buffer far larger
// than the last-level cache. Each thread reads its own contiguous slice (the same static
// split the kernels use), several independent accumulators keep enough loads in flight to
// saturate the memory system, and the median of several passes is reported so that one
// disturbed pass (a shared VM, a page-cache flush) does not move the figure.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/bandwidth_probe.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace kiln {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sums `size` bytes as 64-bit words (the tail bytewise). Integer adds have one cycle of
// latency, so eight accumulators leave the loop bound by loads alone.
uint64_t SumWords(const uint8_t* HWY_RESTRICT bytes, size_t size) {
  const hn::ScalableTag<uint64_t> d;
  const size_t lanes = hn::Lanes(d);
  const size_t words = size / sizeof(uint64_t);
  const uint64_t* HWY_RESTRICT p = reinterpret_cast<const uint64_t*>(bytes);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  auto s4 = hn::Zero(d), s5 = hn::Zero(d), s6 = hn::Zero(d), s7 = hn::Zero(d);
  size_t i = 0;
  for (; i + 8 * lanes <= words; i += 8 * lanes) {
    s0 = hn::Add(s0, hn::LoadU(d, p + i + 0 * lanes));
    s1 = hn::Add(s1, hn::LoadU(d, p + i + 1 * lanes));
    s2 = hn::Add(s2, hn::LoadU(d, p + i + 2 * lanes));
    s3 = hn::Add(s3, hn::LoadU(d, p + i + 3 * lanes));
    s4 = hn::Add(s4, hn::LoadU(d, p + i + 4 * lanes));
    s5 = hn::Add(s5, hn::LoadU(d, p + i + 5 * lanes));
    s6 = hn::Add(s6, hn::LoadU(d, p + i + 6 * lanes));
    s7 = hn::Add(s7, hn::LoadU(d, p + i + 7 * lanes));
  }
  for (; i + lanes <= words; i += lanes) s0 = hn::Add(s0, hn::LoadU(d, p + i));
  const auto total =
      hn::Add(hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)), hn::Add(hn::Add(s4, s5), hn::Add(s6, s7)));
  // Summed through memory rather than SumOfLanes, whose AVX-512 form adds signed 64-bit
  // lanes and trips UBSan on the wrap-around this checksum relies on.
  HWY_ALIGN uint64_t lane_sums[HWY_MAX_BYTES / sizeof(uint64_t)];
  hn::Store(total, d, lane_sums);
  uint64_t sum = 0;
  for (size_t lane = 0; lane < lanes; ++lane) sum += lane_sums[lane];
  for (size_t b = i * sizeof(uint64_t); b < size; ++b) sum += bytes[b];
  return sum;
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "kiln/allocator.h"
#include "kiln/error.h"
#include "kiln/runtime.h"
#include "kiln/thread_pool.h"

namespace kiln {
HWY_EXPORT(SumWords);

namespace {

constexpr size_t kMiB = size_t{1} << 20;
// Slices start on cache-line boundaries so that no line is read by two threads.
constexpr size_t kSliceAlign = 64;
// Writing the sums here keeps the compiler from dropping the reads.
volatile uint64_t g_sink = 0;

// Contiguous slice `index` of `threads` over `bytes` bytes.
struct Slice {
  size_t begin = 0, size = 0;
};
Slice slice_of(size_t bytes, int threads, int index) {
  const size_t at_least = (bytes + threads - 1) / threads;
  const size_t per_thread = (at_least + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
  const size_t begin = std::min(bytes, per_thread * index);
  return {begin, std::min(bytes, begin + per_thread) - begin};
}

// Never zero, so that a pass over a few bytes still gives a finite figure.
double seconds_since(std::chrono::steady_clock::time_point start) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::max(seconds, 1e-9);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// One pass with every pool thread reading its own slice; GB/s.
double timed_parallel_read(ThreadPool& pool, const uint8_t* data, size_t bytes) {
  const int threads = pool.num_threads();
  // One cache line per thread's sum so that the stores at the end do not contend.
  std::vector<uint64_t> sums(static_cast<size_t>(threads) * 8, 0);
  const auto start = std::chrono::steady_clock::now();
  pool.run_on_all([&](int t) {
    const Slice s = slice_of(bytes, threads, t);
    sums[static_cast<size_t>(t) * 8] = HWY_DYNAMIC_DISPATCH(SumWords)(data + s.begin, s.size);
  });
  const double seconds = seconds_since(start);
  uint64_t total = 0;
  for (int t = 0; t < threads; ++t) total += sums[static_cast<size_t>(t) * 8];
  g_sink = g_sink + total;
  return static_cast<double>(bytes) / seconds / 1e9;
}

double timed_single_read(const uint8_t* data, size_t bytes) {
  const auto start = std::chrono::steady_clock::now();
  const uint64_t sum = HWY_DYNAMIC_DISPATCH(SumWords)(data, bytes);
  const double seconds = seconds_since(start);
  g_sink = g_sink + sum;
  return static_cast<double>(bytes) / seconds / 1e9;
}

// 8 x LLC leaves at most an eighth of the data cached between passes. The cap matters on
// VMs that report the whole host's L3 (508 MiB on our 2-core build machines): 8 x that
// would be 4 GiB, and faulting in fresh pages there costs ~11 us each, 11 s in all.
size_t default_buffer_bytes() {
  const CpuInfo info = cpu_info();
  size_t bytes = std::max<size_t>(256 * kMiB, 8 * static_cast<size_t>(std::max<int64_t>(info.llc_bytes, 0)));
  bytes = std::min(bytes, 1024 * kMiB);
  if (info.available_memory_bytes > 0)
    bytes = std::min(bytes, static_cast<size_t>(info.available_memory_bytes) / 4);
  return bytes;
}

// Frees the probe buffer on every path, back to the caching allocator for the next probe.
class ProbeBuffer {
 public:
  explicit ProbeBuffer(size_t bytes) : bytes_(bytes), data_(static_cast<uint8_t*>(allocate_bytes(bytes))) {}
  ~ProbeBuffer() { free_bytes(data_, bytes_); }
  ProbeBuffer(const ProbeBuffer&) = delete;
  ProbeBuffer& operator=(const ProbeBuffer&) = delete;
  uint8_t* data() const { return data_; }

 private:
  size_t bytes_;
  uint8_t* data_;
};

}  // namespace

BandwidthResult measure_memory_bandwidth(ThreadPool& pool, size_t buffer_bytes, int repeats) {
  KILN_CHECK_KIND(repeats >= 1, Value, "measure_memory_bandwidth", "repeats must be >= 1, got {}", repeats);
  if (buffer_bytes == 0) buffer_bytes = default_buffer_bytes();
  const int threads = pool.num_threads();
  KILN_CHECK_KIND(buffer_bytes >= kSliceAlign * static_cast<size_t>(threads), Value,
                  "measure_memory_bandwidth", "buffer_bytes must be at least {} bytes for {} threads, got {}",
                  kSliceAlign * threads, threads, buffer_bytes);

  ProbeBuffer buffer(buffer_bytes);
  // Each thread touches the slice it will read: fresh pages are faulted in outside the
  // timed passes, and on a NUMA machine they land on the reading thread's node.
  pool.run_on_all([&](int t) {
    const Slice s = slice_of(buffer_bytes, threads, t);
    std::memset(buffer.data() + s.begin, 1, s.size);
  });

  std::vector<double> single, all;
  for (int r = 0; r < repeats; ++r) {
    single.push_back(timed_single_read(buffer.data(), buffer_bytes));
    all.push_back(timed_parallel_read(pool, buffer.data(), buffer_bytes));
  }
  BandwidthResult result;
  result.read_gbps_1thread = median(single);
  result.read_gbps_all = median(all);
  result.threads = threads;
  result.buffer_bytes = buffer_bytes;
  result.repeats = repeats;
  return result;
}

double measure_read_bandwidth_gbps(ThreadPool& pool, const void* data, size_t bytes) {
  KILN_CHECK_KIND(data != nullptr && bytes > 0, Value, "measure_read_bandwidth_gbps",
                  "expected a non-empty buffer, got data={} bytes={}", data, bytes);
  return timed_parallel_read(pool, static_cast<const uint8_t*>(data), bytes);
}

}  // namespace kiln

#endif  // HWY_ONCE
