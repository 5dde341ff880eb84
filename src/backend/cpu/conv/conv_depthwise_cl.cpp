// Direct depthwise convolution in the channels-last layout (groups == in_channels > 1):
// activations [N, D, H, W, C], so the loops run along the channels, contiguous, for one
// pixel and tap at a time (a GEMM per channel would be a handful of taps long). The
// weight [O, 1, *kernel] is the same memory in both layouts; it is transposed once per
// call to [taps, O] so that a tap's weights are contiguous over the channels too.
//
// Tasks own rows: forward one output row (n, od, oh), input gradient one input row
// (gathering, for each input pixel, the outputs that read it, taps in a fixed order),
// weight gradient a fixed chunk of output rows with its own partial, summed in chunk
// order. No two tasks write the same element, no atomics.
#include <algorithm>
#include <vector>

#include "backend/cpu/conv/conv_kernels.h"
#include "backend/cpu/conv/conv_loops.h"

namespace kiln::cpu {
namespace {

using backend::ConvForwardArgs;
using backend::ConvGeometry;
using backend::ConvInputGradArgs;
using backend::ConvWeightGradArgs;

int64_t taps_of(const ConvGeometry& g) { return g.kernel[0] * g.kernel[1] * g.kernel[2]; }

// w [O, taps] -> [taps, O].
template <typename T>
std::vector<T> taps_by_channel(const ConvGeometry& g, const T* w) {
  const int64_t taps = taps_of(g), O = g.out_channels;
  std::vector<T> t(static_cast<size_t>(taps * O));
  for (int64_t o = 0; o < O; ++o)
    for (int64_t k = 0; k < taps; ++k) t[static_cast<size_t>(k * O + o)] = w[o * taps + k];
  return t;
}

// acc[o] += wv[o] * src[o / m] over the O output channels (m = O / C).
template <typename T>
inline void madd_channels(T* acc, const T* wv, const T* src, int64_t C, int64_t m) {
  if (m == 1) {
    for (int64_t c = 0; c < C; ++c) acc[c] += wv[c] * src[c];
    return;
  }
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < m; ++j) acc[c * m + j] += wv[c * m + j] * src[c];
}

template <typename T>
void forward(const ExecutionContext& ctx, const ConvForwardArgs& args) {
  const ConvGeometry& g = args.g;
  const int64_t C = g.in_channels, O = g.out_channels, m = O / C;
  const T* x = static_cast<const T*>(args.input);
  const T* bias = static_cast<const T*>(args.bias);
  T* y = static_cast<T*>(args.output);
  const std::vector<T> wt = taps_by_channel(g, static_cast<const T*>(args.weight));
  const int64_t rows = g.out[0] * g.out[1];
  ctx.pool().parallel_for(g.batch * rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / rows, row = t % rows, od = row / g.out[1], oh = row % g.out[1];
      T* yrow = y + t * g.out[2] * O;
      for (int64_t ow = 0; ow < g.out[2]; ++ow) {
        T* yp = yrow + ow * O;
        if (bias != nullptr) {
          std::copy(bias, bias + O, yp);
        } else {
          std::fill(yp, yp + O, T(0));
        }
      }
      conv::for_each_input_row(g, od, oh, [&](int64_t in_row, int64_t tap0) {
        const T* xrow = x + (n * g.in[0] * g.in[1] + in_row) * g.in[2] * C;
        conv::for_each_column_tap(g, [&](int64_t e, int64_t off, int64_t lo, int64_t hi) {
          const T* wv = wt.data() + (tap0 + e) * O;
          for (int64_t ow = lo; ow < hi; ++ow) madd_channels(yrow + ow * O, wv, xrow + (ow * g.stride[2] + off) * C, C, m);
        });
      });
    }
  });
}

template <typename T>
void input_grad(const ExecutionContext& ctx, const ConvInputGradArgs& args) {
  const ConvGeometry& g = args.g;
  const int64_t C = g.in_channels, O = g.out_channels, m = O / C;
  const T* gy = static_cast<const T*>(args.grad_output);
  T* gx = static_cast<T*>(args.grad_input);
  const std::vector<T> wt = taps_by_channel(g, static_cast<const T*>(args.weight));
  const int64_t rows = g.in[0] * g.in[1];
  ctx.pool().parallel_for(g.batch * rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / rows, row = t % rows, id = row / g.in[1], ih = row % g.in[1];
      T* gxrow = gx + t * g.in[2] * C;
      std::fill(gxrow, gxrow + g.in[2] * C, T(0));
      for (int64_t a = 0; a < g.kernel[0]; ++a) {
        const int64_t vd = id + g.padding[0] - a * g.dilation[0];
        if (vd < 0 || vd % g.stride[0] != 0 || vd / g.stride[0] >= g.out[0]) continue;
        for (int64_t b = 0; b < g.kernel[1]; ++b) {
          const int64_t vh = ih + g.padding[1] - b * g.dilation[1];
          if (vh < 0 || vh % g.stride[1] != 0 || vh / g.stride[1] >= g.out[1]) continue;
          const T* gyrow = gy + ((n * g.out[0] + vd / g.stride[0]) * g.out[1] + vh / g.stride[1]) * g.out[2] * O;
          for (int64_t e = 0; e < g.kernel[2]; ++e) {
            const T* wv = wt.data() + ((a * g.kernel[1] + b) * g.kernel[2] + e) * O;
            const int64_t shift = g.padding[2] - e * g.dilation[2];  // ow * s = iw + shift
            for (int64_t iw = 0; iw < g.in[2]; ++iw) {
              const int64_t v = iw + shift;
              if (v < 0 || v % g.stride[2] != 0 || v / g.stride[2] >= g.out[2]) continue;
              const T* gyp = gyrow + (v / g.stride[2]) * O;
              T* gxp = gxrow + iw * C;
              if (m == 1) {
                for (int64_t c = 0; c < C; ++c) gxp[c] += wv[c] * gyp[c];
              } else {
                for (int64_t c = 0; c < C; ++c)
                  for (int64_t j = 0; j < m; ++j) gxp[c] += wv[c * m + j] * gyp[c * m + j];
              }
            }
          }
        }
      }
    }
  });
}

template <typename T>
void weight_grad(const ExecutionContext& ctx, const ConvWeightGradArgs& args) {
  const ConvGeometry& g = args.g;
  const int64_t C = g.in_channels, O = g.out_channels, m = O / C, taps = taps_of(g);
  const T* x = static_cast<const T*>(args.input);
  const T* gy = static_cast<const T*>(args.grad_output);
  T* gw = static_cast<T*>(args.grad_weight);
  const int64_t rows = g.out[0] * g.out[1], tasks = g.batch * rows;
  if (tasks == 0) {
    std::fill(gw, gw + O * taps, T(0));
    return;
  }
  int64_t chunks = 0;
  // Per chunk [taps, O].
  const std::vector<T> partial =
      conv::chunked_partials<T>(ctx, tasks, taps * O, &chunks, [&](int64_t t_begin, int64_t t_end, T* acc) {
        for (int64_t t = t_begin; t < t_end; ++t) {
          const int64_t n = t / rows, row = t % rows, od = row / g.out[1], oh = row % g.out[1];
          const T* gyrow = gy + t * g.out[2] * O;
          conv::for_each_input_row(g, od, oh, [&](int64_t in_row, int64_t tap0) {
            const T* xrow = x + (n * g.in[0] * g.in[1] + in_row) * g.in[2] * C;
            conv::for_each_column_tap(g, [&](int64_t e, int64_t off, int64_t lo, int64_t hi) {
              T* a = acc + (tap0 + e) * O;
              for (int64_t ow = lo; ow < hi; ++ow)
                madd_channels(a, gyrow + ow * O, xrow + (ow * g.stride[2] + off) * C, C, m);
            });
          });
        }
      });
  for (int64_t o = 0; o < O; ++o)
    for (int64_t k = 0; k < taps; ++k) {
      T sum = 0;
      for (int64_t chunk = 0; chunk < chunks; ++chunk) sum += partial[static_cast<size_t>((chunk * taps + k) * O + o)];
      gw[o * taps + k] = sum;
    }
}

}  // namespace

void conv_depthwise_cl_forward(const ExecutionContext& ctx, const ConvForwardArgs& a) {
  conv::by_dtype(ctx, a, forward<float>, forward<double>);
}

void conv_depthwise_cl_input_grad(const ExecutionContext& ctx, const ConvInputGradArgs& a) {
  conv::by_dtype(ctx, a, input_grad<float>, input_grad<double>);
}

void conv_depthwise_cl_weight_grad(const ExecutionContext& ctx, const ConvWeightGradArgs& a) {
  conv::by_dtype(ctx, a, weight_grad<float>, weight_grad<double>);
}

}  // namespace kiln::cpu
