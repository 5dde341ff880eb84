// Register-blocked forward substitution (see triangular_panel.h), compiled once per
// Highway target.
//
// Rows are solved in blocks of kRows. A block's accumulators stay in registers while
// every already-solved row j streams past once: one load of x_j serves kRows FMAs, each
// with L(i, j) broadcast from memory, and the kRows chains are independent, so the FMA
// units are never waiting on one chain's latency. The block's own triangle is then
// substituted in registers. A last block of fewer rows takes an instantiation of its
// exact size: no padding rows are computed and no entry outside the triangle is read.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/linalg/triangular_panel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/linalg/triangular_panel.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::linalg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows per block: enough independent FMA chains to cover latency x throughput (4 x 2),
// and within the register file with x_j and a broadcast (16 vector registers on AVX2,
// 32 on AVX-512). A double panel (two vectors per row) halves the rows: each broadcast
// of L(i, j) then feeds two FMAs, so loads no longer bound the FMA rate.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int64_t kRows = 16;
#else
constexpr int64_t kRows = 8;
#endif

template <int64_t V>
constexpr int64_t kBlockRows = kRows / V;

template <int64_t R, int64_t V, class D, typename T = hn::TFromD<D>>
HWY_INLINE void SolveBlock(D d, const T* HWY_RESTRICT a, int64_t a_row, int64_t a_col, T* x, int64_t x_row,
                           int64_t i0, bool unit) {
  using Vec = hn::Vec<D>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  Vec acc[R][V];
  const T* row[R];
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t v = 0; v < V; ++v) acc[r][v] = hn::LoadU(d, x + (i0 + r) * x_row + v * N);
    row[r] = a + (i0 + r) * a_row;
  }
  for (int64_t j = 0; j < i0; ++j) {
    Vec xj[V];
    for (int64_t v = 0; v < V; ++v) xj[v] = hn::LoadU(d, x + j * x_row + v * N);
    const int64_t aj = j * a_col;
    for (int64_t r = 0; r < R; ++r) {
      const Vec l = hn::Set(d, row[r][aj]);
      for (int64_t v = 0; v < V; ++v) acc[r][v] = hn::NegMulAdd(l, xj[v], acc[r][v]);
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    const int64_t ai = (i0 + r) * a_col;
    if (!unit) {
      const Vec inv = hn::Set(d, T(1) / row[r][ai]);
      for (int64_t v = 0; v < V; ++v) acc[r][v] = hn::Mul(acc[r][v], inv);
    }
    for (int64_t v = 0; v < V; ++v) hn::StoreU(acc[r][v], d, x + (i0 + r) * x_row + v * N);
    for (int64_t s = r + 1; s < R; ++s) {
      const Vec l = hn::Set(d, row[s][ai]);
      for (int64_t v = 0; v < V; ++v) acc[s][v] = hn::NegMulAdd(l, acc[r][v], acc[s][v]);
    }
  }
}

template <int64_t V, class D, typename T = hn::TFromD<D>, int64_t R = kBlockRows<V> - 1>
HWY_INLINE void SolveTail(D d, const T* a, int64_t a_row, int64_t a_col, T* x, int64_t x_row, int64_t i0,
                          int64_t rows, bool unit) {
  if constexpr (R >= 1) {
    if (rows == R) return SolveBlock<R, V>(d, a, a_row, a_col, x, x_row, i0, unit);
    SolveTail<V, D, T, R - 1>(d, a, a_row, a_col, x, x_row, i0, rows, unit);
  }
}

template <int64_t V, class D, typename T = hn::TFromD<D>>
HWY_INLINE void SolveLower(D d, const T* a, int64_t a_row, int64_t a_col, T* x, int64_t x_row, int64_t n,
                           bool unit) {
  constexpr int64_t R = kBlockRows<V>;
  int64_t i0 = 0;
  for (; i0 + R <= n; i0 += R) SolveBlock<R, V>(d, a, a_row, a_col, x, x_row, i0, unit);
  if (i0 < n) SolveTail<V>(d, a, a_row, a_col, x, x_row, i0, n - i0, unit);
}

template <typename T>
int64_t PanelLanes(int width) {
  const int64_t full = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<T>()));
  if (width == 0) return static_cast<int64_t>(hn::Lanes(hn::CappedTag<T, 32 / sizeof(T)>()));
  return width == 1 ? full : 2 * full;
}

template <typename T>
void SolveLowerTyped(int width, const T* a, int64_t a_row, int64_t a_col, T* x, int64_t x_row, int64_t n, bool unit) {
  if (width == 0) SolveLower<1>(hn::CappedTag<T, 32 / sizeof(T)>(), a, a_row, a_col, x, x_row, n, unit);
  else if (width == 1) SolveLower<1>(hn::ScalableTag<T>(), a, a_row, a_col, x, x_row, n, unit);
  else SolveLower<2>(hn::ScalableTag<T>(), a, a_row, a_col, x, x_row, n, unit);
}

int64_t PanelLanesF32(int width) { return PanelLanes<float>(width); }
int64_t PanelLanesF64(int width) { return PanelLanes<double>(width); }
void SolveLowerF32(int width, const float* a, int64_t a_row, int64_t a_col, float* x, int64_t x_row, int64_t n,
                   bool unit) {
  SolveLowerTyped(width, a, a_row, a_col, x, x_row, n, unit);
}
void SolveLowerF64(int width, const double* a, int64_t a_row, int64_t a_col, double* x, int64_t x_row, int64_t n,
                   bool unit) {
  SolveLowerTyped(width, a, a_row, a_col, x, x_row, n, unit);
}

}  // namespace kiln::cpu::linalg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu::linalg {

HWY_EXPORT(PanelLanesF32);
HWY_EXPORT(PanelLanesF64);
HWY_EXPORT(SolveLowerF32);
HWY_EXPORT(SolveLowerF64);

int64_t panel_lanes(PanelWidth width, float) {
  return HWY_DYNAMIC_DISPATCH(PanelLanesF32)(static_cast<int>(width));
}
int64_t panel_lanes(PanelWidth width, double) {
  return HWY_DYNAMIC_DISPATCH(PanelLanesF64)(static_cast<int>(width));
}
void solve_lower_panel(PanelWidth width, const float* a, int64_t a_row, int64_t a_col, float* x, int64_t x_row,
                       int64_t n, bool unit) {
  HWY_DYNAMIC_DISPATCH(SolveLowerF32)(static_cast<int>(width), a, a_row, a_col, x, x_row, n, unit);
}
void solve_lower_panel(PanelWidth width, const double* a, int64_t a_row, int64_t a_col, double* x, int64_t x_row,
                       int64_t n, bool unit) {
  HWY_DYNAMIC_DISPATCH(SolveLowerF64)(static_cast<int>(width), a, a_row, a_col, x, x_row, n, unit);
}

}  // namespace kiln::cpu::linalg
#endif  // HWY_ONCE
