// Issue 9, class 6 (silent results): inputs that used to give a plausible but wrong
// answer. grouped_mm's output past offs[-1] is zeros and its 2D x 2D form refuses
// mismatched K; attention propagates NaN as PyTorch's math path does (NaN or +inf
// scores, NaN masks, NaN or infinite scales) in the general kernel, the fused decode
// kernel (one slice or several) and attention_decode; pow on bool follows PyTorch.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "backend/cpu/attention/attention_kernels.h"
#include "kiln/context.h"
#include "kiln/ops/attention.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/grouped_mm.h"
#include "nn_test_utils.h"
#include "test_util.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;
using nn_test::from_doubles;
using nn_test::to_doubles;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor int32_tensor(const std::vector<int32_t>& v) {
  Tensor t = empty({static_cast<int64_t>(v.size())}, DType::Int32);
  for (size_t i = 0; i < v.size(); ++i) t.data<int32_t>()[i] = v[i];
  return t;
}

Tensor rnd(const Shape& shape, DType dt, uint32_t seed) { return nn_test::random_sample(shape, dt, seed).tensor; }

// Allocates and frees a few buffers of `bytes` full of a non-zero pattern, so that an
// output that is not fully written would show it.
void dirty_the_allocator(int64_t bytes) {
  for (int i = 0; i < 4; ++i) full({bytes / 4}, Scalar(7.0), DType::Float32);
}

// ---------------------------------------------------------------- grouped_mm

TEST(HostileResults, GroupedMmRowsPastLastOffsetAreZero) {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(dt));
    // 2D x 3D: rows [3, 40) of the output belong to no group; row counts cover the
    // small-group and the sgemm paths.
    for (const std::vector<int32_t>& offs : std::vector<std::vector<int32_t>>{{1, 3}, {0, 0}, {20, 30}}) {
      dirty_the_allocator(40 * 16 * 4);
      const Tensor out = grouped_mm(rnd({40, 16}, dt, 1), rnd({2, 16, 16}, dt, 2), int32_tensor(offs));
      const std::vector<double> v = to_doubles(out);
      for (int64_t r = offs.back(); r < 40; ++r)
        for (int64_t c = 0; c < 16; ++c) ASSERT_EQ(v[r * 16 + c], 0.0) << "row " << r;
    }
    // No groups at all: every row is past the (empty) offsets.
    dirty_the_allocator(8 * 16 * 4);
    for (double x : to_doubles(grouped_mm(rnd({8, 16}, dt, 3), rnd({0, 16, 16}, dt, 4), int32_tensor({}))))
      ASSERT_EQ(x, 0.0);
    // 3D x 2D: columns [24, 72) of every output row belong to no group.
    dirty_the_allocator(5 * 72 * 4);
    const std::vector<double> v =
        to_doubles(grouped_mm(rnd({2, 5, 16}, dt, 5), rnd({16, 72}, dt, 6), int32_tensor({8, 24})));
    for (int64_t r = 0; r < 5; ++r)
      for (int64_t c = 24; c < 72; ++c) ASSERT_EQ(v[r * 72 + c], 0.0) << "row " << r << " col " << c;
  }
}

TEST(HostileResults, GroupedMmFp8RowsPastLastOffsetAreZero) {
  dirty_the_allocator(12 * 16 * 4);
  const Tensor w = rnd({2, 16, 16}, DType::Float32, 7).to(DType::Float8_e4m3fn);
  const Tensor out = grouped_mm_fp8(rnd({12, 16}, DType::Float32, 8), w, ones({2, 16}), int32_tensor({2, 5}));
  const std::vector<double> v = to_doubles(out);
  for (int64_t i = 5 * 16; i < 12 * 16; ++i) ASSERT_EQ(v[i], 0.0);
}

TEST(HostileResults, GroupedMm2Dx2DRefusesMismatchedK) {
  expect_error([] { grouped_mm(ones({4, 8}), ones({4, 4}), int32_tensor({2, 4})); }, ErrorKind::Runtime,
               "grouped_mm: contraction dimension of mat_a and mat_b must match, got [4, 8] and [4, 4]");
  // Matching K still works, and an offs[-1] short of K contracts over the covered part.
  const std::vector<double> v = to_doubles(grouped_mm(ones({4, 8}), ones({8, 4}), int32_tensor({2, 6})));
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], i < 16 ? 2.0 : 4.0);
}

// ---------------------------------------------------------------- attention

// Row r (of rows x width values) is all NaN.
void expect_nan_row(const std::vector<double>& v, int64_t width, int64_t r) {
  for (int64_t c = 0; c < width; ++c) ASSERT_TRUE(std::isnan(v[r * width + c])) << "row " << r << " col " << c;
}

void expect_zero_row(const std::vector<double>& v, int64_t width, int64_t r) {
  for (int64_t c = 0; c < width; ++c) ASSERT_EQ(v[r * width + c], 0.0) << "row " << r << " col " << c;
}

void expect_equal_row(const std::vector<double>& got, const std::vector<double>& want, int64_t width, int64_t r) {
  for (int64_t c = 0; c < width; ++c) ASSERT_EQ(got[r * width + c], want[r * width + c]) << "row " << r;
}

const std::vector<DType> kAttentionDtypes = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16};

// A NaN anywhere in a float mask row (first key, either side of a key-tile boundary,
// last key) makes that query row NaN; other rows are untouched. +inf in the mask too
// (softmax's inf - inf).
TEST(HostileResults, AttentionMaskNaNOrPlusInfGivesNaNRow) {
  nn_test::for_each_target(cpu::attention_simd_targets(), [] {
    const int64_t L = 6, S = 150, E = 8;
    for (DType dt : kAttentionDtypes) {
      SCOPED_TRACE(dtype_name(dt));
      const Tensor q = rnd({1, L, E}, dt, 10), k = rnd({1, S, E}, dt, 11), v = rnd({1, S, E}, dt, 12);
      std::vector<double> mask(static_cast<size_t>(L * S), 0.0);
      const std::vector<std::pair<int64_t, int64_t>> bad = {{1, 0}, {2, 63}, {3, 64}, {4, 149}};
      for (auto [i, j] : bad) mask[i * S + j] = kNaN;
      mask[5 * S + 70] = kInf;
      const DType mdt = dt == DType::Float64 ? DType::Float64 : DType::Float32;
      const std::vector<double> got =
          to_doubles(scaled_dot_product_attention(q, k, v, from_doubles(mask, {L, S}, mdt)));
      const std::vector<double> clean = to_doubles(scaled_dot_product_attention(q, k, v, zeros({L, S}, mdt)));
      expect_equal_row(got, clean, E, 0);
      for (int64_t r = 1; r < L; ++r) expect_nan_row(got, E, r);
    }
  });
}

// A NaN scale makes every score NaN: every output is NaN, on the general kernel, the
// decode kernel (one slice, and a long context split over threads) and attention_decode.
TEST(HostileResults, AttentionNaNScaleGivesNaN) {
  const ThreadsScope threads(4);
  nn_test::for_each_target(cpu::attention_simd_targets(), [] {
    for (DType dt : kAttentionDtypes) {
      SCOPED_TRACE(dtype_name(dt));
      for (int64_t L : {1, 5})
        for (int64_t S : {3, 1100})
          for (bool causal : {false, true}) {
            SCOPED_TRACE(::testing::Message() << "L=" << L << " S=" << S << " causal=" << causal);
            const Tensor out = scaled_dot_product_attention(rnd({2, L, 8}, dt, 13), rnd({2, S, 8}, dt, 14),
                                                            rnd({2, S, 8}, dt, 15), std::nullopt, 0.0, causal, kNaN);
            for (double x : to_doubles(out)) ASSERT_TRUE(std::isnan(x));
          }
      const Tensor out =
          attention_decode(rnd({1, 4, 8}, dt, 16), rnd({1, 2, 1100, 8}, dt, 17), rnd({1, 2, 1100, 8}, dt, 18), 1000,
                           kNaN);
      for (double x : to_doubles(out)) ASSERT_TRUE(std::isnan(x));
    }
  });
}

// With an infinite scale each score is -inf, +inf or NaN (inf * 0, inf - inf). PyTorch's
// math path: a row with any +inf or NaN score is NaN, a row of only -inf is zeros, and
// is_causal is an added -inf bias, so a hidden key with a +inf or NaN score still makes
// the row NaN. q is all ones, so key j's score is +inf if k_j is all positive and -inf if
// all negative.
TEST(HostileResults, AttentionInfiniteScaleFollowsTheMathPath) {
  const ThreadsScope threads(4);
  nn_test::for_each_target(cpu::attention_simd_targets(), [] {
    for (DType dt : kAttentionDtypes) {
      SCOPED_TRACE(dtype_name(dt));
      const int64_t E = 4;
      for (int64_t L : {1, 3})
        for (int64_t S : {3, 1100})
          for (bool causal : {false, true})
            for (double scale : {kInf, -kInf}) {
              SCOPED_TRACE(::testing::Message() << "L=" << L << " S=" << S << " causal=" << causal << " scale=" << scale);
              const Tensor q = ones({1, L, E}, dt), v = rnd({1, S, E}, dt, 19);
              // Every score -inf: zeros (kiln decision 5), even where v holds inf or NaN.
              Tensor k = full({1, S, E}, Scalar(scale > 0 ? -1.0 : 1.0), dt);
              for (double x : to_doubles(scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, causal, scale)))
                ASSERT_EQ(x, 0.0);
              Tensor v_inf = v.clone();
              v_inf.select(1, 0).select(1, 1).fill_(Scalar(kInf));
              v_inf.select(1, S - 1).select(1, 2).fill_(Scalar(kNaN));
              for (double x : to_doubles(scaled_dot_product_attention(q, k, v_inf, std::nullopt, 0.0, causal, scale)))
                ASSERT_EQ(x, 0.0);
              // One key (the last, hidden from every query but the last under is_causal)
              // scores +inf: every row is NaN.
              k.select(1, S - 1).fill_(Scalar(scale > 0 ? 1.0 : -1.0));
              for (double x : to_doubles(scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, causal, scale)))
                ASSERT_TRUE(std::isnan(x));
              // A zero in k gives inf * 0 = NaN.
              k = full({1, S, E}, Scalar(scale > 0 ? -1.0 : 1.0), dt);
              k.select(1, S / 2).select(1, 1).fill_(Scalar(0.0));
              for (double x : to_doubles(scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, causal, scale)))
                ASSERT_TRUE(std::isnan(x));
            }
    }
  });
}

// NaN in a query row makes that row NaN (it used to be zeros); NaN in one key makes
// every row that sees it NaN; on the decode kernel with one slice and several.
TEST(HostileResults, AttentionNaNInputsPropagate) {
  const ThreadsScope threads(4);
  nn_test::for_each_target(cpu::attention_simd_targets(), [] {
    for (DType dt : kAttentionDtypes) {
      for (int64_t S : {5, 1100}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " S=" << S);
        const int64_t H = 3, E = 8;
        Tensor q = rnd({H, 1, E}, dt, 20);
        const Tensor k = rnd({H, S, E}, dt, 21), v = rnd({H, S, E}, dt, 22);
        const std::vector<double> clean = to_doubles(scaled_dot_product_attention(q, k, v));
        q.select(0, 1).select(1, 3).fill_(Scalar(kNaN));
        const std::vector<double> got = to_doubles(scaled_dot_product_attention(q, k, v));
        expect_equal_row(got, clean, E, 0);
        expect_nan_row(got, E, 1);
        expect_equal_row(got, clean, E, 2);
        Tensor k_nan = k.clone();
        k_nan.select(0, 2).select(0, S - 1).select(0, 0).fill_(Scalar(kNaN));
        const std::vector<double> got_k = to_doubles(scaled_dot_product_attention(rnd({H, 1, E}, dt, 20), k_nan, v));
        expect_equal_row(got_k, clean, E, 0);
        expect_nan_row(got_k, E, 2);
      }
    }
  });
}

// Rows whose keys are all masked stay zeros (kiln decision 5) next to NaN rows.
TEST(HostileResults, AttentionFullyMaskedRowsStayZeroBesideNaN) {
  const Tensor q = rnd({1, 2, 8}, DType::Float32, 23), k = rnd({1, 4, 8}, DType::Float32, 24),
               v = rnd({1, 4, 8}, DType::Float32, 25);
  const Tensor mask = from_doubles({-kInf, -kInf, -kInf, -kInf, 0, kNaN, 0, 0}, {2, 4}, DType::Float32);
  const std::vector<double> got = to_doubles(scaled_dot_product_attention(q, k, v, mask));
  expect_zero_row(got, 8, 0);
  expect_nan_row(got, 8, 1);
}

// ---------------------------------------------------------------- pow on bool

// PyTorch promotes a bool base with an int exponent (int64 result), fills or copies for
// the exponents False / True (pow_out's shortcuts), and has no bool pow kernel otherwise.
TEST(HostileResults, PowOnBoolFollowsPyTorch) {
  const Tensor b = from_doubles({1, 0, 1}, {3}, DType::Bool);
  const Tensor squared = pow(b, Scalar(int64_t{2}));
  EXPECT_EQ(squared.dtype(), DType::Int64);
  EXPECT_EQ(to_doubles(squared), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(pow(b, Scalar(2.5)).dtype(), DType::Float32);
  const Tensor same = pow(b, Scalar(true));
  EXPECT_EQ(same.dtype(), DType::Bool);
  EXPECT_EQ(to_doubles(same), (std::vector<double>{1, 0, 1}));
  const Tensor one = pow(b, Scalar(false));
  EXPECT_EQ(one.dtype(), DType::Bool);
  EXPECT_EQ(to_doubles(one), (std::vector<double>{1, 1, 1}));
  expect_error([&] { pow(b, b); }, ErrorKind::Type, "pow: not supported for bool");
  expect_error([&] { pow(Scalar(true), b); }, ErrorKind::Type, "pow: not supported for bool");
  expect_error([&] { pow(b, Scalar(int64_t{-1})); }, ErrorKind::Runtime,
               "Integers to negative integer powers are not allowed.");
}

}  // namespace
}  // namespace kiln
