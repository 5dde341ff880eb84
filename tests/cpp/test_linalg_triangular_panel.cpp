// The register-blocked small path of solve_triangular (float32/float64, n <= 64): every
// order across the row-block boundaries (4, 8 and 16 rows), 1..17 right-hand sides and
// counts around 32 and 64 (narrow, wide and double panels, full and partial), every flag, batches of 0, 1 and odd counts, and
// operands the kernel reads through arbitrary strides, all against the complex<double>
// substitution reference.
#include <gtest/gtest.h>

#include <limits>

#include "backend/cpu/linalg/linalg_kernels.h"
#include "backend/cpu/linalg/triangular_panel.h"
#include "kiln/context.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/linalg.h"
#include "linalg_test_util.h"
#include "simd_targets.h"

using namespace kiln;
using namespace kiln::linalg_test;

namespace {

// Substitution is backward stable, |dT| <= n u |T| (Higham, Thm 8.5), so the forward
// error is at most ~cond * n * u * |X| with cond < ~10 for triangle()'s matrices.
double tolerance(int64_t n, DType dt, const Values& ref) { return 20.0 * n * eps_of(dt) * std::max(1.0, max_abs(ref)); }

void expect_solves(const Tensor& A, const Tensor& B, const Tensor& X, int64_t batch, int64_t n, int64_t rows,
                   int64_t cols, bool upper, bool left, bool unit, DType dt) {
  const Values a = values(A), b = values(B), x = values(X);
  for (int64_t i = 0; i < batch; ++i) {
    const Values ref = triangular_ref(&a[i * n * n], &b[i * rows * cols], n, rows, cols, upper, left, unit);
    ASSERT_LE(max_diff(&x[i * rows * cols], ref.data(), rows * cols), tolerance(n, dt, ref))
        << dtype_name(dt) << " batch " << i << " n=" << n << " rows=" << rows << " cols=" << cols
        << " upper=" << upper << " left=" << left << " unit=" << unit;
  }
}

TEST(LinalgTriangularPanel, EveryOrderRhsCountAndFlag) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int64_t n : {1, 2, 3, 7, 8, 9, 15, 16, 17, 23, 31, 32, 33, 47, 48, 63, 64}) {
      for (int64_t k : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 31, 32, 33, 47, 64, 65}) {
        for (int flags = 0; flags < 8; ++flags) {
          const bool upper = flags & 1, left = flags & 2, unit = flags & 4;
          const int64_t batch = (n + k) % 2 == 0 ? 1 : 3;
          const Tensor A = triangle(batch, n, dt, upper, unit, 300 + n);
          const int64_t rows = left ? n : k, cols = left ? k : n;
          const Tensor B = random_tensor({batch, rows, cols}, dt, 400 + k);
          const Tensor X = linalg::solve_triangular(A, B, upper, left, unit);
          ASSERT_EQ(X.sizes(), (Shape{batch, rows, cols}));
          expect_solves(A, B, X, batch, n, rows, cols, upper, left, unit, dt);
        }
      }
    }
  }
}

TEST(LinalgTriangularPanel, EmptyBatchAndEmptyRhs) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    EXPECT_EQ(linalg::solve_triangular(triangle(0, 16, dt, false, true, 1), zeros({0, 16, 8}, dt), false, true, true)
                  .sizes(),
              (Shape{0, 16, 8}));
    EXPECT_EQ(linalg::solve_triangular(triangle(2, 16, dt, false, false, 1), zeros({2, 16, 0}, dt), false).sizes(),
              (Shape{2, 16, 0}));
  }
}

// Non-contiguous operands through the front end: A transposed (column-major, so the
// kernel reads it with a unit row stride), B with a column stride of 2, a broadcast A.
TEST(LinalgTriangularPanel, StridedAndBroadcastOperands) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int64_t n : {5, 16, 33, 64}) {
      for (int64_t k : {3, 8, 16, 17}) {
        for (bool upper : {false, true}) {
          const Tensor At = triangle(3, n, dt, !upper, false, 500 + n);
          const Tensor A = At.transpose(-2, -1);  // upper when At is lower, column-major
          const Tensor wide = random_tensor({3, n, 2 * k}, dt, 600 + k);
          const Tensor B = wide.slice(2, 0, std::nullopt, 2);
          ASSERT_FALSE(B.is_contiguous());
          const Tensor X = linalg::solve_triangular(A, B, upper);
          expect_solves(A.contiguous(), B.contiguous(), X, 3, n, n, k, upper, true, false, dt);
          // One A for a batch of five right-hand-side blocks.
          const Tensor one = A.select(0, 1);
          const Tensor B5 = random_tensor({5, n, k}, dt, 700 + k);
          const Tensor X5 = linalg::solve_triangular(one, B5, upper);
          const Tensor A5 = one.unsqueeze(0).expand({5, n, n}).contiguous();
          expect_solves(A5, B5, X5, 5, n, n, k, upper, true, false, dt);
        }
      }
    }
  }
}

// The kernel reads row-major blocks with row strides 16, 32 and 64 in place (compiled-in
// strides, walked backwards for upper solves), including an n x n block at the top left
// of a larger matrix whose other entries are NaN: a read outside the block's triangle
// shows up as NaN. Orders cover full row blocks and every remainder (blocks of 8, 4,
// 2, 1); right solves read the block transposed, which the caller packs. Run on every
// SIMD target the kernel was compiled for and this CPU has (16-row blocks on AVX-512,
// 8 on AVX2 and below; narrow, wide and double panels differ per target).
TEST(LinalgTriangularPanel, InPlaceSubBlocksOfStride16_32_64OnEveryTarget) {
  simd_targets::for_each(cpu::linalg::triangular_panel_simd_targets(), [] {
    for (DType dt : {DType::Float32, DType::Float64}) {
      for (int64_t stride : {16, 32, 64}) {
        for (int64_t n : {1, 3, 13, 16, 20, 32, 47, 63, 64}) {
          if (n > stride) continue;
          for (int64_t k : {1, 8, 9, 17, 33}) {
            for (int flags = 0; flags < 8; ++flags) {
              const bool upper = flags & 1, left = flags & 2, unit = flags & 4;
              const int64_t batch = 3;
              const Tensor T = triangle(batch, n, dt, upper, unit, 900 + n);
              Tensor parent = full({batch, stride, stride}, Scalar(std::numeric_limits<double>::quiet_NaN()), dt);
              Tensor block = parent.slice(1, 0, n).slice(2, 0, n);
              block.copy_(T);
              ASSERT_EQ(block.stride(1), stride);
              const int64_t rows = left ? n : k, cols = left ? k : n;
              const Tensor B = random_tensor({batch, rows, cols}, dt, 1000 + k);
              const Tensor X = linalg::solve_triangular(block, B, upper, left, unit);
              expect_solves(T, B, X, batch, n, rows, cols, upper, left, unit, dt);
            }
          }
        }
      }
    }
  });
}

// The kernel entry itself with a column stride on X of 3 and A read through a row
// stride of 2n (every other row of a larger matrix) and column stride 2: both panel
// packing and strided broadcast reads; the untouched columns of X keep B's values.
TEST(LinalgTriangularPanel, KernelReadsAnyStride) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int64_t n : {9, 40}) {
      for (bool upper : {false, true}) {
        const int64_t k = 10;
        const Tensor big = triangle(1, 2 * n, dt, upper, false, 8).squeeze(0);
        const Tensor B = random_tensor({3, n, 3 * k}, dt, 9);
        Tensor X = B.clone();
        const backend::TriangularSolveProblem p{dt, 3, n, k, big.data_ptr(), 0, 2 * (2 * n), 2,
                                                X.data_ptr(), n * 3 * k, 3 * k, 3, upper, true, false};
        cpu::linalg::triangular_solve_cpu(current_context(), p);
        const Tensor A = big.slice(0, 0, std::nullopt, 2).slice(1, 0, std::nullopt, 2);
        const Tensor A3 = A.unsqueeze(0).expand({3, n, n}).contiguous();
        expect_solves(A3, B.slice(2, 0, std::nullopt, 3), X.slice(2, 0, std::nullopt, 3), 3, n, n, k, upper, true,
                      false, dt);
        EXPECT_EQ(values(X.slice(2, 1, std::nullopt, 3)), values(B.slice(2, 1, std::nullopt, 3)));
        EXPECT_EQ(values(X.slice(2, 2, std::nullopt, 3)), values(B.slice(2, 2, std::nullopt, 3)));
      }
    }
  }
}

}  // namespace
