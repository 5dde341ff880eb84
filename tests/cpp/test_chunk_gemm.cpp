// The register-blocked products of the chunked gated delta rule (chunk_gemm) on every
// SIMD target, against a float64 scalar reference: row counts around the row blocks (4, 6, 8),
// column counts around the vector width and the tile, empty operands, transposed A,
// lower-triangular terms (A above the diagonal poisoned with NaN: never read), the row
// scale, accumulate with a scale, lower_cols, and C's neighbours left untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/gated_delta/chunk_gemm.h"
#include "simd_targets.h"

namespace kiln::cpu {
namespace {

constexpr double kU = 1.0 / (1 << 24);  // float32 unit roundoff
constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();
constexpr float kGuard = 12345.0f;

struct TermData {
  std::vector<float> a, b;
  ChunkGemmTerm term;
};

// A (rows x k) stored row-major with padding, or transposed (column-major), and B
// (k x cols) with a leading dimension past cols. A lower term's entries above the
// diagonal are NaN.
TermData make_term(int64_t rows, int64_t cols, int64_t k, bool transposed, bool lower, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  TermData t;
  const int64_t lda = (transposed ? rows : k) + 3, ldb = cols + 5;
  t.a.assign(static_cast<size_t>(std::max<int64_t>((transposed ? k : rows) * lda, 1)), kPoison);
  t.b.assign(static_cast<size_t>(std::max<int64_t>(k * ldb, 1)), kPoison);
  t.term.a_row = transposed ? 1 : lda;
  t.term.a_col = transposed ? lda : 1;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      if (lower && p > i) continue;
      t.a[static_cast<size_t>(i * t.term.a_row + p * t.term.a_col)] = dist(rng);
    }
  }
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < cols; ++j) t.b[static_cast<size_t>(p * ldb + j)] = dist(rng);
  }
  t.term.a = t.a.data();
  t.term.b = t.b.data();
  t.term.ldb = ldb;
  t.term.k = k;
  t.term.lower = lower;
  return t;
}

// Row i's float64 value of a term at column j, and the sum of its terms' magnitudes.
void term_ref(const ChunkGemmTerm& t, int64_t i, int64_t j, double* value, double* magnitude) {
  *value = 0.0;
  *magnitude = 0.0;
  const int64_t end = t.lower ? std::min(t.k, i + 1) : t.k;
  for (int64_t p = 0; p < end; ++p) {
    const double prod = static_cast<double>(t.a[i * t.a_row + p * t.a_col]) * t.b[p * t.ldb + j];
    *value += prod;
    *magnitude += std::abs(prod);
  }
}

struct Case {
  int64_t rows, cols, k1, k2;
  bool transposed, lower1, lower2, row_scale, accumulate, lower_cols;
};

void check_case(const Case& cs, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message() << "rows " << cs.rows << " cols " << cs.cols << " k " << cs.k1 << "+" << cs.k2
                                    << " transposed " << cs.transposed << " lower " << cs.lower1 << cs.lower2
                                    << " row_scale " << cs.row_scale << " accumulate " << cs.accumulate
                                    << " lower_cols " << cs.lower_cols);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  TermData first = make_term(cs.rows, cs.cols, cs.k1, cs.transposed, cs.lower1, rng);
  TermData second = make_term(cs.rows, cs.cols, cs.k2, false, cs.lower2, rng);
  std::vector<float> scales(static_cast<size_t>(cs.rows));
  for (float& s : scales) s = 2.0f * dist(rng);
  // C with a guard row above and below and guard columns either side.
  const int64_t ldc = cs.cols + 7;
  std::vector<float> c(static_cast<size_t>((cs.rows + 2) * ldc), kGuard);
  float* c0 = c.data() + ldc + 3;
  for (int64_t i = 0; i < cs.rows; ++i) {
    for (int64_t j = 0; j < cs.cols; ++j) c0[i * ldc + j] = dist(rng);
  }
  const std::vector<float> before = c;
  const float c_scale = 0.75f;

  ChunkGemmProblem p;
  p.rows = cs.rows;
  p.cols = cs.cols;
  p.first = first.term;
  p.first_row_scale = cs.row_scale ? scales.data() : nullptr;
  p.second = second.term;
  p.c = c0;
  p.ldc = ldc;
  p.accumulate = cs.accumulate;
  p.c_scale = c_scale;
  p.lower_cols = cs.lower_cols;
  chunk_gemm(p);

  const int64_t offset = ldc + 3;
  for (int64_t i = -1; i <= cs.rows; ++i) {
    for (int64_t j = -3; j < ldc - 3; ++j) {
      const size_t at = static_cast<size_t>(offset + i * ldc + j);
      const bool inside = i >= 0 && i < cs.rows && j >= 0 && j < cs.cols;
      if (!inside) {
        ASSERT_EQ(c[at], kGuard) << "outside C written at row " << i << " col " << j;
        continue;
      }
      double v1, m1, v2, m2;
      term_ref(first.term, i, j, &v1, &m1);
      term_ref(second.term, i, j, &v2, &m2);
      const double s = cs.row_scale ? scales[static_cast<size_t>(i)] : 1.0;
      const double init = cs.accumulate ? c_scale * static_cast<double>(before[at]) : 0.0;
      const double want = init + s * v1 + v2;
      // Each sum of k FMAs errs by at most k u of its magnitude (one rounding per step),
      // then the scale, the add of the two terms and of the initial C round once each.
      const double bound =
          (cs.k1 + cs.k2 + 4) * kU * (std::abs(init) + std::abs(s) * m1 + m2) + std::numeric_limits<float>::min();
      if (cs.lower_cols && j > i) {
        // Unwanted: either left alone or holding the product.
        if (c[at] == before[at]) continue;
      }
      ASSERT_NEAR(c[at], want, bound) << "row " << i << " col " << j;
    }
  }
}

TEST(ChunkGemm, ShapesAndOptionsOnEveryTarget) {
  simd_targets::for_each(chunk_gemm_simd_targets(), [] {
    std::mt19937 rng(21);
    for (int64_t rows : {0, 1, 3, 4, 5, 6, 7, 9, 12, 13, 64}) {
      for (int64_t cols : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 47, 48, 49, 63, 64, 65, 129}) {
        for (int64_t k : {0, 1, 5, 64}) {
          check_case({rows, cols, k, 0, false, false, false, false, false, false}, rng);
        }
        // The option combinations at one reduction length each.
        check_case({rows, cols, 13, 0, true, false, false, false, true, false}, rng);
        check_case({rows, cols, rows, rows, false, true, true, true, false, false}, rng);
        check_case({rows, cols, 7, rows, false, false, true, true, true, false}, rng);
        check_case({rows, cols, 11, 0, false, false, false, false, false, true}, rng);
        check_case({rows, cols, rows + 2, 3, true, true, false, false, true, true}, rng);
      }
    }
  });
}

// The shapes the chunked prefill runs: 64-token chunks at head dim 128.
TEST(ChunkGemm, PrefillShapes) {
  simd_targets::for_each(chunk_gemm_simd_targets(), [] {
    std::mt19937 rng(22);
    check_case({64, 128, 128, 0, false, false, false, false, true, false}, rng);   // Delta = U - W S0
    check_case({64, 128, 128, 64, false, false, true, true, false, false}, rng);   // O = e^G Q S0 + P Delta
    check_case({128, 128, 64, 0, true, false, false, false, true, false}, rng);    // S = decay S + K^T Delta
    check_case({64, 64, 128, 0, false, false, false, false, false, true}, rng);    // K K^T, lower part
  });
}

// Prefetching the caller's next rows between tiles changes nothing the product writes:
// fewer prefetch rows than tiles, more, none, rows narrower than a line and rows not
// starting on a line, with C compared bit for bit against the same product without.
TEST(ChunkGemm, PrefetchLeavesResultUnchanged) {
  simd_targets::for_each(chunk_gemm_simd_targets(), [] {
    std::mt19937 rng(23);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (const auto& shape : {std::tuple<int64_t, int64_t, int64_t>{64, 128, 128}, {5, 7, 3}, {128, 128, 64},
                              {1, 1, 1}}) {
      // Plain copies: the lambda below may not capture structured bindings (clang 14).
      const int64_t rows = std::get<0>(shape), cols = std::get<1>(shape), k = std::get<2>(shape);
      const TermData first = make_term(rows, cols, k, false, false, rng);
      for (int64_t pf_rows : {0, 1, 3, 64, 200}) {
        for (int64_t row_floats : {1, 17, 128}) {
          SCOPED_TRACE(::testing::Message() << "rows " << rows << " cols " << cols << " k " << k << " prefetch rows "
                                            << pf_rows << " x " << row_floats);
          const int64_t stride = row_floats + 5;
          std::vector<float> next(static_cast<size_t>(std::max<int64_t>(pf_rows * stride + 1, 1)));
          for (float& x : next) x = dist(rng);
          const std::vector<float> next_before = next;
          const auto run = [&](bool prefetch) {
            std::vector<float> c(static_cast<size_t>(rows * cols), kGuard);
            ChunkGemmProblem p;
            p.rows = rows;
            p.cols = cols;
            p.first = first.term;
            p.c = c.data();
            p.ldc = cols;
            if (prefetch) p.prefetch = {next.data() + 1, stride, pf_rows, row_floats};
            chunk_gemm(p);
            return c;
          };
          const std::vector<float> plain = run(false);
          const std::vector<float> with = run(true);
          ASSERT_EQ(std::memcmp(plain.data(), with.data(), plain.size() * sizeof(float)), 0);
          ASSERT_EQ(next, next_before);
        }
      }
    }
  });
}

}  // namespace
}  // namespace kiln::cpu
