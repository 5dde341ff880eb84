// The recursive LU (recursive_lu.cpp) against LAPACK's getrf and the scalar getf2
// (small_lu.h): the same pivots and info, factors that reconstruct A to Higham's bound,
// and values that agree with getrf's for well-conditioned matrices; square, tall, wide
// and leaf-sized shapes, zero columns, ties, all four dtypes, with and without the
// pool. Then lu_factor's routing: batches, 0x0, non-finite input (bit for bit what getrf
// gives).
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/linalg/lapack.h"
#include "backend/cpu/linalg/linalg_common.h"
#include "backend/cpu/linalg/recursive_lu.h"
#include "backend/cpu/linalg/small_lu.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/linalg.h"
#include "kiln/thread_pool.h"
#include "linalg_test_util.h"

using namespace kiln;
using namespace kiln::linalg_test;
namespace cl = kiln::cpu::linalg;
namespace lapack = kiln::cpu::lapack;

namespace {

template <typename T>
using Matrix = std::vector<T>;  // column-major

template <typename T>
double unit_roundoff() {
  return std::numeric_limits<cl::Real<T>>::epsilon() / 2;
}

// Standard normal entries, column-major m x n; `boost` is added to the diagonal.
template <typename T>
Matrix<T> gaussian(int64_t m, int64_t n, uint64_t seed, double boost = 0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal;
  Matrix<T> a(static_cast<size_t>(m * n));
  for (T& x : a) {
    if constexpr (cl::kIsComplex<T>) {
      const double re = normal(gen);
      x = T(static_cast<cl::Real<T>>(re), static_cast<cl::Real<T>>(normal(gen)));
    } else {
      x = static_cast<T>(normal(gen));
    }
  }
  for (int64_t i = 0; i < std::min(m, n); ++i) a[i + i * m] += static_cast<cl::Real<T>>(boost);
  return a;
}

struct Lu {
  std::vector<int32_t> pivots;
  int32_t info;
};

template <typename T>
Lu by_getrf(Matrix<T>& a, int64_t m, int64_t n) {
  lapack::prepare();
  Lu r{std::vector<int32_t>(static_cast<size_t>(std::max<int64_t>(1, std::min(m, n)))), 0};
  r.info = lapack::getrf(static_cast<lapack::I>(m), static_cast<lapack::I>(n), a.data(),
                         static_cast<lapack::I>(std::max<int64_t>(1, m)), r.pivots.data());
  return r;
}

template <typename T>
Lu by_recursion(Matrix<T>& a, int64_t m, int64_t n, ThreadPool* pool) {
  lapack::prepare();
  Lu r{std::vector<int32_t>(static_cast<size_t>(std::max<int64_t>(1, std::min(m, n)))), 0};
  r.info = cl::recursive_lu(pool, a.data(), m, n, std::max<int64_t>(1, m), r.pivots.data());
  return r;
}

// max over entries of |P A - L U| / (|L| |U|) in units of k u: Higham's Thm 9.3 bounds
// |dA| <= gamma_k |L||U| with gamma_k = k u / (1 - k u) for the computed factors
// (complex arithmetic adds a small constant factor).
template <typename T>
double residual_in_ku(const Matrix<T>& a, const Matrix<T>& lu, const std::vector<int32_t>& pivots, int64_t m,
                      int64_t n) {
  const int64_t k = std::min(m, n);
  std::vector<cd> pa(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m * n; ++i) pa[i] = cd(a[i]);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t p = pivots[i] - 1;
    for (int64_t c = 0; c < n; ++c) std::swap(pa[i + c * m], pa[p + c * m]);
  }
  double worst = 0;
  for (int64_t c = 0; c < n; ++c) {
    for (int64_t i = 0; i < m; ++i) {
      cd s = 0;
      double scale = 0;
      for (int64_t t = 0; t <= std::min({i, c, k - 1}); ++t) {
        const cd l = t == i ? cd(1) : cd(lu[i + t * m]);
        const cd u = cd(lu[t + c * m]);
        s += l * u;
        scale += std::abs(l) * std::abs(u);
      }
      const double err = std::abs(pa[i + c * m] - s);
      if (err == 0) continue;
      worst = std::max(worst, err / (std::max(scale, std::numeric_limits<double>::min()) * std::max<int64_t>(k, 1) *
                                     unit_roundoff<T>()));
    }
  }
  return worst;
}

template <typename T>
void expect_like_getrf(const Matrix<T>& a, int64_t m, int64_t n, ThreadPool* pool, bool well_conditioned,
                       const char* what) {
  Matrix<T> ref = a, got = a, scalar = a;
  const Lu r = by_getrf(ref, m, n);
  const Lu g = by_recursion(got, m, n, pool);
  const int64_t k = std::min(m, n);
  std::vector<int32_t> scalar_pivots(static_cast<size_t>(std::max<int64_t>(1, k)));
  const int32_t scalar_info = cl::small_lu(scalar.data(), m, n, scalar_pivots.data());
  const std::string where = std::string(what) + " " + std::to_string(m) + "x" + std::to_string(n) +
                            (pool != nullptr ? " pool" : "") + " " +
                            (cl::kIsComplex<T> ? "complex " : "real ") + std::to_string(sizeof(cl::Real<T>) * 8);
  EXPECT_EQ(g.info, r.info) << where;
  EXPECT_EQ(g.info, scalar_info) << where;
  for (int64_t i = 0; i < k; ++i) {
    ASSERT_EQ(g.pivots[i], r.pivots[i]) << where << " pivot " << i;
    ASSERT_EQ(g.pivots[i], scalar_pivots[i]) << where << " pivot " << i;
  }
  // 4 k u |L||U| (the bound, with room for complex multiply-adds).
  EXPECT_LE(residual_in_ku(a, got, g.pivots, m, n), 4.0) << where;
  if (well_conditioned) {
    // Both are exact factors of A + dA with |dA| <= gamma_k |L||U|; for cond(A) < ~10
    // (boosted diagonal, below) the factors then differ by ~cond * k * u * |U|.
    double biggest = 0, diff = 0;
    for (int64_t i = 0; i < m * n; ++i) {
      biggest = std::max(biggest, std::abs(cd(ref[i])));
      diff = std::max(diff, std::abs(cd(ref[i]) - cd(got[i])));
    }
    EXPECT_LE(diff, 10.0 * 10.0 * std::max<int64_t>(k, 1) * unit_roundoff<T>() * biggest) << where;
  }
}

template <typename T>
void every_shape(ThreadPool* pool) {
  const std::pair<int64_t, int64_t> shapes[] = {{0, 0}, {1, 1},    {1, 40},   {40, 1},  {16, 16},  {17, 17},
                                                {31, 33}, {48, 48}, {64, 64},  {100, 100}, {130, 70}, {70, 130},
                                                {16, 300}, {300, 16}, {257, 256}, {256, 257}, {33, 200}};
  for (auto [m, n] : shapes) {
    const uint64_t seed = static_cast<uint64_t>(m * 1000 + n);
    expect_like_getrf(gaussian<T>(m, n, seed), m, n, pool, false, "gaussian");
    const double boost = 2.0 * std::sqrt(static_cast<double>(std::max(m, n))) + 1.0;
    expect_like_getrf(gaussian<T>(m, n, seed + 1, boost), m, n, pool, true, "well-conditioned");
  }
}

TEST(LinalgRecursiveLu, PivotsInfoAndFactorsLikeGetrfEveryShapeAndDtype) {
  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    every_shape<float>(p);
    every_shape<double>(p);
    every_shape<cl::c64>(p);
    every_shape<cl::c128>(p);
  }
}

// all_finite, the scan that sends non-finite input to getrf (and svd's check): every
// kind of non-finite value at every position of runs around the 4096-value block edge,
// the largest finite value and subnormals counted finite; complex with either part bad.
template <typename T>
void all_finite_finds_every_non_finite() {
  using R = cl::Real<T>;
  const R bad[] = {std::numeric_limits<R>::infinity(), -std::numeric_limits<R>::infinity(),
                   std::numeric_limits<R>::quiet_NaN(), -std::numeric_limits<R>::quiet_NaN()};
  const R fine[] = {std::numeric_limits<R>::max(), -std::numeric_limits<R>::max(),
                    std::numeric_limits<R>::denorm_min(), R(-0.0)};
  for (int64_t count : {1, 7, 2047, 2048, 2049, 4097}) {
    std::vector<T> x(static_cast<size_t>(count), T(1));
    for (int64_t i = 0; i < count; ++i) x[i] = T(fine[i % 4]);
    EXPECT_TRUE(cl::all_finite(x.data(), count)) << count;
    for (int64_t at : {int64_t{0}, count / 2, count - 1}) {
      for (R b : bad) {
        std::vector<T> y = x;
        y[at] = T(b);
        EXPECT_FALSE(cl::all_finite(y.data(), count)) << count << " at " << at;
        if constexpr (cl::kIsComplex<T>) {
          y[at] = T(R(1), b);
          EXPECT_FALSE(cl::all_finite(y.data(), count)) << count << " imaginary at " << at;
        }
      }
    }
  }
}

TEST(LinalgRecursiveLu, AllFiniteFindsEveryNonFiniteValue) {
  all_finite_finds_every_non_finite<float>();
  all_finite_finds_every_non_finite<double>();
  all_finite_finds_every_non_finite<cl::c64>();
  all_finite_finds_every_non_finite<cl::c128>();
}

// The updates' column blocks shared by the pool's threads: the pivots and info one
// thread gives and factors within the same bound (not bit for bit: OpenBLAS's edge
// tiles round differently, and the blocks' edges move with the thread count), for pools
// of 2 and 3 threads and for a call from inside a pool chunk (which runs alone).
template <typename T>
void same_on_every_team(ThreadPool& two, ThreadPool& three) {
  for (auto [m, n] : {std::pair<int64_t, int64_t>{256, 256}, {300, 200}, {200, 300}, {400, 90}}) {
    const Matrix<T> a = gaussian<T>(m, n, 99 + m);
    Matrix<T> alone = a;
    const Lu ref = by_recursion(alone, m, n, nullptr);
    for (ThreadPool* pool : {&two, &three}) {
      Matrix<T> shared = a;
      const Lu got = by_recursion(shared, m, n, pool);
      EXPECT_EQ(got.info, ref.info);
      ASSERT_EQ(got.pivots, ref.pivots) << m << "x" << n << " " << pool->num_threads() << " threads";
      EXPECT_LE(residual_in_ku(a, shared, got.pivots, m, n), 4.0) << m << "x" << n;
    }
    Matrix<T> nested = a;
    Lu inside;
    const int64_t rows = m, cols = n;  // clang 14 cannot capture structured bindings
    two.parallel_for(2, 1, [&](int64_t begin, int64_t) {
      if (begin == 0) inside = by_recursion(nested, rows, cols, &two);
    });
    EXPECT_EQ(inside.pivots, ref.pivots);
    EXPECT_TRUE(nested == alone);  // alone inside a chunk: the one-thread path exactly
  }
}

TEST(LinalgRecursiveLu, ThreadTeamsGiveTheOneThreadResult) {
  ThreadPool two(2), three(3);
  same_on_every_team<float>(two, three);
  same_on_every_team<double>(two, three);
  same_on_every_team<cl::c64>(two, three);
  same_on_every_team<cl::c128>(two, three);
}

template <typename T>
void singular_and_ties(ThreadPool* pool) {
  // Exact zero columns (they stay exactly zero through elimination): info is the first,
  // the factorisation goes on past it, in the leaf and across the recursion's splits.
  for (auto [m, n] : {std::pair<int64_t, int64_t>{64, 64}, {100, 60}, {60, 100}, {200, 200}}) {
    for (std::vector<int64_t> zero : {std::vector<int64_t>{20, 40}, {0}, {std::min(m, n) - 1}, {16, 17, 33}}) {
      Matrix<T> a = gaussian<T>(m, n, 7 + m);
      for (int64_t c : zero) {
        for (int64_t i = 0; i < m; ++i) a[i + c * m] = T(0);
      }
      expect_like_getrf(a, m, n, pool, false, "zero columns");
    }
  }
  // All ones: every candidate ties (the first row wins), then exact zeros: info 2.
  for (int64_t n : {5, 40, 129}) {
    Matrix<T> ones(static_cast<size_t>(n * n), T(1));
    expect_like_getrf(ones, n, n, pool, false, "ones");
    Matrix<T> copy = ones;
    EXPECT_EQ(by_recursion(copy, n, n, pool).info, 2);
  }
  // The zero matrix: info 1, no interchange.
  Matrix<T> zeros(64 * 64, T(0));
  const Lu z = by_recursion(zeros, 64, 64, pool);
  EXPECT_EQ(z.info, 1);
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(z.pivots[i], i + 1);
  // A permutation matrix: pivoting every column, exact.
  const int64_t n = 90;
  Matrix<T> perm(static_cast<size_t>(n * n), T(0));
  for (int64_t c = 0; c < n; ++c) perm[(c * 37 + 11) % n + c * n] = T(1);
  expect_like_getrf(perm, n, n, pool, false, "permutation");
}

TEST(LinalgRecursiveLu, ZeroPivotsTiesAndPermutations) {
  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    singular_and_ties<float>(p);
    singular_and_ties<double>(p);
    singular_and_ties<cl::c64>(p);
    singular_and_ties<cl::c128>(p);
  }
}

// getrf on one m x n matrix of A's dtype (a 2-D tensor): the row-major factors as
// complex<double>, pivots and info.
struct TensorLu {
  Values lu;
  std::vector<int32_t> pivots;
  int32_t info;
};
TensorLu getrf_of(const Tensor& A) {
  const int64_t m = A.size(0), n = A.size(1);
  Tensor col = A.transpose(0, 1).contiguous();  // A column-major
  TensorLu r{{}, std::vector<int32_t>(static_cast<size_t>(std::max<int64_t>(1, std::min(m, n)))), 0};
  lapack::prepare();
  cl::dispatch(A.dtype(), "test", [&](auto tag) {
    using T = decltype(tag);
    r.info = lapack::getrf(static_cast<lapack::I>(m), static_cast<lapack::I>(n), static_cast<T*>(col.data_ptr()),
                           static_cast<lapack::I>(std::max<int64_t>(1, m)), r.pivots.data());
  });
  r.lu = values(col.transpose(0, 1));
  return r;
}

// lu_factor itself, whichever route it takes: pivots and info as getrf on the same
// matrices, batches split over the pool, empty shapes.
TEST(LinalgRecursiveLu, LuFactorMatchesGetrfAcrossRoutesAndBatches) {
  for (DType dt : kLinalgDTypes) {
    for (auto [batch, m, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 256, 256}, {3, 96, 96}, {2, 150, 80},
                               {1, 80, 150}, {5, 40, 40}, {1, 9, 9}, {2, 0, 0}, {0, 30, 30}, {1, 0, 5}}) {
      const Tensor A = random_tensor({batch, m, n}, dt, static_cast<uint64_t>(batch * 7 + m + n));
      linalg::LuFactorExResult f = linalg::lu_factor_ex(A);
      const int64_t k = std::min(m, n);
      ASSERT_EQ(f.pivots.sizes(), (Shape{batch, k}));
      ASSERT_EQ(f.LU.sizes(), (Shape{batch, m, n}));
      const Values a = values(A), lu = values(f.LU);
      const Tensor piv = f.pivots.contiguous(), info = f.info.contiguous();
      for (int64_t b = 0; b < batch; ++b) {
        const TensorLu r = getrf_of(A.select(0, b));
        EXPECT_EQ(info.data<int32_t>()[b], r.info);
        for (int64_t i = 0; i < k; ++i)
          ASSERT_EQ(piv.data<int32_t>()[b * k + i], r.pivots[i]) << dtype_name(dt) << " " << m << "x" << n;
        // Both backward stable; these Gaussian matrices have cond ~ n, so the factors
        // differ by <~ cond * k * u * |A| (with a factor 10 to spare).
        const double tol = 10.0 * std::max(m, n) * std::max<int64_t>(1, k) * eps_of(dt) * max_abs(a);
        EXPECT_LE(max_diff(lu.data() + b * m * n, r.lu.data(), m * n), tol) << dtype_name(dt) << " " << m << "x" << n;
      }
    }
  }
}

bool same_value(double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; }

// Non-finite input goes to getrf, so NaN and inf come out exactly as LAPACK gives them.
TEST(LinalgRecursiveLu, NonFiniteInputIsGetrfBitForBit) {
  for (DType dt : kLinalgDTypes) {
    for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
      const int64_t n = 128;
      Values v = values(random_tensor({n, n}, dt, 3));
      v[5 * n + 70] = bad;
      v[90 * n + 2] = -bad;
      const Tensor A = from_values(v, {n, n}, dt);
      linalg::LuFactorExResult f = linalg::lu_factor_ex(A);
      const TensorLu r = getrf_of(A);
      const Values got = values(f.LU);
      for (int64_t i = 0; i < n * n; ++i) {
        ASSERT_TRUE(same_value(got[i].real(), r.lu[i].real()) && same_value(got[i].imag(), r.lu[i].imag()))
            << dtype_name(dt) << " entry " << i;
      }
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(f.pivots.contiguous().data<int32_t>()[i], r.pivots[i]);
      EXPECT_EQ(f.info.item().to_int64(), r.info);
    }
  }
}

}  // namespace
