// cast_strided / to_f32 / from_f32 against a reference written here: every dtype pair on
// interesting values in every layout, and the SIMD paths over every f16/bf16/fp8 code,
// rounding boundaries and random floats, on each Highway target the CPU supports.
#include <gtest/gtest.h>
#include <kiln/dtype.h>
#include <kiln/scalar_types.h>

#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cast/cast.h"
#include "simd_targets.h"

namespace {

using kiln::DType;
namespace cpu = kiln::cpu;

constexpr DType kAllDTypes[] = {
    DType::Bool,    DType::UInt8,     DType::UInt16,     DType::UInt32,        DType::UInt64,     DType::Int8,
    DType::Int16,   DType::Int32,     DType::Int64,      DType::Float16,       DType::BFloat16,   DType::Float32,
    DType::Float64, DType::Complex64, DType::Complex128, DType::Float8_e4m3fn, DType::Float8_e5m2};
constexpr DType kSimdDTypes[] = {DType::Float16, DType::BFloat16,      DType::Float32,
                                 DType::Float64, DType::Float8_e4m3fn, DType::Float8_e5m2};

using Bytes = std::vector<uint8_t>;
using i128 = __int128;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// An element's exact value: an integer (bool and integer dtypes) or a pair of doubles
// (every float dtype's values are doubles exactly).
struct Value {
  bool is_int = false;
  i128 i = 0;
  double re = 0, im = 0;
};

template <typename T>
Bytes bytes_of(const T& v) {
  Bytes b(sizeof(T));
  std::memcpy(b.data(), &v, sizeof(T));
  return b;
}
template <typename T>
T from_bytes(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Encodes a float value into a float dtype the way the library's scalar types do
// (those are pinned by test_scalar_types.cpp).
Bytes encode_float(DType t, double re, double im) {
  const float f = static_cast<float>(re);
  switch (t) {
    case DType::Float16:
      return bytes_of(kiln::Half(f).bits);
    case DType::BFloat16:
      return bytes_of(kiln::BFloat16(f).bits);
    case DType::Float8_e4m3fn:
      return bytes_of(kiln::Float8_e4m3fn(f).bits);
    case DType::Float8_e5m2:
      return bytes_of(kiln::Float8_e5m2(f).bits);
    case DType::Float32:
      return bytes_of(f);
    case DType::Float64:
      return bytes_of(re);
    case DType::Complex64:
      return bytes_of(std::complex<float>(f, static_cast<float>(im)));
    case DType::Complex128:
      return bytes_of(std::complex<double>(re, im));
    default:
      ADD_FAILURE() << "not a float dtype";
      return {};
  }
}

Value decode(DType t, const uint8_t* p) {
  Value v;
  v.is_int = true;
  switch (t) {
    case DType::Bool:
      v.i = p[0] != 0;
      return v;
    case DType::UInt8:
      v.i = from_bytes<uint8_t>(p);
      return v;
    case DType::UInt16:
      v.i = from_bytes<uint16_t>(p);
      return v;
    case DType::UInt32:
      v.i = from_bytes<uint32_t>(p);
      return v;
    case DType::UInt64:
      v.i = from_bytes<uint64_t>(p);
      return v;
    case DType::Int8:
      v.i = from_bytes<int8_t>(p);
      return v;
    case DType::Int16:
      v.i = from_bytes<int16_t>(p);
      return v;
    case DType::Int32:
      v.i = from_bytes<int32_t>(p);
      return v;
    case DType::Int64:
      v.i = from_bytes<int64_t>(p);
      return v;
    default:
      break;
  }
  v.is_int = false;
  switch (t) {
    case DType::Float16:
      v.re = kiln::half_bits_to_float(from_bytes<uint16_t>(p));
      break;
    case DType::BFloat16:
      v.re = kiln::bf16_bits_to_float(from_bytes<uint16_t>(p));
      break;
    case DType::Float8_e4m3fn:
      v.re = kiln::fp8_e4m3fn_bits_to_float(p[0]);
      break;
    case DType::Float8_e5m2:
      v.re = kiln::fp8_e5m2_bits_to_float(p[0]);
      break;
    case DType::Float32:
      v.re = from_bytes<float>(p);
      break;
    case DType::Float64:
      v.re = from_bytes<double>(p);
      break;
    case DType::Complex64: {
      const auto c = from_bytes<std::complex<float>>(p);
      v.re = c.real();
      v.im = c.imag();
      break;
    }
    case DType::Complex128: {
      const auto c = from_bytes<std::complex<double>>(p);
      v.re = c.real();
      v.im = c.imag();
      break;
    }
    default:
      ADD_FAILURE() << "unknown dtype";
  }
  return v;
}

// PyTorch's float -> integer with kiln's choices for what it leaves undefined (see
// cast.h), computed in 128-bit arithmetic: NaN -> 0, truncate, clamp to int64 (uint64:
// up to 2^64 - 1), wrap.
template <typename T>
Bytes float_to_int_reference(double x) {
  if (std::isnan(x)) return bytes_of(T(0));
  const double t = std::trunc(x);
  const bool u64 = std::is_same_v<T, uint64_t>;
  const i128 lo = -(i128(1) << 63);
  const i128 hi = u64 ? (i128(1) << 64) - 1 : (i128(1) << 63) - 1;
  i128 k;
  if (t <= -0x1p63)
    k = lo;
  else if (t >= (u64 ? 0x1p64 : 0x1p63))
    k = hi;
  else
    k = static_cast<i128>(t);
  return bytes_of(static_cast<T>(k));
}

// What converting `v` to dtype `t` must give.
Bytes expected(DType t, const Value& v) {
  switch (t) {
    case DType::Bool:
      return bytes_of(uint8_t(v.is_int ? v.i != 0 : (v.re != 0 || v.im != 0)));
    case DType::UInt8:
      return v.is_int ? bytes_of(static_cast<uint8_t>(v.i)) : float_to_int_reference<uint8_t>(v.re);
    case DType::UInt16:
      return v.is_int ? bytes_of(static_cast<uint16_t>(v.i)) : float_to_int_reference<uint16_t>(v.re);
    case DType::UInt32:
      return v.is_int ? bytes_of(static_cast<uint32_t>(v.i)) : float_to_int_reference<uint32_t>(v.re);
    case DType::UInt64:
      return v.is_int ? bytes_of(static_cast<uint64_t>(v.i)) : float_to_int_reference<uint64_t>(v.re);
    case DType::Int8:
      return v.is_int ? bytes_of(static_cast<int8_t>(v.i)) : float_to_int_reference<int8_t>(v.re);
    case DType::Int16:
      return v.is_int ? bytes_of(static_cast<int16_t>(v.i)) : float_to_int_reference<int16_t>(v.re);
    case DType::Int32:
      return v.is_int ? bytes_of(static_cast<int32_t>(v.i)) : float_to_int_reference<int32_t>(v.re);
    case DType::Int64:
      return v.is_int ? bytes_of(static_cast<int64_t>(v.i)) : float_to_int_reference<int64_t>(v.re);
    case DType::Float64:
    case DType::Complex128:
      // An integer rounds to double directly (int128 -> double is correctly rounded).
      return encode_float(t, v.is_int ? static_cast<double>(v.i) : v.re, v.im);
    default:
      // Everything else rounds to float first: integers directly, doubles via float.
      return encode_float(t, v.is_int ? static_cast<double>(static_cast<float>(v.i)) : v.re, v.im);
  }
}

// Equal bytes, or (for float dtypes) NaN where the other is NaN, part by part.
bool same_element(DType t, const uint8_t* got, const uint8_t* want) {
  const size_t size = kiln::itemsize(t);
  if (std::memcmp(got, want, size) == 0) return true;
  if (kiln::is_integral(t, true)) return false;
  const Value a = decode(t, got), b = decode(t, want);
  auto same = [](double x, double y) {
    return (std::isnan(x) && std::isnan(y)) || std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y);
  };
  return same(a.re, b.re) && same(a.im, b.im);
}

std::string hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = n; i-- > 0;) s += {digits[p[i] >> 4], digits[p[i] & 15]};
  return s;
}

// Interesting elements of each dtype, as raw bytes laid end to end.
Bytes interesting_elements(DType t) {
  Bytes out;
  auto add = [&](const Bytes& b) { out.insert(out.end(), b.begin(), b.end()); };
  if (t == DType::Bool) return {0, 1};
  if (kiln::is_integral(t)) {
    const i128 seeds[] = {0,          1,          -1,
                          2,          7,          127,
                          128,        255,        256,
                          -128,       -129,       300,
                          32767,      32768,      65535,
                          65536,      -32769,     16777217,
                          2147483647, 2147483648, -2147483648LL,
                          4294967295, 4294967296, (i128(1) << 53) + 1,
                          INT64_MAX,  INT64_MIN,  UINT64_MAX,
                          -1000000007};
    for (i128 s : seeds) {
      Value v;
      v.is_int = true;
      v.i = s;
      add(expected(t, v));  // wraps the seed into t
    }
    return out;
  }
  const double seeds[] = {0.0,    -0.0,    1.0,     -1.0,  0.5,   -0.5,   0.7,         -0.7,  1.5,   2.5,
                          -2.5,   127.9,   128.0,   255.5, 256.0, 300.0,  -300.0,      448.0, 464.0, 500.0,
                          57344,  61440,   65504,   65520, 1e5,   0x1p31, -0x1p31 - 1, 3e9,   -3e9,  0x1p53 + 2,
                          0x1p63, -0x1p63, 0x1p64,  1e19,  3e19,  -1e19,  1e30,        -1e30, 1e-30, 1e-40,
                          0x1p-9, 0x1p-10, 0x1p-24, 3e38,  1e300, kInf,   -kInf,       kNan,  -kNan};
  const size_t count = std::size(seeds);
  for (size_t k = 0; k < count; ++k) add(encode_float(t, seeds[k], seeds[(k * 7 + 3) % count]));
  // Only the imaginary part is nonzero: true as a bool, zero as a real.
  if (kiln::is_complex(t)) add(encode_float(t, 0.0, 1.0));
  return out;
}

// Casts `elems` laid out with a source stride of `src_step` elements (0: a broadcast of
// the middle element; negative: walking backwards) into a destination with a stride of
// `dst_step` elements (negative: filled backwards); each result must equal expected()
// and the gaps and guards around the destination elements must stay untouched.
void check_layout(DType st, DType dt, const Bytes& elems, int64_t src_step, int64_t dst_step) {
  const int64_t ss = static_cast<int64_t>(kiln::itemsize(st)), ds = static_cast<int64_t>(kiln::itemsize(dt));
  const int64_t count = static_cast<int64_t>(elems.size()) / ss;
  const int64_t n = src_step == 0 ? 5 : count;
  // Source buffer: element k of `elems` at position k * |src_step| (reversed for a
  // negative step, so walking backwards from the last visits elems in order).
  const int64_t abs_step = src_step < 0 ? -src_step : (src_step == 0 ? 1 : src_step);
  // One element in from the allocation, so the data is not vector-aligned.
  Bytes src(static_cast<size_t>((count * abs_step + 1) * ss));
  uint8_t* base = src.data() + ss;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t pos = src_step < 0 ? (count - 1 - k) * abs_step : k * abs_step;
    std::memcpy(base + pos * ss, elems.data() + k * ss, static_cast<size_t>(ss));
  }
  const int64_t first = src_step == 0 ? count / 2 : (src_step < 0 ? (count - 1) * abs_step : 0);
  const int64_t first_elem = src_step == 0 ? count / 2 : 0;

  const uint8_t kGuard = 0xA5;
  const int64_t abs_dst = dst_step < 0 ? -dst_step : dst_step;
  Bytes dst(static_cast<size_t>((n * abs_dst + 2) * ds), kGuard);
  uint8_t* out = dst.data() + ds;  // a guard element before
  if (dst_step < 0) out += (n - 1) * abs_dst * ds;
  cpu::cast_strided(st, base + first * ss, src_step * ss, dt, out, dst_step * ds, n);

  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = src_step == 0 ? first_elem : i;
    const Value v = decode(st, elems.data() + k * ss);
    const Bytes want = expected(dt, v);
    const uint8_t* got = out + i * dst_step * ds;
    EXPECT_TRUE(same_element(dt, got, want.data()))
        << kiln::dtype_name(st) << " -> " << kiln::dtype_name(dt) << " element " << k << " (src "
        << hex(elems.data() + k * ss, static_cast<size_t>(ss)) << "), steps " << src_step << "/" << dst_step << ": got "
        << hex(got, static_cast<size_t>(ds)) << ", want " << hex(want.data(), want.size());
  }
  // Nothing written outside the destination elements.
  for (int64_t b = 0; b < static_cast<int64_t>(dst.size()); ++b) {
    const int64_t rel = b - ds;
    const bool inside = rel >= 0 && rel / ds < n * abs_dst && (rel / ds) % abs_dst == 0;
    if (!inside) ASSERT_EQ(dst[static_cast<size_t>(b)], kGuard) << "byte " << b << " written";
  }
}

void check_all_pairs() {
  for (DType st : kAllDTypes) {
    const Bytes elems = interesting_elements(st);
    for (DType dt : kAllDTypes) {
      check_layout(st, dt, elems, 1, 1);
      check_layout(st, dt, elems, 2, 3);
      check_layout(st, dt, elems, -1, 1);
      check_layout(st, dt, elems, 3, -2);
      check_layout(st, dt, elems, 0, 1);
      check_layout(st, dt, elems, 0, 2);
    }
  }
}

// Runs `body` once per Highway target that the SIMD paths were compiled for and this
// CPU supports, with dispatch pinned to it.
template <typename Body>
void for_each_target(Body body) {
  simd_targets::for_each(cpu::cast_simd_targets(), body);
}

TEST(CastAllPairs, InterestingValuesInEveryLayout) { check_all_pairs(); }

TEST(CastAllPairs, InterestingValuesOnEachTarget) { for_each_target(check_all_pairs); }

// A few results pinned by value, so the reference above is not the only witness.
TEST(CastPinned, FloatToInteger) {
  auto to = [](DType dt, double x, auto want) {
    decltype(want) got{};
    cpu::cast_strided(DType::Float64, &x, 8, dt, &got, sizeof(got), 1);
    EXPECT_EQ(got, want) << x << " -> " << kiln::dtype_name(dt);
  };
  to(DType::UInt8, -1.0, uint8_t{255});
  to(DType::UInt8, 300.0, uint8_t{44});
  to(DType::Int32, 2.7, int32_t{2});
  to(DType::Int32, -2.7, int32_t{-2});
  to(DType::Int32, kNan, int32_t{0});
  to(DType::Int32, 3e9, int32_t{-1294967296});
  to(DType::Int64, 1e20, INT64_MAX);
  to(DType::Int64, -1e20, INT64_MIN);
  to(DType::Int64, kInf, INT64_MAX);
  to(DType::UInt64, 1.8e19, uint64_t{18000000000000000000u});
  to(DType::UInt64, 1e20, UINT64_MAX);
  to(DType::UInt64, -1.0, UINT64_MAX);
  to(DType::Bool, kNan, uint8_t{1});
  to(DType::Bool, -0.0, uint8_t{0});
  to(DType::Bool, 0.1, uint8_t{1});
}

TEST(CastPinned, ComplexAndBool) {
  const std::complex<float> c(0.0f, 2.0f);
  uint8_t b = 7;
  cpu::cast_strided(DType::Complex64, &c, 8, DType::Bool, &b, 1, 1);
  EXPECT_EQ(b, 1);
  float re = 1;
  cpu::cast_strided(DType::Complex64, &c, 8, DType::Float32, &re, 4, 1);
  EXPECT_EQ(re, 0.0f);
  const uint8_t t = 1;
  std::complex<double> z(5, 5);
  cpu::cast_strided(DType::Bool, &t, 1, DType::Complex128, &z, 16, 1);
  EXPECT_EQ(z, std::complex<double>(1, 0));
  const int64_t big = (int64_t{1} << 53) + 1;
  float f = 0;
  cpu::cast_strided(DType::Int64, &big, 8, DType::Float32, &f, 4, 1);
  EXPECT_EQ(f, 0x1p53f);
  // Float8 saturation survives the trip from float64 through float32.
  const double over = 1e10;
  uint8_t e4m3 = 0;
  cpu::cast_strided(DType::Float64, &over, 8, DType::Float8_e4m3fn, &e4m3, 1, 1);
  EXPECT_EQ(e4m3, 0x7E);
}

TEST(CastPinned, SameDtypeCopiesBits) {
  const uint16_t signalling_nan[3] = {0x7C01, 0x7C01, 0x7C01};
  uint16_t out[3] = {};
  cpu::cast_strided(DType::Float16, signalling_nan, 2, DType::Float16, out, 2, 3);
  EXPECT_EQ(out[2], 0x7C01);
  cpu::cast_strided(DType::Float16, signalling_nan, 0, DType::Float16, out, 2, 3);
  EXPECT_EQ(out[1], 0x7C01);
}

// ---- SIMD paths against the scalar conversions of kiln/scalar_types.h ----

std::vector<uint16_t> all_u16_codes() {
  std::vector<uint16_t> v(65536);
  for (uint32_t c = 0; c < 65536; ++c) v[c] = static_cast<uint16_t>(c);
  return v;
}

// Floats that probe every rounding decision of a narrow format: each code's value,
// its float neighbours, the midpoints between adjacent codes and their neighbours.
void add_boundaries(std::vector<float>& out, const std::vector<float>& decoded) {
  for (size_t c = 0; c < decoded.size(); ++c) {
    const float x = decoded[c];
    out.insert(out.end(), {x, std::nextafter(x, -INFINITY), std::nextafter(x, INFINITY)});
    if (c + 1 < decoded.size() && std::isfinite(x) && std::isfinite(decoded[c + 1])) {
      const float mid = static_cast<float>((static_cast<double>(x) + decoded[c + 1]) / 2);
      out.insert(out.end(), {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)});
    }
  }
}

std::vector<float> probe_floats() {
  std::vector<float> out;
  std::vector<float> decoded;
  for (uint32_t c = 0; c < 65536; ++c) decoded.push_back(kiln::half_bits_to_float(static_cast<uint16_t>(c)));
  add_boundaries(out, decoded);
  decoded.clear();
  for (uint32_t c = 0; c < 65536; ++c) decoded.push_back(kiln::bf16_bits_to_float(static_cast<uint16_t>(c)));
  add_boundaries(out, decoded);
  decoded.clear();
  for (uint32_t c = 0; c < 256; ++c) decoded.push_back(kiln::fp8_e4m3fn_bits_to_float(static_cast<uint8_t>(c)));
  add_boundaries(out, decoded);
  decoded.clear();
  for (uint32_t c = 0; c < 256; ++c) decoded.push_back(kiln::fp8_e5m2_bits_to_float(static_cast<uint8_t>(c)));
  add_boundaries(out, decoded);
  for (uint32_t bits : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7FBFFFFFu, 0xFFFFFFFFu, 0x7F802000u, 0x00000001u,
                        0x807FFFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu})
    out.push_back(std::bit_cast<float>(bits));
  out.insert(out.end(), {464.0f, 480.0f, 1e30f, -1e30f, 65520.0f, 61440.0f, INFINITY, -INFINITY});
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> near(-600.0f, 600.0f), wide(-70000.0f, 70000.0f), exponent(-40.0f, 20.0f);
  for (int k = 0; k < 100000; ++k) {
    out.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
    out.push_back(near(rng));
    out.push_back(wide(rng));
    out.push_back(std::exp2(exponent(rng)) * (k % 2 ? -1.0f : 1.0f));
  }
  return out;
}

template <typename T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  size_t failures = 0;
  for (size_t i = 0; i < got.size() && failures < 10; ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      ++failures;
      ADD_FAILURE() << what << " element " << i << ": got " << hex(reinterpret_cast<const uint8_t*>(&got[i]), sizeof(T))
                    << ", want " << hex(reinterpret_cast<const uint8_t*>(&want[i]), sizeof(T));
    }
  }
}

TEST(CastSimd, DecodeEveryCodeOnEachTarget) {
  const std::vector<uint16_t> codes16 = all_u16_codes();
  std::vector<uint8_t> codes8;
  for (int rep = 0; rep < 3; ++rep)
    for (uint32_t c = 0; c < 256; ++c) codes8.push_back(static_cast<uint8_t>(c));
  for_each_target([&] {
    std::vector<float> got(codes16.size()), want(codes16.size());
    cpu::to_f32(DType::Float16, codes16.data(), got.data(), 65536);
    for (size_t i = 0; i < codes16.size(); ++i) want[i] = kiln::half_bits_to_float(codes16[i]);
    expect_same_bits(got, want, "f16 -> f32");
    cpu::to_f32(DType::BFloat16, codes16.data(), got.data(), 65536);
    for (size_t i = 0; i < codes16.size(); ++i) want[i] = kiln::bf16_bits_to_float(codes16[i]);
    expect_same_bits(got, want, "bf16 -> f32");

    got.assign(codes8.size(), 0.0f);
    want.assign(codes8.size(), 0.0f);
    cpu::to_f32(DType::Float8_e4m3fn, codes8.data(), got.data(), static_cast<int64_t>(codes8.size()));
    for (size_t i = 0; i < codes8.size(); ++i) want[i] = kiln::fp8_e4m3fn_bits_to_float(codes8[i]);
    expect_same_bits(got, want, "e4m3fn -> f32");
    cpu::to_f32(DType::Float8_e5m2, codes8.data(), got.data(), static_cast<int64_t>(codes8.size()));
    for (size_t i = 0; i < codes8.size(); ++i) want[i] = kiln::fp8_e5m2_bits_to_float(codes8[i]);
    expect_same_bits(got, want, "e5m2 -> f32");
  });
}

template <typename T, typename Scalar>
void check_encode(const std::vector<float>& in, DType dt, Scalar scalar, const char* what) {
  std::vector<T> got(in.size()), want(in.size());
  cpu::from_f32(in.data(), dt, got.data(), static_cast<int64_t>(in.size()));
  for (size_t i = 0; i < in.size(); ++i) want[i] = scalar(in[i]);
  expect_same_bits(got, want, what);
}

TEST(CastSimd, EncodeBoundariesAndRandomFloatsOnEachTarget) {
  const std::vector<float> in = probe_floats();
  for_each_target([&] {
    check_encode<uint16_t>(in, DType::Float16, kiln::float_to_half_bits, "f32 -> f16");
    check_encode<uint16_t>(in, DType::BFloat16, kiln::float_to_bf16_bits, "f32 -> bf16");
    check_encode<uint8_t>(in, DType::Float8_e4m3fn, kiln::float_to_fp8_e4m3fn_bits, "f32 -> e4m3fn");
    check_encode<uint8_t>(in, DType::Float8_e5m2, kiln::float_to_fp8_e5m2_bits, "f32 -> e5m2");
    check_encode<double>(
        in, DType::Float64, [](float x) { return static_cast<double>(x); }, "f32 -> f64");
  });
}

TEST(CastSimd, DoubleToFloatOnEachTarget) {
  std::vector<double> in = {0.0,
                            -0.0,
                            1e300,
                            -1e300,
                            kInf,
                            -kInf,
                            kNan,
                            -kNan,
                            1e-300,
                            0x1p-149,
                            0x1p-150,
                            0x1.8p-150,
                            3.4028235677973366e38,
                            3.4028235677973362e38,
                            std::numeric_limits<double>::denorm_min(),
                            std::bit_cast<double>(0x7FF0000000000001ull)};
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> near(-1e6, 1e6);
  for (int k = 0; k < 100000; ++k) {
    in.push_back(std::bit_cast<double>(rng()));
    in.push_back(near(rng));
    // Halfway between two floats: a tie that must go to even.
    const float f = static_cast<float>(near(rng));
    in.push_back((static_cast<double>(f) + std::nextafter(f, INFINITY)) / 2);
  }
  for_each_target([&] {
    std::vector<float> got(in.size()), want(in.size());
    cpu::to_f32(DType::Float64, in.data(), got.data(), static_cast<int64_t>(in.size()));
    for (size_t i = 0; i < in.size(); ++i) want[i] = static_cast<float>(in[i]);
    expect_same_bits(got, want, "f64 -> f32");
  });
}

// Every contiguous pair among the SIMD dtypes (direct, or chained through float32) at
// sizes around each vector width, from a misaligned source into a guarded buffer.
TEST(CastSimd, SizesAndMisalignmentOnEachTarget) {
  const int64_t sizes[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 1031};
  for_each_target([&] {
    for (DType st : kSimdDTypes) {
      const int64_t ss = static_cast<int64_t>(kiln::itemsize(st));
      const Bytes elems = interesting_elements(st);
      const int64_t count = static_cast<int64_t>(elems.size()) / ss;
      for (DType dt : kSimdDTypes) {
        const int64_t ds = static_cast<int64_t>(kiln::itemsize(dt));
        for (int64_t n : sizes) {
          // Offset by one element from the allocation, so the data is not vector-aligned.
          Bytes src(static_cast<size_t>((n + 1) * ss));
          for (int64_t i = 0; i < n; ++i)
            std::memcpy(src.data() + (i + 1) * ss, elems.data() + ((i * 5) % count) * ss, static_cast<size_t>(ss));
          Bytes dst(static_cast<size_t>((n + 2) * ds), 0xA5);
          cpu::cast_strided(st, src.data() + ss, ss, dt, dst.data() + ds, ds, n);
          for (int64_t i = 0; i < n; ++i) {
            const Bytes want = expected(dt, decode(st, src.data() + (i + 1) * ss));
            ASSERT_TRUE(same_element(dt, dst.data() + (i + 1) * ds, want.data()))
                << kiln::dtype_name(st) << " -> " << kiln::dtype_name(dt) << " n " << n << " element " << i;
          }
          for (int64_t b = 0; b < ds; ++b) {
            ASSERT_EQ(dst[static_cast<size_t>(b)], 0xA5) << "wrote before the output, n " << n;
            ASSERT_EQ(dst[static_cast<size_t>((n + 1) * ds + b)], 0xA5) << "wrote past the output, n " << n;
          }
        }
      }
    }
  });
}

TEST(CastSimd, ToAndFromF32ForOtherDtypes) {
  const int32_t ints[3] = {-7, 0, 1 << 30};
  float f[3];
  cpu::to_f32(DType::Int32, ints, f, 3);
  EXPECT_EQ(f[0], -7.0f);
  EXPECT_EQ(f[2], 0x1p30f);
  const float g[3] = {-1.0f, 0.0f, 300.5f};
  uint8_t u[3];
  cpu::from_f32(g, DType::UInt8, u, 3);
  EXPECT_EQ(u[0], 255);
  EXPECT_EQ(u[1], 0);
  EXPECT_EQ(u[2], 44);
}

}  // namespace
