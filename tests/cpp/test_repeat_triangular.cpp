// repeat, tile, tril and triu against index arithmetic on iota tensors (every element
// distinct, so a misplaced element shows): every dtype class, empty and 0-dim inputs,
// transposed and expanded inputs, the rank-preserving path past 64 dims, PyTorch's
// errors, in-place forms and gradients.
#include <gtest/gtest.h>

#include <complex>
#include <vector>

#include "autograd_test_util.h"
#include "index_walk_test_util.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/shape.h"
#include "test_util.h"

using namespace kiln;

namespace {

using kiln::testing::expect_error;
using kiln::testing::for_each_index;

// Row-major iota 1, 2, ... (never 0, so a zeroed element shows), converted to dt. bool
// alternates true/false; fp8 wraps its values into the small integers it holds exactly.
Tensor iota(const Shape& s, DType dt = DType::Float32) {
  Tensor base = add(arange(Scalar(shape_numel(s)), DType::Float64), Scalar(1.0)).view(s);
  if (dt == DType::Bool) return eq(remainder(base, Scalar(2.0)), Scalar(1.0));
  if (is_fp8(dt) || is_integral(dt)) base = add(remainder(base, Scalar(15.0)), Scalar(1.0));
  if (is_complex(dt)) return add(base.to(dt), mul(base.to(dt), Scalar(std::complex<double>(0, 0.5))));
  return base.to(dt);
}

std::complex<double> value(const Tensor& t, const Shape& i) { return t.at(i).to_complex(); }

const DType kEveryClass[] = {DType::Bool,    DType::UInt8,    DType::Int16,     DType::UInt64,
                             DType::Int64,   DType::Float16,  DType::BFloat16,  DType::Float32,
                             DType::Float64, DType::Complex64, DType::Complex128, DType::Float8_e4m3fn,
                             DType::Float8_e5m2};

// out[i] == t[i mod size] over t's sizes padded with leading 1s.
void expect_repeat_of(const Tensor& out, const Tensor& t, const std::vector<int64_t>& repeats) {
  const size_t lead = repeats.size() - t.sizes().size();
  Shape want(repeats.size());
  for (size_t d = 0; d < repeats.size(); ++d) want[d] = (d < lead ? 1 : t.sizes()[d - lead]) * repeats[d];
  ASSERT_EQ(out.sizes(), want);
  ASSERT_EQ(out.dtype(), t.dtype());
  for_each_index(want, [&](const Shape& i) {
    Shape j(t.sizes().size());
    for (size_t d = 0; d < j.size(); ++d) j[d] = i[d + lead] % t.sizes()[d];
    ASSERT_EQ(value(out, i), value(t, j)) << "at " << shape_to_string(i);
  });
}

bool keeps(int64_t row, int64_t col, int64_t diagonal, bool lower) {
  return lower ? col - row <= diagonal : col - row >= diagonal;
}

void expect_triangle_of(const Tensor& out, const Tensor& t, int64_t diagonal, bool lower) {
  ASSERT_EQ(out.sizes(), t.sizes());
  ASSERT_EQ(out.dtype(), t.dtype());
  for_each_index(t.sizes(), [&](const Shape& i) {
    const int64_t r = i[i.size() - 2], c = i[i.size() - 1];
    const std::complex<double> want = keeps(r, c, diagonal, lower) ? value(t, i) : 0.0;
    ASSERT_EQ(value(out, i), want) << "at " << shape_to_string(i) << " diagonal " << diagonal;
  });
}

}  // namespace

TEST(Repeat, MatchesIndexArithmetic) {
  const Tensor t = iota({2, 3});
  for (const std::vector<int64_t>& r : std::vector<std::vector<int64_t>>{
           {1, 1}, {2, 1}, {1, 3}, {2, 3}, {3, 1, 2}, {2, 1, 1, 1}, {1, 0}, {0, 4}, {2, 2, 0}}) {
    expect_repeat_of(repeat(t, r), t, r);
  }
  // Size-1 dims repeated (expanded without a new dim) next to ones interleaved.
  const Tensor column = iota({3, 1, 2});
  expect_repeat_of(repeat(column, {2, 4, 3}), column, {2, 4, 3});
}

TEST(Repeat, EveryDtypeAndLayout) {
  for (DType dt : kEveryClass) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor t = iota({2, 3}, dt);
    expect_repeat_of(repeat(t, {2, 2}), t, {2, 2});
  }
  // Transposed, sliced and expanded (stride-0) inputs.
  const Tensor transposed = iota({4, 3}).t();
  expect_repeat_of(repeat(transposed, {2, 3}), transposed, {2, 3});
  const Tensor sliced = iota({4, 6}).slice(1, 1, std::nullopt, 2);
  expect_repeat_of(repeat(sliced, {1, 2, 2}), sliced, {1, 2, 2});
  const Tensor expanded = iota({3, 1}).expand({3, 4});
  expect_repeat_of(repeat(expanded, {2, 2}), expanded, {2, 2});
}

TEST(Repeat, EdgeSizes) {
  // 0-dim: no counts gives a copy, counts give a tensor of that shape.
  const Tensor scalar = scalar_tensor(Scalar(7.0));
  const Tensor copy = repeat(scalar, {});
  EXPECT_EQ(copy.dim(), 0);
  EXPECT_NE(copy.storage(), scalar.storage());
  expect_repeat_of(repeat(scalar, {2, 3}), scalar, {2, 3});
  // Empty input stays empty; a copy even when every count is 1.
  EXPECT_EQ(repeat(zeros({0, 3}), {2, 2}).sizes(), (Shape{0, 6}));
  const Tensor t = iota({2, 2});
  const Tensor same = repeat(t, {1, 1});
  EXPECT_NE(same.storage(), t.storage());
  expect_repeat_of(same, t, {1, 1});
  // Lane width +- 1 along the copied dim.
  for (int64_t n : {15, 16, 17, 31, 32, 33}) {
    const Tensor row = iota({n});
    expect_repeat_of(repeat(row, {3, 2}), row, {3, 2});
  }
}

TEST(Repeat, RankPreservingPathPastTheDimLimit) {
  // 64 dims, six of them of size 2: interleaving would need 70 dims, so the op gathers
  // each repeated dim in place instead.
  Shape s(64, 1);
  for (int d : {0, 5, 20, 40, 62, 63}) s[d] = 2;
  const Tensor t = iota(s);
  std::vector<int64_t> r(64, 1);
  for (int d : {0, 5, 20, 40, 62, 63}) r[d] = 2;
  r[10] = 3;
  expect_repeat_of(repeat(t, r), t, r);
}

TEST(Repeat, Errors) {
  expect_error([] { repeat(iota({2, 3}), {2}); }, ErrorKind::Runtime,
               "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  expect_error([] { repeat(iota({2, 3}), {-1, 2}); }, ErrorKind::Runtime,
               "Trying to create tensor with negative dimension -2: [-2, 6]");
  // PyTorch multiplies first: an empty dim repeated -1 times is empty, not an error.
  EXPECT_EQ(repeat(zeros({0, 2}), {-1, 1}).sizes(), (Shape{0, 2}));
  EXPECT_EQ(repeat(zeros({0, 2}), {-3, 2}).sizes(), (Shape{0, 4}));
  expect_error([] { repeat(zeros({0, 2}), {1, -1}); }, ErrorKind::Runtime, "negative dimension -2");
  expect_error([] { repeat(iota({2}), {int64_t{1} << 62, 4}); }, ErrorKind::Runtime, "repeat");
  expect_error([] { repeat(iota({2}), std::vector<int64_t>(65, 1)); }, ErrorKind::Runtime, "repeat");
}

TEST(Tile, PadsShortDimsWithLeadingOnes) {
  const Tensor t = iota({2, 3, 2});
  expect_repeat_of(tile(t, {2}), t, {1, 1, 2});
  expect_repeat_of(tile(t, {2, 1}), t, {1, 2, 1});
  expect_repeat_of(tile(t, {}), t, {1, 1, 1});
  expect_repeat_of(tile(t, {2, 1, 1, 3}), t, {2, 1, 1, 3});
  expect_repeat_of(tile(iota({3}, DType::Int32), {2, 2}), iota({3}, DType::Int32), {2, 2});
}

TEST(Triangular, MatchesIndexArithmeticForEveryDiagonal) {
  for (const Shape& s : std::vector<Shape>{{4, 4}, {3, 5}, {5, 3}, {2, 3, 4}, {2, 1, 3, 3}}) {
    const Tensor t = iota(s);
    for (int64_t k = -6; k <= 6; ++k) {
      expect_triangle_of(tril(t, k), t, k, true);
      expect_triangle_of(triu(t, k), t, k, false);
    }
  }
  // Diagonals far past the matrix keep everything or nothing.
  const Tensor t = iota({3, 3});
  expect_triangle_of(tril(t, INT64_MAX), t, INT64_MAX, true);
  expect_triangle_of(triu(t, INT64_MIN), t, INT64_MIN, false);
  expect_triangle_of(tril(t, INT64_MIN), t, INT64_MIN, true);
}

TEST(Triangular, EveryDtypeLayoutAndEdgeSize) {
  for (DType dt : kEveryClass) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor t = iota({3, 4}, dt);
    expect_triangle_of(tril(t, 1), t, 1, true);
    expect_triangle_of(triu(t, -1), t, -1, false);
  }
  const Tensor transposed = iota({2, 5, 4}).transpose(1, 2);
  expect_triangle_of(tril(transposed), transposed, 0, true);
  const Tensor expanded = iota({1, 4}).expand({3, 4});
  expect_triangle_of(triu(expanded), expanded, 0, false);
  for (const Shape& s : std::vector<Shape>{{0, 3}, {3, 0}, {2, 0, 0}, {1, 1}, {1, 17}, {17, 1}}) {
    const Tensor t = iota(s);
    expect_triangle_of(tril(t), t, 0, true);
    expect_triangle_of(triu(t, 1), t, 1, false);
  }
  // A fresh tensor, never the input.
  const Tensor t = iota({2, 2});
  EXPECT_NE(tril(t, 5).storage(), t.storage());
}

TEST(Triangular, InPlaceWritesOnlyThroughTheView) {
  const Tensor base = iota({4, 6});
  const Tensor want = base.clone();
  const Tensor view = base.slice(1, 0, std::nullopt, 2);  // columns 0, 2, 4
  const Tensor before = view.clone();
  Tensor self = view;
  EXPECT_TRUE(tril_(self, 0).is_same(view));
  expect_triangle_of(view, before, 0, true);
  for_each_index(base.sizes(), [&](const Shape& i) {
    if (i[1] % 2 == 1) ASSERT_EQ(value(base, i), value(want, i));
  });
  Tensor b = iota({3, 3}, DType::Bool);
  const Tensor b_before = b.clone();
  triu_(b, 1);
  expect_triangle_of(b, b_before, 1, false);
}

TEST(Triangular, Errors) {
  expect_error([] { tril(iota({3})); }, ErrorKind::Runtime, "tril: input tensor must have at least 2 dimensions");
  expect_error([] { triu(scalar_tensor(Scalar(1.0))); }, ErrorKind::Runtime,
               "triu: input tensor must have at least 2 dimensions");
  expect_error([] { tril_(iota({3})); }, ErrorKind::Runtime, "input tensor must have at least 2 dimensions");
  // An expanded tensor's elements share memory: writing it in place is refused.
  expect_error([] { tril_(iota({1, 3}).expand({3, 3})); }, ErrorKind::Runtime, "masked_fill_");
}

TEST(RepeatTriangularAutograd, Gradcheck) {
  using namespace kiln::autograd_test;
  expect_gradcheck(one([](const Tensor& x) { return repeat(x, {2, 1, 3}); }), {leaf({2, 3}, 1)});
  expect_gradcheck(one([](const Tensor& x) { return repeat(x, {2, 2}); }), {transposed_leaf({3, 2}, 2)});
  expect_gradcheck(one([](const Tensor& x) { return tile(x, {3}); }), {leaf({2, 2}, 3)});
  expect_gradcheck(one([](const Tensor& x) { return tril(x, -1); }), {leaf({2, 3, 4}, 4)});
  expect_gradcheck(one([](const Tensor& x) { return triu(x, 1); }), {transposed_leaf({4, 3}, 5)});
  expect_gradcheck(one([](const Tensor& x) { return triu(x); }), {leaf({3, 3}, 6, DType::Complex128)});
  expect_gradgradcheck(one([](const Tensor& x) { return mul(repeat(x, {2, 2}), repeat(x, {2, 2})); }),
                       {leaf({2, 2}, 7)});
  // In place on a non-leaf: the gradient is tril's mask.
  const Tensor x = leaf({3, 3}, 8);
  Tensor y = mul(x, Scalar(2.0));
  tril_(y);
  autograd::backward({sum(y)});
  expect_triangle_of(x.grad(), full({3, 3}, Scalar(2.0), DType::Float64), 0, true);
}
