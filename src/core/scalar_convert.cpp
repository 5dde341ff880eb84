#include "core/scalar_convert.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "kiln/error.h"

namespace kiln {

namespace {

// The largest finite value of floating dtype `dt`, and whether it has infinities.
double float_max(DType dt) {
  switch (dt) {
    case DType::Float16: return 65504.0;
    case DType::BFloat16: return 3.38953138925153547590e38;  // (2 - 2^-7) * 2^127
    case DType::Float32: return static_cast<double>(std::numeric_limits<float>::max());
    case DType::Float8_e4m3fn: return 448.0;
    case DType::Float8_e5m2: return 57344.0;
    default: return std::numeric_limits<double>::max();
  }
}
bool has_infinity(DType dt) { return dt != DType::Float8_e4m3fn; }

int bits_of(DType dt) { return static_cast<int>(itemsize(dt)) * 8; }

// An integer value (sign and magnitude, so every int64 and uint64 is exact) into `dt`.
bool integer_fits(bool negative, uint64_t magnitude, DType dt) {
  if (is_floating(dt)) return static_cast<double>(magnitude) <= float_max(dt);
  if (!is_integral(dt)) return true;  // complex: its parts hold any int64 or uint64
  const int bits = bits_of(dt);
  if (is_unsigned(dt)) {
    const uint64_t max = bits == 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << bits) - 1;
    return magnitude <= max;  // negatives down to -max wrap, as in c10
  }
  const uint64_t max = (uint64_t{1} << (bits - 1)) - 1;
  return magnitude <= (negative ? max + 1 : max);
}

// A real floating value into real dtype `dt`.
bool double_fits(double v, DType dt) {
  if (is_integral(dt)) {
    const int bits = bits_of(dt);
    const double lowest = is_unsigned(dt) ? 0.0 : -std::ldexp(1.0, bits - 1);
    // Below 64 bits the bounds are exact doubles and c10 compares with <= max; 2^63 - 1
    // and 2^64 - 1 are not doubles, so there the bound is the first power of two past.
    if (bits == 64) return v >= lowest && v < std::ldexp(1.0, is_unsigned(dt) ? 64 : 63);
    const double max = std::ldexp(1.0, is_unsigned(dt) ? bits : bits - 1) - 1;
    return v >= lowest && v <= max;  // NaN fails both
  }
  if (std::isnan(v)) return true;
  if (std::isinf(v)) return has_infinity(dt);
  return std::fabs(v) <= float_max(dt);
}

}  // namespace

bool scalar_fits(const Scalar& value, DType dt) {
  if (dt == DType::Bool || value.is_bool()) return true;
  const DType real = to_real(dt);
  switch (value.tag()) {
    case Scalar::Tag::Bool:
      return true;
    case Scalar::Tag::Int: {
      const int64_t v = value.to_int64();
      const uint64_t magnitude = v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
      return integer_fits(v < 0, magnitude, real);
    }
    case Scalar::Tag::UInt:
      return integer_fits(false, value.to_uint64(), real);
    case Scalar::Tag::Double:
      return double_fits(value.to_double(), real);
    case Scalar::Tag::Complex: {
      const std::complex<double> c = value.to_complex();
      if (!is_complex(dt) && c.imag() != 0) return false;
      return double_fits(c.real(), real) && double_fits(c.imag(), real);
    }
  }
  return true;
}

namespace {

// The range `dt` takes, for the message.
std::string range_of(DType dt) {
  if (is_integral(dt)) {
    const int bits = bits_of(dt);
    if (is_unsigned(dt)) {
      const std::string max = bits == 64 ? "18446744073709551615" : std::to_string((uint64_t{1} << bits) - 1);
      return "integers from -" + max + " (negatives wrap) to " + max;
    }
    return "integers from " + std::to_string(bits == 64 ? std::numeric_limits<int64_t>::min()
                                                          : -(int64_t{1} << (bits - 1))) +
           " to " + std::to_string(bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (bits - 1)) - 1);
  }
  const DType real = to_real(dt);
  std::string r = fmt::format("finite values up to {:g} in magnitude", float_max(real));
  r += has_infinity(real) ? ", infinities and NaN" : " and NaN (no infinities)";
  if (!is_complex(dt)) r += ", no imaginary part";
  return r;
}

}  // namespace

void check_scalar_converts(const Scalar& value, DType dt, const char* op) {
  if (scalar_fits(value, dt)) [[likely]] return;
  fail(ErrorKind::Runtime, op, "value cannot be converted to type {} without overflow (got {}; {} takes {})",
       dtype_name(dt), value.str(), dtype_name(dt), range_of(dt));
}

}  // namespace kiln
