// Resampling forward and its gather-style adjoint (backend/interpolate.h), one row of the
// innermost axis at a time:
//  - forward, per output row (plane, od, oh): the source rows it reads along D and H are
//    summed with their weights into a row of the input's width (contiguous, so the loop
//    vectorises), then each output element gathers its W taps from that row;
//  - backward, per input row (plane, id, ih): the output-gradient rows that read it are
//    summed likewise into a row of the output's width, then each input element sums the
//    W positions that read it.
// Each element's sum runs in a fixed order (by output position), whatever the thread
// count, and no two threads write one element. bf16/f16 rows are widened into float32
// scratch; float64 computes in float64. The nearest forward moves elements untouched.
#include "backend/cpu/interpolate/resample_kernels.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/cast/cast.h"
#include "kiln/error.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

namespace {

using backend::ResampleAxis;
using backend::ResampleProblem;

bool is_linear(const ResampleAxis& a) { return a.index1 != nullptr; }

// The taps of one axis as (source, weight) pairs per output position, in Acc.
template <typename Acc>
struct Taps {
  int64_t count = 1;  // taps per output position: 1 or 2
  std::vector<int64_t> index;  // [out * count]
  std::vector<Acc> weight;

  explicit Taps(const ResampleAxis& a) : count(is_linear(a) ? 2 : 1), index(a.out * count), weight(a.out * count) {
    for (int64_t o = 0; o < a.out; ++o) {
      index[o * count] = a.index0[o];
      weight[o * count] = a.weight0 != nullptr ? static_cast<Acc>(a.weight0[o]) : Acc(1);
      if (count == 2) {
        index[o * count + 1] = a.index1[o];
        weight[o * count + 1] = static_cast<Acc>(a.weight1[o]);
      }
    }
  }
};

// The transpose of an axis's taps: for each source position, the (output, weight)
// pairs that read it, by output position (CSR). A zero weight is kept: it still adds
// exactly 0, and dropping it would make the sum order depend on the values.
template <typename Acc>
struct Contributors {
  std::vector<int64_t> start;  // [in + 1]
  std::vector<int64_t> output;
  std::vector<Acc> weight;

  Contributors(const ResampleAxis& a, const Taps<Acc>& taps) : start(a.in + 1, 0) {
    for (int64_t k = 0; k < a.out * taps.count; ++k) ++start[taps.index[k] + 1];
    for (int64_t i = 0; i < a.in; ++i) start[i + 1] += start[i];
    output.resize(start[a.in]);
    weight.resize(start[a.in]);
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (int64_t o = 0; o < a.out; ++o) {
      for (int64_t t = 0; t < taps.count; ++t) {
        const int64_t src = taps.index[o * taps.count + t];
        output[next[src]] = o;
        weight[next[src]] = taps.weight[o * taps.count + t];
        ++next[src];
      }
    }
  }
};

// Rows of `width` elements of the array, read as Acc: in place for float32/float64
// (when Acc matches), else widened into `scratch`.
template <typename Acc>
const Acc* row_as(DType dtype, const void* base, int64_t row, int64_t width, Acc* scratch) {
  const size_t isz = itemsize(dtype);
  const char* p = static_cast<const char*>(base) + static_cast<size_t>(row * width) * isz;
  if constexpr (std::is_same_v<Acc, double>) {
    return reinterpret_cast<const double*>(p);
  } else {
    if (dtype == DType::Float32) return reinterpret_cast<const float*>(p);
    to_f32(dtype, p, scratch, width);
    return scratch;
  }
}

template <typename Acc>
void store_row(DType dtype, const Acc* row, void* base, int64_t index, int64_t width) {
  char* p = static_cast<char*>(base) + static_cast<size_t>(index * width) * itemsize(dtype);
  if constexpr (std::is_same_v<Acc, double>) {
    std::memcpy(p, row, static_cast<size_t>(width) * sizeof(double));
  } else {
    from_f32(row, dtype, p, width);
  }
}

// acc[0..n) (+)= w * row[0..n): the first term assigns, so no zeroing pass.
template <typename Acc>
void axpy(Acc* acc, const Acc* row, Acc w, int64_t n, bool first) {
  if (first) {
    for (int64_t i = 0; i < n; ++i) acc[i] = w * row[i];
  } else {
    for (int64_t i = 0; i < n; ++i) acc[i] += w * row[i];
  }
}

// Rows per task: at least ~32K elements of traffic, so small rows are batched.
int64_t row_grain(int64_t width) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(width, 1)); }

// Nearest forward: a pure gather of elements, any dtype width.
template <typename T>
void nearest_forward(ThreadPool& pool, const ResampleProblem& p) {
  const ResampleAxis &D = p.axes[0], &H = p.axes[1], &W = p.axes[2];
  const T* src = static_cast<const T*>(p.src);
  T* dst = static_cast<T*>(p.dst);
  const int64_t rows = p.planes * D.out * H.out;
  if (rows == 0) return;
  pool.parallel_for(rows, row_grain(W.out), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t oh = r % H.out, od = (r / H.out) % D.out, plane = r / (H.out * D.out);
      const T* in = src + ((plane * D.in + D.index0[od]) * H.in + H.index0[oh]) * W.in;
      T* out = dst + r * W.out;
      for (int64_t ow = 0; ow < W.out; ++ow) out[ow] = in[W.index0[ow]];
    }
  });
}

template <typename Acc>
void linear_forward(const ExecutionContext& ctx, const ResampleProblem& p) {
  const ResampleAxis &D = p.axes[0], &H = p.axes[1], &W = p.axes[2];
  const Taps<Acc> td(D), th(H), tw(W);
  const int64_t rows = p.planes * D.out * H.out;
  if (rows == 0) return;
  ctx.pool().parallel_for(rows, row_grain(W.out), [&](int64_t begin, int64_t end) {
    Acc* mixed = ctx.scratch_of<Acc>(0, W.in);
    Acc* widened = ctx.scratch_of<Acc>(1, W.in);
    Acc* out = ctx.scratch_of<Acc>(2, W.out);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t oh = r % H.out, od = (r / H.out) % D.out, plane = r / (H.out * D.out);
      bool first = true;
      for (int64_t a = 0; a < td.count; ++a) {
        for (int64_t b = 0; b < th.count; ++b) {
          const int64_t id = td.index[od * td.count + a], ih = th.index[oh * th.count + b];
          const Acc w = td.weight[od * td.count + a] * th.weight[oh * th.count + b];
          const Acc* row = row_as<Acc>(p.dtype, p.src, (plane * D.in + id) * H.in + ih, W.in, widened);
          axpy(mixed, row, w, W.in, first);
          first = false;
        }
      }
      for (int64_t ow = 0; ow < W.out; ++ow) {
        Acc v = tw.weight[ow * tw.count] * mixed[tw.index[ow * tw.count]];
        if (tw.count == 2) v += tw.weight[ow * tw.count + 1] * mixed[tw.index[ow * tw.count + 1]];
        out[ow] = v;
      }
      store_row(p.dtype, out, p.dst, r, W.out);
    }
  });
}

template <typename Acc>
void gather_backward(const ExecutionContext& ctx, const ResampleProblem& p) {
  const ResampleAxis &D = p.axes[0], &H = p.axes[1], &W = p.axes[2];
  const Taps<Acc> td(D), th(H), tw(W);
  const Contributors<Acc> cd(D, td), ch(H, th), cw(W, tw);
  const int64_t rows = p.planes * D.in * H.in;
  if (rows == 0) return;
  ctx.pool().parallel_for(rows, row_grain(W.out), [&](int64_t begin, int64_t end) {
    Acc* mixed = ctx.scratch_of<Acc>(0, W.out);
    Acc* widened = ctx.scratch_of<Acc>(1, W.out);
    Acc* grad = ctx.scratch_of<Acc>(2, W.in);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t ih = r % H.in, id = (r / H.in) % D.in, plane = r / (H.in * D.in);
      bool first = true;
      for (int64_t a = cd.start[id]; a < cd.start[id + 1]; ++a) {
        for (int64_t b = ch.start[ih]; b < ch.start[ih + 1]; ++b) {
          const Acc w = cd.weight[a] * ch.weight[b];
          const int64_t row_index = (plane * D.out + cd.output[a]) * H.out + ch.output[b];
          axpy(mixed, row_as<Acc>(p.dtype, p.src, row_index, W.out, widened), w, W.out, first);
          first = false;
        }
      }
      if (first) {  // no output row read this input row
        std::fill(grad, grad + W.in, Acc(0));
      } else {
        for (int64_t iw = 0; iw < W.in; ++iw) {
          Acc v = 0;
          for (int64_t c = cw.start[iw]; c < cw.start[iw + 1]; ++c) v += cw.weight[c] * mixed[cw.output[c]];
          grad[iw] = v;
        }
      }
      store_row(p.dtype, grad, p.dst, r, W.in);
    }
  });
}

void check_dtype(DType dtype) {
  KILN_CHECK_KIND(dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::BFloat16 ||
                      dtype == DType::Float16,
                  Type, "interpolate", "expected float32, float64, bfloat16 or float16, got {}", dtype_name(dtype));
}

}  // namespace

void resample_forward(const ExecutionContext& ctx, const ResampleProblem& p) {
  check_dtype(p.dtype);
  const bool linear = is_linear(p.axes[0]) || is_linear(p.axes[1]) || is_linear(p.axes[2]);
  if (!linear) {
    switch (itemsize(p.dtype)) {
      case 2: return nearest_forward<uint16_t>(ctx.pool(), p);
      case 4: return nearest_forward<uint32_t>(ctx.pool(), p);
      default: return nearest_forward<uint64_t>(ctx.pool(), p);
    }
  }
  if (p.dtype == DType::Float64) return linear_forward<double>(ctx, p);
  linear_forward<float>(ctx, p);
}

void resample_backward(const ExecutionContext& ctx, const ResampleProblem& p) {
  check_dtype(p.dtype);
  if (p.dtype == DType::Float64) return gather_backward<double>(ctx, p);
  gather_backward<float>(ctx, p);
}

}  // namespace kiln::cpu
