// kiln::Scalar: a single number of bool, integer, float or complex category, as
// PyTorch's c10::Scalar. Tensor-scalar ops promote by the scalar's category only.
#pragma once

#include <complex>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kiln/dtype.h"

namespace kiln {

class Scalar {
 public:
  enum class Tag : uint8_t { Bool, Int, UInt, Double, Complex };

  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : tag_(Tag::Bool) { i_ = v; }
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) == 8) {
      // uint64 beyond int64's range keeps its value exactly.
      if (v > static_cast<uint64_t>(INT64_MAX)) { tag_ = Tag::UInt; u_ = v; return; }
    }
    tag_ = Tag::Int;
    i_ = static_cast<int64_t>(v);
  }
  Scalar(float v) : tag_(Tag::Double) { d_ = v; }
  Scalar(double v) : tag_(Tag::Double) { d_ = v; }
  Scalar(std::complex<float> v) : tag_(Tag::Complex) { c_ = v; }
  Scalar(std::complex<double> v) : tag_(Tag::Complex) { c_ = v; }

  Tag tag() const { return tag_; }
  bool is_bool() const { return tag_ == Tag::Bool; }
  bool is_integral() const { return tag_ == Tag::Int || tag_ == Tag::UInt; }
  bool is_floating() const { return tag_ == Tag::Double; }
  bool is_complex() const { return tag_ == Tag::Complex; }

  // The dtype PyTorch gives a wrapped Python number of this category when it takes
  // part in promotion: bool, int64, float32 (the default dtype), complex64.
  DType promotion_dtype() const;

  bool to_bool() const;
  int64_t to_int64() const;
  uint64_t to_uint64() const;
  double to_double() const;
  std::complex<double> to_complex() const;
  std::string str() const;

 private:
  Tag tag_;
  union {
    int64_t i_;
    uint64_t u_;
    double d_;
  };
  std::complex<double> c_{};
};

}  // namespace kiln
