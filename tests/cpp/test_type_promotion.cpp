// Type promotion pinned to PyTorch's torch.promote_types / torch.result_type tables.
#include <gtest/gtest.h>

#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/type_promotion.h"

using namespace kiln;
using D = DType;

TEST(TypePromotion, PromoteTypesTable) {
  struct Case { D a, b, want; };
  const Case cases[] = {
      {D::Bool, D::Bool, D::Bool},        {D::Bool, D::Int8, D::Int8},
      {D::Bool, D::Float16, D::Float16},  {D::UInt8, D::Int8, D::Int16},
      {D::UInt8, D::Int16, D::Int16},     {D::UInt8, D::Int64, D::Int64},
      {D::Int8, D::Int32, D::Int32},      {D::Int32, D::Int64, D::Int64},
      {D::Int64, D::Float16, D::Float16}, {D::Int64, D::BFloat16, D::BFloat16},
      {D::Float16, D::BFloat16, D::Float32}, {D::Float16, D::Float32, D::Float32},
      {D::BFloat16, D::Float64, D::Float64}, {D::Float32, D::Complex64, D::Complex64},
      {D::Float64, D::Complex64, D::Complex128}, {D::Int64, D::Complex64, D::Complex64},
      {D::Complex64, D::Complex128, D::Complex128}, {D::UInt16, D::UInt16, D::UInt16},
      {D::UInt32, D::Float32, D::Float32}, {D::BFloat16, D::UInt64, D::BFloat16},
      {D::Float8_e4m3fn, D::Float8_e4m3fn, D::Float8_e4m3fn},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(promote_types(c.a, c.b), c.want) << dtype_name(c.a) << " + " << dtype_name(c.b);
    EXPECT_EQ(promote_types(c.b, c.a), c.want) << dtype_name(c.b) << " + " << dtype_name(c.a);
  }
}

TEST(TypePromotion, RefusedPairsSayWhy) {
  try {
    promote_types(D::Float8_e4m3fn, D::Float32);
    FAIL() << "fp8 promoted implicitly";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Type);
    EXPECT_NE(std::string(e.what()).find("Float8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(promote_types(D::Float8_e5m2, D::Float8_e4m3fn), Error);
  EXPECT_THROW(promote_types(D::UInt16, D::Int32), Error);
  EXPECT_THROW(promote_types(D::UInt64, D::Int64), Error);
  EXPECT_THROW(promote_types(D::UInt32, D::UInt8), Error);
}

TEST(TypePromotion, ResultTypeWithScalarsAndZeroDim) {
  Tensor i32 = zeros({2}, D::Int32), u8 = zeros({2}, D::UInt8), f16 = zeros({2}, D::Float16);
  Tensor b = zeros({2}, D::Bool);
  Tensor f64_0d = zeros({}, D::Float64), i64_0d = zeros({}, D::Int64), c128_0d = zeros({}, D::Complex128);
  Scalar two(int64_t{2}), half(0.5), cplx(std::complex<double>(1, 1)), yes(true);
  EXPECT_EQ(result_type({i32, two}), D::Int32);       // int scalar keeps the tensor's width
  EXPECT_EQ(result_type({u8, two}), D::UInt8);
  EXPECT_EQ(result_type({i32, half}), D::Float32);    // default dtype for a float scalar
  EXPECT_EQ(result_type({f16, half}), D::Float16);
  EXPECT_EQ(result_type({b, two}), D::Int64);
  EXPECT_EQ(result_type({b, yes}), D::Bool);
  EXPECT_EQ(result_type({i32, cplx}), D::Complex64);
  EXPECT_EQ(result_type({f16, cplx}), D::Complex64);
  EXPECT_EQ(result_type({f16, f64_0d}), D::Float16);  // 0-dim of the same category does not widen
  EXPECT_EQ(result_type({i32, f64_0d}), D::Float64);  // ... but a higher category wins
  EXPECT_EQ(result_type({u8, i64_0d}), D::UInt8);
  EXPECT_EQ(result_type({f16, c128_0d}), D::Complex64);
  EXPECT_EQ(result_type({i64_0d, half}), D::Float32);
  EXPECT_EQ(result_type({f64_0d, i32}), D::Float64);
}

TEST(TypePromotion, BroadcastShapes) {
  EXPECT_EQ(broadcast_shapes(Shape{3, 1}, Shape{4}), (Shape{3, 4}));
  EXPECT_EQ(broadcast_shapes(Shape{}, Shape{2, 3}), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes(Shape{0, 1}, Shape{1, 5}), (Shape{0, 5}));
  EXPECT_EQ(broadcast_shapes(std::vector<Shape>{{2, 1, 1}, {1, 3, 1}, {4}}), (Shape{2, 3, 4}));
  try {
    broadcast_shapes(Shape{2, 3}, Shape{4}, "add");
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("add"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
  }
}
