// index_select, embedding, gather, scatter_add, index_add, masked_fill and masked_select
// against plain loops. Data-moving ops are compared byte for byte on random bit patterns
// of every dtype (fp8 NaN codes included); the adds against a serial loop that sums in
// the same order, so float results must match exactly.
#include <gtest/gtest.h>

#include <complex>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/index.h"
#include "kiln/scalar_types.h"
#include "kiln/thread_pool.h"
#include "index_walk_test_util.h"
#include "test_util.h"

using namespace kiln;

namespace {

using kiln::testing::expect_error;

const DType kAllDTypes[] = {DType::Bool,      DType::UInt8,         DType::UInt16,     DType::UInt32,
                            DType::UInt64,    DType::Int8,          DType::Int16,      DType::Int32,
                            DType::Int64,     DType::Float16,       DType::BFloat16,   DType::Float32,
                            DType::Float64,   DType::Complex64,     DType::Complex128, DType::Float8_e4m3fn,
                            DType::Float8_e5m2};

// Random bit patterns (bool: 0 or 1), so byte-moving ops are checked on NaNs too.
Tensor random_bytes(const Shape& shape, DType dt, uint32_t seed) {
  Tensor t = Tensor::empty(shape, dt);
  std::mt19937 rng(seed);
  auto* p = static_cast<unsigned char*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<unsigned char>(dt == DType::Bool ? rng() & 1 : rng());
  return t;
}

// The bytes of element `index` (any strides).
std::string bytes_at(const Tensor& t, const Shape& index) {
  int64_t offset = 0;
  for (size_t d = 0; d < index.size(); ++d) offset += index[d] * t.strides()[d];
  const char* p = static_cast<const char*>(t.data_ptr()) + offset * static_cast<int64_t>(t.element_size());
  return std::string(p, t.element_size());
}

using kiln::testing::for_each_index;

Tensor index_tensor(const std::vector<int64_t>& v, DType dt = DType::Int64) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::Int64);
  if (!v.empty()) std::memcpy(t.data_ptr(), v.data(), v.size() * sizeof(int64_t));
  return t.to(dt);
}

Tensor random_indices(const Shape& shape, int64_t high, uint64_t seed, DType dt = DType::Int64) {
  Generator g(seed);
  return randint(0, high, shape, dt, &g);
}

int64_t index_value(const Tensor& index, const Shape& at) { return index.at(at).to_int64(); }

}  // namespace

TEST(IndexOps, IndexSelectEveryDtypeExactBytes) {
  uint32_t seed = 1;
  for (DType dt : kAllDTypes) {
    const Tensor input = random_bytes({5, 7, 3}, dt, seed++);
    for (DType idt : {DType::Int64, DType::Int32}) {
      for (int64_t dim : {0, 1, 2, -1}) {
        const int64_t d = dim < 0 ? dim + 3 : dim;
        const Tensor index = index_tensor({2, 0, 2, input.size(d) - 1}, idt);
        const Tensor out = index_select(input, dim, index);
        Shape want = input.sizes();
        want[d] = 4;
        ASSERT_EQ(out.sizes(), want);
        ASSERT_EQ(out.dtype(), dt);
        for_each_index(out.sizes(), [&](const Shape& i) {
          Shape src = i;
          src[d] = index_value(index, {i[d]});
          ASSERT_EQ(bytes_at(out, i), bytes_at(input, src)) << dtype_name(dt) << " dim " << dim;
        });
      }
    }
  }
}

TEST(IndexOps, IndexSelectNonContiguousAndEdgeShapes) {
  const Tensor base = random_bytes({6, 10, 4}, DType::BFloat16, 7);
  const Tensor views[] = {base.transpose(0, 2), base.slice(1, 1, std::nullopt, 3),
                          base.narrow(2, 1, 2).transpose(1, 2), base.select(1, 0).unsqueeze(1).expand({6, 10, 4})};
  const Tensor index = index_tensor({1, 3, 0, 3, 1, 0, 0}).slice(0, 0, std::nullopt, 2);  // strided: 1 0 1 0
  for (const Tensor& v : views) {
    for (int64_t dim = 0; dim < v.dim(); ++dim) {
      const Tensor out = index_select(v, dim, index);
      for_each_index(out.sizes(), [&](const Shape& i) {
        Shape src = i;
        src[dim] = index_value(index, {i[dim]});
        ASSERT_EQ(bytes_at(out, i), bytes_at(v, src));
      });
    }
  }
  // A 0-dim index keeps the dim with size 1; an empty index gives size 0.
  const Tensor scalar_index = scalar_tensor(Scalar(int64_t{2}), DType::Int32);
  const Tensor picked = index_select(base, 1, scalar_index);
  EXPECT_EQ(picked.sizes(), (Shape{6, 1, 4}));
  EXPECT_EQ(bytes_at(picked, {5, 0, 3}), bytes_at(base, {5, 2, 3}));
  EXPECT_EQ(index_select(base, 1, index_tensor({})).sizes(), (Shape{6, 0, 4}));
  EXPECT_EQ(index_select(empty({0, 3}), 1, index_tensor({2})).sizes(), (Shape{0, 1}));
  // A 0-dim input takes one index of value 0 and stays 0-dim.
  const Tensor s = scalar_tensor(Scalar(1.5));
  EXPECT_EQ(index_select(s, 0, index_tensor({0})).dim(), 0);
  EXPECT_EQ(index_select(s, 0, index_tensor({0})).item().to_double(), 1.5);
}

TEST(IndexOps, IndexSelectLargeRunsOnThreads) {
  // Row copies (dim 0, 64-float rows) and single-element rows (last dim).
  const Tensor table = random_bytes({2000, 64}, DType::Float32, 3);
  const Tensor rows = random_indices({50000}, 2000, 4);
  const Tensor out = index_select(table, 0, rows);
  for (int64_t r = 0; r < 50000; r += 997) {
    const int64_t src = index_value(rows, {r});
    ASSERT_EQ(std::memcmp(static_cast<const char*>(out.data_ptr()) + r * 256,
                          static_cast<const char*>(table.data_ptr()) + src * 256, 256),
              0);
  }
  const Tensor wide = random_bytes({100003, 5}, DType::Int16, 5);
  const Tensor cols = index_tensor({4, 0, 2});
  const Tensor picked = index_select(wide, 1, cols);
  for (int64_t r = 0; r < 100003; r += 1009) {
    for (int64_t j = 0; j < 3; ++j) ASSERT_EQ(bytes_at(picked, {r, j}), bytes_at(wide, {r, index_value(cols, {j})}));
  }
}

TEST(IndexOps, IndexSelectErrors) {
  const Tensor t = zeros({3, 4});
  expect_error([&] { index_select(t, 0, index_tensor({3})); }, ErrorKind::Index, "index out of range in self");
  expect_error([&] { index_select(t, 1, index_tensor({0, -1})); }, ErrorKind::Index, "index out of range in self");
  expect_error([&] { index_select(t, 0, zeros({2})); }, ErrorKind::Type, "Expected dtype int32 or int64 for index");
  expect_error([&] { index_select(t, 0, zeros({2, 1}, DType::Int64)); }, ErrorKind::Index,
               "Index is supposed to be a vector");
  expect_error([&] { index_select(t, 2, index_tensor({0})); }, ErrorKind::Index, "dimension out of range");
  expect_error([&] { index_select(scalar_tensor(Scalar(1.0)), 0, index_tensor({0, 0})); }, ErrorKind::Index,
               "Index to scalar can have only 1 value, got 2 value(s)");
  expect_error([&] { index_select(scalar_tensor(Scalar(1.0)), 0, index_tensor({1})); }, ErrorKind::Index,
               "index out of range in self");
}

TEST(IndexOps, Embedding) {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float8_e4m3fn, DType::Complex128}) {
    const Tensor weight = random_bytes({10, 6}, dt, 11);
    for (DType idt : {DType::Int64, DType::Int32}) {
      const Tensor indices = random_indices({2, 3}, 10, 12, idt);
      const Tensor out = embedding(weight, indices);
      ASSERT_EQ(out.sizes(), (Shape{2, 3, 6}));
      for_each_index(out.sizes(), [&](const Shape& i) {
        ASSERT_EQ(bytes_at(out, i), bytes_at(weight, {index_value(indices, {i[0], i[1]}), i[2]}));
      });
    }
  }
  // Transposed weight, 0-dim and empty indices, padding_idx accepted in range.
  const Tensor wt = random_bytes({6, 10}, DType::Float16, 13).t();
  const Tensor one = embedding(wt, scalar_tensor(Scalar(int64_t{7})), 9);
  ASSERT_EQ(one.sizes(), (Shape{6}));
  for (int64_t j = 0; j < 6; ++j) EXPECT_EQ(bytes_at(one, {j}), bytes_at(wt, {7, j}));
  EXPECT_EQ(embedding(wt, index_tensor({}), -10).sizes(), (Shape{0, 6}));

  const Tensor w = zeros({10, 4});
  expect_error([&] { embedding(w, index_tensor({10})); }, ErrorKind::Index, "index out of range in self");
  expect_error([&] { embedding(w, index_tensor({-1})); }, ErrorKind::Index, "index out of range in self");
  expect_error([&] { embedding(w, zeros({2})); }, ErrorKind::Type, "'indices' to have one of the following scalar types");
  expect_error([&] { embedding(zeros({10}), index_tensor({1})); }, ErrorKind::Runtime, "'weight' must be 2-D");
  expect_error([&] { embedding(w, index_tensor({1}), 10); }, ErrorKind::Value, "Padding_idx must be within num_embeddings");
  expect_error([&] { embedding(w, index_tensor({1}), -11); }, ErrorKind::Value, "Padding_idx must be within num_embeddings");
}

TEST(IndexOps, GatherEveryDtypeAndLayout) {
  uint32_t seed = 20;
  for (DType dt : kAllDTypes) {
    const Tensor input = random_bytes({4, 6, 5}, dt, seed++);
    for (int64_t dim = 0; dim < 3; ++dim) {
      // index smaller than input outside dim, larger along it (repeats allowed).
      Shape ishape = {3, 4, 2};
      ishape[dim] = 9;
      for (DType idt : {DType::Int64, DType::Int32}) {
        const Tensor index = random_indices(ishape, input.size(dim), seed++, idt);
        const Tensor out = gather(input, dim, index);
        ASSERT_EQ(out.sizes(), index.sizes());
        for_each_index(out.sizes(), [&](const Shape& i) {
          Shape src = i;
          src[dim] = index_value(index, i);
          ASSERT_EQ(bytes_at(out, i), bytes_at(input, src)) << dtype_name(dt) << " dim " << dim;
        });
      }
    }
  }
  // Non-contiguous input and index.
  const Tensor input = random_bytes({5, 8}, DType::Float64, 30).t();  // [8, 5]
  const Tensor index = random_indices({4, 6}, 8, 31).t();             // [6, 4]
  const Tensor out = gather(input, 0, index);
  for_each_index(out.sizes(), [&](const Shape& i) {
    ASSERT_EQ(bytes_at(out, i), bytes_at(input, {index_value(index, i), i[1]}));
  });
  // 0-dim input and index; a 1-D index on a 0-dim input.
  const Tensor s = scalar_tensor(Scalar(2.5));
  EXPECT_EQ(gather(s, 0, scalar_tensor(Scalar(int64_t{0}))).dim(), 0);
  EXPECT_EQ(gather(s, 0, index_tensor({0, 0})).sizes(), (Shape{2}));
  // An empty index skips the shape checks, as in PyTorch.
  EXPECT_EQ(gather(zeros({2, 3}), 1, empty({5, 0}, DType::Int64)).sizes(), (Shape{5, 0}));
}

TEST(IndexOps, GatherLargeRunsOnThreads) {
  const Tensor input = random_bytes({300, 400}, DType::Float32, 40);
  const Tensor index = random_indices({300, 350}, 400, 41);
  const Tensor out = gather(input, 1, index);
  for (int64_t r = 0; r < 300; r += 7) {
    for (int64_t c = 0; c < 350; c += 13) ASSERT_EQ(bytes_at(out, {r, c}), bytes_at(input, {r, index_value(index, {r, c})}));
  }
}

TEST(IndexOps, GatherErrors) {
  const Tensor t = zeros({3, 5});
  expect_error([&] { gather(t, 1, full({3, 2}, Scalar(int64_t{5}), DType::Int64)); }, ErrorKind::Index,
               "index 5 is out of bounds for dimension 1 with size 5");
  expect_error([&] { gather(t, 0, full({1, 1}, Scalar(int64_t{-1}), DType::Int32)); }, ErrorKind::Index,
               "index -1 is out of bounds for dimension 0 with size 3");
  expect_error([&] { gather(t, 1, zeros({3}, DType::Int64)); }, ErrorKind::Runtime,
               "Index tensor must have the same number of dimensions as input tensor");
  expect_error([&] { gather(t, 1, zeros({4, 2}, DType::Int64)); }, ErrorKind::Runtime,
               "Size does not match at dimension 0 expected index [4, 2] to be no larger than self [3, 5] apart from "
               "dimension 1");
  expect_error([&] { gather(t, 1, zeros({3, 2})); }, ErrorKind::Type, "Expected dtype int32 or int64 for index");
  expect_error([&] { gather(t, 2, zeros({3, 2}, DType::Int64)); }, ErrorKind::Index, "dimension out of range");
}

namespace {

// Serial scatter-add in row-major order of index, which for each element of self is
// index order along dim: the order the kernel must reproduce.
template <typename T, typename AddFn>
Tensor reference_scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, AddFn add) {
  Tensor out = self.clone();
  for_each_index(index.sizes(), [&](const Shape& i) {
    Shape dst = i;
    dst[dim] = index_value(index, i);
    T acc, x;
    std::memcpy(&acc, bytes_at(out, dst).data(), sizeof(T));
    std::memcpy(&x, bytes_at(src, i).data(), sizeof(T));
    acc = add(acc, x);
    int64_t offset = 0;
    for (size_t d = 0; d < dst.size(); ++d) offset += dst[d] * out.strides()[d];
    std::memcpy(static_cast<char*>(out.data_ptr()) + offset * static_cast<int64_t>(sizeof(T)), &acc, sizeof(T));
  });
  return out;
}

void expect_same_bytes(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  for_each_index(a.sizes(), [&](const Shape& i) { ASSERT_EQ(bytes_at(a, i), bytes_at(b, i)) << what; });
}

Tensor random_values(const Shape& shape, DType dt, uint64_t seed) {
  Generator g(seed);
  if (dt == DType::Bool) return randint(0, 2, shape, DType::Int64, &g).to(DType::Bool);
  if (is_integral(dt)) return randint(is_unsigned(dt) ? 0 : -100, 100, shape, dt, &g);
  if (is_complex(dt)) {
    Shape pairs = shape;
    pairs.push_back(2);
    Tensor re_im = randn(pairs, DType::Float64, &g);
    return Tensor::from_storage(re_im.storage(), shape, contiguous_strides(shape), 0, DType::Complex128).to(dt);
  }
  return randn(shape, DType::Float64, &g).to(dt);
}

}  // namespace

TEST(IndexOps, ScatterAddMatchesSerialOrderExactly) {
  uint64_t seed = 50;
  for (int64_t dim = 0; dim < 3; ++dim) {
    Shape ishape = {3, 4, 2};  // smaller than src and self outside dim
    ishape[dim] = 7;           // more entries than self has along dim: duplicates
    const Shape self_shape = {5, 6, 4};
    const Shape src_shape = {8, 8, 8};
    const Tensor index = random_indices(ishape, self_shape[dim], seed++);
    auto check = [&](DType dt, auto tag, auto add) {
      using T = decltype(tag);
      const Tensor self = random_values(self_shape, dt, seed++);
      const Tensor src = random_values(src_shape, dt, seed++);
      const Tensor out = scatter_add(self, dim, index, src);
      expect_same_bytes(out, reference_scatter_add<T>(self, dim, index, src, add),
                        std::string("scatter_add ") + std::string(dtype_name(dt)) + " dim " + std::to_string(dim));
    };
    check(DType::Float32, float{}, [](float a, float b) { return a + b; });
    check(DType::Float64, double{}, [](double a, double b) { return a + b; });
    check(DType::BFloat16, BFloat16{}, [](BFloat16 a, BFloat16 b) { return BFloat16(float(a) + float(b)); });
    check(DType::Float16, Half{}, [](Half a, Half b) { return Half(float(a) + float(b)); });
    check(DType::Complex64, std::complex<float>{}, [](auto a, auto b) { return a + b; });
    check(DType::Complex128, std::complex<double>{}, [](auto a, auto b) { return a + b; });
    check(DType::Int64, int64_t{}, [](int64_t a, int64_t b) { return a + b; });
    check(DType::Int8, int8_t{}, [](int8_t a, int8_t b) { return static_cast<int8_t>(uint8_t(a) + uint8_t(b)); });
    check(DType::UInt16, uint16_t{}, [](uint16_t a, uint16_t b) { return static_cast<uint16_t>(a + b); });
    check(DType::Bool, bool{}, [](bool a, bool b) { return a || b; });
  }
}

TEST(IndexOps, ScatterAddInPlaceNonContiguousAndThreadCountIndependent) {
  // In place through a transposed view of self, with a transposed index.
  Tensor base = random_values({6, 5}, DType::Float32, 60);
  const Tensor expected_base = base.clone();
  const Tensor self = base.t();  // [5, 6]
  const Tensor index = random_indices({4, 9}, 5, 61).t();  // [9, 4], transposed
  const Tensor src = random_values({9, 6}, DType::Float32, 62);
  const Tensor expected = reference_scatter_add<float>(expected_base.t(), 0, index, src, [](float a, float b) { return a + b; });
  scatter_add_(self, 0, index, src);
  expect_same_bytes(self, expected, "in place transposed");

  // Large, with heavy duplication: the result is bitwise the same on one thread.
  const Tensor big_index = random_indices({2000, 300}, 50, 63);
  const Tensor big_src = random_values({2000, 300}, DType::Float32, 64);
  const Tensor big_self = zeros({50, 300});
  const Tensor pooled = scatter_add(big_self, 0, big_index, big_src);
  set_num_threads(1);
  const Tensor serial = scatter_add(big_self, 0, big_index, big_src);
  set_num_threads(physical_core_count());
  expect_same_bytes(pooled, serial, "thread count");
  expect_same_bytes(pooled, reference_scatter_add<float>(big_self, 0, big_index, big_src,
                                                         [](float a, float b) { return a + b; }),
                    "large");
  // Empty index leaves self untouched; 0-dim self, index and src.
  const Tensor untouched = scatter_add(base, 0, empty({0, 3}, DType::Int64), src);
  expect_same_bytes(untouched, base, "empty index");
  const Tensor s = scatter_add(scalar_tensor(Scalar(1.0)), 0, scalar_tensor(Scalar(int64_t{0})), scalar_tensor(Scalar(2.0)));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item().to_double(), 3.0);
}

TEST(IndexOps, ScatterAddErrors) {
  const Tensor self = zeros({3, 4});
  const Tensor src = ones({3, 4});
  expect_error([&] { scatter_add(self, 0, full({1, 2}, Scalar(int64_t{3}), DType::Int64), src); }, ErrorKind::Index,
               "index 3 is out of bounds for dimension 0 with size 3");
  expect_error([&] { scatter_add(self, 1, full({1, 2}, Scalar(int64_t{-1}), DType::Int64), src); }, ErrorKind::Index,
               "index -1 is out of bounds");
  expect_error([&] { scatter_add(self, 0, zeros({1, 2}, DType::Int64), ones({3, 4}, DType::Float64)); }, ErrorKind::Type,
               "Expected self.dtype to be equal to src.dtype");
  expect_error([&] { scatter_add(self, 0, zeros({1, 2}), src); }, ErrorKind::Type, "Expected dtype int32 or int64");
  expect_error([&] { scatter_add(self, 0, zeros({4, 5}, DType::Int64), ones({5, 5})); }, ErrorKind::Runtime,
               "Expected index [4, 5] to be smaller than self [3, 4] apart from dimension 0");
  expect_error([&] { scatter_add(self, 0, zeros({3, 4}, DType::Int64), ones({2, 4})); }, ErrorKind::Runtime,
               "to be smaller size than src");
  expect_error([&] { scatter_add(self, 0, zeros({3}, DType::Int64), src); }, ErrorKind::Runtime,
               "Index tensor must have the same number of dimensions as self tensor");
  expect_error([&] { scatter_add(self, 0, zeros({1, 1}, DType::Int64), ones({4})); }, ErrorKind::Runtime,
               "same number of dimensions as src tensor");
  expect_error([&] { scatter_add(zeros({2, 2}, DType::Float8_e4m3fn), 0, zeros({1, 1}, DType::Int64),
                                 zeros({2, 2}, DType::Float8_e4m3fn)); },
               ErrorKind::Type, "not implemented for float8_e4m3fn");
  expect_error([&] { scatter_add_(zeros({1, 4}).expand({3, 4}), 0, zeros({1, 1}, DType::Int64), src); },
               ErrorKind::Runtime, "more than one element of the written-to tensor refers to a single memory location");
  Tensor shared = zeros({2, 4});
  expect_error([&] { scatter_add_(shared.narrow(0, 0, 1), 0, zeros({1, 4}, DType::Int64), shared.narrow(0, 0, 1)); },
               ErrorKind::Runtime, "refer to a single memory location");
}

TEST(IndexOps, IndexAdd) {
  uint64_t seed = 70;
  for (int64_t dim = 0; dim < 2; ++dim) {
    Shape self_shape = {5, 6};
    Shape source_shape = self_shape;
    source_shape[dim] = 9;
    const Tensor index = random_indices({9}, self_shape[dim], seed++);
    // index_add == scatter_add of alpha * source with index[j] broadcast along the other dim.
    Shape expand_shape = source_shape;
    Shape view_shape = {1, 1};
    view_shape[dim] = 9;
    const Tensor full_index = index.view(view_shape).expand(expand_shape).contiguous();
    const Tensor self = random_values(self_shape, DType::Float32, seed++);
    const Tensor source = random_values(source_shape, DType::Float32, seed++);
    const Tensor out = index_add(self, dim, index, source, Scalar(2.5));
    expect_same_bytes(out, reference_scatter_add<float>(self, dim, full_index, source,
                                                        [](float a, float b) { return a + 2.5f * b; }),
                      "index_add f32");
    const Tensor iself = random_values(self_shape, DType::Int32, seed++);
    const Tensor isource = random_values(source_shape, DType::Int32, seed++);
    expect_same_bytes(index_add(iself, dim, index.to(DType::Int32), isource, Scalar(int64_t{3})),
                      reference_scatter_add<int32_t>(iself, dim, full_index, isource,
                                                     [](int32_t a, int32_t b) { return a + 3 * b; }),
                      "index_add i32");
  }
  // In place on a strided view; bool with an integer alpha.
  Tensor base = zeros({4, 6});
  index_add_(base.slice(1, 0, std::nullopt, 2), 0, index_tensor({1, 1}), ones({2, 3}));
  EXPECT_EQ(base.at({1, 2}).to_double(), 2.0);
  EXPECT_EQ(base.at({1, 1}).to_double(), 0.0);
  const Tensor b = index_add(zeros({3}, DType::Bool), 0, index_tensor({2}), ones({1}, DType::Bool), Scalar(int64_t{1}));
  EXPECT_TRUE(b.at({2}).to_bool());

  const Tensor self = zeros({3, 4});
  expect_error([&] { index_add(self, 0, index_tensor({3}), ones({1, 4})); }, ErrorKind::Index, "index out of range in self");
  expect_error([&] { index_add(self, 0, index_tensor({0, 1}), ones({1, 4})); }, ErrorKind::Runtime,
               "Number of indices (2) should be equal to source.size(dim) (1)");
  expect_error([&] { index_add(self, 0, index_tensor({0}), ones({1, 5})); }, ErrorKind::Runtime,
               "Source/destination tensor must have same slice shapes");
  expect_error([&] { index_add(self, 0, index_tensor({0}), ones({1, 4}, DType::Float64)); }, ErrorKind::Type,
               "must have the same scalar type");
  expect_error([&] { index_add(zeros({3}, DType::Int64), 0, index_tensor({0}), ones({1}, DType::Int64), Scalar(0.5)); },
               ErrorKind::Type, "argument alpha must not be a floating point number");
  expect_error([&] { index_add(self, 0, index_tensor({0}), ones({1, 4}), Scalar(true)); }, ErrorKind::Type,
               "Boolean alpha only supported for Boolean results");
  expect_error([&] { index_add(self, 0, zeros({1, 1}, DType::Int64), ones({1, 4})); }, ErrorKind::Index,
               "Index is supposed to be a vector");
}

TEST(IndexOps, MaskedFillEveryDtype) {
  uint32_t seed = 80;
  for (DType dt : kAllDTypes) {
    const Tensor input = random_bytes({4, 5}, dt, seed++);
    const Tensor mask = random_bytes({1, 5}, DType::Bool, seed++);  // broadcast over rows
    const Scalar value = dt == DType::Bool ? Scalar(true) : Scalar(int64_t{3});
    const Tensor fill = scalar_tensor(value, dt);
    const Tensor out = masked_fill(input, mask, value);
    ASSERT_EQ(out.sizes(), (Shape{4, 5}));
    for_each_index(out.sizes(), [&](const Shape& i) {
      const bool m = mask.at({0, i[1]}).to_bool();
      ASSERT_EQ(bytes_at(out, i), m ? bytes_at(fill, {}) : bytes_at(input, i)) << dtype_name(dt);
    });
  }
  // The result takes the broadcast shape of input and mask.
  const Tensor row = arange(Scalar(int64_t{3}), DType::Float32);
  const Tensor mask = zeros({2, 3}, DType::Bool);
  mask.select(0, 1).fill_(Scalar(true));
  const Tensor out = masked_fill(row, mask, Scalar(-1.0));
  ASSERT_EQ(out.sizes(), (Shape{2, 3}));
  EXPECT_EQ(out.at({0, 2}).to_double(), 2.0);
  EXPECT_EQ(out.at({1, 2}).to_double(), -1.0);
  // In place on a transposed view, with a 0-dim tensor value; large enough for threads.
  Tensor base = zeros({400, 300}, DType::Float64);
  const Tensor big_mask = random_bytes({300, 400}, DType::Bool, 90);
  masked_fill_(base.t(), big_mask, scalar_tensor(Scalar(7.0)));
  for (int64_t r = 0; r < 300; r += 17) {
    for (int64_t c = 0; c < 400; c += 19) {
      ASSERT_EQ(base.at({c, r}).to_double(), big_mask.at({r, c}).to_bool() ? 7.0 : 0.0);
    }
  }
}

TEST(IndexOps, MaskedFillErrors) {
  const Tensor t = zeros({2, 3});
  expect_error([&] { masked_fill(t, zeros({2, 3}), Scalar(1.0)); }, ErrorKind::Type, "expected a bool mask");
  expect_error([&] { masked_fill(t, zeros({3}, DType::Bool), zeros({1})); }, ErrorKind::Runtime,
               "only supports a 0-dimensional value tensor, but got tensor with 1 dimension(s)");
  expect_error([&] { masked_fill_(zeros({3}), zeros({2, 3}, DType::Bool), Scalar(1.0)); }, ErrorKind::Runtime,
               "cannot be broadcast to self");
  expect_error([&] { masked_fill(t, zeros({4}, DType::Bool), Scalar(1.0)); }, ErrorKind::Runtime,
               "must match the size of tensor b");
  expect_error([&] { masked_fill(zeros({2}, DType::Int8), zeros({2}, DType::Bool), Scalar(int64_t{300})); },
               ErrorKind::Runtime, "value cannot be converted to type int8 without overflow");
  expect_error([&] { masked_fill(zeros({2}, DType::UInt8), zeros({2}, DType::Bool), Scalar(-1.0)); },
               ErrorKind::Runtime, "without overflow");
  expect_error([&] { masked_fill(t, zeros({3}, DType::Bool), Scalar(std::complex<double>(1, 2))); },
               ErrorKind::Runtime, "without overflow");
  expect_error([&] { masked_fill_(zeros({1}).expand({3}), zeros({3}, DType::Bool), Scalar(1.0)); }, ErrorKind::Runtime,
               "more than one element of the written-to tensor");
}

TEST(IndexOps, MaskedSelect) {
  uint32_t seed = 100;
  for (DType dt : kAllDTypes) {
    const Tensor input = random_bytes({3, 1, 7}, dt, seed++);
    const Tensor mask = random_bytes({4, 7}, DType::Bool, seed++);  // broadcast to [3, 4, 7]
    const Tensor out = masked_select(input, mask);
    ASSERT_EQ(out.dim(), 1);
    int64_t k = 0;
    for_each_index({3, 4, 7}, [&](const Shape& i) {
      if (!mask.at({i[1], i[2]}).to_bool()) return;
      ASSERT_LT(k, out.size(0));
      ASSERT_EQ(bytes_at(out, {k}), bytes_at(input, {i[0], 0, i[2]})) << dtype_name(dt);
      ++k;
    });
    EXPECT_EQ(k, out.size(0));
  }
  // Many chunks: order is kept across the per-chunk offsets.
  const Tensor values = arange(Scalar(int64_t{100003}), DType::Int64);
  const Tensor mask = random_bytes({100003}, DType::Bool, 110);
  const Tensor picked = masked_select(values.slice(0, 0, std::nullopt, 1), mask);
  int64_t k = 0;
  for (int64_t i = 0; i < 100003; ++i) {
    if (mask.at({i}).to_bool()) {
      ASSERT_EQ(picked.data<int64_t>()[k++], i);
    }
  }
  EXPECT_EQ(k, picked.size(0));
  EXPECT_EQ(masked_select(zeros({0, 3}), zeros({3}, DType::Bool)).sizes(), (Shape{0}));
  EXPECT_EQ(masked_select(zeros({2}), zeros({2}, DType::Bool)).sizes(), (Shape{0}));
  expect_error([&] { masked_select(zeros({2}), zeros({2}, DType::UInt8)); }, ErrorKind::Type, "expected a bool mask");
  expect_error([&] { masked_select(zeros({2}), zeros({3}, DType::Bool)); }, ErrorKind::Runtime, "must match");
}

// Bytes other than 0 and 1 reinterpreted as bool (from_storage, numpy's view(bool)): the
// adding kernels read the byte, count any nonzero one as true and write 0 or 1 (loading
// such a byte as a C++ bool is undefined: the index_ops fuzzer under UBSan).
TEST(IndexOps, AddingIntoBoolBytesOtherThanZeroAndOne) {
  const Tensor bytes = Tensor::empty({4}, DType::UInt8);
  const uint8_t raw[] = {3, 0, 2, 0};
  std::memcpy(bytes.data_ptr(), raw, sizeof raw);
  const Tensor self = Tensor::from_storage(bytes.storage(), {4}, {1}, 0, DType::Bool);
  const Tensor src = Tensor::from_storage(bytes.clone().storage(), {4}, {1}, 0, DType::Bool);
  const Tensor index = zeros({4}, DType::Int64);
  const Tensor out = scatter_add(self, 0, index, src);
  const uint8_t* got = static_cast<const uint8_t*>(out.data_ptr());
  EXPECT_EQ(got[0], 1);  // 3 || 3 || 0 || 2 || 0
  EXPECT_EQ(got[1], 0);
  EXPECT_EQ(got[2], 2);  // untouched: scatter_add copies self first, byte for byte
  EXPECT_EQ(got[3], 0);
}
