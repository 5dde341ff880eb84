// bincount in one pass over the input (backend::BincountOnePassProblem).
//
// The two-pass form reads the input once for its largest value (to size the output) and
// once to count, twice the memory traffic of the count itself. Here each thread counts
// its contiguous share into histograms of its own that grow with the largest value seen,
// and the largest value comes out of the same pass. Two things keep one hot bin (input
// that is nearly one value) from serialising on its own store-to-load dependency:
//  - without weights, runs of equal values are counted, not stored: a block of 8 values
//    equal to the current run's value (one vector compare) only adds 8 to a register;
//  - every other value goes to one of four interleaved sub-histograms (by position), so
//    consecutive increments of one bin are four independent chains.
// It gives up (returns false, nothing written) on a negative value or on values so large
// that the per-thread histograms would outgrow the input; the caller then takes the
// two-pass path, which names the negative value or splits bins over threads.
#include <algorithm>
#include <atomic>
#include <vector>

#include "backend/cpu/index_extra/index_extra_kernels.h"
#include "kiln/int_math.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kGrain = 1 << 16;  // values per thread worth a wake-up
constexpr int64_t kWays = 4;         // interleaved sub-histograms
constexpr int64_t kBlock = 8;        // values compared at once against the run's value
// How far ahead of the block being counted its input is prefetched (2 KiB of int64): a
// single thread's stream is bound by how many cache-line misses it has in flight, and
// the hardware prefetcher alone leaves the one-hot-bin pass ~20% short of a plain sum's
// bandwidth.
constexpr int64_t kPrefetchAhead = 256;

// One thread's kWays sub-histograms of size() bins each, grown on demand up to `limit`.
template <typename W>
class GrowingHistogram {
 public:
  explicit GrowingHistogram(int64_t limit) : limit_(limit) {}

  // Makes bin v exist; false when v is negative or at/past the limit.
  bool reserve(int64_t v) {
    if (static_cast<uint64_t>(v) < static_cast<uint64_t>(size_)) return true;
    if (v < 0 || v >= limit_) return false;
    const int64_t grown = std::min(limit_, std::max({v + 1, 2 * size_, int64_t{256}}));
    std::vector<W> next(static_cast<size_t>(kWays * grown), W(0));
    for (int64_t c = 0; c < kWays; ++c) std::copy_n(bins_.data() + c * size_, size_, next.data() + c * grown);
    bins_.swap(next);
    size_ = grown;
    return true;
  }
  W& at(int64_t way, int64_t v) { return bins_[static_cast<size_t>(way * size_ + v)]; }
  W sum(int64_t v) const {
    W total = W(0);
    for (int64_t c = 0; c < kWays; ++c) total += bins_[static_cast<size_t>(c * size_ + v)];
    return total;
  }
  int64_t size() const { return size_; }

 private:
  int64_t limit_;
  int64_t size_ = 0;
  std::vector<W> bins_;
};

// Counts input[begin, end) into h, tracking the largest value in *largest; false when a
// value does not fit h (or another thread already gave up).
template <typename W>
bool count_share(const int64_t* input, const W* weights, int64_t begin, int64_t end, GrowingHistogram<W>& h,
                 int64_t* largest, const std::atomic<bool>& failed) {
  int64_t hi = -1;
  const auto count = [&](int64_t v, W weight, int64_t way) {
    if (!h.reserve(v)) return false;
    h.at(way, v) += weight;
    hi = std::max(hi, v);
    return true;
  };
  // Without weights: `run` values equal to run_value not yet stored. run_value is always
  // one already counted (so reserved, non-negative and within hi): the first value here.
  if (!count(input[begin], weights == nullptr ? W(1) : weights[begin], 0)) return false;
  int64_t run_value = input[begin], run = 0;
  int64_t i = begin + 1;
  for (; i + kBlock <= end; i += kBlock) {
    const int64_t* block = input + i;
    if (i + kPrefetchAhead < end) {
      __builtin_prefetch(block + kPrefetchAhead, 0, 3);
      if (weights != nullptr) __builtin_prefetch(weights + i + kPrefetchAhead, 0, 3);
    }
    if (weights == nullptr) {
      uint64_t differ = 0;
      for (int64_t k = 0; k < kBlock; ++k) differ |= static_cast<uint64_t>(block[k] ^ run_value);
      if (differ == 0) {
        run += kBlock;
        continue;
      }
      if (run > 0) h.at(0, run_value) += W(run);
      run = 0;
    }
    if (failed.load(std::memory_order_relaxed)) return false;
    for (int64_t k = 0; k < kBlock; ++k) {
      if (!count(block[k], weights == nullptr ? W(1) : weights[i + k], k % kWays)) return false;
    }
    run_value = block[kBlock - 1];
  }
  if (run > 0) h.at(0, run_value) += W(run);
  for (; i < end; ++i) {
    if (!count(input[i], weights == nullptr ? W(1) : weights[i], i % kWays)) return false;
  }
  *largest = hi;
  return true;
}

template <typename W>
bool one_pass_typed(ThreadPool& pool, const backend::BincountOnePassProblem& p) {
  const W* weights = static_cast<const W*>(p.weights);
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(pool.num_threads(), p.count / kGrain));
  const int64_t share = ceil_div(p.count, chunks);
  // All sub-histograms together stay within the input's own element count (and a
  // small floor), so merging them costs no more than the pass itself.
  const int64_t limit = std::max<int64_t>(share, 1 << 16) / kWays;
  std::vector<GrowingHistogram<W>> hists(static_cast<size_t>(chunks), GrowingHistogram<W>(limit));
  std::vector<int64_t> largest(static_cast<size_t>(chunks), -1);
  std::atomic<bool> failed{false};
  pool.parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t begin = c * share, end = std::min(p.count, begin + share);
      if (begin < end && !count_share(p.input, weights, begin, end, hists[static_cast<size_t>(c)],
                                      &largest[static_cast<size_t>(c)], failed)) {
        failed.store(true, std::memory_order_relaxed);
      }
    }
  });
  if (failed.load()) return false;
  const int64_t hi = *std::max_element(largest.begin(), largest.end());
  const int64_t bins = std::max(hi + 1, p.minlength);
  W* out = static_cast<W*>(p.allocate(p.allocate_state, bins));
  pool.parallel_for(hi + 1, 1 << 14, [&](int64_t b0, int64_t b1) {
    for (const GrowingHistogram<W>& h : hists) {
      for (int64_t b = b0, e = std::min(b1, h.size()); b < e; ++b) out[b] += h.sum(b);
    }
  });
  return true;
}

}  // namespace

bool bincount_one_pass_cpu(const ExecutionContext& ctx, const backend::BincountOnePassProblem& p) {
  if (p.weights == nullptr) return one_pass_typed<int64_t>(ctx.pool(), p);
  if (p.weight_dtype == DType::Float32) return one_pass_typed<float>(ctx.pool(), p);
  return one_pass_typed<double>(ctx.pool(), p);
}

}  // namespace kiln::cpu
