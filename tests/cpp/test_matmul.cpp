// matmul / mm / bmm / mv / dot against a plain double-loop reference, over shapes with
// 0, 1 and odd extents, transposed, sliced and broadcast operands, every supported
// dtype, enough work to run on several threads, and every error path.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/matmul.h"
#include "kiln/thread_pool.h"
#include "test_util.h"

using namespace kiln;
using cd = std::complex<double>;

namespace {

using kiln::testing::expect_error;

// Random values of any non-integer dtype (complex from two normals), or small integers.
Tensor random_tensor(const Shape& shape, DType dt, uint64_t seed) {
  Generator g(seed);
  if (is_complex(dt)) {
    Shape pairs = shape;
    pairs.push_back(2);
    Tensor re_im = randn(pairs, DType::Float64, &g);
    Tensor c = Tensor::from_storage(re_im.storage(), shape, contiguous_strides(shape), 0, DType::Complex128);
    return c.to(dt);
  }
  if (is_integral(dt)) return randint(is_unsigned(dt) ? 0 : -100, 101, shape, dt, &g);
  return randn(shape, DType::Float64, &g).to(dt);
}

// The values of a tensor as complex<double>, row-major (exact for every dtype tested).
std::vector<cd> values(const Tensor& t) {
  Tensor c = t.to(DType::Complex128).contiguous();
  const cd* p = c.data<cd>();
  return std::vector<cd>(p, p + c.numel());
}

double eps_of(DType dt) {
  switch (dt) {
    case DType::Float64:
    case DType::Complex128: return std::numeric_limits<double>::epsilon();
    case DType::BFloat16: return 0x1p-7;
    case DType::Float16: return 0x1p-10;
    default: return std::numeric_limits<float>::epsilon();
  }
}

// Checks c (M x N) against the exact product of a (M x K) and b (K x N).
//
// Tolerance. A sum of K products computed in a floating type with unit roundoff u
// (any order, blocked or FMA) satisfies |computed - exact| <= gamma_K * sum_k |a_ik b_kj|
// with gamma_K = K u / (1 - K u) (Higham, Accuracy and Stability, 3.1). Bounding gamma_K
// by K * eps (eps = 2u) leaves a factor 2 of margin; complex products add one more
// rounding per term, covered by another factor 2. f16/bf16 products accumulate in f32
// (delta from the f32 bound) and round once to the narrow type, adding at most
// eps_narrow/2 * |result|; 2 * delta + eps_narrow * |exact| covers both.
void expect_product(const Tensor& a, const Tensor& b, const Tensor& c, const std::string& what) {
  ASSERT_EQ(a.dim(), 2);
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  ASSERT_EQ(c.sizes(), (Shape{M, N})) << what;
  const std::vector<cd> av = values(a), bv = values(b), cv = values(c);
  const DType dt = c.dtype();
  const bool narrow = dt == DType::BFloat16 || dt == DType::Float16;
  const double acc_eps = narrow ? eps_of(DType::Float32) : eps_of(dt);
  const double factor = is_complex(dt) ? 2.0 : 1.0;
  int failures = 0;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      cd exact = 0;
      double magnitude = 0;
      for (int64_t k = 0; k < K; ++k) {
        exact += av[i * K + k] * bv[k * N + j];
        magnitude += std::abs(av[i * K + k]) * std::abs(bv[k * N + j]);
      }
      const double delta = factor * static_cast<double>(K) * acc_eps * magnitude;
      const double tol = narrow ? 2 * delta + eps_of(dt) * std::abs(exact) : delta;
      const double err = std::abs(cv[i * N + j] - exact);
      if (!(err <= tol) && ++failures <= 5) {
        ADD_FAILURE() << what << ": C[" << i << "," << j << "] = " << cv[i * N + j] << ", exact " << exact
                      << ", |err| " << err << " > tol " << tol;
      }
    }
  }
}

// Integer products wrap modulo 2^bits, like PyTorch's: reference in 64-bit wrapping
// arithmetic, truncated to T.
template <typename T>
void expect_integer_product(const Tensor& a, const Tensor& b, const Tensor& c) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  ASSERT_EQ(c.sizes(), (Shape{M, N}));
  const Tensor ac = a.contiguous(), bc = b.contiguous(), cc = c.contiguous();
  const T* ap = ac.data<T>();
  const T* bp = bc.data<T>();
  const T* cp = cc.data<T>();
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      uint64_t sum = 0;
      for (int64_t k = 0; k < K; ++k) {
        sum += static_cast<uint64_t>(static_cast<int64_t>(ap[i * K + k])) *
               static_cast<uint64_t>(static_cast<int64_t>(bp[k * N + j]));
      }
      ASSERT_EQ(cp[i * N + j], static_cast<T>(sum)) << "C[" << i << "," << j << "]";
    }
  }
}

// Layouts an M x K operand can arrive in.
enum class Layout { Contiguous, Transposed, RowPadded, ColumnStep, Broadcast, Flipped };
const Layout kLayouts[] = {Layout::Contiguous, Layout::Transposed, Layout::RowPadded,
                           Layout::ColumnStep, Layout::Broadcast,  Layout::Flipped};

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::RowPadded: return "row-padded";
    case Layout::ColumnStep: return "column-step";
    case Layout::Broadcast: return "broadcast";
    case Layout::Flipped: return "flipped";
  }
  return "?";
}

// A rows x cols matrix in the given layout: BLAS reads the first three in place
// (NoTrans, Trans, lda > cols); the others (stride 2, stride 0, negative stride) are
// copied first.
Tensor make_matrix(int64_t rows, int64_t cols, DType dt, Layout layout, uint64_t seed) {
  switch (layout) {
    case Layout::Contiguous: return random_tensor({rows, cols}, dt, seed);
    case Layout::Transposed: return random_tensor({cols, rows}, dt, seed).t();
    case Layout::RowPadded: return random_tensor({rows, cols + 3}, dt, seed).narrow(1, 2, cols);
    case Layout::ColumnStep: return random_tensor({rows, 2 * cols}, dt, seed).slice(1, 0, std::nullopt, 2);
    case Layout::Broadcast: return random_tensor({1, cols}, dt, seed).expand({rows, cols});
    case Layout::Flipped: {
      Tensor base = random_tensor({rows, cols}, dt, seed);
      if (rows == 0 || cols == 0) return base;
      return base.as_strided({rows, cols}, {-cols, 1}, (rows - 1) * cols);
    }
  }
  return {};
}

struct Dims {
  int64_t m, k, n;
};

// 0 and 1 extents, odd sizes, single rows/columns (the gemv paths), and sizes around
// OpenBLAS's 16-wide micro-kernels.
const Dims kShapes[] = {{0, 3, 4},  {3, 0, 4},  {3, 4, 0},   {1, 1, 1},    {1, 7, 1},   {5, 1, 3},
                        {1, 9, 13}, {13, 9, 1}, {17, 33, 9}, {16, 16, 16}, {15, 17, 31}, {2, 65, 3}};

}  // namespace

TEST(Matmul, MmFloat32AllShapesAndLayouts) {
  uint64_t seed = 1;
  for (const Dims& d : kShapes) {
    for (Layout la : kLayouts) {
      for (Layout lb : {Layout::Contiguous, Layout::Transposed, Layout::ColumnStep, Layout::Broadcast}) {
        const Tensor a = make_matrix(d.m, d.k, DType::Float32, la, seed++);
        const Tensor b = make_matrix(d.k, d.n, DType::Float32, lb, seed++);
        const std::string what = "mm " + std::to_string(d.m) + "x" + std::to_string(d.k) + "x" +
                                 std::to_string(d.n) + " a " + layout_name(la) + " b " + layout_name(lb);
        expect_product(a, b, mm(a, b), what);
      }
    }
  }
}

TEST(Matmul, MmEveryFloatingAndComplexDtype) {
  uint64_t seed = 100;
  for (DType dt : {DType::Float64, DType::Complex64, DType::Complex128, DType::BFloat16, DType::Float16}) {
    for (const Dims& d : {Dims{1, 5, 1}, Dims{1, 9, 7}, Dims{6, 9, 1}, Dims{13, 31, 17}, Dims{3, 0, 2}}) {
      for (Layout la : {Layout::Contiguous, Layout::Transposed, Layout::ColumnStep}) {
        const Tensor a = make_matrix(d.m, d.k, dt, la, seed++);
        const Tensor b = make_matrix(d.k, d.n, dt, Layout::Transposed, seed++);
        const Tensor c = mm(a, b);
        EXPECT_EQ(c.dtype(), dt);
        expect_product(a, b, c, std::string(dtype_name(dt)) + " a " + layout_name(la));
      }
    }
  }
}

TEST(Matmul, MmIntegersWrapLikePyTorch) {
  // Values up to +-100 with K = 37: int8/int16/uint8 sums overflow and must wrap.
  uint64_t seed = 200;
  for (Layout la : {Layout::Contiguous, Layout::Transposed, Layout::ColumnStep}) {
    const Dims d{9, 37, 5};
    auto run = [&](DType dt, auto tag) {
      using T = decltype(tag);
      const Tensor a = make_matrix(d.m, d.k, dt, la, seed++);
      const Tensor b = make_matrix(d.k, d.n, dt, Layout::Transposed, seed++);
      const Tensor c = mm(a, b);
      EXPECT_EQ(c.dtype(), dt);
      expect_integer_product<T>(a, b, c);
    };
    run(DType::Int8, int8_t{});
    run(DType::Int16, int16_t{});
    run(DType::Int32, int32_t{});
    run(DType::Int64, int64_t{});
    run(DType::UInt8, uint8_t{});
    run(DType::UInt16, uint16_t{});
    run(DType::UInt32, uint32_t{});
    run(DType::UInt64, uint64_t{});
  }
  // A single int8 product that wraps: 100 * 100 * 3 = 30000 = 48 (mod 256).
  const Tensor a = full({1, 3}, Scalar(int64_t{100}), DType::Int8);
  const Tensor b = full({3, 1}, Scalar(int64_t{100}), DType::Int8);
  EXPECT_EQ(mm(a, b).at({0, 0}).to_int64(), 48);
}

TEST(Matmul, ZeroContractionGivesZeros) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Complex64, DType::BFloat16, DType::Int32, DType::UInt8}) {
    const Tensor c = mm(empty({3, 0}, dt), empty({0, 4}, dt));
    ASSERT_EQ(c.sizes(), (Shape{3, 4}));
    for (const cd& v : values(c)) EXPECT_EQ(v, cd(0)) << dtype_name(dt);
    const Tensor batched = matmul(empty({2, 3, 0}, dt), empty({0, 5}, dt));
    ASSERT_EQ(batched.sizes(), (Shape{2, 3, 5}));
    for (const cd& v : values(batched)) EXPECT_EQ(v, cd(0)) << dtype_name(dt);
  }
  EXPECT_EQ(dot(empty({0}), empty({0})).item().to_double(), 0.0);
}

TEST(Matmul, LargeProductsSplitAcrossThreads) {
  // Enough work for several panels: tall (split by rows), wide (split by columns),
  // and a single row/column long enough to be cut too.
  uint64_t seed = 300;
  for (const Dims& d : {Dims{301, 150, 203}, Dims{64, 200, 515}, Dims{1, 600, 4001}, Dims{4001, 600, 1}}) {
    for (Layout la : {Layout::Contiguous, Layout::Transposed}) {
      const Tensor a = make_matrix(d.m, d.k, DType::Float32, la, seed++);
      const Tensor b = make_matrix(d.k, d.n, DType::Float32, Layout::Transposed, seed++);
      expect_product(a, b, mm(a, b), std::string("large ") + layout_name(la));
    }
  }
  // Integers are split the same way.
  const Tensor a = make_matrix(257, 64, DType::Int32, Layout::Contiguous, seed++);
  const Tensor b = make_matrix(64, 129, DType::Int32, Layout::Transposed, seed++);
  expect_integer_product<int32_t>(a, b, mm(a, b));
}

TEST(Matmul, SameResultWithOneThread) {
  // Panels change which thread computes a row, not how it is summed.
  const Tensor a = random_tensor({200, 300}, DType::Float64, 1);
  const Tensor b = random_tensor({300, 250}, DType::Float64, 2);
  const Tensor many = mm(a, b);
  set_num_threads(1);
  const Tensor one = mm(a, b);
  set_num_threads(physical_core_count());
  expect_product(a, b, one, "one thread");
  expect_product(a, b, many, "pool");
}

TEST(Matmul, MatmulVectorRules) {
  const Tensor v = random_tensor({5}, DType::Float32, 1);
  const Tensor w = random_tensor({5}, DType::Float32, 2);
  const Tensor m = random_tensor({3, 5}, DType::Float32, 3);
  const Tensor n = random_tensor({5, 4}, DType::Float32, 4);

  const Tensor d = matmul(v, w);  // 1-D . 1-D -> 0-dim
  EXPECT_EQ(d.dim(), 0);
  expect_product(v.unsqueeze(0), w.unsqueeze(1), d.view({1, 1}), "dot");
  EXPECT_EQ(dot(v, w).dim(), 0);

  const Tensor mvv = matmul(m, v);  // 2-D @ 1-D -> [3]
  EXPECT_EQ(mvv.sizes(), (Shape{3}));
  expect_product(m, v.unsqueeze(1), mvv.unsqueeze(1), "mv");
  expect_product(m, v.unsqueeze(1), mv(m, v).unsqueeze(1), "mv()");

  const Tensor vm = matmul(v, n);  // 1-D @ 2-D -> [4]
  EXPECT_EQ(vm.sizes(), (Shape{4}));
  expect_product(v.unsqueeze(0), n, vm.unsqueeze(0), "vm");

  // A strided vector (stride 3) and a broadcast one (stride 0).
  const Tensor strided = random_tensor({15}, DType::Float32, 5).slice(0, 0, std::nullopt, 3);
  expect_product(m, strided.unsqueeze(1), matmul(m, strided).unsqueeze(1), "strided vector");
  const Tensor bcast = random_tensor({1}, DType::Float32, 6).expand({5});
  expect_product(m, bcast.unsqueeze(1), matmul(m, bcast).unsqueeze(1), "broadcast vector");

  // 1-D @ 3-D: the prepended dim is removed, the batch kept.
  const Tensor b3 = random_tensor({2, 5, 4}, DType::Float32, 7);
  const Tensor vb = matmul(v, b3);
  ASSERT_EQ(vb.sizes(), (Shape{2, 4}));
  for (int64_t i = 0; i < 2; ++i) expect_product(v.unsqueeze(0), b3.select(0, i), vb.select(0, i).unsqueeze(0), "vb");

  // 3-D @ 1-D and 3-D @ 2-D fold the batch into the rows.
  const Tensor a3 = random_tensor({2, 3, 5}, DType::Float32, 8);
  const Tensor av = matmul(a3, v);
  ASSERT_EQ(av.sizes(), (Shape{2, 3}));
  for (int64_t i = 0; i < 2; ++i) expect_product(a3.select(0, i), v.unsqueeze(1), av.select(0, i).unsqueeze(1), "av");
  const Tensor an = matmul(a3, n);
  ASSERT_EQ(an.sizes(), (Shape{2, 3, 4}));
  for (int64_t i = 0; i < 2; ++i) expect_product(a3.select(0, i), n, an.select(0, i), "an");
  // Folding a batch that is not viewable as rows (transposed batch dims) copies first.
  const Tensor a3t = random_tensor({3, 2, 5}, DType::Float32, 9).transpose(0, 1);
  const Tensor ant = matmul(a3t, n);
  for (int64_t i = 0; i < 2; ++i) expect_product(a3t.select(0, i), n, ant.select(0, i), "an transposed batch");
}

TEST(Matmul, BatchedBroadcasting) {
  uint64_t seed = 400;
  for (DType dt : {DType::Float32, DType::Float64, DType::Complex64, DType::BFloat16, DType::Int64}) {
    // [2, 1, 3, 4] @ [5, 4, 6] -> [2, 5, 3, 6]; b's batch dims broadcast against a's.
    const Tensor a = random_tensor({2, 1, 3, 4}, dt, seed++);
    const Tensor b = random_tensor({5, 6, 4}, dt, seed++).transpose(1, 2);
    const Tensor c = matmul(a, b);
    ASSERT_EQ(c.sizes(), (Shape{2, 5, 3, 6}));
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 5; ++j) {
        const Tensor ai = a.select(0, i).select(0, 0), bj = b.select(0, j), cij = c.select(0, i).select(0, j);
        if (dt == DType::Int64) {
          expect_integer_product<int64_t>(ai, bj, cij);
        } else {
          expect_product(ai, bj, cij, std::string("batched ") + std::string(dtype_name(dt)));
        }
      }
    }
  }
  // 2-D @ 3-D broadcasts the matrix over b's batch.
  const Tensor m = random_tensor({3, 4}, DType::Float32, seed++);
  const Tensor b = random_tensor({7, 4, 2}, DType::Float32, seed++);
  const Tensor c = matmul(m, b);
  ASSERT_EQ(c.sizes(), (Shape{7, 3, 2}));
  for (int64_t i = 0; i < 7; ++i) expect_product(m, b.select(0, i), c.select(0, i), "2-D @ 3-D");
  // Expanded (stride-0) batch dims and many tiny matrices.
  const Tensor tiny_a = random_tensor({1, 2, 3}, DType::Float32, seed++).expand({1000, 2, 3});
  const Tensor tiny_b = random_tensor({1000, 3, 2}, DType::Float32, seed++);
  const Tensor tiny = matmul(tiny_a, tiny_b);
  ASSERT_EQ(tiny.sizes(), (Shape{1000, 2, 2}));
  for (int64_t i = 0; i < 1000; i += 111) {
    expect_product(tiny_a.select(0, i), tiny_b.select(0, i), tiny.select(0, i), "tiny batch");
  }
}

TEST(Matmul, Bmm) {
  uint64_t seed = 500;
  for (const Dims& d : {Dims{3, 4, 5}, Dims{1, 1, 1}, Dims{0, 2, 3}, Dims{4, 0, 2}, Dims{33, 17, 65}}) {
    const Tensor a = random_tensor({6, d.m, d.k}, DType::Float32, seed++);
    const Tensor b = random_tensor({6, d.n, d.k}, DType::Float32, seed++).transpose(1, 2);
    const Tensor c = bmm(a, b);
    ASSERT_EQ(c.sizes(), (Shape{6, d.m, d.n}));
    for (int64_t i = 0; i < 6; ++i) expect_product(a.select(0, i), b.select(0, i), c.select(0, i), "bmm");
  }
  EXPECT_EQ(bmm(empty({0, 2, 3}), empty({0, 3, 4})).sizes(), (Shape{0, 2, 4}));
}

TEST(Matmul, Errors) {
  const Tensor f = zeros({2, 3});
  const Tensor d = zeros({3, 4}, DType::Float64);
  expect_error([&] { mm(f, d); }, ErrorKind::Type, "expected m1 and m2 to have the same dtype, but got: float32 != float64");
  expect_error([&] { matmul(f, d); }, ErrorKind::Type, "same dtype");
  expect_error([&] { bmm(zeros({1, 2, 3}), zeros({1, 3, 4}, DType::Float64)); }, ErrorKind::Type, "same dtype");
  expect_error([&] { dot(zeros({3}), zeros({3}, DType::Float64)); }, ErrorKind::Type,
               "expected both vectors to have same dtype, but found float32 and float64");
  expect_error([&] { mm(zeros({3}), f); }, ErrorKind::Runtime, "self must be a matrix");
  expect_error([&] { mm(f, zeros({3, 4, 1})); }, ErrorKind::Runtime, "mat2 must be a matrix");
  expect_error([&] { mm(f, zeros({4, 5})); }, ErrorKind::Runtime, "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
  expect_error([&] { matmul(zeros({2}), zeros({3, 4})); }, ErrorKind::Runtime,
               "mat1 and mat2 shapes cannot be multiplied (1x2 and 3x4)");
  expect_error([&] { matmul(zeros({2, 2, 3}), zeros({4, 5})); }, ErrorKind::Runtime, "cannot be multiplied");
  expect_error([&] { matmul(zeros({2, 2, 3}), zeros({2, 4, 5})); }, ErrorKind::Runtime, "cannot be multiplied");
  expect_error([&] { matmul(zeros({2, 2, 3}), zeros({3, 3, 5})); }, ErrorKind::Runtime,
               "must match the size of tensor b");
  expect_error([&] { matmul(zeros({}), f); }, ErrorKind::Runtime,
               "both arguments to matmul need to be at least 1D, but they are 0D and 2D");
  expect_error([&] { bmm(f, zeros({1, 3, 4})); }, ErrorKind::Runtime, "batch1 must be a 3D tensor");
  expect_error([&] { bmm(zeros({1, 2, 3}), f); }, ErrorKind::Runtime, "batch2 must be a 3D tensor");
  expect_error([&] { bmm(zeros({2, 2, 3}), zeros({3, 3, 4})); }, ErrorKind::Runtime,
               "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [3, 3].");
  expect_error([&] { dot(zeros({3}), zeros({4})); }, ErrorKind::Runtime,
               "inconsistent tensor size, expected tensor [3] and src [4]");
  expect_error([&] { dot(f, f); }, ErrorKind::Runtime, "1D tensors expected, but got 2D and 2D tensors");
  expect_error([&] { mv(f, zeros({4})); }, ErrorKind::Runtime, "size mismatch");
  expect_error([&] { mv(zeros({3}), zeros({3})); }, ErrorKind::Runtime, "vector + matrix @ vector expected");
  expect_error([&] { mm(zeros({2, 2}, DType::Bool), zeros({2, 2}, DType::Bool)); }, ErrorKind::Type,
               "not implemented for bool");
  for (DType fp8 : {DType::Float8_e4m3fn, DType::Float8_e5m2}) {
    expect_error([&] { matmul(zeros({2, 2}, fp8), zeros({2, 2}, fp8)); }, ErrorKind::Type, "scaled_mm");
  }
  expect_error([&] { mm(Tensor(), f); }, ErrorKind::Runtime, "undefined");
}
