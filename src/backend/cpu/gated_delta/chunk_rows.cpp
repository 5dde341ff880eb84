// Row scaling of the chunked gated delta rule (chunk_rows.h), once per Highway target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/gated_delta/chunk_rows.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/gated_delta/chunk_rows.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void ScaleRow(const float* x, float s, int64_t n, float* out) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto scale = hn::Set(d, s);
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(scale, hn::LoadU(d, x + i)), d, out + i);
  if (i < n) {
    const auto mask = hn::FirstN(d, static_cast<size_t>(n - i));
    hn::BlendedStore(hn::Mul(scale, hn::MaskedLoad(mask, d, x + i)), mask, d, out + i);
  }
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(ScaleRow);

void scale_row(const float* x, float s, int64_t n, float* out) { HWY_DYNAMIC_DISPATCH(ScaleRow)(x, s, n, out); }

int64_t chunk_rows_simd_targets() { return HWY_TARGETS; }

}  // namespace kiln::cpu
#endif  // HWY_ONCE
