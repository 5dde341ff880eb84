// grouped_mm (all four cases) and grouped_mm_fp8 against a per-group double-precision
// matmul loop: every dtype, row- and column-major operands (including the transposed
// [G, N, K] weight view), empty groups anywhere, zero-size dims, groups small enough for
// the GEMV path and large enough for several row and column tiles, work big enough for
// several threads, and every validation error with its message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/linear/linear_kernels.h"
#include "backend/cpu/matmul/grouped_mm_kernels.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/grouped_mm.h"
#include "kiln/ops/linear.h"
#include "simd_targets.h"
#include "test_util.h"

using namespace kiln;

namespace {

using kiln::testing::expect_error;

Tensor random_tensor(const Shape& shape, DType dt, uint64_t seed) {
  Generator g(seed);
  return randn(shape, DType::Float64, &g).to(dt);
}

std::vector<double> values(const Tensor& t) {
  const Tensor d = t.to(DType::Float64).contiguous();
  const double* p = d.data<double>();
  return std::vector<double>(p, p + d.numel());
}

Tensor int32_tensor(const std::vector<int32_t>& v) {
  Tensor t = empty({static_cast<int64_t>(v.size())}, DType::Int32);
  for (size_t i = 0; i < v.size(); ++i) t.data<int32_t>()[i] = v[i];
  return t;
}

double eps_of(DType dt) {
  switch (dt) {
    case DType::BFloat16: return 0x1p-7;
    case DType::Float16: return 0x1p-10;
    default: return std::numeric_limits<float>::epsilon();
  }
}

// Checks got (m x n) against the exact product a (m x k) @ b (k x n), optionally with
// column scales (fp8 weights: b holds the dequantised weights without the scale).
//
// Tolerance: the dot products run in float32 in some order (blocked, FMA), so
// |computed - exact| <= gamma_k * sum_k |a b| with gamma_k = k u / (1 - k u), u = eps/2
// (Higham 3.1); k * eps_f32 * sum|a||b| bounds it with a factor 2 of margin. The inputs
// are exact in float32 (bf16/f16/fp8 widen exactly). A column scale applied after the sum
// adds one f32 rounding (eps_f32 * |exact|), and the output cast to a narrow dtype adds
// at most eps_out / 2 * |result|, covered by eps_out * |exact| plus the doubled f32 term.
// x_rounding: a kernel that rounds a to bf16 first (the FP8 GEMV's bf16 dot path) moves
// each sum by at most 2^-8 sum_k |a b| (round to nearest even, 8 significant bits).
void expect_group(const Tensor& got, const Tensor& a, const Tensor& b, const std::string& what,
                  const std::vector<double>* col_scale = nullptr, double x_rounding = 0.0) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  ASSERT_EQ(got.size(0), m) << what;
  ASSERT_EQ(got.size(1), n) << what;
  const std::vector<double> av = values(a), bv = values(b), gv = values(got);
  const double eps32 = std::numeric_limits<float>::epsilon();
  const double eps_out = eps_of(got.dtype());
  int bad = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0, magnitude = 0;
      for (int64_t p = 0; p < k; ++p) {
        exact += av[i * k + p] * bv[p * n + j];
        magnitude += std::abs(av[i * k + p] * bv[p * n + j]);
      }
      double tol = (2.0 * static_cast<double>(k) * eps32 + x_rounding) * magnitude;
      if (col_scale != nullptr) {
        exact *= (*col_scale)[j];
        tol = tol * std::abs((*col_scale)[j]) + eps32 * std::abs(exact);
      }
      tol += eps_out * std::abs(exact);
      const double g = gv[i * n + j];
      if (!(std::abs(g - exact) <= tol) && bad++ < 5) {
        ADD_FAILURE() << what << " at (" << i << ", " << j << "): got " << g << ", expected " << exact << " +- "
                      << tol;
      }
    }
  }
}

// An [rows, cols] operand in the requested layout. Column-major ones are the transpose of
// a row-major [cols, rows] tensor (like w.transpose(-2, -1)); both get their leading dim
// padded to a 16-byte multiple by narrowing a wider tensor, so odd sizes are allowed.
// (Never below 8: PyTorch rejects e.g. a contiguous [16, 0] float32 matrix, whose row
// stride 1 is not a multiple of 16 bytes.)
int64_t padded(int64_t n) { return std::max<int64_t>(8, (n + 7) / 8 * 8); }

Tensor matrix(int64_t rows, int64_t cols, DType dt, bool column_major, uint64_t seed) {
  if (column_major) return random_tensor({cols, padded(rows)}, dt, seed).narrow(1, 0, rows).t();
  return random_tensor({rows, padded(cols)}, dt, seed).narrow(1, 0, cols);
}

Tensor batch(int64_t g, int64_t rows, int64_t cols, DType dt, bool column_major, uint64_t seed) {
  if (column_major) return random_tensor({g, cols, padded(rows)}, dt, seed).narrow(2, 0, rows).transpose(1, 2);
  return random_tensor({g, rows, padded(cols)}, dt, seed).narrow(2, 0, cols);
}

const DType kDtypes[] = {DType::Float32, DType::BFloat16, DType::Float16};

std::string tag(DType dt, bool a_col, bool b_col) {
  return std::string(dtype_name(dt)) + (a_col ? " A col-major" : " A row-major") + (b_col ? " B col-major" : " B row-major");
}

// 2D x 3D for one offs pattern.
void check_2d_3d(const std::vector<int32_t>& offs, int64_t M_total, int64_t K, int64_t N, DType dt, bool a_col,
                 bool b_col, uint64_t seed) {
  const int64_t G = static_cast<int64_t>(offs.size());
  const Tensor a = matrix(M_total, K, dt, a_col, seed);
  const Tensor b = batch(G, K, N, dt, b_col, seed + 1);
  const Tensor out = grouped_mm(a, b, int32_tensor(offs));
  ASSERT_EQ(out.sizes(), (Shape{M_total, N}));
  ASSERT_EQ(out.dtype(), dt);
  int64_t s = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t e = offs[static_cast<size_t>(g)];
    expect_group(out.narrow(0, s, e - s), a.narrow(0, s, e - s), b.select(0, g),
                 tag(dt, a_col, b_col) + " 2Dx3D group " + std::to_string(g));
    s = e;
  }
}

}  // namespace

TEST(GroupedMm, Jagged2Dx3DEveryLayoutAndDtype) {
  // Empty first, middle and last groups; groups of 1 to 8 rows (GEMV path on column-major
  // B) and larger ones (sgemm path); rows past offs[-1] are never read.
  const std::vector<int32_t> offs = {0, 1, 4, 4, 12, 30, 31, 31};
  for (DType dt : kDtypes) {
    for (bool a_col : {false, true}) {
      for (bool b_col : {false, true}) check_2d_3d(offs, 40, 37, 70, dt, a_col, b_col, 10);
    }
  }
}

TEST(GroupedMm, Jagged2Dx3DTileEdgesAndThreads) {
  // Groups over 128 rows and N over 64 columns span several tiles; the total work is far
  // above the single-thread threshold.
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    for (bool b_col : {false, true}) {
      check_2d_3d({3, 200, 201, 340, 345}, 350, 96, 130, dt, false, b_col, 20);
    }
  }
  // Decode-like: one row per expert over many experts.
  std::vector<int32_t> one_each(16);
  for (int g = 0; g < 16; ++g) one_each[static_cast<size_t>(g)] = g + 1;
  for (DType dt : kDtypes) check_2d_3d(one_each, 16, 256, 96, dt, false, true, 30);
}

TEST(GroupedMm, Jagged2Dx3DZeroSizes) {
  check_2d_3d({0, 0, 0}, 0, 16, 8, DType::Float32, false, true, 40);  // no rows
  check_2d_3d({2, 5}, 5, 16, 0, DType::BFloat16, false, false, 41);    // N = 0
  check_2d_3d({}, 4, 16, 8, DType::Float32, false, false, 42);         // no groups: nothing written
  // K = 0: every grouped row is zero.
  const Tensor out = grouped_mm(matrix(5, 0, DType::Float32, false, 43), batch(2, 0, 8, DType::Float32, false, 44),
                                int32_tensor({2, 5}));
  for (double v : values(out)) EXPECT_EQ(v, 0.0);
  // PyTorch's stride rule rejects the plain contiguous [5, 0] float32 matrix (row stride 1).
  expect_error([] { grouped_mm(empty({5, 0}), empty({2, 0, 8}), int32_tensor({2, 5})); }, ErrorKind::Runtime,
               "strides should be multiple of 16 bytes");
}

TEST(GroupedMm, Jagged3Dx2D) {
  const std::vector<int32_t> offs = {0, 9, 9, 40, 75};  // columns; 75..80 never read
  const int64_t G = 5, K = 29, N_total = 80;
  for (DType dt : kDtypes) {
    for (bool a_col : {false, true}) {
      for (bool b_col : {false, true}) {
        for (int64_t M : {3, 11}) {  // 3 takes a small-group path, 11 the sgemm path
          const Tensor a = batch(G, M, K, dt, a_col, 50);
          const Tensor b = matrix(K, N_total, dt, b_col, 51);
          const Tensor out = grouped_mm(a, b, int32_tensor(offs));
          ASSERT_EQ(out.sizes(), (Shape{M, N_total}));
          int64_t s = 0;
          for (int64_t g = 0; g < G; ++g) {
            const int64_t e = offs[static_cast<size_t>(g)];
            expect_group(out.narrow(1, s, e - s), a.select(0, g), b.narrow(1, s, e - s),
                         tag(dt, a_col, b_col) + " 3Dx2D group " + std::to_string(g));
            s = e;
          }
        }
      }
    }
  }
}

TEST(GroupedMm, Jagged2Dx2DEmptyKGivesZeros) {
  const std::vector<int32_t> offs = {0, 13, 13, 50, 64};  // groups 0 and 2 have no K
  for (DType dt : kDtypes) {
    for (bool a_col : {false, true}) {
      for (bool b_col : {false, true}) {
        const int64_t M = 9, K_total = 64, N = 21;
        const Tensor a = matrix(M, K_total, dt, a_col, 60);
        const Tensor b = matrix(K_total, N, dt, b_col, 61);
        const Tensor out = grouped_mm(a, b, int32_tensor(offs));
        ASSERT_EQ(out.sizes(), (Shape{5, M, N}));
        int64_t s = 0;
        for (int64_t g = 0; g < 5; ++g) {
          const int64_t e = offs[static_cast<size_t>(g)];
          expect_group(out.select(0, g), a.narrow(1, s, e - s), b.narrow(0, s, e - s),
                       tag(dt, a_col, b_col) + " 2Dx2D group " + std::to_string(g));
          if (e == s) {
            for (double v : values(out.select(0, g))) EXPECT_EQ(v, 0.0);
          }
          s = e;
        }
      }
    }
  }
}

TEST(GroupedMm, Batched3Dx3D) {
  for (DType dt : kDtypes) {
    for (bool a_col : {false, true}) {
      for (bool b_col : {false, true}) {
        // M = 3 takes the GEMV path when B is column-major; M = 150 the tiled sgemm path.
        for (int64_t M : {3, 150}) {
          const int64_t G = 3, K = 45, N = 66;
          const Tensor a = batch(G, M, K, dt, a_col, 70);
          const Tensor b = batch(G, K, N, dt, b_col, 71);
          const Tensor out = grouped_mm(a, b);
          ASSERT_EQ(out.sizes(), (Shape{G, M, N}));
          for (int64_t g = 0; g < G; ++g) {
            expect_group(out.select(0, g), a.select(0, g), b.select(0, g),
                         tag(dt, a_col, b_col) + " 3Dx3D M=" + std::to_string(M));
          }
        }
      }
    }
  }
  const Tensor empty_batch = grouped_mm(empty({0, 4, 8}), empty({0, 8, 4}));
  EXPECT_EQ(empty_batch.sizes(), (Shape{0, 4, 4}));
}

TEST(GroupedMm, ValidationErrorsInPyTorchOrder) {
  const Tensor a2 = empty({8, 16}), b3 = empty({2, 16, 8}), offs = int32_tensor({4, 8});
  const auto R = ErrorKind::Runtime;
  expect_error([&] { grouped_mm(empty({8, 16}, DType::Float64), b3, offs); }, R,
               "Expected mat_a to be Float32, BFloat16 or Float16 matrix, got float64");
  expect_error([&] { grouped_mm(a2, empty({2, 16, 8}, DType::Int32), offs); }, R,
               "Expected mat_b to be Float32, BFloat16 or Float16 matrix, got int32");
  // dtype comes before rank.
  expect_error([&] { grouped_mm(empty({8}, DType::Float64), b3, offs); }, R, "Expected mat_a");
  expect_error([&] { grouped_mm(empty({8}), b3, offs); }, R, "mat_a has to be 2 or 3d");
  expect_error([&] { grouped_mm(a2, empty({1, 2, 16, 8}), offs); }, R, "mat_b has to be 2 or 3d");
  expect_error([&] { grouped_mm(a2, empty({2, 12, 8}), offs); }, R,
               "contraction dimension of mat_a and mat_b must match");
  // Rank before strides: K mismatch wins over a bad layout.
  expect_error([&] { grouped_mm(empty({8, 16}).slice(1, 0, 16, 2), empty({2, 12, 8}), offs); }, R,
               "contraction dimension");
  expect_error([&] { grouped_mm(empty({8, 32}).slice(1, 0, 32, 2), b3, offs); }, R,
               "Invalid strides/sizes, got [32, 2] for strides and [8, 16] for sizes");
  // A row stride of 12 bf16 elements (24 bytes) is not a multiple of 16 bytes.
  expect_error([&] { grouped_mm(empty({8, 12}, DType::BFloat16).narrow(1, 0, 10), empty({2, 10, 8}, DType::BFloat16),
                                offs); },
               R, "strides should be multiple of 16 bytes");
  expect_error([&] { grouped_mm(a2, b3); }, R,
               "Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d");
  expect_error([&] { grouped_mm(empty({2, 8, 16}), b3, offs); }, R, "no offset if both matrices are 3d");
  expect_error([&] { grouped_mm(a2, b3, empty({2, 1}, DType::Int32)); }, R, "offs has to be 1D");
  expect_error([&] { grouped_mm(a2, b3, empty({2}, DType::Int64)); }, R, "Offsets have to be int32");
  expect_error([&] { grouped_mm(a2, b3, offs, empty({8})); }, R, "Bias not supported yet");
  expect_error([&] { grouped_mm(a2, b3, offs, std::nullopt, DType::BFloat16); }, R,
               "Grouped gemm output dtype must match `mat_a` dtype");
  expect_error([&] { grouped_mm(a2, b3, int32_tensor({8})); }, R, "matrix batch sizes have to match");
  expect_error([&] { grouped_mm(empty({2, 8, 16}), empty({16, 8}), int32_tensor({8})); }, R,
               "matrix batch sizes have to match");
  expect_error([&] { grouped_mm(empty({2, 8, 16}), empty({3, 16, 8})); }, R, "batched dimension has to match");
  expect_error([&] { grouped_mm(a2, empty({2, 16, 8}, DType::BFloat16), offs); }, R,
               "expected mat_a and mat_b to have the same dtype, but got: float32 != bfloat16");
  // kiln is stricter than PyTorch's clamping slices: bad offsets are a ValueError.
  expect_error([&] { grouped_mm(a2, b3, int32_tensor({6, 4})); }, ErrorKind::Value,
               "offs[1] = 4 follows 6");
  expect_error([&] { grouped_mm(a2, b3, int32_tensor({4, 9})); }, ErrorKind::Value, "in [0, 8]");
  expect_error([&] { grouped_mm(a2, b3, int32_tensor({-1, 8})); }, ErrorKind::Value, "offs[0] = -1");
}

// ---- grouped_mm_fp8 ----

namespace {

// FP8 expert weights [G, N, K] from random codes (no NaN codes) and positive scales.
struct Fp8Experts {
  Tensor w;      // float8_e4m3fn [G, N, K]
  Tensor scale;  // float32 [G, N]
};

Fp8Experts fp8_experts(int64_t G, int64_t N, int64_t K, uint64_t seed) {
  Generator g(seed);
  Tensor w = empty({G, N, K}, DType::Float8_e4m3fn);
  const Tensor codes = randint(0, 254, {G, N, K}, DType::Int64, &g);
  for (int64_t i = 0; i < w.numel(); ++i) {
    int64_t c = codes.data<int64_t>()[i];
    if (c >= 0x7F) ++c;  // skip 0x7F; 254 codes in [0, 255) then never hit 0xFF
    w.data<uint8_t>()[i] = static_cast<uint8_t>(c);
  }
  Tensor scale = rand({G, N}, DType::Float32, &g);
  for (int64_t i = 0; i < scale.numel(); ++i) scale.data<float>()[i] = 0.25f + scale.data<float>()[i] / 64.0f;
  return {w, scale};
}

void check_fp8(const std::vector<int32_t>& offs, int64_t M_total, int64_t K, int64_t N, DType dt, bool a_strided,
               uint64_t seed) {
  const int64_t G = static_cast<int64_t>(offs.size());
  const Fp8Experts e = fp8_experts(G, N, K, seed);
  Tensor a = random_tensor({M_total, 2 * K}, dt, seed + 1);
  a = a_strided ? a.slice(1, 0, 2 * K, 2) : a.narrow(1, 0, K);
  const Tensor out = grouped_mm_fp8(a, e.w, e.scale, int32_tensor(offs));
  ASSERT_EQ(out.sizes(), (Shape{M_total, N}));
  ASSERT_EQ(out.dtype(), dt);
  int64_t s = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t end = offs[static_cast<size_t>(g)];
    const std::vector<double> sv = values(e.scale.select(0, g));
    // Reference: the exact fp8 values (dequantised in f64), scales applied per column.
    expect_group(out.narrow(0, s, end - s), a.narrow(0, s, end - s), e.w.select(0, g).to(DType::Float64).t(),
                 std::string("fp8 ") + std::string(dtype_name(dt)) + " group " + std::to_string(g), &sv,
                 cpu::fp8_kernels_round_x_to_bf16() ? 0x1p-8 : 0.0);
    s = end;
  }
}

}  // namespace

TEST(GroupedMm, Fp8SmallAndLargeGroups) {
  for (DType dt : kDtypes) {
    for (bool strided : {false, true}) {
      // Groups of 0-3 rows (GEMV path) and of 20-140 rows (decode + sgemm path), odd K.
      check_fp8({0, 1, 3, 3, 23, 163}, 170, 77, 70, dt, strided, 80);
    }
  }
  std::vector<int32_t> one_each(32);
  for (int g = 0; g < 32; ++g) one_each[static_cast<size_t>(g)] = g + 1;
  check_fp8(one_each, 32, 512, 130, DType::BFloat16, false, 81);
}

TEST(GroupedMm, Fp8Errors) {
  const Fp8Experts e = fp8_experts(2, 8, 16, 90);
  const Tensor a = empty({6, 16}, DType::BFloat16), offs = int32_tensor({3, 6});
  expect_error([&] { grouped_mm_fp8(empty({6, 16}, DType::Float64), e.w, e.scale, offs); }, ErrorKind::Type,
               "mat_a must be float32, bfloat16 or float16");
  expect_error([&] { grouped_mm_fp8(a, e.w.to(DType::BFloat16), e.scale, offs); }, ErrorKind::Type,
               "mat_b must be float8_e4m3fn");
  expect_error([&] { grouped_mm_fp8(a, e.w, e.scale.to(DType::BFloat16), offs); }, ErrorKind::Type,
               "scale must be float32");
  expect_error([&] { grouped_mm_fp8(empty({2, 6, 16}, DType::BFloat16), e.w, e.scale, offs); }, ErrorKind::Runtime,
               "mat_a must be 2-D");
  expect_error([&] { grouped_mm_fp8(a, e.w.select(0, 0), e.scale, offs); }, ErrorKind::Runtime, "mat_b must be 3-D");
  expect_error([&] { grouped_mm_fp8(empty({6, 12}, DType::BFloat16), e.w, e.scale, offs); }, ErrorKind::Runtime,
               "contraction dimension");
  // [G, N, K] with column-major [N, K] weights (unit stride along N).
  const Tensor w_col = e.w.transpose(1, 2).contiguous().transpose(1, 2);
  expect_error([&] { grouped_mm_fp8(a, w_col, e.scale, offs); }, ErrorKind::Runtime, "must be row-major");
  expect_error([&] { grouped_mm_fp8(a, e.w, e.scale.t().contiguous(), offs); }, ErrorKind::Runtime,
               "scale must have shape [2, 8]");
  expect_error([&] { grouped_mm_fp8(a, e.w, e.scale, empty({2}, DType::Int64)); }, ErrorKind::Runtime,
               "Offsets have to be int32");
  expect_error([&] { grouped_mm_fp8(a, e.w, e.scale, int32_tensor({6})); }, ErrorKind::Runtime,
               "matrix batch sizes have to match");
  expect_error([&] { grouped_mm_fp8(a, e.w, e.scale, int32_tensor({3, 7})); }, ErrorKind::Value, "in [0, 6]");
}

TEST(GroupedMm, SmallGroupPathsOnEachTarget) {
  // The row-major small-group kernel (and the GEMV kernels on the w.T view) with dispatch
  // pinned to each compiled target this CPU supports.
  simd_targets::for_each(cpu::grouped_mm_simd_targets(), [] {
    for (DType dt : kDtypes) {
      for (bool b_col : {false, true}) check_2d_3d({0, 1, 4, 4, 12}, 14, 37, 133, dt, false, b_col, 100);
    }
    check_fp8({2, 2, 7}, 7, 45, 70, DType::BFloat16, false, 101);
  });
}
