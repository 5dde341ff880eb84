// Backward formulas of the elementwise ops (PyTorch's derivatives.yaml, same names).
// Broadcast inputs get the broadcast gradient; the engine sums it back to their shape.
#include <cmath>
#include <numbers>

#include "autograd/formula_util.h"
#include "autograd/function.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "ops/autograd_hooks.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;
using C = BackwardContext;

Scalar conj_scalar(const Scalar& s) { return s.is_complex() ? Scalar(std::conj(s.to_complex())) : s; }
Scalar negated(const Scalar& s) { return s.is_complex() ? Scalar(-s.to_complex()) : Scalar(-s.to_double()); }
bool is_one(const Scalar& s) { return !s.is_complex() && !s.is_bool() && s.to_double() == 1.0; }

// A one-input op whose backward reads its input or its output: only that one is saved
// (as PyTorch's formulas do), so an in-place change of the other does not invalidate
// the backward. The backward gets an undefined tensor for the one not saved.
enum class Reads { Input, Output };
template <typename Fwd, typename Bwd>
Tensor unary(const char* name, const Tensor& x, Fwd fwd, Bwd bwd, Reads reads) {
  Tensor y = below_autograd([&] { return fwd(x); });
  if (reads == Reads::Input) {
    return record(name, {x}, y, {Save::input(x)}, [bwd](C& c) { return Grads{bwd(c.grad(), c.saved[0], Tensor())}; });
  }
  return record(name, {x}, y, {Save::out(0)}, [bwd](C& c) { return Grads{bwd(c.grad(), Tensor(), c.saved[0])}; });
}

Tensor zero_grad_unary(const char* name, const Tensor& x, Tensor (*fwd)(const Tensor&)) {
  Tensor y = below_autograd([&] { return fwd(x); });
  return record(name, {x}, y, {}, [](C& c) { return Grads{zeros_of(c.grad())}; });
}

// ---------------------------------------------------------------- arithmetic

Tensor add_entry(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  Tensor y = below_autograd([&] { return add(a, b, alpha); });
  return record("AddBackward0", {a, b}, y, {}, [alpha](C& c) {
    return Grads{c.grad(), is_one(alpha) ? c.grad() : mul(c.grad(), conj_scalar(alpha))};
  });
}
Tensor add_scalar_entry(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  Tensor y = below_autograd([&] { return add(a, b, alpha); });
  return record("AddBackward1", {a}, y, {}, [](C& c) { return Grads{c.grad()}; });
}
Tensor sub_entry(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  Tensor y = below_autograd([&] { return sub(a, b, alpha); });
  return record("SubBackward0", {a, b}, y, {}, [alpha](C& c) {
    return Grads{c.grad(), is_one(alpha) ? neg(c.grad()) : mul(c.grad(), conj_scalar(negated(alpha)))};
  });
}
Tensor sub_scalar_entry(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  Tensor y = below_autograd([&] { return sub(a, b, alpha); });
  return record("SubBackward1", {a}, y, {}, [](C& c) { return Grads{c.grad()}; });
}
Tensor mul_entry(const Tensor& a, const Tensor& b) {
  Tensor y = below_autograd([&] { return mul(a, b); });
  return record("MulBackward0", {a, b}, y, {Save::input(a), Save::input(b)}, [](C& c) {
    return Grads{c.needs[0] ? mul_conj(c.grad(), c.saved[1]) : Tensor(),
                 c.needs[1] ? mul_conj(c.grad(), c.saved[0]) : Tensor()};
  });
}
Tensor mul_scalar_entry(const Tensor& a, const Scalar& b) {
  Tensor y = below_autograd([&] { return mul(a, b); });
  return record("MulBackward1", {a}, y, {}, [b](C& c) { return Grads{mul(c.grad(), conj_scalar(b))}; });
}
Tensor div_entry(const Tensor& a, const Tensor& b, std::optional<std::string_view> mode) {
  Tensor y = below_autograd([&] { return div(a, b, mode); });
  if (mode) return record("DivBackward1", {a, b}, y, {}, [](C& c) { return Grads{Tensor(), Tensor()}; });
  return record("DivBackward0", {a, b}, y, {Save::input(b), Save::out(0)}, [](C& c) {
    Tensor ga = div(c.grad(), conj(c.saved[0]));
    return Grads{ga, c.needs[1] ? neg(mul_conj(ga, c.saved[1])) : Tensor()};
  });
}
Tensor div_scalar_entry(const Tensor& a, const Scalar& b, std::optional<std::string_view> mode) {
  Tensor y = below_autograd([&] { return div(a, b, mode); });
  if (mode) return record("DivBackward3", {a}, y, {}, [](C& c) { return Grads{zeros_of(c.grad())}; });
  return record("DivBackward2", {a}, y, {}, [b](C& c) { return Grads{div(c.grad(), conj_scalar(b))}; });
}
Tensor remainder_entry(const Tensor& a, const Tensor& b) {
  Tensor y = below_autograd([&] { return remainder(a, b); });
  return record("RemainderBackward0", {a, b}, y, {Save::input(a), Save::input(b)}, [](C& c) {
    return Grads{c.grad(), c.needs[1] ? neg(mul(c.grad(), div(c.saved[0], c.saved[1], "floor"))) : Tensor()};
  });
}
Tensor remainder_scalar_entry(const Tensor& a, const Scalar& b) {
  Tensor y = below_autograd([&] { return remainder(a, b); });
  return record("RemainderBackward1", {a}, y, {}, [](C& c) { return Grads{c.grad()}; });
}
Tensor remainder_scalar_tensor_entry(const Scalar& a, const Tensor& b) {
  Tensor y = below_autograd([&] { return remainder(a, b); });
  return record("RemainderBackward2", {b}, y, {Save::input(b)}, [a](C& c) {
    return Grads{neg(mul(c.grad(), div(full_like(c.saved[0], a), c.saved[0], "floor")))};
  });
}

// d/da a^b = b a^(b-1); d/db a^b = a^b log(a), taken as 0 where a == 0 and b >= 0 (PyTorch).
Tensor pow_exponent_grad(const Tensor& g, const Tensor& base, const Tensor& exponent, const Tensor& out) {
  Tensor d = mul(out, log(base));
  if (!is_complex(d.dtype())) d = where(logical_and(eq(base, Scalar(0.0)), ge(exponent, Scalar(0.0))), Scalar(0.0), d);
  return mul_conj(g, d);
}
Tensor pow_entry(const Tensor& a, const Tensor& b) {
  Tensor y = below_autograd([&] { return pow(a, b); });
  return record("PowBackward1", {a, b}, y, {Save::input(a), Save::input(b), Save::out(0)}, [](C& c) {
    const Tensor &base = c.saved[0], &e = c.saved[1];
    Tensor ga = c.needs[0] ? mul_conj(c.grad(), mul(e, pow(base, sub(e, Scalar(1.0))))) : Tensor();
    Tensor gb = c.needs[1] ? pow_exponent_grad(c.grad(), base, e, c.saved[2]) : Tensor();
    return Grads{ga, gb};
  });
}
Tensor pow_scalar_entry(const Tensor& a, const Scalar& e) {
  Tensor y = below_autograd([&] { return pow(a, e); });
  return record("PowBackward0", {a}, y, {Save::input(a)}, [e](C& c) {
    if (!e.is_complex() && e.to_double() == 0.0) return Grads{zeros_of(c.grad())};
    const Scalar e_minus_1 = e.is_complex() ? Scalar(e.to_complex() - 1.0) : Scalar(e.to_double() - 1.0);
    return Grads{mul_conj(c.grad(), mul(pow(c.saved[0], e_minus_1), e))};
  });
}
Tensor pow_scalar_base_entry(const Scalar& base, const Tensor& e) {
  Tensor y = below_autograd([&] { return pow(base, e); });
  return record("PowBackward2", {e}, y, {Save::input(e), Save::out(0)}, [base](C& c) {
    return Grads{pow_exponent_grad(c.grad(), full_like(c.saved[0], base), c.saved[0], c.saved[1])};
  });
}

// Ties split the gradient evenly, as PyTorch's maximum/minimum backward.
Tensor extremum_entry(const char* name, const Tensor& a, const Tensor& b, bool is_max) {
  Tensor y = below_autograd([&] { return is_max ? maximum(a, b) : minimum(a, b); });
  return record(name, {a, b}, y, {Save::input(a), Save::input(b)}, [is_max](C& c) {
    const Tensor &x = c.saved[0], &z = c.saved[1];
    const DType dt = c.grad().dtype();
    Tensor wins = (is_max ? gt(x, z) : lt(x, z)).to(dt);
    Tensor share = add(wins, mul(eq(x, z).to(dt), Scalar(0.5)));
    return Grads{mul(c.grad(), share), mul(c.grad(), sub(ones_like(share), share))};
  });
}
Tensor maximum_entry(const Tensor& a, const Tensor& b) { return extremum_entry("MaximumBackward0", a, b, true); }
Tensor minimum_entry(const Tensor& a, const Tensor& b) { return extremum_entry("MinimumBackward0", a, b, false); }
Tensor atan2_entry(const Tensor& a, const Tensor& b) {
  Tensor y = below_autograd([&] { return atan2(a, b); });
  return record("Atan2Backward0", {a, b}, y, {Save::input(a), Save::input(b)}, [](C& c) {
    const Tensor &x = c.saved[0], &z = c.saved[1];
    Tensor r = add(mul(x, x), mul(z, z));
    return Grads{mul(c.grad(), div(z, r)), mul(c.grad(), div(neg(x), r))};
  });
}

// ---------------------------------------------------------------- unary

Tensor sgn(const Tensor& x) {
  if (!is_complex(x.dtype())) return sign(x);
  Tensor a = abs(x);
  return where(eq(a, Scalar(0.0)), Scalar(0.0), div(x, a));
}

Tensor abs_entry(const Tensor& x) {
  return unary("AbsBackward0", x, [](const Tensor& t) { return abs(t); },
               [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, sgn(x)); }, Reads::Input);
}
Tensor neg_entry(const Tensor& x) {
  Tensor y = below_autograd([&] { return neg(x); });
  return record("NegBackward0", {x}, y, {}, [](C& c) { return Grads{neg(c.grad())}; });
}
Tensor square_entry(const Tensor& x) {
  return unary("PowBackward0", x, [](const Tensor& t) { return square(t); },
               [](const Tensor& g, const Tensor& x, const Tensor&) { return mul_conj(g, mul(x, Scalar(2.0))); },
               Reads::Input);
}
Tensor exp_entry(const Tensor& x) {
  return unary("ExpBackward0", x, [](const Tensor& t) { return exp(t); },
               [](const Tensor& g, const Tensor&, const Tensor& y) { return mul_conj(g, y); }, Reads::Output);
}
Tensor exp2_entry(const Tensor& x) {
  return unary("Exp2Backward0", x, [](const Tensor& t) { return exp2(t); },
               [](const Tensor& g, const Tensor&, const Tensor& y) { return mul(g, mul(y, Scalar(std::numbers::ln2))); },
               Reads::Output);
}
Tensor expm1_entry(const Tensor& x) {
  return unary("Expm1Backward0", x, [](const Tensor& t) { return expm1(t); },
               [](const Tensor& g, const Tensor&, const Tensor& y) { return mul_conj(g, add(y, Scalar(1.0))); },
               Reads::Output);
}
Tensor log_entry(const Tensor& x) {
  return unary("LogBackward0", x, [](const Tensor& t) { return log(t); },
               [](const Tensor& g, const Tensor& x, const Tensor&) { return div(g, conj(x)); }, Reads::Input);
}
Tensor log2_entry(const Tensor& x) {
  return unary("Log2Backward0", x, [](const Tensor& t) { return log2(t); },
               [](const Tensor& g, const Tensor& x, const Tensor&) { return div(g, mul(x, Scalar(std::numbers::ln2))); },
               Reads::Input);
}
Tensor log1p_entry(const Tensor& x) {
  return unary("Log1PBackward0", x, [](const Tensor& t) { return log1p(t); },
               [](const Tensor& g, const Tensor& x, const Tensor&) { return div(g, add(x, Scalar(1.0))); },
               Reads::Input);
}
Tensor sqrt_entry(const Tensor& x) {
  return unary("SqrtBackward0", x, [](const Tensor& t) { return sqrt(t); },
               [](const Tensor& g, const Tensor&, const Tensor& y) { return div(g, mul(conj(y), Scalar(2.0))); },
               Reads::Output);
}
Tensor rsqrt_entry(const Tensor& x) {
  return unary("RsqrtBackward0", x, [](const Tensor& t) { return rsqrt(t); },
               [](const Tensor& g, const Tensor&, const Tensor& y) {
                 return mul_conj(g, mul(pow(y, Scalar(3.0)), Scalar(-0.5)));
               }, Reads::Output);
}
Tensor reciprocal_entry(const Tensor& x) {
  return unary("ReciprocalBackward0", x, [](const Tensor& t) { return reciprocal(t); },
               [](const Tensor& g, const Tensor&, const Tensor& y) { return neg(mul_conj(g, mul(y, y))); },
               Reads::Output);
}
Tensor sin_entry(const Tensor& x) {
  return unary("SinBackward0", x, [](const Tensor& t) { return sin(t); },
               [](const Tensor& g, const Tensor& x, const Tensor&) { return mul_conj(g, cos(x)); }, Reads::Input);
}
Tensor cos_entry(const Tensor& x) {
  return unary("CosBackward0", x, [](const Tensor& t) { return cos(t); },
               [](const Tensor& g, const Tensor& x, const Tensor&) { return neg(mul_conj(g, sin(x))); }, Reads::Input);
}
Tensor tanh_entry(const Tensor& x) {
  return unary("TanhBackward0", x, [](const Tensor& t) { return tanh(t); },
               [](const Tensor& g, const Tensor&, const Tensor& y) {
                 return mul_conj(g, sub(ones_like(y), mul(y, y)));
               }, Reads::Output);
}
Tensor sigmoid_entry(const Tensor& x) {
  return unary("SigmoidBackward0", x, [](const Tensor& t) { return sigmoid(t); },
               [](const Tensor& g, const Tensor&, const Tensor& y) {
                 return mul_conj(g, mul(y, sub(ones_like(y), y)));
               }, Reads::Output);
}
Tensor silu_entry(const Tensor& x) {
  return unary("SiluBackward0", x, [](const Tensor& t) { return silu(t); },
               [](const Tensor& g, const Tensor& x, const Tensor&) {
                 Tensor s = sigmoid(x);
                 return mul(g, mul(s, add(mul(x, sub(ones_like(s), s)), Scalar(1.0))));
               }, Reads::Input);
}
Tensor relu_entry(const Tensor& x) {
  return unary("ReluBackward0", x, [](const Tensor& t) { return relu(t); },
               [](const Tensor& g, const Tensor&, const Tensor& y) { return mul(g, gt(y, Scalar(0)).to(g.dtype())); },
               Reads::Output);
}

// gelu's derivative Phi(x) + x phi(x). kiln has no erf, so Phi is read off the forward:
// Phi(x) = gelu(x) / x (1/2 at 0), exact to rounding wherever gelu(x) does not underflow.
Tensor gelu_entry(const Tensor& x, std::string_view approximate) {
  const bool tanh_form = approximate == "tanh";
  Tensor y = below_autograd([&] { return gelu(x, approximate); });
  return record("GeluBackward0", {x}, y, {Save::input(x), Save::out(0)}, [tanh_form](C& c) {
    const Tensor &x = c.saved[0], &y = c.saved[1];
    if (tanh_form) {
      constexpr double k = 0.7978845608028654;  // sqrt(2 / pi)
      constexpr double a = 0.044715;
      Tensor x2 = mul(x, x);
      Tensor t = tanh(mul(add(x, mul(mul(x2, x), Scalar(a))), Scalar(k)));
      Tensor dt = mul(sub(ones_like(t), mul(t, t)), mul(add(mul(x2, Scalar(3 * a)), Scalar(1.0)), Scalar(k)));
      Tensor d = add(mul(add(t, Scalar(1.0)), Scalar(0.5)), mul(mul(x, dt), Scalar(0.5)));
      return Grads{mul(c.grad(), d)};
    }
    const double inv_sqrt_2pi = 0.3989422804014327;
    Tensor is_zero = eq(x, Scalar(0.0));
    Tensor phi_cdf = where(is_zero, Scalar(0.5), div(y, where(is_zero, Scalar(1.0), x)));
    Tensor pdf = mul(exp(mul(mul(x, x), Scalar(-0.5))), Scalar(inv_sqrt_2pi));
    return Grads{mul(c.grad(), add(phi_cdf, mul(x, pdf)))};
  });
}
Tensor softplus_entry(const Tensor& x, const Scalar& beta, const Scalar& threshold) {
  Tensor y = below_autograd([&] { return softplus(x, beta, threshold); });
  return record("SoftplusBackward0", {x}, y, {Save::input(x)}, [beta, threshold](C& c) {
    Tensor bx = mul(c.saved[0], beta);
    Tensor d = where(gt(bx, threshold), Scalar(1.0), sigmoid(bx));
    return Grads{mul(c.grad(), d)};
  });
}

// ---------------------------------------------------------------- selection

Tensor where_entry(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Tensor y = below_autograd([&] { return where(cond, a, b); });
  return record("WhereBackward0", {a, b}, y, {Save::input(cond)}, [](C& c) {
    return Grads{where(c.saved[0], c.grad(), Scalar(0.0)), where(c.saved[0], Scalar(0.0), c.grad())};
  });
}
Tensor where_scalar_other_entry(const Tensor& cond, const Tensor& a, const Scalar& b) {
  Tensor y = below_autograd([&] { return where(cond, a, b); });
  return record("WhereBackward1", {a}, y, {Save::input(cond)},
                [](C& c) { return Grads{where(c.saved[0], c.grad(), Scalar(0.0))}; });
}
Tensor where_scalar_self_entry(const Tensor& cond, const Scalar& a, const Tensor& b) {
  Tensor y = below_autograd([&] { return where(cond, a, b); });
  return record("WhereBackward2", {b}, y, {Save::input(cond)},
                [](C& c) { return Grads{where(c.saved[0], Scalar(0.0), c.grad())}; });
}
Tensor masked_grad(const Tensor& g, const Tensor& keep) { return where(keep, g, Scalar(0.0)); }

Tensor clamp_scalar_entry(const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  Tensor y = below_autograd([&] { return clamp(x, lo, hi); });
  return record("ClampBackward1", {x}, y, {Save::input(x)}, [lo, hi](C& c) {
    const Tensor& x = c.saved[0];
    Tensor keep = lo ? ge(x, *lo) : ones(x.sizes(), DType::Bool);
    if (hi) keep = logical_and(keep, le(x, *hi));
    return Grads{masked_grad(c.grad(), keep)};
  });
}
Tensor clamp_entry(const Tensor& x, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
  Tensor y = below_autograd([&] { return clamp(x, lo, hi); });
  const Tensor lo_t = lo.value_or(Tensor()), hi_t = hi.value_or(Tensor());
  return record("ClampBackward0", {x, lo_t, hi_t}, y, {Save::input(x), Save::input(lo_t), Save::input(hi_t)},
                [](C& c) {
                  const Tensor &x = c.saved[0], &lo = c.saved[1], &hi = c.saved[2];
                  Tensor above_lo = lo.defined() ? ge(x, lo) : ones(x.sizes(), DType::Bool);
                  Tensor below_hi = hi.defined() ? le(x, hi) : ones(x.sizes(), DType::Bool);
                  Tensor gx = masked_grad(c.grad(), logical_and(above_lo, below_hi));
                  Tensor glo, ghi;
                  if (lo.defined()) {
                    Tensor wins = logical_not(above_lo);
                    if (hi.defined()) wins = logical_and(wins, le(lo, hi));
                    glo = masked_grad(c.grad(), wins);
                  }
                  if (hi.defined()) {
                    Tensor raised = lo.defined() ? maximum(x, lo) : x;
                    ghi = masked_grad(c.grad(), gt(raised, hi));
                  }
                  return Grads{gx, glo, ghi};
                });
}
Tensor masked_fill_scalar_entry(const Tensor& x, const Tensor& mask, const Scalar& v) {
  Tensor y = below_autograd([&] { return masked_fill(x, mask, v); });
  return record("MaskedFillBackward0", {x}, y, {Save::input(mask)},
                [](C& c) { return Grads{where(c.saved[0], Scalar(0.0), c.grad())}; });
}
Tensor masked_fill_entry(const Tensor& x, const Tensor& mask, const Tensor& v) {
  Tensor y = below_autograd([&] { return masked_fill(x, mask, v); });
  return record("MaskedFillBackward1", {x, v}, y, {Save::input(mask)}, [](C& c) {
    Tensor gv = c.needs[1] ? sum(where(c.saved[0], c.grad(), Scalar(0.0))) : Tensor();
    return Grads{where(c.saved[0], Scalar(0.0), c.grad()), gv};
  });
}

const bool installed = [] {
  auto& h = autograd_hooks::op_hooks();
  h.add = add_entry;
  h.add_scalar = add_scalar_entry;
  h.sub = sub_entry;
  h.sub_scalar = sub_scalar_entry;
  h.mul = mul_entry;
  h.mul_scalar = mul_scalar_entry;
  h.div = div_entry;
  h.div_scalar = div_scalar_entry;
  h.remainder = remainder_entry;
  h.remainder_scalar = remainder_scalar_entry;
  h.remainder_scalar_tensor = remainder_scalar_tensor_entry;
  h.pow = pow_entry;
  h.pow_scalar = pow_scalar_entry;
  h.pow_scalar_base = pow_scalar_base_entry;
  h.maximum = maximum_entry;
  h.minimum = minimum_entry;
  h.atan2 = atan2_entry;
  h.abs = abs_entry;
  h.neg = neg_entry;
  h.square = square_entry;
  h.exp = exp_entry;
  h.exp2 = exp2_entry;
  h.expm1 = expm1_entry;
  h.log = log_entry;
  h.log2 = log2_entry;
  h.log1p = log1p_entry;
  h.sqrt = sqrt_entry;
  h.rsqrt = rsqrt_entry;
  h.reciprocal = reciprocal_entry;
  h.sin = sin_entry;
  h.cos = cos_entry;
  h.tanh = tanh_entry;
  h.sigmoid = sigmoid_entry;
  h.silu = silu_entry;
  h.relu = relu_entry;
  h.sign = [](const Tensor& x) { return zero_grad_unary("SignBackward0", x, sign); };
  h.floor = [](const Tensor& x) { return zero_grad_unary("FloorBackward0", x, floor); };
  h.ceil = [](const Tensor& x) { return zero_grad_unary("CeilBackward0", x, ceil); };
  h.round = [](const Tensor& x) { return zero_grad_unary("RoundBackward0", x, round); };
  h.trunc = [](const Tensor& x) { return zero_grad_unary("TruncBackward0", x, trunc); };
  h.gelu = gelu_entry;
  h.softplus = softplus_entry;
  h.where = where_entry;
  h.where_scalar_other = where_scalar_other_entry;
  h.where_scalar_self = where_scalar_self_entry;
  h.clamp_scalar = clamp_scalar_entry;
  h.clamp = clamp_entry;
  h.masked_fill_scalar = masked_fill_scalar_entry;
  h.masked_fill = masked_fill_entry;
  return true;
}();

}  // namespace

}  // namespace kiln::autograd
