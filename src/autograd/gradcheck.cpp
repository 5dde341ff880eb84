// Gradient checking: the Jacobian from backward against central finite differences.
//
// Every tensor is treated as a vector of real numbers (a complex element is two: its
// real and imaginary parts). Row r of the Jacobian is the derivative of every real
// output coordinate with respect to real input coordinate r. Backward gives row
// entries through vector-Jacobian products: grad_output = 1 (or i) at one output
// element yields d(Re out_k) (or d(Im out_k)) / d(Re x) + i d/d(Im x), PyTorch's
// convention for complex gradients.
#include <cmath>
#include <complex>

#include <fmt/core.h>

#include "autograd/function.h"
#include "kiln/autograd.h"
#include "kiln/error.h"
#include "kiln/generator.h"
#include "kiln/ops/creation.h"

namespace kiln::autograd {

namespace {

using Matrix = std::vector<std::vector<double>>;  // [input coordinate][output coordinate]

int64_t real_count(const Tensor& t) { return t.numel() * (is_complex(t.dtype()) ? 2 : 1); }

// The values of t as real coordinates, in row-major element order.
std::vector<double> real_values(const Tensor& t) {
  std::vector<double> out;
  if (is_complex(t.dtype())) {
    const Tensor c = t.detach().to(DType::Complex128).contiguous();
    const auto* p = c.data<std::complex<double>>();
    for (int64_t i = 0; i < c.numel(); ++i) {
      out.push_back(p[i].real());
      out.push_back(p[i].imag());
    }
  } else {
    const Tensor c = t.detach().to(DType::Float64).contiguous();
    const auto* p = c.data<double>();
    out.assign(p, p + c.numel());
  }
  return out;
}

// The element of t at row-major position `flat`, as a 0-dim view (any strides).
Tensor element(const Tensor& t, int64_t flat) {
  Tensor e = t;
  std::vector<int64_t> index(t.dim());
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    index[d] = flat % t.size(d);
    flat /= t.size(d);
  }
  for (int64_t d = 0; d < t.dim(); ++d) e = e.select(0, index[d]);
  return e;
}

std::vector<Tensor> differentiable_outputs(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> out;
  for (const Tensor& t : outputs) {
    if (t.defined() && (is_floating(t.dtype()) || is_complex(t.dtype()))) out.push_back(t);
  }
  return out;
}

// Numerical Jacobian of every output with respect to input i, perturbing the input's
// own storage (so its strides are kept) and restoring it.
std::vector<Matrix> numerical(const Function& fn, const std::vector<Tensor>& inputs, size_t i,
                              const std::vector<int64_t>& out_counts, double eps) {
  NoGradGuard no_grad;
  const Tensor x = inputs[i].detach();
  const bool cplx = is_complex(x.dtype());
  std::vector<Matrix> jac(out_counts.size(), Matrix(real_count(x)));
  for (int64_t flat = 0; flat < x.numel(); ++flat) {
    Tensor e = element(x, flat);
    const Scalar original = e.item();
    for (int part = 0; part < (cplx ? 2 : 1); ++part) {
      const std::complex<double> step = part == 0 ? std::complex<double>(eps, 0) : std::complex<double>(0, eps);
      // The outputs are read out at once: a view of the input would follow the next change.
      const auto value = [&](std::complex<double> delta) {
        if (cplx) {
          e.fill_(Scalar(original.to_complex() + delta));
        } else {
          e.fill_(Scalar(original.to_double() + delta.real()));
        }
        std::vector<std::vector<double>> values;
        for (const Tensor& out : differentiable_outputs(fn(inputs))) values.push_back(real_values(out));
        return values;
      };
      const auto plus = value(step);
      const auto minus = value(-step);
      e.fill_(original);
      for (size_t o = 0; o < plus.size(); ++o) {
        const auto &p = plus[o], &m = minus[o];
        auto& row = jac[o][flat * (cplx ? 2 : 1) + part];
        row.resize(p.size());
        for (size_t k = 0; k < p.size(); ++k) row[k] = (p[k] - m[k]) / (2 * eps);
      }
    }
  }
  return jac;
}

}  // namespace

std::string gradcheck_mismatch(const Function& fn, const std::vector<Tensor>& inputs,
                               const GradcheckOptions& options) {
  std::vector<size_t> diff_inputs;
  std::vector<Tensor> diff_tensors;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined() && inputs[i].requires_grad()) {
      diff_inputs.push_back(i);
      diff_tensors.push_back(inputs[i]);
    }
  }
  KILN_CHECK(!diff_inputs.empty(), "gradcheck", "gradcheck expects at least one input tensor to require gradient");

  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    outputs = differentiable_outputs(fn(inputs));
  }
  std::vector<int64_t> out_counts;
  for (const Tensor& o : outputs) out_counts.push_back(real_count(o));

  // numerical[input][output][row][col]
  std::vector<std::vector<Matrix>> num;
  for (size_t i : diff_inputs) num.push_back(numerical(fn, inputs, i, out_counts, options.eps));

  // Analytical: one vector-Jacobian product per real output coordinate.
  const std::vector<Tensor> recorded = differentiable_outputs(fn(inputs));
  KILN_CHECK(recorded.size() == outputs.size(), "gradcheck", "the function returned a different number of outputs");
  for (size_t o = 0; o < recorded.size(); ++o) {
    const Tensor& out = recorded[o];
    const bool cplx_out = is_complex(out.dtype());
    if (!out.requires_grad()) {
      // No path to any input: every numerical derivative must be zero.
      for (size_t j = 0; j < diff_inputs.size(); ++j) {
        for (const auto& row : num[j][o]) {
          for (double v : row) {
            if (std::abs(v) > options.atol) {
              return fmt::format("Jacobian mismatch for output {} with respect to input {}: numerical {} but the "
                                 "output does not require grad", o, diff_inputs[j], v);
            }
          }
        }
      }
      continue;
    }
    for (int64_t k = 0; k < out.numel(); ++k) {
      for (int part = 0; part < (cplx_out ? 2 : 1); ++part) {
        Tensor go = zeros(out.sizes(), out.dtype());
        {
          NoGradGuard no_grad;
          element(go, k).fill_(part == 0 ? Scalar(1.0) : Scalar(std::complex<double>(0, 1)));
        }
        const std::vector<Tensor> g = grad({out}, diff_tensors, {go}, true, false, true);
        const int64_t col = k * (cplx_out ? 2 : 1) + part;
        for (size_t j = 0; j < diff_inputs.size(); ++j) {
          const Tensor& x = diff_tensors[j];
          const std::vector<double> a = g[j].defined() ? real_values(g[j]) : std::vector<double>(real_count(x), 0.0);
          KILN_CHECK(static_cast<int64_t>(a.size()) == real_count(x), "gradcheck",
                     "gradient of input {} has shape {} but the input has shape {}", diff_inputs[j],
                     g[j].shape_str(), x.shape_str());
          for (int64_t r = 0; r < real_count(x); ++r) {
            const double n = num[j][o][r][col];
            if (std::abs(a[r] - n) > options.atol + options.rtol * std::abs(n) || std::isnan(a[r]) != std::isnan(n)) {
              return fmt::format(
                  "Jacobian mismatch for output {} with respect to input {}: at input coordinate {} and output "
                  "coordinate {}, numerical {} but analytical {} (atol {}, rtol {})",
                  o, diff_inputs[j], r, col, n, a[r], options.atol, options.rtol);
            }
          }
        }
      }
    }
  }
  return "";
}

std::string gradgradcheck_mismatch(const Function& fn, const std::vector<Tensor>& inputs,
                                   const GradcheckOptions& options, uint64_t seed) {
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    outputs = differentiable_outputs(fn(inputs));
  }
  std::vector<Tensor> all = inputs;
  const size_t n_inputs = inputs.size();
  Generator gen(seed);
  for (const Tensor& o : outputs) {
    Tensor v = randn(o.sizes(), DType::Float64, &gen).to(o.dtype());
    v.requires_grad_(true);
    all.push_back(v);
  }
  const Function first_derivative = [&fn, n_inputs](const std::vector<Tensor>& xs) {
    EnableGradGuard recording;  // the numerical pass runs under no_grad
    std::vector<Tensor> ins(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(n_inputs));
    std::vector<Tensor> vs(xs.begin() + static_cast<std::ptrdiff_t>(n_inputs), xs.end());
    std::vector<Tensor> diff;
    for (const Tensor& t : ins) {
      if (t.requires_grad()) diff.push_back(t);
    }
    std::vector<Tensor> outs = differentiable_outputs(fn(ins));
    std::vector<Tensor> kept_outs, kept_vs;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i].requires_grad()) {
        kept_outs.push_back(outs[i]);
        kept_vs.push_back(vs[i]);
      }
    }
    if (kept_outs.empty()) return std::vector<Tensor>{};
    std::vector<Tensor> g = grad(kept_outs, diff, kept_vs, true, true, true);
    std::vector<Tensor> defined;
    for (size_t i = 0; i < g.size(); ++i) defined.push_back(g[i].defined() ? g[i] : zeros(diff[i].sizes(), diff[i].dtype()));
    return defined;
  };
  return gradcheck_mismatch(first_derivative, all, options);
}

}  // namespace kiln::autograd
