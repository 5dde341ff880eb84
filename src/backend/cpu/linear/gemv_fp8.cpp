// One-row linear for float8_e4m3fn weights with per-row or 128x128 block scales (kernel
// in gemv-inl.h, the exact e4m3 decodes in common/fp8_decode-inl.h), and the same decode
// into f32 panels for the many-row path.
#undef HWY_TARGET_INCLUDE
// Also compile for AVX3_DL (AVX-512 VBMI), whose byte-table decode is ~1.4x faster than
// plain AVX3's (see gemv-inl.h); Highway 1.0.3 builds that target only on request.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#define HWY_TARGET_INCLUDE "backend/cpu/linear/gemv_fp8.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>

#include "backend/cpu/linear/gemv-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {

using Fp8GemvFn = void (*)(ThreadPool&, const LinearWeight&, const LinearActivations&, float*);

template <class Dec, DType kOut>
Fp8GemvFn Fp8GemvFor(Fp8ScaleLayout layout) {
  return layout == Fp8ScaleLayout::Block128 ? &RunGemv<Dec, kOut, true, true> : &RunGemv<Dec, kOut, true, false>;
}

template <class Dec>
Fp8GemvFn Fp8GemvOf(DType act, Fp8ScaleLayout layout) {
  switch (act) {
    case DType::Float32: return Fp8GemvFor<Dec, DType::Float32>(layout);
    case DType::BFloat16: return Fp8GemvFor<Dec, DType::BFloat16>(layout);
    case DType::Float16: return Fp8GemvFor<Dec, DType::Float16>(layout);
    default: fail(ErrorKind::Type, "linear_fp8", "unsupported activation dtype {}", dtype_name(act));
  }
}

void GemvFp8(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch) {
  Fp8GemvFn fn = nullptr;
  WithFp8Decoder([&](auto dec) HWY_ATTR { fn = Fp8GemvOf<decltype(dec)>(act.dtype, w.scale_layout); });
  fn(pool, w, act, x_scratch);
}

bool Fp8KernelsRoundX() {
  bool rounds = false;
  WithFp8Decoder([&](auto dec) HWY_ATTR { rounds = IsBf16Dot<decltype(dec)>(); });
  return rounds;
}

int64_t Fp8KernelsTarget() { return HWY_TARGET; }

// out[r, k] = decoded W[n0 + r, k] * scale, with the decode's 2^8 folded into the scale:
// the same values the GEMV kernel multiplies, decoded straight into natural order
// (fp8_decode-inl.h) and stored with plain vector stores.
void Fp8RowsToF32(const LinearWeight& w, int64_t n0, int64_t rows, float* HWY_RESTRICT out) {
  constexpr int V = fp8::kF32Vecs;
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const int64_t step = static_cast<int64_t>(fp8::F32StepCodes());
  const int64_t K = w.K;
  const int64_t k_blocks = ceil_div(K, kFp8ScaleBlock);
  constexpr float kUndoDecode = 1.0f / Fp8Weights::kDecodedPerReal;
  static_assert(Fp8Weights::kDecodedPerReal == kiln::detail::exp2_float(fp8::Kernel::kLog2Scale),
                "the GEMV decode and the panel decode agree on the decoded scale");
  const auto* base = static_cast<const uint8_t*>(w.data);
  const bool blocked = w.scale_layout == Fp8ScaleLayout::Block128;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = n0 + r;
    const uint8_t* row = base + n * w.row_stride;
    float* dst = out + r * K;
    // A step never straddles a 128-wide block (128 is a multiple of every step).
    const auto scale_at = [&](int64_t k) HWY_ATTR {
      const float s = blocked ? w.scale[n / kFp8ScaleBlock * k_blocks + k / kFp8ScaleBlock] : w.scale[n];
      return hn::Set(df, s * kUndoDecode);
    };
    VF wv[V];
    int64_t k = 0;
    for (; k + step <= K; k += step) {
      fp8::F32<fp8::Kernel>(row + k, wv);
      const VF scale = scale_at(k);
      for (int v = 0; v < V; ++v) hn::StoreU(hn::Mul(wv[v], scale), df, dst + k + v * lanes);
    }
    if (k < K) {
      HWY_ALIGN uint8_t codes[kMaxStep] = {};
      HWY_ALIGN float buf[kMaxStep];
      std::memcpy(codes, row + k, static_cast<size_t>(K - k));
      fp8::F32<fp8::Kernel>(codes, wv);
      const VF scale = scale_at(k);
      for (int v = 0; v < V; ++v) hn::Store(hn::Mul(wv[v], scale), df, buf + v * lanes);
      std::memcpy(dst + k, buf, static_cast<size_t>(K - k) * sizeof(float));
    }
  }
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(GemvFp8);
HWY_EXPORT(Fp8RowsToF32);
HWY_EXPORT(Fp8KernelsRoundX);
HWY_EXPORT(Fp8KernelsTarget);

void gemv_fp8(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch) {
  HWY_DYNAMIC_DISPATCH(GemvFp8)(pool, w, act, x_scratch);
}

// This file is built for the most targets (AVX3_DL too), a superset of the other
// gemv_<dtype>.cpp files'.
int64_t gemv_simd_targets() { return HWY_TARGETS; }

bool fp8_kernels_round_x_to_bf16() { return HWY_DYNAMIC_DISPATCH(Fp8KernelsRoundX)(); }

int64_t fp8_kernels_target() { return HWY_DYNAMIC_DISPATCH(Fp8KernelsTarget)(); }

void fp8_rows_to_f32(const LinearWeight& w, int64_t n0, int64_t rows, float* out) {
  HWY_DYNAMIC_DISPATCH(Fp8RowsToF32)(w, n0, rows, out);
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
