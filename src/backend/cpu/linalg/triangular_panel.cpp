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
// 32 on AVX-512).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int64_t kRows = 16;
#else
constexpr int64_t kRows = 8;
#endif

template <int64_t R, class D, typename T = hn::TFromD<D>>
HWY_INLINE void SolveBlock(D d, const T* HWY_RESTRICT a, int64_t a_row, int64_t a_col, T* x, int64_t x_row,
                           int64_t i0, bool unit) {
  using V = hn::Vec<D>;
  V acc[R];
  const T* row[R];
  for (int64_t r = 0; r < R; ++r) {
    acc[r] = hn::LoadU(d, x + (i0 + r) * x_row);
    row[r] = a + (i0 + r) * a_row;
  }
  for (int64_t j = 0; j < i0; ++j) {
    const V xj = hn::LoadU(d, x + j * x_row);
    const int64_t aj = j * a_col;
    for (int64_t r = 0; r < R; ++r) acc[r] = hn::NegMulAdd(hn::Set(d, row[r][aj]), xj, acc[r]);
  }
  for (int64_t r = 0; r < R; ++r) {
    const int64_t ai = (i0 + r) * a_col;
    if (!unit) acc[r] = hn::Mul(acc[r], hn::Set(d, T(1) / row[r][ai]));
    hn::StoreU(acc[r], d, x + (i0 + r) * x_row);
    for (int64_t s = r + 1; s < R; ++s) acc[s] = hn::NegMulAdd(hn::Set(d, row[s][ai]), acc[r], acc[s]);
  }
}

template <class D, typename T = hn::TFromD<D>, int64_t R = kRows - 1>
HWY_INLINE void SolveTail(D d, const T* a, int64_t a_row, int64_t a_col, T* x, int64_t x_row, int64_t i0,
                          int64_t rows, bool unit) {
  if constexpr (R >= 1) {
    if (rows == R) return SolveBlock<R>(d, a, a_row, a_col, x, x_row, i0, unit);
    SolveTail<D, T, R - 1>(d, a, a_row, a_col, x, x_row, i0, rows, unit);
  }
}

template <class D, typename T = hn::TFromD<D>>
HWY_INLINE void SolveLower(D d, const T* a, int64_t a_row, int64_t a_col, T* x, int64_t x_row, int64_t n,
                           bool unit) {
  int64_t i0 = 0;
  for (; i0 + kRows <= n; i0 += kRows) SolveBlock<kRows>(d, a, a_row, a_col, x, x_row, i0, unit);
  if (i0 < n) SolveTail(d, a, a_row, a_col, x, x_row, i0, n - i0, unit);
}

// Narrow panels: one AVX2 register (fewer lanes on targets without it).
using NarrowF32 = hn::CappedTag<float, 8>;
using NarrowF64 = hn::CappedTag<double, 4>;

int64_t PanelLanesF32(bool wide) {
  return wide ? static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>())) : static_cast<int64_t>(hn::Lanes(NarrowF32()));
}
int64_t PanelLanesF64(bool wide) {
  return wide ? static_cast<int64_t>(hn::Lanes(hn::ScalableTag<double>()))
              : static_cast<int64_t>(hn::Lanes(NarrowF64()));
}
void SolveLowerF32(bool wide, const float* a, int64_t a_row, int64_t a_col, float* x, int64_t x_row, int64_t n,
                   bool unit) {
  if (wide) SolveLower(hn::ScalableTag<float>(), a, a_row, a_col, x, x_row, n, unit);
  else SolveLower(NarrowF32(), a, a_row, a_col, x, x_row, n, unit);
}
void SolveLowerF64(bool wide, const double* a, int64_t a_row, int64_t a_col, double* x, int64_t x_row, int64_t n,
                   bool unit) {
  if (wide) SolveLower(hn::ScalableTag<double>(), a, a_row, a_col, x, x_row, n, unit);
  else SolveLower(NarrowF64(), a, a_row, a_col, x, x_row, n, unit);
}

}  // namespace kiln::cpu::linalg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu::linalg {

HWY_EXPORT(PanelLanesF32);
HWY_EXPORT(PanelLanesF64);
HWY_EXPORT(SolveLowerF32);
HWY_EXPORT(SolveLowerF64);

int64_t panel_lanes_f32(bool wide) { return HWY_DYNAMIC_DISPATCH(PanelLanesF32)(wide); }
int64_t panel_lanes_f64(bool wide) { return HWY_DYNAMIC_DISPATCH(PanelLanesF64)(wide); }
void solve_lower_panel(bool wide, const float* a, int64_t a_row, int64_t a_col, float* x, int64_t x_row, int64_t n,
                       bool unit) {
  HWY_DYNAMIC_DISPATCH(SolveLowerF32)(wide, a, a_row, a_col, x, x_row, n, unit);
}
void solve_lower_panel(bool wide, const double* a, int64_t a_row, int64_t a_col, double* x, int64_t x_row,
                       int64_t n, bool unit) {
  HWY_DYNAMIC_DISPATCH(SolveLowerF64)(wide, a, a_row, a_col, x, x_row, n, unit);
}

}  // namespace kiln::cpu::linalg
#endif  // HWY_ONCE
