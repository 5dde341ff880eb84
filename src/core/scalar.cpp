#include "kiln/scalar.h"

#include <fmt/core.h>

namespace kiln {

DType Scalar::promotion_dtype() const {
  switch (tag_) {
    case Tag::Bool: return DType::Bool;
    case Tag::Int: return DType::Int64;
    case Tag::UInt: return DType::UInt64;
    case Tag::Double: return DType::Float32;
    case Tag::Complex: return DType::Complex64;
  }
  return DType::Int64;
}

bool Scalar::to_bool() const {
  switch (tag_) {
    case Tag::Bool:
    case Tag::Int: return i_ != 0;
    case Tag::UInt: return u_ != 0;
    case Tag::Double: return d_ != 0;
    case Tag::Complex: return c_ != std::complex<double>(0, 0);
  }
  return false;
}

int64_t Scalar::to_int64() const {
  switch (tag_) {
    case Tag::Bool:
    case Tag::Int: return i_;
    case Tag::UInt: return static_cast<int64_t>(u_);
    case Tag::Double: return static_cast<int64_t>(d_);
    case Tag::Complex: return static_cast<int64_t>(c_.real());
  }
  return 0;
}

uint64_t Scalar::to_uint64() const {
  switch (tag_) {
    case Tag::UInt: return u_;
    case Tag::Double: return d_ >= 9223372036854775808.0 ? static_cast<uint64_t>(d_) : static_cast<uint64_t>(static_cast<int64_t>(d_));
    default: return static_cast<uint64_t>(to_int64());
  }
}

double Scalar::to_double() const {
  switch (tag_) {
    case Tag::Bool:
    case Tag::Int: return static_cast<double>(i_);
    case Tag::UInt: return static_cast<double>(u_);
    case Tag::Double: return d_;
    case Tag::Complex: return c_.real();
  }
  return 0;
}

std::complex<double> Scalar::to_complex() const {
  return tag_ == Tag::Complex ? c_ : std::complex<double>(to_double(), 0);
}

std::string Scalar::str() const {
  switch (tag_) {
    case Tag::Bool: return i_ ? "True" : "False";
    case Tag::Int: return std::to_string(i_);
    case Tag::UInt: return std::to_string(u_);
    case Tag::Double: return fmt::format("{}", d_);
    case Tag::Complex: return fmt::format("({}{:+}j)", c_.real(), c_.imag());
  }
  return "";
}

}  // namespace kiln
