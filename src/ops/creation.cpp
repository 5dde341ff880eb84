#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"

#include <cmath>
#include <utility>
#include <cstdint>
#include <complex>
#include <cstring>
#include <limits>

#include "backend/random.h"
#include "core/scalar_convert.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/generator.h"

namespace kiln {

namespace {

// Each creation op allocates through these, so that a size that overflows or memory the
// system refuses is reported under the op's own name.
Tensor zeros_named(const Shape& sizes, DType dtype, const char* op) {
  Tensor t = Tensor::empty(sizes, dtype, kCPU, op);
  if (t.nbytes() > 0) std::memset(t.data_ptr(), 0, t.nbytes());  // all-zero bits is 0 in every dtype
  return t;
}

// `value` in `dtype` (its own promotion dtype by default) as a 0-dim tensor, after
// PyTorch's checked conversion: a value that does not fit (300 in uint8, 1e39 in
// float32, 1j in a real dtype) raises rather than wrapping or being truncated.
Tensor checked_scalar_tensor(const Scalar& value, std::optional<DType> dtype, const char* op) {
  const DType dt = dtype.value_or(value.promotion_dtype());
  check_scalar_converts(value, dt, op);
  // Stored in its widest natural dtype, then cast with the shared cast rules.
  return Tensor::from_scalar(value).to(dt);
}

Tensor full_named(const Shape& sizes, const Scalar& value, std::optional<DType> dtype, const char* op) {
  Tensor v = checked_scalar_tensor(value, dtype, op);
  Tensor t = Tensor::empty(sizes, v.dtype(), kCPU, op);
  t.copy_(v);
  return t;
}

}  // namespace

Tensor empty(const Shape& sizes, DType dtype) { return Tensor::empty(sizes, dtype); }
Tensor empty_like(const Tensor& t, std::optional<DType> dtype) {
  return Tensor::empty(t.sizes(), dtype.value_or(t.dtype()), kCPU, "empty_like");
}
Tensor zeros(const Shape& sizes, DType dtype) { return zeros_named(sizes, dtype, "zeros"); }
Tensor zeros_like(const Tensor& t, std::optional<DType> dtype) {
  return zeros_named(t.sizes(), dtype.value_or(t.dtype()), "zeros_like");
}
Tensor ones(const Shape& sizes, DType dtype) { return full_named(sizes, Scalar(int64_t{1}), dtype, "ones"); }
Tensor ones_like(const Tensor& t, std::optional<DType> dtype) {
  return full_named(t.sizes(), Scalar(int64_t{1}), dtype.value_or(t.dtype()), "ones_like");
}

Tensor scalar_tensor(const Scalar& value, std::optional<DType> dtype) {
  return checked_scalar_tensor(value, dtype, "scalar_tensor");
}

Tensor full(const Shape& sizes, const Scalar& value, std::optional<DType> dtype) {
  return full_named(sizes, value, dtype, "full");
}

Tensor full_like(const Tensor& t, const Scalar& value, std::optional<DType> dtype) {
  return full_named(t.sizes(), value, dtype.value_or(t.dtype()), "full_like");
}

Tensor arange(const Scalar& end, std::optional<DType> dtype) {
  return arange(Scalar(int64_t{0}), end, Scalar(int64_t{1}), dtype);
}

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, std::optional<DType> dtype) {
  for (const Scalar* s : {&start, &end, &step}) {
    KILN_CHECK_KIND(!s->is_complex(), Type, "arange", "complex arguments are not supported (got {})", s->str());
  }
  bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
  DType out_dtype = dtype.value_or(integral ? DType::Int64 : DType::Float32);
  double xstart = start.to_double(), xend = end.to_double(), xstep = step.to_double();
  KILN_CHECK(std::isfinite(xstart) && std::isfinite(xend), "arange", "unsupported range: {} -> {}",
             start.str(), end.str());
  KILN_CHECK(xstep != 0, "arange", "step must be nonzero");
  KILN_CHECK((xstep > 0 && xend >= xstart) || (xstep < 0 && xend <= xstart), "arange",
             "upper bound and larger bound inconsistent with step sign (start {}, end {}, step {})",
             start.str(), end.str(), step.str());
  // The element count, in arithmetic that cannot wrap: |end - start| may exceed int64
  // (it is exact in uint64), and a float count may exceed any integer.
  uint64_t count = 0;
  if (integral) {
    for (const Scalar* s : {&start, &end, &step}) {
      KILN_CHECK(s->tag() != Scalar::Tag::UInt || s->to_uint64() <= static_cast<uint64_t>(
                     std::numeric_limits<int64_t>::max()),
                 "arange", "integer arguments must fit in int64, got {}", s->str());
    }
    const int64_t a = start.to_int64(), b = end.to_int64(), s = step.to_int64();
    // Exact again: int64 values 1 apart may round to one double above.
    KILN_CHECK(s > 0 ? b >= a : b <= a, "arange",
               "upper bound and larger bound inconsistent with step sign (start {}, end {}, step {})", start.str(),
               end.str(), step.str());
    const uint64_t span = s > 0 ? static_cast<uint64_t>(b) - static_cast<uint64_t>(a)
                                : static_cast<uint64_t>(a) - static_cast<uint64_t>(b);
    const uint64_t stride = s > 0 ? static_cast<uint64_t>(s) : uint64_t{0} - static_cast<uint64_t>(s);
    count = span / stride + (span % stride != 0 ? 1 : 0);
  } else {
    const double size_d = std::ceil((xend - xstart) / xstep);
    count = size_d < 0x1p63 ? static_cast<uint64_t>(size_d) : std::numeric_limits<uint64_t>::max();
  }
  KILN_CHECK(count <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "arange",
             "invalid size, possible overflow? (start {}, end {}, step {} give more elements than int64 can count)",
             start.str(), end.str(), step.str());
  const auto n = static_cast<int64_t>(count);
  // Values are computed in int64 or float64 and cast once, as PyTorch's accumulate type.
  if (integral && !is_floating(out_dtype) && !is_complex(out_dtype)) {
    Tensor t = Tensor::empty({n}, DType::Int64, kCPU, "arange");
    // start + i * step wraps in between when the range spans more than int64 (from near
    // INT64_MIN to near INT64_MAX); modulo 2^64 the result is still exact.
    const auto a = static_cast<uint64_t>(start.to_int64()), s = static_cast<uint64_t>(step.to_int64());
    auto* p = t.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(a + static_cast<uint64_t>(i) * s);
    return t.to(out_dtype);
  }
  Tensor t = Tensor::empty({n}, DType::Float64, kCPU, "arange");
  auto* p = t.data<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = xstart + static_cast<double>(i) * xstep;
  return t.to(out_dtype);
}

Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, std::optional<DType> dtype) {
  KILN_CHECK(steps >= 0, "linspace", "number of steps must be non-negative, got {}", steps);
  DType out_dtype = dtype.value_or(DType::Float32);
  Tensor t = Tensor::empty({steps}, DType::Float64, kCPU, "linspace");
  auto* p = t.data<double>();
  double a = start.to_double(), b = end.to_double();
  if (steps == 1) p[0] = a;
  if (steps > 1) {
    // Symmetric evaluation (from both ends) keeps the last value exactly `end`.
    double step = (b - a) / static_cast<double>(steps - 1);
    int64_t half = steps / 2;
    for (int64_t i = 0; i < steps; ++i) {
      p[i] = i < half ? a + step * static_cast<double>(i) : b - step * static_cast<double>(steps - 1 - i);
    }
  }
  return t.to(out_dtype);
}

Tensor eye(int64_t n, std::optional<int64_t> m_opt, DType dtype) {
  int64_t m = m_opt.value_or(n);
  KILN_CHECK(n >= 0 && m >= 0, "eye", "n and m must be non-negative, got n={} m={}", n, m);
  Tensor t = zeros_named({n, m}, dtype, "eye");
  Tensor one = scalar_tensor(Scalar(int64_t{1}), dtype);
  int64_t k = std::min(n, m);
  // The diagonal as a strided view, filled by one broadcast copy.
  if (k > 0) t.as_strided({k}, {m + 1}, 0).copy_(one);
  return t;
}

namespace {

void check_random_dtype(DType dtype, const char* op) {
  KILN_CHECK_KIND(is_floating(dtype), Type, op, "expected a floating dtype, got {}", dtype_name(dtype));
}

// The significand bits (implicit bit included) of a narrow float: rand draws in them.
int significand_digits(DType dtype) {
  switch (dtype) {
    case DType::Float16: return 11;
    case DType::BFloat16: return 8;
    case DType::Float8_e4m3fn: return 4;
    case DType::Float8_e5m2: return 3;
    default: return 24;
  }
}

// Uniform float32 values in [0, 1) as multiples of 2^-digits of a narrow `dtype`, as
// PyTorch draws them for such dtypes: each converts to `dtype` exactly, where plain
// rounding would turn values just under 1 into 1.0 (0.9999 is 1.0 in bfloat16).
Tensor quantize_uniform(const Tensor& u, DType dtype) {
  const double scale = std::ldexp(1.0, significand_digits(dtype));
  return mul(floor(mul(u, Scalar(scale))), Scalar(1.0 / scale)).to(dtype);
}

}  // namespace

// The generator is the caller's, else the context's (default_generator() unless a
// ContextScope gave one).
Tensor rand(const Shape& sizes, DType dtype, Generator* gen) {
  check_random_dtype(dtype, "rand");
  const ExecutionContext ctx = current_context();
  Generator& g = gen ? *gen : ctx.generator();
  bool f64 = dtype == DType::Float64;
  // Allocated before the generator advances: bad sizes leave it untouched.
  Tensor t = Tensor::empty(sizes, f64 ? DType::Float64 : DType::Float32, kCPU, "rand");
  const int64_t n = t.numel();
  const auto kernel = backend::random_kernels.on(t.device(), "rand").uniform;
  kernel(ctx, {{g.seed(), g.advance(f64 ? backend::normal_blocks(n) : backend::uniform_blocks(n))}, t});
  return is_reduced_float(dtype) ? quantize_uniform(t, dtype) : t;
}

Tensor randn(const Shape& sizes, DType dtype, Generator* gen) {
  check_random_dtype(dtype, "randn");
  const ExecutionContext ctx = current_context();
  Generator& g = gen ? *gen : ctx.generator();
  Tensor t = Tensor::empty(sizes, dtype == DType::Float64 ? DType::Float64 : DType::Float32, kCPU, "randn");
  const backend::PhiloxKey key{g.seed(), g.advance(backend::normal_blocks(t.numel()))};
  const auto kernel = backend::random_kernels.on(t.device(), "randn").normal;
  kernel(ctx, {key, t});
  return t.to(dtype);
}

namespace {

// The integers a dtype holds exactly, as PyTorch's random_ bounds them: the integer
// range, or +-2^digits for a float (every integer up to there is representable).
std::pair<int64_t, int64_t> exact_integer_range(DType dtype) {
  switch (dtype) {
    case DType::UInt8: return {0, 255};
    case DType::Int8: return {-128, 127};
    case DType::Int16: return {-32768, 32767};
    case DType::UInt16: return {0, 65535};
    case DType::Int32: return {INT32_MIN, INT32_MAX};
    case DType::UInt32: return {0, UINT32_MAX};
    case DType::UInt64: return {0, INT64_MAX};  // the int64 arguments' own limit
    case DType::Float8_e5m2: return {-(int64_t{1} << 3), int64_t{1} << 3};
    case DType::Float8_e4m3fn: return {-(int64_t{1} << 4), int64_t{1} << 4};
    case DType::BFloat16: return {-(int64_t{1} << 8), int64_t{1} << 8};
    case DType::Float16: return {-(int64_t{1} << 11), int64_t{1} << 11};
    case DType::Float32: return {-(int64_t{1} << 24), int64_t{1} << 24};
    case DType::Float64: return {-(int64_t{1} << 53), int64_t{1} << 53};
    default: return {INT64_MIN, INT64_MAX};
  }
}

}  // namespace

Tensor randint(int64_t low, int64_t high, const Shape& sizes, DType dtype, Generator* gen) {
  KILN_CHECK(low < high, "randint", "random_ expects 'from' to be less than 'to', but got from={} >= to={}",
             low, high);
  KILN_CHECK_KIND(!is_complex(dtype) && dtype != DType::Bool, Type, "randint", "unsupported dtype {}",
                  dtype_name(dtype));
  // Values the dtype cannot hold would wrap or round into other values (PyTorch refuses).
  const auto [lowest, highest] = exact_integer_range(dtype);
  KILN_CHECK(low >= lowest && low <= highest, "randint", "from is out of bounds for {} (got {}, expected [{}, {}])",
             dtype_name(dtype), low, lowest, highest);
  KILN_CHECK(high - 1 >= lowest && high - 1 <= highest, "randint",
             "to - 1 is out of bounds for {} (got {}, expected [{}, {}])", dtype_name(dtype), high - 1, lowest,
             highest);
  const ExecutionContext ctx = current_context();
  Generator& g = gen ? *gen : ctx.generator();
  Tensor t = Tensor::empty(sizes, DType::Int64, kCPU, "randint");
  const int64_t n = t.numel();
  uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  const auto kernel = backend::random_kernels.on(t.device(), "randint").randint;
  kernel(ctx, {{g.seed(), g.advance(backend::randint_blocks(n))}, low, range, t});
  return t.to(dtype);
}

}  // namespace kiln
