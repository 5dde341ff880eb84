// Register-blocked forward substitution (see triangular_panel.h), compiled once per
// Highway target.
//
// Rows are solved in blocks of kRows. A block's accumulators stay in registers while
// every already-solved row j streams past once: one load of x_j serves kRows FMAs, each
// with L(i, j) broadcast from memory, and the kRows chains are independent, so the FMA
// units are never waiting on one chain's latency. The block's own triangle is then
// substituted in registers. Rows left over after the full blocks take blocks of half,
// a quarter, ... of kRows: no padding rows are computed and no entry outside the
// triangle is read.
//
// A's row stride is a template argument: L(i0 + r, j) is then one pointer plus a
// constant offset for every r, so the inner loop is kRows FMAs with a broadcast memory
// operand each and two pointer increments. (With the stride at run time, a block of 16
// rows needs 16 row pointers; they do not fit the 16 general registers with the loop's
// own, and the spills cost more than the FMAs.) The loops over a block's rows are fully
// unrolled so the accumulators are registers, never a stack array.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/linalg/triangular_panel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/linalg/triangular_panel.h"
#include "kiln/error.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::linalg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows per block: enough independent FMA chains to cover latency x throughput (4 x 2),
// and within the register file with x_j (16 vector registers on AVX2, 32 on AVX-512;
// the broadcasts are memory operands of the FMAs). A double panel (two vectors per row)
// halves the rows: each broadcast of L(i, j) then feeds two FMAs.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int64_t kRows = 16;
#else
constexpr int64_t kRows = 8;
#endif

template <int64_t V>
constexpr int64_t kBlockRows = kRows / V;

// Rows i0 .. i0 + R - 1 of L X = X. L(i, j) is a[i * S + j * C] with C = sign(S); x's
// rows are x_row apart. Rows before i0 are solved already.
template <int64_t R, int64_t V, int64_t S, class D, typename T = hn::TFromD<D>>
HWY_INLINE void SolveBlock(D d, const T* HWY_RESTRICT a, T* HWY_RESTRICT x, int64_t x_row, int64_t i0, bool unit) {
  constexpr int64_t C = S > 0 ? 1 : -1;
  using Vec = hn::Vec<D>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  T* xi = x + i0 * x_row;
  Vec acc[R][V];
#pragma GCC unroll 16
  for (int64_t r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int64_t v = 0; v < V; ++v) acc[r][v] = hn::LoadU(d, xi + r * x_row + v * N);
  }
  // block[r * S] is L(i0 + r, j) as block walks the columns.
  const T* block = a + i0 * S;
  const T* xj = x;
  for (int64_t j = 0; j < i0; ++j, block += C, xj += x_row) {
    Vec xv[V];
#pragma GCC unroll 2
    for (int64_t v = 0; v < V; ++v) xv[v] = hn::LoadU(d, xj + v * N);
#pragma GCC unroll 16
    for (int64_t r = 0; r < R; ++r) {
      const Vec l = hn::Set(d, block[r * S]);
#pragma GCC unroll 2
      for (int64_t v = 0; v < V; ++v) acc[r][v] = hn::NegMulAdd(l, xv[v], acc[r][v]);
    }
  }
  // The block's own triangle; block is at column i0.
#pragma GCC unroll 16
  for (int64_t r = 0; r < R; ++r) {
    const T* column = block + r * C;  // column[s * S] = L(i0 + s, i0 + r)
    if (!unit) {
      const Vec inv = hn::Set(d, T(1) / column[r * S]);
#pragma GCC unroll 2
      for (int64_t v = 0; v < V; ++v) acc[r][v] = hn::Mul(acc[r][v], inv);
    }
#pragma GCC unroll 2
    for (int64_t v = 0; v < V; ++v) hn::StoreU(acc[r][v], d, xi + r * x_row + v * N);
#pragma GCC unroll 16
    for (int64_t s = r + 1; s < R; ++s) {
      const Vec l = hn::Set(d, column[s * S]);
#pragma GCC unroll 2
      for (int64_t v = 0; v < V; ++v) acc[s][v] = hn::NegMulAdd(l, acc[r][v], acc[s][v]);
    }
  }
}

// The rows left after the full blocks (fewer than 2Q): a block of Q when that many are
// left, then Q/2, ... down to 1.
template <int64_t Q, int64_t V, int64_t S, class D, typename T = hn::TFromD<D>>
HWY_INLINE void SolveRest(D d, const T* a, T* x, int64_t x_row, int64_t i0, int64_t n, bool unit) {
  if constexpr (Q >= 1) {
    if (n - i0 >= Q) {
      SolveBlock<Q, V, S>(d, a, x, x_row, i0, unit);
      i0 += Q;
    }
    SolveRest<Q / 2, V, S>(d, a, x, x_row, i0, n, unit);
  }
}

template <int64_t V, int64_t S, class D, typename T = hn::TFromD<D>>
HWY_NOINLINE void SolveLower(D d, const T* a, T* x, int64_t x_row, int64_t n, bool unit) {
  constexpr int64_t R = kBlockRows<V>;
  int64_t i0 = 0;
  for (; i0 + R <= n; i0 += R) SolveBlock<R, V, S>(d, a, x, x_row, i0, unit);
  SolveRest<R / 2, V, S>(d, a, x, x_row, i0, n, unit);
}

template <int64_t V, class D, typename T = hn::TFromD<D>>
void SolveLowerStrided(D d, const T* a, int64_t a_row, T* x, int64_t x_row, int64_t n, bool unit) {
  switch (a_row) {
    case 16: return SolveLower<V, 16>(d, a, x, x_row, n, unit);
    case 32: return SolveLower<V, 32>(d, a, x, x_row, n, unit);
    case 64: return SolveLower<V, 64>(d, a, x, x_row, n, unit);
    case -16: return SolveLower<V, -16>(d, a, x, x_row, n, unit);
    case -32: return SolveLower<V, -32>(d, a, x, x_row, n, unit);
    case -64: return SolveLower<V, -64>(d, a, x, x_row, n, unit);
    default: return;  // solve_lower_panel checked panel_reads_in_place
  }
}

template <typename T>
int64_t PanelLanes(int width) {
  const int64_t full = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<T>()));
  if (width == 0) return static_cast<int64_t>(hn::Lanes(hn::CappedTag<T, 32 / sizeof(T)>()));
  return width == 1 ? full : 2 * full;
}

template <typename T>
void SolveLowerTyped(int width, const T* a, int64_t a_row, T* x, int64_t x_row, int64_t n, bool unit) {
  if (width == 0) SolveLowerStrided<1>(hn::CappedTag<T, 32 / sizeof(T)>(), a, a_row, x, x_row, n, unit);
  else if (width == 1) SolveLowerStrided<1>(hn::ScalableTag<T>(), a, a_row, x, x_row, n, unit);
  else SolveLowerStrided<2>(hn::ScalableTag<T>(), a, a_row, x, x_row, n, unit);
}

int64_t PanelLanesF32(int width) { return PanelLanes<float>(width); }
int64_t PanelLanesF64(int width) { return PanelLanes<double>(width); }
void SolveLowerF32(int width, const float* a, int64_t a_row, float* x, int64_t x_row, int64_t n, bool unit) {
  SolveLowerTyped(width, a, a_row, x, x_row, n, unit);
}
void SolveLowerF64(int width, const double* a, int64_t a_row, double* x, int64_t x_row, int64_t n, bool unit) {
  SolveLowerTyped(width, a, a_row, x, x_row, n, unit);
}

}  // namespace kiln::cpu::linalg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu::linalg {

int64_t triangular_panel_simd_targets() { return HWY_TARGETS; }

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

bool panel_reads_in_place(int64_t a_row, int64_t a_col) {
  if (a_col != 1 && a_col != -1) return false;
  const int64_t s = a_row * a_col;
  return s == 16 || s == 32 || s == 64;
}

namespace {
void check_layout(int64_t a_row, int64_t a_col, int64_t n) {
  KILN_CHECK(panel_reads_in_place(a_row, a_col) && n >= 0 && n <= kPackedRowStride, "solve_triangular",
             "internal: the panel kernel got a {}x{} triangle with strides ({}, {}); the caller packs such layouts", n,
             n, a_row, a_col);
}
}  // namespace

void solve_lower_panel(PanelWidth width, const float* a, int64_t a_row, int64_t a_col, float* x, int64_t x_row,
                       int64_t n, bool unit) {
  check_layout(a_row, a_col, n);
  HWY_DYNAMIC_DISPATCH(SolveLowerF32)(static_cast<int>(width), a, a_row, x, x_row, n, unit);
}
void solve_lower_panel(PanelWidth width, const double* a, int64_t a_row, int64_t a_col, double* x, int64_t x_row,
                       int64_t n, bool unit) {
  check_layout(a_row, a_col, n);
  HWY_DYNAMIC_DISPATCH(SolveLowerF64)(static_cast<int>(width), a, a_row, x, x_row, n, unit);
}

}  // namespace kiln::cpu::linalg
#endif  // HWY_ONCE
