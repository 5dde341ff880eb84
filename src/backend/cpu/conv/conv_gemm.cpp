// The GEMM convolution kernels: tiled im2col + OpenBLAS, for both layouts.
//
// Work is split over (sample, tile of positions); a tile's packed windows live in the
// worker's scratch, sized to a fixed budget (kPackBudgetBytes), so memory does not grow
// with the image. (A tile keeps at least kMinTile positions, so only a window longer
// than budget / kMinTile, e.g. 4096 channels x 27 taps, takes more.) A 1x1 kernel with stride 1 and no padding reads the activations in
// place (no packing).
//
// Forward, per sample n, group g and tile of output positions:
//   contiguous:    Y[Og, tile] = W_g[Og, Cg*taps] @ cols[Cg*taps, tile]   (rows (c, tap))
//   channels-last: Y[tile, Og] = cols[tile, taps*Cg] @ W_g^T               (rows (tap, c))
// The weight gradient packs the same windows: dW_g += dY x cols^T, one partial per
// thread chunk, summed in chunk order at the end (deterministic for a thread count).
//
// The input gradient is gather-style: the input positions are split into stride phases
// (position = r + stride * t per dim). Within a phase the taps that reach the input are
// fixed and each reads output position t + offset(tap), so the phase is a stride-1
// correlation of dY with those taps: dX_phase = windows(dY)[tile, taps*Og] @ W_phase.
// Every input element belongs to exactly one phase and is written once (no atomics).
#include <algorithm>
#include <vector>

#include "backend/cpu/conv/conv_kernels.h"
#include "backend/cpu/conv/conv_loops.h"
#include "backend/cpu/matmul/blas.h"
#include "kiln/int_math.h"

namespace kiln::cpu {
namespace {

using backend::ConvForwardArgs;
using backend::ConvGeometry;
using backend::ConvInputGradArgs;
using backend::ConvWeightGradArgs;
using conv::Dims3;
using conv::Tap;

// Per-thread bytes of packed windows: about an L2's worth, enough for OpenBLAS to run
// at speed on each tile.
constexpr int64_t kPackBudgetBytes = int64_t{1} << 20;
constexpr int64_t kMinTile = 16;
constexpr int64_t kMaxTile = 512;

struct Sizes {
  Dims3 in, out, kernel;
  int64_t taps, Cg, Og, K, in_positions, out_positions;
};

Sizes sizes_of(const ConvGeometry& g) {
  Sizes s;
  for (int i = 0; i < 3; ++i) {
    s.in.d[i] = g.in[i];
    s.out.d[i] = g.out[i];
    s.kernel.d[i] = g.kernel[i];
  }
  s.taps = s.kernel.numel();
  s.Cg = g.in_channels / g.groups;
  s.Og = g.out_channels / g.groups;
  s.K = s.Cg * s.taps;
  s.in_positions = s.in.numel();
  s.out_positions = s.out.numel();
  return s;
}

// Positions per tile: the packed rows (row_len values each) fit the budget, at most
// kMaxTile of them so that a batch of a few images still gives every thread several
// tasks. The tile never depends on the thread count: each output element's GEMM, and so
// its rounding, is the same for any number of threads.
int64_t tile_length(int64_t positions, int64_t row_len, size_t element_size) {
  const int64_t row_bytes = std::max<int64_t>(1, row_len) * static_cast<int64_t>(element_size);
  const int64_t tile = std::clamp(kPackBudgetBytes / row_bytes, kMinTile, kMaxTile);
  return std::max<int64_t>(1, std::min(tile, positions));
}

std::vector<Tap> forward_taps(const ConvGeometry& g) {
  std::vector<Tap> taps;
  for (int64_t a = 0; a < g.kernel[0]; ++a)
    for (int64_t b = 0; b < g.kernel[1]; ++b)
      for (int64_t e = 0; e < g.kernel[2]; ++e)
        taps.push_back({(a * g.kernel[1] + b) * g.kernel[2] + e,
                        {a * g.dilation[0] - g.padding[0], b * g.dilation[1] - g.padding[1],
                         e * g.dilation[2] - g.padding[2]}});
  return taps;
}

// A 1x1 kernel with stride 1 and no padding: the windows are the activations themselves.
bool windows_are_identity(const ConvGeometry& g) {
  for (int i = 0; i < 3; ++i) {
    if (g.kernel[i] != 1 || g.stride[i] != 1 || g.padding[i] != 0) return false;
  }
  return true;
}

int as_int(int64_t v) { return static_cast<int>(v); }  // the front end checked every GEMM extent fits

// A packed (or in-place) operand: pointer and leading dimension.
template <typename T>
struct Operand {
  const T* data;
  int64_t ld;
};

// The forward windows of sample n, group grp, positions [q0, q0 + qn):
// contiguous [K, qn] (rows (c, tap)), channels-last [qn, K] (rows (tap, c)).
template <typename T>
Operand<T> forward_windows(const ConvGeometry& g, const Sizes& s, const std::vector<Tap>& taps, const T* x,
                           int64_t n, int64_t grp, int64_t q0, int64_t qn, T* cols) {
  const bool identity = windows_are_identity(g);
  if (!g.channels_last) {
    const T* planes = x + (n * g.in_channels + grp * s.Cg) * s.in_positions;
    if (identity) return {planes + q0, s.in_positions};
    for (int64_t c = 0; c < s.Cg; ++c)
      for (size_t l = 0; l < taps.size(); ++l)
        conv::pack_planar_row(cols + (c * s.taps + static_cast<int64_t>(l)) * qn, planes + c * s.in_positions, s.in,
                              s.out, g.stride, taps[l].off, q0, qn);
    return {cols, qn};
  }
  const T* base = x + n * s.in_positions * g.in_channels + grp * s.Cg;
  if (identity) return {base + q0 * g.in_channels, g.in_channels};
  conv::pack_pixel_rows(cols, base, g.in_channels, s.Cg, s.in, s.out, g.stride, taps, q0, qn);
  return {cols, s.K};
}

template <typename T>
void forward(const ExecutionContext& ctx, const ConvForwardArgs& a) {
  const ConvGeometry& g = a.g;
  const Sizes s = sizes_of(g);
  const T* x = static_cast<const T*>(a.input);
  const T* w = static_cast<const T*>(a.weight);
  const T* bias = static_cast<const T*>(a.bias);
  T* y = static_cast<T*>(a.output);
  const std::vector<Tap> taps = forward_taps(g);
  const int64_t tile = tile_length(s.out_positions, s.K, sizeof(T));
  const int64_t tiles = ceil_div(s.out_positions, tile);
  const int64_t P = s.out_positions, O = g.out_channels;
  const T beta = bias != nullptr ? T(1) : T(0);
  ctx.pool().parallel_for(g.batch * tiles, 1, [&](int64_t begin, int64_t end) {
    T* cols = windows_are_identity(g) ? nullptr : ctx.scratch_of<T>(0, s.K * tile);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / tiles, q0 = (t % tiles) * tile, qn = std::min(tile, P - q0);
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        const Operand<T> win = forward_windows(g, s, taps, x, n, grp, q0, qn, cols);
        const T* wg = w + grp * s.Og * s.K;
        if (!g.channels_last) {
          T* yt = y + (n * O + grp * s.Og) * P + q0;  // [Og, qn], rows P apart
          if (bias != nullptr)
            for (int64_t o = 0; o < s.Og; ++o) std::fill(yt + o * P, yt + o * P + qn, bias[grp * s.Og + o]);
          blas::gemm(false, false, as_int(s.Og), as_int(qn), as_int(s.K), wg, as_int(s.K), win.data, as_int(win.ld),
                     beta, yt, as_int(P));
        } else {
          T* yt = y + (n * P + q0) * O + grp * s.Og;  // [qn, Og], rows O apart
          if (bias != nullptr)
            for (int64_t q = 0; q < qn; ++q) std::copy(bias + grp * s.Og, bias + (grp + 1) * s.Og, yt + q * O);
          blas::gemm(false, true, as_int(qn), as_int(s.Og), as_int(s.K), win.data, as_int(win.ld), wg, as_int(s.K),
                     beta, yt, as_int(O));
        }
      }
    }
  });
}

template <typename T>
void weight_grad(const ExecutionContext& ctx, const ConvWeightGradArgs& a) {
  const ConvGeometry& g = a.g;
  const Sizes s = sizes_of(g);
  const T* x = static_cast<const T*>(a.input);
  const T* gy = static_cast<const T*>(a.grad_output);
  T* gw = static_cast<T*>(a.grad_weight);
  const std::vector<Tap> taps = forward_taps(g);
  const int64_t tile = tile_length(s.out_positions, s.K, sizeof(T));
  const int64_t tiles = ceil_div(s.out_positions, tile);
  const int64_t tasks = g.batch * tiles, P = s.out_positions, O = g.out_channels;
  const int64_t weight_numel = O * s.K;
  if (tasks == 0) {
    std::fill(gw, gw + weight_numel, T(0));
    return;
  }
  int64_t chunks = 0;
  const std::vector<T> partial =
      conv::chunked_partials<T>(ctx, tasks, weight_numel, &chunks, [&](int64_t t_begin, int64_t t_end, T* acc) {
        T* cols = windows_are_identity(g) ? nullptr : ctx.scratch_of<T>(0, s.K * tile);
        for (int64_t t = t_begin; t < t_end; ++t) {
          const int64_t n = t / tiles, q0 = (t % tiles) * tile, qn = std::min(tile, P - q0);
          for (int64_t grp = 0; grp < g.groups; ++grp) {
            const Operand<T> win = forward_windows(g, s, taps, x, n, grp, q0, qn, cols);
            T* accg = acc + grp * s.Og * s.K;
            if (!g.channels_last) {
              const T* gyt = gy + (n * O + grp * s.Og) * P + q0;  // [Og, qn]
              blas::gemm(false, true, as_int(s.Og), as_int(s.K), as_int(qn), gyt, as_int(P), win.data,
                         as_int(win.ld), T(1), accg, as_int(s.K));
            } else {
              const T* gyt = gy + (n * P + q0) * O + grp * s.Og;  // [qn, Og]
              blas::gemm(true, false, as_int(s.Og), as_int(s.K), as_int(qn), gyt, as_int(O), win.data,
                         as_int(win.ld), T(1), accg, as_int(s.K));
            }
          }
        }
      });
  std::copy(partial.begin(), partial.begin() + weight_numel, gw);
  for (int64_t chunk = 1; chunk < chunks; ++chunk) {
    const T* p = partial.data() + chunk * weight_numel;
    for (int64_t i = 0; i < weight_numel; ++i) gw[i] += p[i];
  }
}

// One stride phase of the input gradient: input positions r + stride * t, t on `grid`,
// and the taps that reach them, each reading output position t + tap.off.
struct Phase {
  int64_t r[3];
  Dims3 grid;
  std::vector<Tap> taps;
  int64_t weight_offset = 0;  // of its packed weight block within a group's block
  int64_t tile = 0, tiles = 0;
};

std::vector<Phase> input_phases(const ConvGeometry& g) {
  // Per dim: the residues, and for each the taps with (r + padding - k * dilation) % stride == 0.
  std::vector<std::pair<int64_t, std::vector<std::pair<int64_t, int64_t>>>> per_dim[3];  // (r, [(k, off)])
  for (int i = 0; i < 3; ++i) {
    for (int64_t r = 0; r < std::min(g.stride[i], g.in[i]); ++r) {
      std::vector<std::pair<int64_t, int64_t>> ks;
      for (int64_t k = 0; k < g.kernel[i]; ++k) {
        const int64_t v = r + g.padding[i] - k * g.dilation[i];
        if (v % g.stride[i] == 0) ks.push_back({k, v / g.stride[i]});
      }
      per_dim[i].push_back({r, std::move(ks)});
    }
  }
  std::vector<Phase> phases;
  for (const auto& [rd, kd] : per_dim[0])
    for (const auto& [rh, kh] : per_dim[1])
      for (const auto& [rw, kw] : per_dim[2]) {
        Phase p;
        p.r[0] = rd;
        p.r[1] = rh;
        p.r[2] = rw;
        const int64_t r[3] = {rd, rh, rw};
        for (int i = 0; i < 3; ++i) p.grid.d[i] = ceil_div(g.in[i] - r[i], g.stride[i]);
        for (const auto& [a, oa] : kd)
          for (const auto& [b, ob] : kh)
            for (const auto& [e, oe] : kw) p.taps.push_back({(a * g.kernel[1] + b) * g.kernel[2] + e, {oa, ob, oe}});
        phases.push_back(std::move(p));
      }
  return phases;
}

template <typename T>
void input_grad(const ExecutionContext& ctx, const ConvInputGradArgs& a) {
  const ConvGeometry& g = a.g;
  const Sizes s = sizes_of(g);
  const T* gy = static_cast<const T*>(a.grad_output);
  const T* w = static_cast<const T*>(a.weight);
  T* gx = static_cast<T*>(a.grad_input);
  const int64_t C = g.in_channels, O = g.out_channels, Pin = s.in_positions, Pout = s.out_positions;
  const bool unit_stride = g.stride[0] == 1 && g.stride[1] == 1 && g.stride[2] == 1;
  std::vector<Phase> phases = input_phases(g);

  // The weight regrouped per phase: [group][phase][(tap, o)][c], taps*Og*Cg per group.
  const int64_t group_block = s.taps * s.Og * s.Cg;
  std::vector<T> packed(static_cast<size_t>(g.groups * group_block));
  int64_t offset = 0;
  std::vector<int64_t> task_start{0};
  for (Phase& p : phases) {
    p.weight_offset = offset;
    offset += static_cast<int64_t>(p.taps.size()) * s.Og * s.Cg;
    const int64_t row_len = std::max<int64_t>(static_cast<int64_t>(p.taps.size()) * s.Og, s.Cg);
    p.tile = tile_length(p.grid.numel(), row_len, sizeof(T));
    p.tiles = ceil_div(p.grid.numel(), p.tile);
    task_start.push_back(task_start.back() + p.tiles);
  }
  for (int64_t grp = 0; grp < g.groups; ++grp)
    for (const Phase& p : phases)
      for (size_t l = 0; l < p.taps.size(); ++l)
        for (int64_t o = 0; o < s.Og; ++o) {
          T* dst = packed.data() + grp * group_block + p.weight_offset + (static_cast<int64_t>(l) * s.Og + o) * s.Cg;
          const int64_t oc = grp * s.Og + o, tap = p.taps[l].index;
          for (int64_t c = 0; c < s.Cg; ++c)
            dst[c] = g.channels_last ? w[(oc * s.taps + tap) * s.Cg + c] : w[(oc * s.Cg + c) * s.taps + tap];
        }

  const int64_t tasks_per_sample = task_start.back();
  const bool identity = windows_are_identity(g);
  const int64_t one[3] = {1, 1, 1};
  ctx.pool().parallel_for(g.batch * tasks_per_sample, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / tasks_per_sample, rem = t % tasks_per_sample;
      const size_t pi = static_cast<size_t>(
          std::upper_bound(task_start.begin(), task_start.end(), rem) - task_start.begin() - 1);
      const Phase& p = phases[pi];
      const int64_t L = static_cast<int64_t>(p.taps.size()), KL = L * s.Og;
      const int64_t q0 = (rem - task_start[pi]) * p.tile, qn = std::min(p.tile, p.grid.numel() - q0);
      T* cols = identity ? nullptr : ctx.scratch_of<T>(0, std::max<int64_t>(1, KL) * p.tile);
      T* staging = unit_stride ? nullptr : ctx.scratch_of<T>(1, s.Cg * p.tile);
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        // Where the GEMM writes: in place for stride 1 (the phase is the whole input),
        // else a staging tile scattered to the phase's positions below.
        T* dst;
        int64_t ldd;
        if (unit_stride) {
          dst = g.channels_last ? gx + (n * Pin + q0) * C + grp * s.Cg : gx + (n * C + grp * s.Cg) * Pin + q0;
          ldd = g.channels_last ? C : Pin;
        } else {
          dst = staging;
          ldd = g.channels_last ? s.Cg : qn;
        }
        const T* wp = packed.data() + grp * group_block + p.weight_offset;
        if (L == 0) {  // no tap reaches these positions
          for (int64_t i = 0; i < (g.channels_last ? qn : s.Cg); ++i)
            std::fill(dst + i * ldd, dst + i * ldd + (g.channels_last ? s.Cg : qn), T(0));
        } else if (!g.channels_last) {
          Operand<T> win{cols, qn};
          const T* planes = gy + (n * O + grp * s.Og) * Pout;
          if (identity) {
            win = {planes + q0, Pout};
          } else {
            for (int64_t l = 0; l < L; ++l)
              for (int64_t o = 0; o < s.Og; ++o)
                conv::pack_planar_row(cols + (l * s.Og + o) * qn, planes + o * Pout, s.out, p.grid, one,
                                      p.taps[l].off, q0, qn);
          }
          blas::gemm(true, false, as_int(s.Cg), as_int(qn), as_int(KL), wp, as_int(s.Cg), win.data, as_int(win.ld),
                     T(0), dst, as_int(ldd));
        } else {
          Operand<T> win{cols, KL};
          const T* base = gy + n * Pout * O + grp * s.Og;
          if (identity) {
            win = {base + q0 * O, O};
          } else {
            conv::pack_pixel_rows(cols, base, O, s.Og, s.out, p.grid, one, p.taps, q0, qn);
          }
          blas::gemm(false, false, as_int(qn), as_int(s.Cg), as_int(KL), win.data, as_int(win.ld), wp, as_int(s.Cg),
                     T(0), dst, as_int(ldd));
        }
        if (unit_stride) continue;
        // Scatter the staging tile to the phase's input positions.
        const int64_t gw = p.grid.d[2], gh = p.grid.d[1];
        for (int64_t q = q0; q < q0 + qn; ++q) {
          const int64_t qw = q % gw, qh = (q / gw) % gh, qd = q / (gw * gh);
          const int64_t pos = ((p.r[0] + g.stride[0] * qd) * g.in[1] + p.r[1] + g.stride[1] * qh) * g.in[2] + p.r[2] +
                              g.stride[2] * qw;
          if (g.channels_last) {
            std::copy(staging + (q - q0) * s.Cg, staging + (q - q0 + 1) * s.Cg, gx + (n * Pin + pos) * C + grp * s.Cg);
          } else {
            T* col = gx + (n * C + grp * s.Cg) * Pin + pos;
            for (int64_t c = 0; c < s.Cg; ++c) col[c * Pin] = staging[c * qn + (q - q0)];
          }
        }
      }
    }
  });
}

}  // namespace

void conv_gemm_forward(const ExecutionContext& ctx, const ConvForwardArgs& a) {
  ensure_blas_single_threaded();
  conv::by_dtype(ctx, a, forward<float>, forward<double>);
}

void conv_gemm_input_grad(const ExecutionContext& ctx, const ConvInputGradArgs& a) {
  ensure_blas_single_threaded();
  conv::by_dtype(ctx, a, input_grad<float>, input_grad<double>);
}

void conv_gemm_weight_grad(const ExecutionContext& ctx, const ConvWeightGradArgs& a) {
  ensure_blas_single_threaded();
  conv::by_dtype(ctx, a, weight_grad<float>, weight_grad<double>);
}

}  // namespace kiln::cpu
