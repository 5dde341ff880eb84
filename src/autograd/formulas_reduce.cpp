// Backward formulas of the reductions, cumsum, sort and topk.
#include <cmath>
#include <limits>

#include "autograd/formula_util.h"
#include "autograd/function.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/shape.h"
#include "ops/autograd_hooks.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;
using C = BackwardContext;

int64_t reduced_count(const Shape& sizes, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= sizes[d];
  return n;
}

Tensor sum_entry(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  Tensor y = below_autograd([&] { return sum(x, dims, keepdim, dtype); });
  const Shape in = x.sizes();
  const auto rd = reduced_dims(dims, x.dim());
  return record("SumBackward1", {x}, y, {}, [in, rd, keepdim](C& c) {
    return Grads{expand_reduced(c.grad(), in, rd, keepdim)};
  });
}

Tensor mean_entry(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  Tensor y = below_autograd([&] { return mean(x, dims, keepdim, dtype); });
  const Shape in = x.sizes();
  const auto rd = reduced_dims(dims, x.dim());
  const auto n = static_cast<double>(reduced_count(in, rd));
  return record("MeanBackward1", {x}, y, {}, [in, rd, keepdim, n](C& c) {
    return Grads{div(expand_reduced(c.grad(), in, rd, keepdim), Scalar(n))};
  });
}

// d prod / d x_i = the product of the other elements: out / x_i without zeros, the
// product of the nonzero elements at a lone zero, 0 with two or more zeros.
Tensor prod_entry(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  Tensor y = below_autograd([&] { return prod(x, dims, keepdim, dtype); });
  const Shape in = x.sizes();
  const auto rd = reduced_dims(dims, x.dim());
  return record("ProdBackward1", {x}, y, {Save::input(x), Save::out(0)}, [in, rd, keepdim](C& c) {
    const Tensor &x = c.saved[0], &out = c.saved[1];
    const DimList dl(rd.begin(), rd.end());
    Tensor is_zero = eq(x, Scalar(0.0));
    Tensor zero_count = expand_reduced(sum(is_zero.to(DType::Int64), dl, true), in, rd, true);
    Tensor others_nonzero = expand_reduced(prod(where(is_zero, Scalar(1.0), x), dl, true), in, rd, true);
    Tensor out_full = expand_reduced(out, in, rd, keepdim);
    Tensor safe_x = where(is_zero, Scalar(1.0), x);
    Tensor d = where(is_zero, where(eq(zero_count, Scalar(1)), others_nonzero, Scalar(0.0)), div(out_full, safe_x));
    return Grads{mul_conj(expand_reduced(c.grad(), in, rd, keepdim), d)};
  });
}

// amax/amin and the full max/min: the gradient is shared evenly among the elements
// equal to the result (PyTorch's evenly_distribute_backward).
Tensor extreme_entry(const char* name, const Tensor& x, const DimList& dims, bool keepdim, Tensor y) {
  const Shape in = x.sizes();
  const auto rd = reduced_dims(dims, x.dim());
  return record(name, {x}, y, {Save::input(x), Save::out(0)}, [in, rd, keepdim](C& c) {
    const DimList dl(rd.begin(), rd.end());
    Tensor hit = eq(c.saved[0], expand_reduced(c.saved[1], in, rd, keepdim)).to(c.grad().dtype());
    Tensor count = expand_reduced(sum(hit, dl, true), in, rd, true);
    return Grads{div(mul(expand_reduced(c.grad(), in, rd, keepdim), hit), count)};
  });
}
Tensor amax_entry(const Tensor& x, const DimList& dims, bool keepdim) {
  return extreme_entry("AmaxBackward0", x, dims, keepdim, below_autograd([&] { return amax(x, dims, keepdim); }));
}
Tensor amin_entry(const Tensor& x, const DimList& dims, bool keepdim) {
  return extreme_entry("AminBackward0", x, dims, keepdim, below_autograd([&] { return amin(x, dims, keepdim); }));
}
Tensor max_all_entry(const Tensor& x) {
  return extreme_entry("MaxBackward1", x, {}, false, below_autograd([&] { return max(x); }));
}
Tensor min_all_entry(const Tensor& x) {
  return extreme_entry("MinBackward1", x, {}, false, below_autograd([&] { return min(x); }));
}

// Values chosen by index (max/min along a dim, sort, topk): the gradient goes back to
// the chosen positions.
ValuesIndices record_selected(const char* name, const Tensor& x, ValuesIndices r, int64_t dim, bool keepdim) {
  const Shape in = x.sizes();
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), name);
  std::vector<Tensor*> outs{&r.values};
  record(name, {x}, outs, {Save::input(r.indices)}, [in, d, keepdim](C& c) {
    if (in.empty()) return Grads{c.grad().reshape(in)};
    Tensor idx = keepdim ? c.saved[0] : c.saved[0].unsqueeze(d);
    Tensor g = keepdim ? c.grad() : c.grad().unsqueeze(d);
    return Grads{scatter_add(zeros(in, g.dtype()), d, idx, g)};
  });
  return r;
}
ValuesIndices max_dim_entry(const Tensor& x, int64_t dim, bool keepdim) {
  return record_selected("MaxBackward0", x, below_autograd([&] { return max(x, dim, keepdim); }), dim, keepdim);
}
ValuesIndices min_dim_entry(const Tensor& x, int64_t dim, bool keepdim) {
  return record_selected("MinBackward0", x, below_autograd([&] { return min(x, dim, keepdim); }), dim, keepdim);
}
ValuesIndices sort_entry(const Tensor& x, int64_t dim, bool descending, bool stable) {
  return record_selected("SortBackward0", x, below_autograd([&] { return sort(x, dim, descending, stable); }), dim,
                         true);
}
ValuesIndices topk_entry(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  return record_selected("TopkBackward0", x, below_autograd([&] { return topk(x, k, dim, largest, sorted); }), dim,
                         true);
}

// var = sum |x - mean|^2 / (N - correction): d/dx = 2 (x - mean) / (N - correction).
Tensor var_grad(const Tensor& g, const Tensor& x, const Shape& in, const std::vector<int64_t>& rd, bool keepdim,
                double correction) {
  const DimList dl(rd.begin(), rd.end());
  const double n = static_cast<double>(reduced_count(in, rd));
  Tensor centred = sub(x, mean(x, dl, true));
  return mul(mul(expand_reduced(g, in, rd, keepdim), centred), Scalar(2.0 / std::max(0.0, n - correction)));
}
Tensor var_entry(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  Tensor y = below_autograd([&] { return var(x, dims, correction, keepdim); });
  const Shape in = x.sizes();
  const auto rd = reduced_dims(dims, x.dim());
  return record("VarBackward0", {x}, y, {Save::input(x)}, [in, rd, keepdim, correction](C& c) {
    return Grads{var_grad(c.grad(), c.saved[0], in, rd, keepdim, correction)};
  });
}
Tensor std_entry(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  Tensor y = below_autograd([&] { return kiln::std(x, dims, correction, keepdim); });
  const Shape in = x.sizes();
  const auto rd = reduced_dims(dims, x.dim());
  return record("StdBackward0", {x}, y, {Save::input(x), Save::out(0)}, [in, rd, keepdim, correction](C& c) {
    const Tensor& out = c.saved[1];
    // d std = d var / (2 std); PyTorch masks std == 0 to 0.
    Tensor scale = where(eq(out, Scalar(0.0)), Scalar(0.0), div(c.grad(), mul(out, Scalar(2.0))));
    return Grads{var_grad(scale, c.saved[0], in, rd, keepdim, correction)};
  });
}

// vector_norm: d||x||_p / dx = x |x|^(p-2) / ||x||^(p-1) (sgn(x) for p = 1, an even share
// of sgn(x) among the extreme elements for p = +-inf, 0 for p = 0).
Tensor norm_entry(const Tensor& x, double p, const DimList& dims, bool keepdim) {
  Tensor y = below_autograd([&] { return norm(x, p, dims, keepdim); });
  const Shape in = x.sizes();
  const auto rd = reduced_dims(dims, x.dim());
  return record("LinalgVectorNormBackward0", {x}, y, {Save::input(x), Save::out(0)}, [in, rd, keepdim, p](C& c) {
    const Tensor &x = c.saved[0], &out = c.saved[1];
    const DimList dl(rd.begin(), rd.end());
    Tensor g = expand_reduced(c.grad(), in, rd, keepdim);
    Tensor o = expand_reduced(out, in, rd, keepdim);
    Tensor a = abs(x);
    Tensor is_zero = eq(a, Scalar(0.0));
    Tensor unit = is_complex(x.dtype()) ? where(is_zero, Scalar(0.0), div(x, where(is_zero, Scalar(1.0), a)))
                                        : sign(x);
    if (p == 0.0) return Grads{zeros_of(x)};
    if (p == 1.0) return Grads{mul(g, unit)};
    if (std::isinf(p)) {
      Tensor hit = eq(a, o).to(g.dtype());
      Tensor count = expand_reduced(sum(hit, dl, true), in, rd, true);
      return Grads{mul(div(mul(g, hit), count), unit)};
    }
    Tensor safe_o = where(eq(o, Scalar(0.0)), Scalar(1.0), o);
    Tensor d = p == 2.0 ? div(x, safe_o)
                        : div(mul(unit, pow(a, Scalar(p - 1.0))), pow(safe_o, Scalar(p - 1.0)));
    d = where(eq(o, Scalar(0.0)), Scalar(0.0), d);
    return Grads{mul(g, d)};
  });
}

Tensor cumsum_entry(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  Tensor y = below_autograd([&] { return cumsum(x, dim, dtype); });
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), "cumsum");
  return record("CumsumBackward0", {x}, y, {}, [d](C& c) {
    if (c.grad().dim() == 0) return Grads{c.grad()};
    return Grads{flip(cumsum(flip(c.grad(), {d}), d), {d})};
  });
}

const bool installed = [] {
  auto& h = autograd_hooks::op_hooks();
  h.sum = sum_entry;
  h.mean = mean_entry;
  h.prod = prod_entry;
  h.amax = amax_entry;
  h.amin = amin_entry;
  h.max_all = max_all_entry;
  h.min_all = min_all_entry;
  h.max_dim = max_dim_entry;
  h.min_dim = min_dim_entry;
  h.sort = sort_entry;
  h.topk = topk_entry;
  h.var = var_entry;
  h.std = std_entry;
  h.norm = norm_entry;
  h.cumsum = cumsum_entry;
  return true;
}();

}  // namespace

}  // namespace kiln::autograd
