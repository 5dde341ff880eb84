// bincount on the CPU.
//
// Each thread counts its contiguous share of the input into histograms of its own, and
// the histograms are summed once at the end: no atomics, so input that is nearly one
// value (one hot bin) costs what uniform input costs. With few bins each thread keeps
// four interleaved histograms, so consecutive increments of the hot bin do not wait on
// each other's store. When bins x threads would outgrow the input (many bins, little
// data) each thread instead owns a range of bins and scans the whole input for it.
#include <algorithm>
#include <limits>
#include <vector>

#include "backend/cpu/index_extra/index_extra_kernels.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kGrain = 1 << 16;
constexpr int64_t kInterleave = 4;
constexpr int64_t kInterleaveMaxBins = 4096;

template <typename W>
W weight_at(const W* weights, int64_t i) {
  return weights == nullptr ? W(1) : weights[i];
}

// Counts input[begin, end) into hist (`ways` interleaved copies of `bins`).
template <typename W>
void count_into(const int64_t* input, const W* weights, int64_t begin, int64_t end, W* hist, int64_t bins,
                int64_t ways) {
  if (ways == 1) {
    for (int64_t i = begin; i < end; ++i) hist[input[i]] += weight_at(weights, i);
    return;
  }
  int64_t i = begin;
  for (; i + kInterleave <= end; i += kInterleave) {
    hist[input[i]] += weight_at(weights, i);
    hist[bins + input[i + 1]] += weight_at(weights, i + 1);
    hist[2 * bins + input[i + 2]] += weight_at(weights, i + 2);
    hist[3 * bins + input[i + 3]] += weight_at(weights, i + 3);
  }
  for (; i < end; ++i) hist[input[i]] += weight_at(weights, i);
}

template <typename W>
void bincount_typed(ThreadPool& pool, const backend::BincountProblem& p) {
  const W* weights = static_cast<const W*>(p.weights);
  W* out = static_cast<W*>(p.out);
  const int64_t bins = p.bins;
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(pool.num_threads(), p.count / kGrain));
  const int64_t ways = bins <= kInterleaveMaxBins ? kInterleave : 1;
  const int64_t per_chunk = checked_mul(bins, ways, "bincount");
  if (chunks > 1 && per_chunk > std::max<int64_t>(p.count / chunks, 1 << 16)) {
    // Many bins: thread t owns bins [lo, hi) and reads all of the input.
    pool.parallel_for(bins, std::max<int64_t>(1, bins / pool.num_threads()), [&](int64_t lo, int64_t hi) {
      for (int64_t i = 0; i < p.count; ++i) {
        const int64_t v = p.input[i];
        if (v >= lo && v < hi) out[v] += weight_at(weights, i);
      }
    });
    return;
  }
  if (chunks == 1 && ways == 1) {
    // One pass on one thread over many bins: straight into the zeroed output, with no
    // second histogram of the same size to merge.
    count_into(p.input, weights, 0, p.count, out, bins, 1);
    return;
  }
  std::vector<W> hists(static_cast<size_t>(checked_mul(chunks, per_chunk, "bincount")), W(0));
  const int64_t share = ceil_div(p.count, chunks);
  pool.parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t begin = c * share, end = std::min(p.count, begin + share);
      if (begin < end) count_into(p.input, weights, begin, end, hists.data() + c * per_chunk, bins, ways);
    }
  });
  const int64_t copies = chunks * ways;
  pool.parallel_for(bins, 1 << 14, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      W sum = W(0);
      for (int64_t c = 0; c < copies; ++c) sum += hists[c * bins + b];
      out[b] += sum;
    }
  });
}

}  // namespace

void value_range_cpu(const ExecutionContext& ctx, const int64_t* values, int64_t count, int64_t* min, int64_t* max) {
  const int threads = ctx.num_threads();
  std::vector<int64_t> lows(threads, std::numeric_limits<int64_t>::max());
  std::vector<int64_t> highs(threads, std::numeric_limits<int64_t>::min());
  const int64_t share = ceil_div(count, threads);
  ctx.pool().parallel_for(threads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
      for (int64_t i = t * share, e = std::min(count, (t + 1) * share); i < e; ++i) {
        lo = std::min(lo, values[i]);
        hi = std::max(hi, values[i]);
      }
      lows[t] = lo;
      highs[t] = hi;
    }
  });
  *min = *std::min_element(lows.begin(), lows.end());
  *max = *std::max_element(highs.begin(), highs.end());
}

void bincount_cpu(const ExecutionContext& ctx, const backend::BincountProblem& p) {
  if (p.count == 0) return;
  if (p.weights == nullptr) bincount_typed<int64_t>(ctx.pool(), p);
  else if (p.weight_dtype == DType::Float32) bincount_typed<float>(ctx.pool(), p);
  else bincount_typed<double>(ctx.pool(), p);
}

}  // namespace kiln::cpu
