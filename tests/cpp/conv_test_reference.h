// Plain scalar references of the convolutions for the conv tests: nested loops in
// double over logical [N, C, *spatial] values, each result with the sum of the absolute
// values of its terms (the scale of its rounding error).
//
// The input gradient and conv_transpose are written as scatters (each input element
// adds into every output it reaches), the opposite formulation of the gather kernels.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kiln/ops/conv.h"
#include "kiln/tensor.h"
#include "nn_test_utils.h"

namespace kiln::conv_test {

// One convolution problem. Spatial vectors hold one entry per spatial dim (1 to 3).
struct Case {
  int64_t N, C, O, groups;
  Shape in, kernel, stride, padding, dilation;
  Shape output_padding = {};  // conv_transpose only (empty: zeros)
};

struct Ref {
  std::vector<double> value, magnitude;
};

inline int64_t spatial_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

// The problem in three spatial dims (leading dims of size 1, kernel 1).
struct Geo {
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0},
          d[3] = {1, 1, 1};
  int64_t taps() const { return k[0] * k[1] * k[2]; }
  int64_t in_positions() const { return in[0] * in[1] * in[2]; }
  int64_t out_positions() const { return out[0] * out[1] * out[2]; }
};

// conv's output size per dim: floor((in + 2 p - d (k - 1) - 1) / s) + 1.
inline Shape conv_out(const Case& c) {
  Shape out;
  for (size_t i = 0; i < c.in.size(); ++i)
    out.push_back((c.in[i] + 2 * c.padding[i] - c.dilation[i] * (c.kernel[i] - 1) - 1) / c.stride[i] + 1);
  return out;
}
// conv_transpose's: (in - 1) s - 2 p + d (k - 1) + output_padding + 1.
inline Shape transpose_out(const Case& c) {
  Shape out;
  for (size_t i = 0; i < c.in.size(); ++i) {
    const int64_t op = c.output_padding.empty() ? 0 : c.output_padding[i];
    out.push_back((c.in[i] - 1) * c.stride[i] - 2 * c.padding[i] + c.dilation[i] * (c.kernel[i] - 1) + op + 1);
  }
  return out;
}

// in: the input spatial sizes, out: the output spatial sizes of the map being computed.
inline Geo geo(const Case& c, const Shape& in, const Shape& out) {
  Geo g;
  const size_t lead = 3 - c.in.size();
  for (size_t i = 0; i < c.in.size(); ++i) {
    g.in[lead + i] = in[i];
    g.out[lead + i] = out[i];
    g.k[lead + i] = c.kernel[i];
    g.s[lead + i] = c.stride[i];
    g.p[lead + i] = c.padding[i];
    g.d[lead + i] = c.dilation[i];
  }
  return g;
}

// Calls f(output position, input position) for every tap of `g` that lands inside the
// input (tap index t in kernel order).
template <typename F>
void for_each_window(const Geo& g, F&& f) {
  for (int64_t od = 0; od < g.out[0]; ++od)
    for (int64_t oh = 0; oh < g.out[1]; ++oh)
      for (int64_t ow = 0; ow < g.out[2]; ++ow)
        for (int64_t a = 0; a < g.k[0]; ++a)
          for (int64_t b = 0; b < g.k[1]; ++b)
            for (int64_t e = 0; e < g.k[2]; ++e) {
              const int64_t id = od * g.s[0] + a * g.d[0] - g.p[0], ih = oh * g.s[1] + b * g.d[1] - g.p[1],
                            iw = ow * g.s[2] + e * g.d[2] - g.p[2];
              if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1] || iw < 0 || iw >= g.in[2]) continue;
              f((od * g.out[1] + oh) * g.out[2] + ow, (id * g.in[1] + ih) * g.in[2] + iw, (a * g.k[1] + b) * g.k[2] + e);
            }
}

// y = conv(x, w) + b: x [N, C, in], w [O, C / groups, kernel], y [N, O, conv_out].
inline Ref conv_ref(const Case& c, const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<double>* bias) {
  const Geo g = geo(c, c.in, conv_out(c));
  const int64_t Cg = c.C / c.groups, Og = c.O / c.groups, P = g.out_positions(), I = g.in_positions();
  Ref r{std::vector<double>(static_cast<size_t>(c.N * c.O * P)), std::vector<double>(static_cast<size_t>(c.N * c.O * P))};
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t o = 0; o < c.O; ++o) {
      const int64_t grp = o / Og;
      const size_t base = static_cast<size_t>((n * c.O + o) * P);
      for (int64_t p = 0; p < P; ++p) {
        r.value[base + p] = bias ? (*bias)[o] : 0.0;
        r.magnitude[base + p] = bias ? std::fabs((*bias)[o]) : 0.0;
      }
      for (int64_t ci = 0; ci < Cg; ++ci) {
        const double* xp = x.data() + (n * c.C + grp * Cg + ci) * I;
        const double* wp = w.data() + (o * Cg + ci) * g.taps();
        for_each_window(g, [&](int64_t p, int64_t i, int64_t t) {
          r.value[base + p] += xp[i] * wp[t];
          r.magnitude[base + p] += std::fabs(xp[i] * wp[t]);
        });
      }
    }
  return r;
}

// y = conv_transpose(x, w) + b as a scatter: x [N, C, in], w [C, O / groups, kernel],
// y [N, O, transpose_out]. With the roles swapped this is also conv's input gradient.
inline Ref conv_transpose_ref(const Case& c, const std::vector<double>& x, const std::vector<double>& w,
                              const std::vector<double>* bias) {
  const Shape out = transpose_out(c);
  const Geo g = geo(c, out, c.in);  // the conv from y's positions back to x's
  const int64_t Cg = c.C / c.groups, Og = c.O / c.groups, P = g.in_positions(), I = g.out_positions();
  Ref r{std::vector<double>(static_cast<size_t>(c.N * c.O * P)), std::vector<double>(static_cast<size_t>(c.N * c.O * P))};
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t o = 0; o < c.O; ++o) {
      const size_t base = static_cast<size_t>((n * c.O + o) * P);
      for (int64_t p = 0; p < P; ++p) {
        r.value[base + p] = bias ? (*bias)[o] : 0.0;
        r.magnitude[base + p] = bias ? std::fabs((*bias)[o]) : 0.0;
      }
    }
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t ci = 0; ci < c.C; ++ci) {
      const int64_t grp = ci / Cg;
      const double* xp = x.data() + (n * c.C + ci) * I;
      for (int64_t j = 0; j < Og; ++j) {
        const int64_t o = grp * Og + j;
        const double* wp = w.data() + (ci * Og + j) * g.taps();
        const size_t base = static_cast<size_t>((n * c.O + o) * P);
        for_each_window(g, [&](int64_t xi, int64_t yi, int64_t t) {
          r.value[base + yi] += xp[xi] * wp[t];
          r.magnitude[base + yi] += std::fabs(xp[xi] * wp[t]);
        });
      }
    }
  return r;
}

// dW[o, c, k] = sum over n, p of gy[n, o, p] x[n, c, window]: x [N, C, in], gy [N, O, out].
inline Ref weight_grad_ref(const Case& c, const Shape& in, const Shape& out, const std::vector<double>& x,
                           const std::vector<double>& gy) {
  const Geo g = geo(c, in, out);
  const int64_t Cg = c.C / c.groups, Og = c.O / c.groups, P = g.out_positions(), I = g.in_positions();
  const size_t numel = static_cast<size_t>(c.O * Cg * g.taps());
  Ref r{std::vector<double>(numel), std::vector<double>(numel)};
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t o = 0; o < c.O; ++o)
      for (int64_t ci = 0; ci < Cg; ++ci) {
        const double* xp = x.data() + (n * c.C + (o / Og) * Cg + ci) * I;
        const double* gp = gy.data() + (n * c.O + o) * P;
        const size_t base = static_cast<size_t>((o * Cg + ci) * g.taps());
        for_each_window(g, [&](int64_t p, int64_t i, int64_t t) {
          r.value[base + t] += gp[p] * xp[i];
          r.magnitude[base + t] += std::fabs(gp[p] * xp[i]);
        });
      }
  return r;
}

// Sum over n and positions of gy [N, O, P] per channel.
inline Ref bias_grad_ref(int64_t N, int64_t O, int64_t P, const std::vector<double>& gy) {
  Ref r{std::vector<double>(static_cast<size_t>(O)), std::vector<double>(static_cast<size_t>(O))};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t p = 0; p < P; ++p) {
        r.value[o] += gy[(n * O + o) * P + p];
        r.magnitude[o] += std::fabs(gy[(n * O + o) * P + p]);
      }
  return r;
}

// The leading corner `to` of [N, C, *from] values (per spatial dim, to <= from).
inline Ref crop(const Ref& r, int64_t N, int64_t C, const Shape& from, const Shape& to) {
  if (from == to) return r;
  Shape f = from, t = to;
  while (f.size() < 3) {
    f.insert(f.begin(), 1);
    t.insert(t.begin(), 1);
  }
  Ref out;
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t a = 0; a < t[0]; ++a)
      for (int64_t b = 0; b < t[1]; ++b)
        for (int64_t e = 0; e < t[2]; ++e) {
          const size_t i = static_cast<size_t>(((nc * f[0] + a) * f[1] + b) * f[2] + e);
          out.value.push_back(r.value[i]);
          out.magnitude.push_back(r.magnitude[i]);
        }
  return out;
}

// Error bound of a sum of `terms` products computed in the dtype's compute precision and
// stored in `dtype`: every partial sum rounds once (gamma_terms ~ terms * u_compute times
// the sum of |terms|), plus one rounding of the result to storage. Inputs are exact in
// the reference (it reads the rounded tensor values).
inline double tolerance(DType dtype, int64_t terms, double magnitude, double value) {
  const double u = nn_test::compute_roundoff(dtype);
  return 2.0 * static_cast<double>(terms + 2) * u * magnitude + nn_test::unit_roundoff(dtype) * std::fabs(value) +
         nn_test::underflow_error(dtype) + 1e-300;
}

inline void expect_near_ref(const Tensor& got, const Ref& want, DType dtype, int64_t terms, const char* what) {
  const std::vector<double> g = nn_test::to_doubles(got);
  ASSERT_EQ(g.size(), want.value.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    const double tol = tolerance(dtype, terms, want.magnitude[i], want.value[i]);
    ASSERT_TRUE(nn_test::near(g[i], want.value[i], tol)) << what << " element " << i;
  }
}

// Layouts a test input can take.
enum class Layout { Contiguous, ChannelsLast, Strided };

// t (logical [N, C, *spatial]) with `layout`'s strides: channels-last as
// permute(0, 2.., 1).contiguous().permute(back); strided as every other element of a
// twice-as-long last dim.
inline Tensor with_layout(const Tensor& t, Layout layout) {
  const int64_t nd = t.dim();
  if (layout == Layout::ChannelsLast) {
    Shape to{0}, back{0, nd - 1};
    for (int64_t d = 2; d < nd; ++d) to.push_back(d);
    to.push_back(1);
    for (int64_t d = 1; d < nd - 1; ++d) back.push_back(d);
    return t.permute(to).contiguous().permute(back);
  }
  if (layout == Layout::Strided) {
    Shape wide = t.sizes();
    wide.back() *= 2;
    Tensor big = Tensor::empty(wide, t.dtype());
    big.zero_();
    Tensor view = big.slice(-1, 0, std::nullopt, 2);
    view.copy_(t);
    return view;
  }
  return t.contiguous();
}

// Whether t's strides are the dense channels-last strides of its sizes.
inline bool has_channels_last_strides(const Tensor& t) {
  Shape to{0};
  for (int64_t d = 2; d < t.dim(); ++d) to.push_back(d);
  to.push_back(1);
  return t.permute(to).is_contiguous();
}

}  // namespace kiln::conv_test
