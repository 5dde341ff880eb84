// bincount's one-pass kernel (growing per-thread histograms, run-length counting of
// equal neighbours, interleaved sub-histograms) and its fall-back to the two-pass path,
// exact against a plain loop on one and several threads: one hot bin with every length
// around the 8-value blocks, runs broken at block edges, all-distinct and very large
// values (fall-back), growth from small to large values, weights (dyadic, so float sums
// are exact in any order), minlength, empty input and negative values anywhere.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/index_extra/index_extra_kernels.h"
#include "kiln/context.h"
#include "kiln/generator.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/index_extra.h"
#include "test_util.h"

using namespace kiln;
using kiln::testing::expect_error;

namespace {

Tensor int64_tensor(const std::vector<int64_t>& v) {
  Tensor t = empty({static_cast<int64_t>(v.size())}, DType::Int64);
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

template <typename T>
std::vector<T> vec(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::vector<T>(c.data<T>(), c.data<T>() + c.numel());
}

template <typename W>
std::vector<W> reference(const std::vector<int64_t>& v, const std::vector<W>* weights, int64_t minlength) {
  int64_t bins = minlength;
  for (int64_t x : v) bins = std::max(bins, x + 1);
  std::vector<W> out(static_cast<size_t>(bins), W(0));
  for (size_t i = 0; i < v.size(); ++i) out[static_cast<size_t>(v[i])] += weights ? (*weights)[i] : W(1);
  return out;
}

void expect_counts(const std::vector<int64_t>& v, int64_t minlength = 0) {
  EXPECT_EQ(vec<int64_t>(bincount(int64_tensor(v), std::nullopt, minlength)), reference<int64_t>(v, nullptr, minlength))
      << "size " << v.size();
}

const int kThreadCounts[] = {1, 2, 3};

TEST(BincountOnePass, OneHotBinEveryLengthAroundTheBlocks) {
  for (int threads : kThreadCounts) {
    ThreadsScope scope(threads);
    for (int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 200001}) {
      expect_counts(std::vector<int64_t>(static_cast<size_t>(n), 5));
      expect_counts(std::vector<int64_t>(static_cast<size_t>(n), 0), 3);
    }
  }
}

TEST(BincountOnePass, RunsBrokenAtEveryPositionAndSkewedInput) {
  for (int threads : kThreadCounts) {
    ThreadsScope scope(threads);
    // A hot value with one other value at every offset of a 3-block stretch.
    for (int64_t at = 0; at < 24; ++at) {
      std::vector<int64_t> v(24, 9);
      v[static_cast<size_t>(at)] = 2;
      expect_counts(v);
    }
    // The benchmark's shape, smaller: all but 1 in 1000 the same, the rest spread.
    std::vector<int64_t> v(300007, 3);
    for (size_t i = 0; i < v.size(); i += 1000) v[i] = static_cast<int64_t>(i % 97);
    expect_counts(v);
    // Runs of varying length of varying values.
    Generator g(21);
    const std::vector<int64_t> r = vec<int64_t>(randint(0, 40, {400000}, DType::Int64, &g));
    std::vector<int64_t> runs(r.size());
    int64_t value = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      if (r[i] < 3) value = r[i] * 7 + static_cast<int64_t>(i % 5);
      runs[i] = value;
    }
    expect_counts(runs);
    // Uniform small values: every block takes the sub-histograms.
    expect_counts(vec<int64_t>(randint(0, 100, {250001}, DType::Int64, &g)));
  }
}

TEST(BincountOnePass, GrowthAllDistinctAndValuesPastTheHistogramLimit) {
  for (int threads : kThreadCounts) {
    ThreadsScope scope(threads);
    std::vector<int64_t> rising(300000);
    for (size_t i = 0; i < rising.size(); ++i) rising[i] = static_cast<int64_t>(i / 4);  // grows many times
    expect_counts(rising);
    std::vector<int64_t> distinct(300000);
    for (size_t i = 0; i < distinct.size(); ++i) distinct[i] = static_cast<int64_t>(distinct.size() - 1 - i);
    expect_counts(distinct);
    // A few very large values: past any one-pass histogram, the two-pass path counts.
    std::vector<int64_t> sparse(1000, 1);
    sparse[500] = 3000000;
    sparse[999] = 2999999;
    expect_counts(sparse, 10);
  }
}

TEST(BincountOnePass, WeightsMinlengthAndEmpty) {
  for (int threads : kThreadCounts) {
    ThreadsScope scope(threads);
    Generator g(22);
    std::vector<int64_t> v = vec<int64_t>(randint(0, 50, {200003}, DType::Int64, &g));
    for (size_t i = 0; i < v.size(); i += 3) v[i] = 4;  // a hot bin among the rest
    std::vector<double> wd(v.size());
    for (size_t i = 0; i < v.size(); ++i) wd[i] = static_cast<double>(static_cast<int64_t>(i % 8) - 3) / 4.0;
    const std::vector<float> wf(wd.begin(), wd.end());
    Tensor wdt = empty({static_cast<int64_t>(v.size())}, DType::Float64);
    std::copy(wd.begin(), wd.end(), wdt.data<double>());
    Tensor wft = empty({static_cast<int64_t>(v.size())}, DType::Float32);
    std::copy(wf.begin(), wf.end(), wft.data<float>());
    EXPECT_EQ(vec<double>(bincount(int64_tensor(v), wdt, 60)), reference<double>(v, &wd, 60));
    EXPECT_EQ(vec<float>(bincount(int64_tensor(v), wft)), reference<float>(v, &wf, 0));
    expect_counts(v, 70);
    expect_counts({0}, 0);
    expect_counts({2, 2, 2}, 1);
    EXPECT_EQ(vec<int64_t>(bincount(empty({0}, DType::Int64), std::nullopt, 4)), (std::vector<int64_t>(4, 0)));
    EXPECT_EQ(bincount(empty({0}, DType::Int64)).numel(), 0);
  }
}

TEST(BincountOnePass, NegativeValuesAnywhereAreNamed) {
  for (int threads : kThreadCounts) {
    ThreadsScope scope(threads);
    for (int64_t at : {int64_t{0}, int64_t{7}, int64_t{8}, int64_t{100}, int64_t{199999}}) {
      std::vector<int64_t> v(200000, 1);
      v[static_cast<size_t>(at)] = -3;
      expect_error([&] { bincount(int64_tensor(v)); }, ErrorKind::Runtime,
                   "bincount only supports 1-d non-negative integral inputs. (got the value -3)");
    }
    // A run of the same negative value (a block of equal values must still be checked).
    expect_error([&] { bincount(int64_tensor(std::vector<int64_t>(40, -1))); }, ErrorKind::Runtime,
                 "(got the value -1)");
  }
}

// The kernel's contract: false without calling allocate when one pass does not fit.
TEST(BincountOnePass, KernelGivesUpWithoutAllocating) {
  int calls = 0;
  const auto allocate = [](void* state, int64_t) -> void* {
    ++*static_cast<int*>(state);
    return nullptr;
  };
  const std::vector<int64_t> negative = {1, 2, -1};
  const std::vector<int64_t> huge = {1, int64_t{1} << 40};
  for (const auto* v : {&negative, &huge}) {
    const backend::BincountOnePassProblem p{static_cast<int64_t>(v->size()), v->data(), DType::Float32, nullptr, 0,
                                            allocate, &calls};
    EXPECT_FALSE(cpu::bincount_one_pass_cpu(current_context(), p));
  }
  EXPECT_EQ(calls, 0);
}

}  // namespace
