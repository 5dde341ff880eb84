// Direct depthwise convolution, contiguous layout (groups == in_channels > 1): each
// output channel reads one input channel, so a GEMM per channel would be a handful of
// taps long. The loops run along the last spatial dim, contiguous for stride 1 so the
// compiler vectorises them; this is the hybrid models' short causal conv1d
// ([B, C, L], kernel 4, padding 3).
//
// Tasks own whole planes: forward one output plane, input gradient one input plane
// (summing its channel's outputs in a fixed order), weight gradient one output
// channel's taps (running sums per output column, reduced in float64). No two tasks
// write the same element.
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

struct Plan {
  int64_t multiplier, taps, in_plane, out_plane;
};

Plan plan_of(const ConvGeometry& g) {
  return {g.out_channels / g.in_channels, g.kernel[0] * g.kernel[1] * g.kernel[2], g.in[0] * g.in[1] * g.in[2],
          g.out[0] * g.out[1] * g.out[2]};
}

// Calls row(in_row, out_row, tap, lo, hi, off) for every (output row, tap) pair whose
// input row exists: output positions [lo, hi) of the row read in_row[ow * stride + off].
template <typename F>
void for_each_row_tap(const ConvGeometry& g, F&& row) {
  for (int64_t od = 0; od < g.out[0]; ++od)
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      const int64_t out_row = (od * g.out[1] + oh) * g.out[2];
      conv::for_each_input_row(g, od, oh, [&](int64_t in_row, int64_t tap0) {
        conv::for_each_column_tap(g, [&](int64_t e, int64_t off, int64_t lo, int64_t hi) {
          row(in_row * g.in[2], out_row, tap0 + e, lo, hi, off);
        });
      });
    }
}

template <typename T>
void forward(const ExecutionContext& ctx, const ConvForwardArgs& args) {
  const ConvGeometry& g = args.g;
  const Plan p = plan_of(g);
  const T* x = static_cast<const T*>(args.input);
  const T* w = static_cast<const T*>(args.weight);
  const T* bias = static_cast<const T*>(args.bias);
  T* y = static_cast<T*>(args.output);
  const int64_t s = g.stride[2];
  ctx.pool().parallel_for(g.batch * g.out_channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / g.out_channels, o = t % g.out_channels, c = o / p.multiplier;
      const T* xp = x + (n * g.in_channels + c) * p.in_plane;
      const T* wp = w + o * p.taps;
      T* yp = y + t * p.out_plane;
      std::fill(yp, yp + p.out_plane, bias != nullptr ? bias[o] : T(0));
      for_each_row_tap(g, [&](int64_t in_row, int64_t out_row, int64_t tap, int64_t lo, int64_t hi, int64_t off) {
        const T wv = wp[tap];
        const T* xr = xp + in_row + off;
        T* yr = yp + out_row;
        if (s == 1) {
          for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow];
        } else {
          for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow * s];
        }
      });
    }
  });
}

template <typename T>
void input_grad(const ExecutionContext& ctx, const ConvInputGradArgs& args) {
  const ConvGeometry& g = args.g;
  const Plan p = plan_of(g);
  const T* gy = static_cast<const T*>(args.grad_output);
  const T* w = static_cast<const T*>(args.weight);
  T* gx = static_cast<T*>(args.grad_input);
  const int64_t s = g.stride[2];
  ctx.pool().parallel_for(g.batch * g.in_channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / g.in_channels, c = t % g.in_channels;
      T* gxp = gx + t * p.in_plane;
      std::fill(gxp, gxp + p.in_plane, T(0));
      for (int64_t j = 0; j < p.multiplier; ++j) {
        const int64_t o = c * p.multiplier + j;
        const T* gyp = gy + (n * g.out_channels + o) * p.out_plane;
        const T* wp = w + o * p.taps;
        for_each_row_tap(g, [&](int64_t in_row, int64_t out_row, int64_t tap, int64_t lo, int64_t hi, int64_t off) {
          const T wv = wp[tap];
          T* xr = gxp + in_row + off;
          const T* yr = gyp + out_row;
          if (s == 1) {
            for (int64_t ow = lo; ow < hi; ++ow) xr[ow] += wv * yr[ow];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) xr[ow * s] += wv * yr[ow];
          }
        });
      }
    }
  });
}

template <typename T>
void weight_grad(const ExecutionContext& ctx, const ConvWeightGradArgs& args) {
  const ConvGeometry& g = args.g;
  const Plan p = plan_of(g);
  const T* x = static_cast<const T*>(args.input);
  const T* gy = static_cast<const T*>(args.grad_output);
  T* gw = static_cast<T*>(args.grad_weight);
  const int64_t s = g.stride[2];
  // Per tap, one running sum per output column: the inner loop is elementwise (it
  // vectorises, a single running sum would not), reduced along the row at the end.
  const int64_t width = g.out[2];
  ctx.pool().parallel_for(g.out_channels, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> columns(static_cast<size_t>(p.taps * width));
    for (int64_t o = begin; o < end; ++o) {
      std::fill(columns.begin(), columns.end(), T(0));
      const int64_t c = o / p.multiplier;
      for (int64_t n = 0; n < g.batch; ++n) {
        const T* xp = x + (n * g.in_channels + c) * p.in_plane;
        const T* gyp = gy + (n * g.out_channels + o) * p.out_plane;
        for_each_row_tap(g, [&](int64_t in_row, int64_t out_row, int64_t tap, int64_t lo, int64_t hi, int64_t off) {
          const T* xr = xp + in_row + off;
          const T* yr = gyp + out_row;
          T* col = columns.data() + tap * width;
          if (s == 1) {
            for (int64_t ow = lo; ow < hi; ++ow) col[ow] += yr[ow] * xr[ow];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) col[ow] += yr[ow] * xr[ow * s];
          }
        });
      }
      for (int64_t k = 0; k < p.taps; ++k) {
        double sum = 0;
        for (int64_t ow = 0; ow < width; ++ow) sum += columns[static_cast<size_t>(k * width + ow)];
        gw[o * p.taps + k] = static_cast<T>(sum);
      }
    }
  });
}

}  // namespace

bool is_depthwise_direct(const ConvGeometry& g) { return g.groups > 1 && g.groups == g.in_channels; }

void conv_depthwise_forward(const ExecutionContext& ctx, const ConvForwardArgs& a) {
  conv::by_dtype(ctx, a, forward<float>, forward<double>);
}

void conv_depthwise_input_grad(const ExecutionContext& ctx, const ConvInputGradArgs& a) {
  conv::by_dtype(ctx, a, input_grad<float>, input_grad<double>);
}

void conv_depthwise_weight_grad(const ExecutionContext& ctx, const ConvWeightGradArgs& a) {
  conv::by_dtype(ctx, a, weight_grad<float>, weight_grad<double>);
}

void conv_forward_cpu(const ExecutionContext& ctx, const ConvForwardArgs& a) {
  if (!is_depthwise_direct(a.g)) return conv_gemm_forward(ctx, a);
  a.g.channels_last ? conv_depthwise_cl_forward(ctx, a) : conv_depthwise_forward(ctx, a);
}

void conv_input_grad_cpu(const ExecutionContext& ctx, const ConvInputGradArgs& a) {
  if (!is_depthwise_direct(a.g)) return conv_gemm_input_grad(ctx, a);
  a.g.channels_last ? conv_depthwise_cl_input_grad(ctx, a) : conv_depthwise_input_grad(ctx, a);
}

void conv_weight_grad_cpu(const ExecutionContext& ctx, const ConvWeightGradArgs& a) {
  if (!is_depthwise_direct(a.g)) return conv_gemm_weight_grad(ctx, a);
  a.g.channels_last ? conv_depthwise_cl_weight_grad(ctx, a) : conv_depthwise_weight_grad(ctx, a);
}

}  // namespace kiln::cpu
