// The one-row linear kernel, y[n] = scale_n * sum_k x[k] W[n, k] + bias[n], compiled once
// per Highway target by gemv_<dtype>.cpp (internal).
//
// Decode is a bandwidth race. At ~25 GB/s per core a core sees 16 bf16 weights every
// ~1.3 ns, and the decode must also leave the core free to keep enough cache-line fills
// in flight. Measured on this Zen 5 VM (one core, weights in L2) the kernels sustain ~3
// vector instructions per cycle, so instructions per weight is the figure to minimise:
//   - x is converted to f32 once per call and per thread into scratch, in whatever lane
//     order the weight decode produces, and shared by 8 output rows per pass (8 rows x 2
//     accumulators hide the FMA latency).
//   - bf16: a 32-bit lane holds two bf16 weights; `lane << 16` is the even weight as an
//     f32 and `lane & 0xFFFF0000` the odd one. One load, one shift, one and, two FMAs per
//     2L weights (~60 G weights/s per core in L2).
//   - f16: F16C's vcvtph2ps, one per L weights, exact for every code.
//   - float8_e4m3fn, every path exact for every code (normal, subnormal, zero), the
//     decoded value being 2^-8 times the real one (the 2^8 is folded into the scale); the
//     decodes live in common/fp8_decode-inl.h, shared with the prefill kernels:
//     . AVX3_DL (AVX-512 VBMI): two 128-entry byte-table lookups (vpermi2b) give the high
//       and low byte of each weight's bf16 pattern, the sign is OR-ed into the high byte,
//       two byte unpacks make bf16 words, then the bf16 split above: 14 instructions per
//       64 weights (~45 G weights/s per core in L2).
//     . AVX3: sign-extend bytes to 16 bits, << 4, & 0x87FF | 0x3800: the bf16 pattern
//       s 0111eeee mmm0000, exponent 112 + e, i.e. 2^(e-7) (1 + m/8) * 2^-8, for every
//       code with e >= 1; codes with e == 0 (zero, subnormals) get an XOR fix from a
//       vpermw lookup; then the bf16 split: 10 instructions per 32 weights (~35 G/s).
//     . AVX2: sign-extend, << 7, & 0xBF80 gives the f16 code s 0eeee mmm0000000, exactly
//       the e4m3 value times 2^-8 (f16's exponent bias, 15, is 8 more than e4m3's, and a
//       subnormal 0 0000 mmm lands on the f16 subnormal m * 2^-17 = m * 2^-9 * 2^-8),
//       widened by F16C.
//     No decoded value is an f32 denormal (the smallest is 2^-17), so DAZ/FTZ settings
//     cannot change results. The NaN codes 0x7F/0xFF decode as ±480 on every path (the
//     pattern continues past 448): a quantised weight never holds them, because
//     quantisation saturates to ±448 and refuses non-finite input, so the kernel does
//     not spend instructions per weight on turning them back into NaN.
//     AVX512-BF16's vdpbf16ps on the VBMI-decoded pairs (bf16 activations only, with
//     DAZ/FTZ) cuts the step to 8 instructions, ~68 G weights/s in L2, but streaming
//     from DRAM it measured no faster (24.9 vs 28.0 GB/s on one core for 4096x4096,
//     equal on 2 cores and other shapes), so it is not used.
//   - scales stay out of the inner product: a per-row scale multiplies the final sum;
//     128x128 block scales multiply each 128-wide block's vector partial sums once
//     (the 8 rows of a pass always share a row block).
//   - each step requests the weights 1 KiB further along its row, wrapping into the next
//     pass near the row's end (Prefetch::kRolling): two cores then stream ~50 GB/s from
//     DRAM for bf16 and FP8, ~0.9 of the read roofline on large matrices.
// Targets without F16C (the scalar baseline) decode through kiln's scalar conversions
// into a vector buffer: slow, but the same values.
// Rows are split over the pool in groups of 8 with a grain of kMinChunkBytes of weights,
// so the smallest matrices stay on one thread.

// Per-target include guard (Highway's pattern: the toggle flips once per target).
#if defined(KILN_BACKEND_CPU_GEMV_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_BACKEND_CPU_GEMV_INL_H_
#undef KILN_BACKEND_CPU_GEMV_INL_H_
#else
#define KILN_BACKEND_CPU_GEMV_INL_H_
#endif

#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>
#include <kiln/scalar_types.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cpu/cast/cast.h"
#include "backend/cpu/common/codecs-inl.h"
#include "backend/cpu/common/fp8_decode-inl.h"
#include "backend/cpu/linear/linear_kernels.h"
#include "kiln/error.h"
#include "kiln/int_math.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
// Internal linkage: every gemv_<dtype>.cpp includes this file.
namespace {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using DI = hn::RebindToSigned<DF>;

// The SIMD decoders need F16C (x86 AVX2 and up); they are not even compiled elsewhere.
#undef KILN_GEMV_SIMD_DECODE
#if (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL) && !defined(HWY_DISABLE_F16C)
#define KILN_GEMV_SIMD_DECODE 1
#else
#define KILN_GEMV_SIMD_DECODE 0
#endif

// Weights per inner step at most: four f32 vectors.
constexpr size_t kMaxStep = 4 * HWY_MAX_BYTES / sizeof(float);

// Rows per pass sharing the x loads: 8 in the one-row linear; the MoE expert kernel
// works in groups of 4 (kRowsPerPass).
constexpr int kGemvRowsPerPass = 8;
constexpr int kRowsPerPass = 4;

// Weight bytes a thread should stream at least (~2.5 us at ~25 GB/s) before a split pays
// for handing a chunk to a pool worker. A split costs ~1 us (the round trip to a spinning
// worker and the cache lines the two cores exchange). Measured on the small decode shapes
// (cold weights, 2 threads), two 64 KiB chunks against one thread: bf16 32 x 2048 1.14x,
// 64 x 2048 1.29x, FP8 64 x 2048 0.99x, 128 x 2048 1.17x; two 32 KiB chunks: FP8
// 32 x 2048 0.8x.
constexpr int64_t kMinChunkBytes = int64_t{64} << 10;

// ---- weight decoders ----
// A decoder turns one step of kVecs * L weights at p into kVecs f32 vectors (Load), each
// value kDecodedPerReal times the weight. When kPermutesX the vectors hold the step's
// weights in another order, and ArrangeX puts one step of x in the same order; the FP8
// decoders also describe it by XSource(slot, L), the step offset that slot
// (= vector v * L + lane) holds, to store decoded panels in natural order.

struct F32Weights {
  using T = float;
  static constexpr int kVecs = 2;
  static constexpr bool kPermutesX = false;
  static constexpr float kDecodedPerReal = 1.0f;
  HWY_INLINE void Load(const T* HWY_RESTRICT p, VF* w) const {
    const DF df;
    w[0] = hn::LoadU(df, p);
    w[1] = hn::LoadU(df, p + hn::Lanes(df));
  }
};

// Decodes element by element with a scalar conversion, for targets without F16C.
template <typename Elem, float (*kToFloat)(Elem), int kLog2DecodedPerReal>
struct ScalarDecodedWeights {
  using T = Elem;
  static constexpr int kVecs = 2;
  static constexpr bool kPermutesX = false;
  static constexpr float kDecodedPerReal = detail::exp2_float(kLog2DecodedPerReal);
  HWY_INLINE void Load(const T* HWY_RESTRICT p, VF* w) const {
    const DF df;
    const size_t lanes = hn::Lanes(df);
    HWY_ALIGN float buf[kMaxStep];
    for (size_t i = 0; i < 2 * lanes; ++i) buf[i] = kToFloat(p[i]);
    w[0] = hn::Load(df, buf);
    w[1] = hn::Load(df, buf + lanes);
  }
};

[[maybe_unused]] float Bf16ToFloat(uint16_t bits) { return bf16_bits_to_float(bits); }
[[maybe_unused]] float F16ToFloat(uint16_t bits) { return half_bits_to_float(bits); }
// The scalar form of the FP8 decode (kernel policy, fp8_decode-inl.h).
[[maybe_unused]] float Fp8ToScaledFloat(uint8_t b) { return bf16_bits_to_float(fp8_decode::kPatternTable<fp8::Kernel>.x[b]); }

// Slot order of decoders that split 32-bit lanes into their even and odd 16-bit halves:
// vector 0 holds the even offsets, vector 1 the odd ones.
[[maybe_unused]] int EvenOddSource(int slot, int lanes) { return 2 * (slot % lanes) + slot / lanes; }

#if KILN_GEMV_SIMD_DECODE
// Moves the even-offset floats of p[0, 2L) to p[0, L) and the odd ones to p[L, 2L).
HWY_INLINE void SeparateEvenOdd(float* HWY_RESTRICT p) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const VF first = hn::LoadU(df, p);
  const VF second = hn::LoadU(df, p + lanes);
  hn::StoreU(hn::ConcatEven(df, second, first), df, p);
  hn::StoreU(hn::ConcatOdd(df, second, first), df, p + lanes);
}

// Splits 2L bf16 patterns (as 16-bit lanes) into f32 vectors of the even and odd ones.
HWY_INLINE void SplitBf16Pairs(hn::Vec<hn::RebindToUnsigned<DF>> pairs, VF* w) {
  const DF df;
  const hn::RebindToUnsigned<DF> du32;
  w[0] = hn::BitCast(df, hn::ShiftLeft<16>(pairs));
  w[1] = hn::BitCast(df, hn::And(pairs, hn::Set(du32, uint32_t{0xFFFF0000u})));
}

struct SimdBf16Weights {
  using T = uint16_t;
  static constexpr int kVecs = 2;
  static constexpr bool kPermutesX = true;
  static constexpr float kDecodedPerReal = 1.0f;
  static void ArrangeX(float* HWY_RESTRICT step) { SeparateEvenOdd(step); }
  HWY_INLINE void Load(const T* HWY_RESTRICT p, VF* w) const {
    const hn::Repartition<uint16_t, DF> du16;
    SplitBf16Pairs(hn::BitCast(hn::RebindToUnsigned<DF>(), hn::LoadU(du16, p)), w);
  }
};

struct SimdF16Weights {
  using T = uint16_t;
  static constexpr int kVecs = 2;
  static constexpr bool kPermutesX = false;
  static constexpr float kDecodedPerReal = 1.0f;
  HWY_INLINE void Load(const T* HWY_RESTRICT p, VF* w) const {
    const DF df;
    w[0] = codecs::LoadF16(df, p);
    w[1] = codecs::LoadF16(df, p + hn::Lanes(df));
  }
};

// The FP8 decoders below are fp8_decode-inl.h's (the kernel policy: values 2^-8 times the
// real ones, NaN codes as ±480), arranged into the f32 vectors the kernels multiply.
// kPacksBf16: Load is LoadBf16Words followed by SplitBf16Pairs on each word vector, so
// the words themselves are the packed form of a step (moe_experts_tiled-inl.h).
#if HWY_TARGET == HWY_AVX3_DL
struct VbmiFp8Weights {
  using T = uint8_t;
  static constexpr int kVecs = 4;
  static constexpr bool kPermutesX = true;
  static constexpr bool kPacksBf16 = true;
  static constexpr float kDecodedPerReal = detail::exp2_float(-8);
  // The byte unpacks work per 128-bit block b: words from bytes 16b..16b+7 go to the
  // first vector pair, 16b+8..16b+15 to the second; each pair then splits even/odd.
  static int XSource(int slot, int lanes) {
    const int v = slot / lanes, lane = slot % lanes;
    return 16 * (lane / 4) + 8 * (v / 2) + 2 * (lane % 4) + (v % 2);
  }
  // XSource with shuffles: gather the first and second 8-float halves of each 16, then
  // split each set even/odd.
  static void ArrangeX(float* HWY_RESTRICT step) {
    const __m512 x0 = _mm512_loadu_ps(step), x1 = _mm512_loadu_ps(step + 16);
    const __m512 x2 = _mm512_loadu_ps(step + 32), x3 = _mm512_loadu_ps(step + 48);
    _mm512_storeu_ps(step, _mm512_shuffle_f32x4(x0, x1, 0x44));  // x[0..8), x[16..24)
    _mm512_storeu_ps(step + 16, _mm512_shuffle_f32x4(x2, x3, 0x44));
    _mm512_storeu_ps(step + 32, _mm512_shuffle_f32x4(x0, x1, 0xEE));  // x[8..16), x[24..32)
    _mm512_storeu_ps(step + 48, _mm512_shuffle_f32x4(x2, x3, 0xEE));
    SeparateEvenOdd(step);
    SeparateEvenOdd(step + 32);
  }
  // The decoder's native word order (its 5-instruction form, no code permutation).
  HWY_INLINE void LoadBf16Words(const T* HWY_RESTRICT p, fp8::VU16* words) const {
    fp8::Bf16Native<fp8::Kernel>(p, words);
  }
  HWY_INLINE void Load(const T* HWY_RESTRICT p, VF* w) const {
    fp8::VU16 words[2];
    LoadBf16Words(p, words);
    const hn::RebindToUnsigned<DF> du32;
    SplitBf16Pairs(hn::BitCast(du32, words[0]), w);
    SplitBf16Pairs(hn::BitCast(du32, words[1]), w + 2);
  }
};
using Fp8Weights = VbmiFp8Weights;

#elif HWY_TARGET == HWY_AVX3
struct Avx3Fp8Weights {
  using T = uint8_t;
  static constexpr int kVecs = 2;
  static constexpr bool kPermutesX = true;
  static constexpr bool kPacksBf16 = true;
  static constexpr float kDecodedPerReal = detail::exp2_float(-8);
  static int XSource(int slot, int lanes) { return EvenOddSource(slot, lanes); }
  static void ArrangeX(float* HWY_RESTRICT step) { SeparateEvenOdd(step); }
  HWY_INLINE void LoadBf16Words(const T* HWY_RESTRICT p, fp8::VU16* words) const { fp8::Bf16<fp8::Kernel>(p, words); }
  HWY_INLINE void Load(const T* HWY_RESTRICT p, VF* w) const {
    fp8::VU16 words[1];
    LoadBf16Words(p, words);
    SplitBf16Pairs(hn::BitCast(hn::RebindToUnsigned<DF>(), words[0]), w);
  }
};
using Fp8Weights = Avx3Fp8Weights;

#else  // AVX2
// F16C: the f16 code of value * 2^-8 widened (fp8_decode-inl.h), in natural order.
struct F16cFp8Weights {
  using T = uint8_t;
  static constexpr int kVecs = 2;
  static constexpr bool kPermutesX = false;
  static constexpr bool kPacksBf16 = false;
  static constexpr float kDecodedPerReal = detail::exp2_float(-8);
  HWY_INLINE void Load(const T* HWY_RESTRICT p, VF* w) const { fp8::F32<fp8::Kernel>(p, w); }
};
using Fp8Weights = F16cFp8Weights;
#endif
using Bf16Weights = SimdBf16Weights;
using F16Weights = SimdF16Weights;

#else  // !KILN_GEMV_SIMD_DECODE
using Bf16Weights = ScalarDecodedWeights<uint16_t, &Bf16ToFloat, 0>;
using F16Weights = ScalarDecodedWeights<uint16_t, &F16ToFloat, 0>;
using Fp8Weights = ScalarDecodedWeights<uint8_t, &Fp8ToScaledFloat, -8>;
#endif

template <class Dec>
HWY_INLINE int64_t StepOf(DF df) {
  return Dec::kVecs * static_cast<int64_t>(hn::Lanes(df));
}

// Decodes the last n < step weights of a row through a zero-padded buffer, so the tail
// sees exactly the arithmetic of the body (the x scratch is zero past K).
template <class Dec>
HWY_INLINE void LoadTail(const Dec& dec, const typename Dec::T* HWY_RESTRICT p, size_t n, VF* w) {
  HWY_ALIGN typename Dec::T buf[kMaxStep] = {};
  std::memcpy(buf, p, n * sizeof(typename Dec::T));
  dec.Load(buf, w);
}

// ---- activations, bias and output in their dtype ----
template <DType kDt>
HWY_INLINE float ReadScalar(const void* p, int64_t i) {
  if constexpr (kDt == DType::Float32) return static_cast<const float*>(p)[i];
  if constexpr (kDt == DType::BFloat16) return bf16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
  if constexpr (kDt == DType::Float16) return half_bits_to_float(static_cast<const uint16_t*>(p)[i]);
}

template <DType kDt>
HWY_INLINE void WriteScalar(void* p, int64_t i, float v) {
  if constexpr (kDt == DType::Float32) static_cast<float*>(p)[i] = v;
  if constexpr (kDt == DType::BFloat16) static_cast<uint16_t*>(p)[i] = float_to_bf16_bits(v);
  if constexpr (kDt == DType::Float16) static_cast<uint16_t*>(p)[i] = float_to_half_bits(v);
}

// x -> f32 scratch in the slot order of Dec, zero from K to a whole step.
template <class Dec>
void PrepareX(const LinearActivations& act, int64_t K, float* HWY_RESTRICT xs) {
  const DF df;
  const int64_t step = StepOf<Dec>(df);
  const int64_t padded = ceil_div(K, step) * step;
  to_f32(act.dtype, act.x, xs, K);
  std::fill(xs + K, xs + padded, 0.0f);
  if constexpr (Dec::kPermutesX) {
    for (int64_t k = 0; k < padded; k += step) Dec::ArrangeX(xs + k);
  }
}

// Where each step requests the weights it will need later, so that enough cache-line
// fills are in flight for the decode work to overlap the memory latency. The hardware
// prefetchers stop at each 4 KiB page (one FP8 row of K = 4096), so without software
// prefetch every row start waits for DRAM. Addresses past the matrix are harmless:
// prefetches never fault.
enum class Prefetch {
  // The same offset in the rows R further on, which the next pass reads: on Zen 5 this
  // lifted the 4-row FP8 kernel from ~15 to ~22 GB/s on one core. The MoE expert kernel
  // uses it (its passes of 4 rows hop between experts).
  kNextPass,
  // kPrefetchAheadBytes further along the same row; within the last stretch of a row, the
  // same offset in the row R further on instead (the start of the next pass), so a pass
  // begins with its first lines in flight. The lead, R x 1 KiB, is short enough that the
  // lines are still in L1 when read, which a whole pass ahead is not once R rows plus x
  // outgrow L1 (8 FP8 rows of K = 4096 and x take 48 KiB). Measured on 2 threads over the
  // decode shapes, the one-row linear with 8-row passes and this prefetch streams 1.08x
  // (bf16) to 1.25x (FP8) faster than with 4-row passes and kNextPass.
  kRolling,
};
constexpr int64_t kPrefetchAheadBytes = 1024;

// Offset (elements) from a step's address at k to the weights it requests.
template <Prefetch P, int R, typename T>
HWY_INLINE int64_t PrefetchOffset(int64_t k, int64_t K, int64_t ldw) {
  if constexpr (P == Prefetch::kNextPass) {
    return R * ldw;
  } else {
    constexpr int64_t kAhead = kPrefetchAheadBytes / static_cast<int64_t>(sizeof(T));
    return k + kAhead < K ? kAhead : R * ldw + kAhead - K;
  }
}

// Requests the cache lines of one step of weights at p.
template <typename T>
HWY_INLINE void PrefetchStep(const T* p, int64_t step) {
  constexpr int64_t kLine = 64;
  const char* bytes = reinterpret_cast<const char*>(p);
  for (int64_t off = 0; off < step * static_cast<int64_t>(sizeof(T)); off += kLine) hwy::Prefetch(bytes + off);
}

// sums[r] = sum_k x[k] * decoded W[r, k], over R rows starting at w with row stride ldw.
// kBlocked: each 128-wide block's partial sums are multiplied by block_scale[block].
template <class Dec, int R, bool kBlocked, Prefetch P = Prefetch::kNextPass>
HWY_INLINE void DotRows(const typename Dec::T* HWY_RESTRICT w, int64_t ldw, const float* HWY_RESTRICT xs, int64_t K,
                        const float* HWY_RESTRICT block_scale, float* HWY_RESTRICT sums) {
  constexpr int V = Dec::kVecs;
  // Accumulators per row: one per decoded vector while R * V <= 16, else fewer (vector v
  // adds into accumulator v % A), leaving registers for x, the decode tables and
  // temporaries; 8 rows still keep 16 independent FMA chains.
  constexpr int A = R * V <= 16 ? V : (16 / R > 1 ? 16 / R : 1);
  const DF df;
  const Dec dec;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const int64_t step = StepOf<Dec>(df);
  const int64_t block = kBlocked ? kFp8ScaleBlock : K;
  VF total[R];
  VF acc[R][A];
  for (int r = 0; r < R; ++r) total[r] = hn::Zero(df);
  for (int64_t kb = 0; kb < K; kb += block) {
    const int64_t kend = std::min(K, kb + block);
    for (int r = 0; r < R; ++r) {
      for (int v = 0; v < A; ++v) acc[r][v] = hn::Zero(df);
    }
    const auto accumulate = [&](int64_t k, auto load) HWY_ATTR {
      VF x[V];
      for (int v = 0; v < V; ++v) x[v] = hn::LoadU(df, xs + k + v * lanes);
      for (int r = 0; r < R; ++r) {
        VF wv[V];
        load(w + r * ldw + k, wv);
        for (int v = 0; v < V; ++v) acc[r][v % A] = hn::MulAdd(wv[v], x[v], acc[r][v % A]);
      }
    };
    int64_t k = kb;
    for (; k + step <= kend; k += step) {
      const int64_t ahead = PrefetchOffset<P, R, typename Dec::T>(k, K, ldw);
      accumulate(k, [&](const typename Dec::T* p, VF* wv) HWY_ATTR {
        PrefetchStep(p + ahead, step);
        dec.Load(p, wv);
      });
    }
    if (k < kend) {
      const size_t rest = static_cast<size_t>(kend - k);
      accumulate(k, [&](const typename Dec::T* p, VF* wv) HWY_ATTR { LoadTail(dec, p, rest, wv); });
    }
    for (int r = 0; r < R; ++r) {
      VF sum = acc[r][0];
      for (int v = 1; v < A; ++v) sum = hn::Add(sum, acc[r][v]);
      if constexpr (kBlocked) {
        total[r] = hn::MulAdd(sum, hn::Set(df, block_scale[kb / kFp8ScaleBlock]), total[r]);
      } else {
        total[r] = sum;
      }
    }
  }
  for (int r = 0; r < R; ++r) sums[r] = hn::GetLane(hn::SumOfLanes(df, total[r]));
}

// Output rows [n0, n1) of one call: n0 is a multiple of kGemvRowsPerPass, so a pass never
// straddles a 128-row scale block.
template <class Dec, DType kOut, bool kScaled, bool kBlocked>
void GemvRows(const LinearWeight& w, const LinearActivations& act, const float* xs, int64_t n0, int64_t n1) {
  using T = typename Dec::T;
  const T* base = static_cast<const T*>(w.data);
  const int64_t K = w.K, ldw = w.row_stride;
  const int64_t k_blocks = ceil_div(K, kFp8ScaleBlock);
  constexpr float kUndoDecode = 1.0f / Dec::kDecodedPerReal;  // a power of two: exact
  const auto finish = [&](int64_t n, float sum) {
    float v = sum * kUndoDecode;
    if constexpr (kScaled && !kBlocked) v *= w.scale[n];
    if (act.bias != nullptr) v += ReadScalar<kOut>(act.bias, n * act.bias_stride);
    WriteScalar<kOut>(act.y, n, v);
  };
  const auto block_scales = [&](int64_t n) { return kBlocked ? w.scale + n / kFp8ScaleBlock * k_blocks : nullptr; };
  int64_t n = n0;
  const auto passes = [&](auto rows) {
    constexpr int R = decltype(rows)::value;
    for (; n + R <= n1; n += R) {
      float sums[R];
      DotRows<Dec, R, kBlocked, Prefetch::kRolling>(base + n * ldw, ldw, xs, K, block_scales(n), sums);
      for (int r = 0; r < R; ++r) finish(n + r, sums[r]);
    }
  };
  passes(std::integral_constant<int, kGemvRowsPerPass>());
  passes(std::integral_constant<int, kRowsPerPass>());  // a tail of 4 to 7 rows
  for (; n < n1; ++n) {
    float sum;
    DotRows<Dec, 1, kBlocked, Prefetch::kRolling>(base + n * ldw, ldw, xs, K, block_scales(n), &sum);
    finish(n, sum);
  }
}

// Scratch for x on a pool worker, kept per thread and grown on demand. Each chunk of a
// split call converts x itself: reading the source row costs less than pulling the
// caller's freshly written f32 copy across cores, which measured ~7 us per 8 KiB here.
HWY_INLINE float* WorkerXScratch(int64_t floats) {
  thread_local hwy::AlignedFreeUniquePtr<float[]> buffer;
  thread_local int64_t capacity = 0;
  if (capacity < floats) {
    buffer = hwy::AllocateAligned<float>(static_cast<size_t>(floats));
    capacity = buffer ? floats : 0;
    KILN_CHECK(buffer != nullptr, "linear", "out of memory: could not allocate {} floats of GEMV scratch", floats);
  }
  return buffer.get();
}

template <class Dec, DType kOut, bool kScaled, bool kBlocked>
void RunGemv(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* xs) {
  constexpr int kRows = kGemvRowsPerPass;
  const int64_t groups = ceil_div(w.N, kRows);
  const int64_t group_bytes = kRows * w.K * static_cast<int64_t>(sizeof(typename Dec::T));
  const int64_t grain = std::max<int64_t>(1, kMinChunkBytes / std::max<int64_t>(group_bytes, 1));
  pool.parallel_for(groups, grain, [&](int64_t g0, int64_t g1) {
    // The caller runs the chunk at 0 (ThreadPool's contract), with the call's scratch.
    float* x = g0 == 0 ? xs : WorkerXScratch(gemv_scratch_floats(w.K));
    PrepareX<Dec>(act, w.K, x);
    GemvRows<Dec, kOut, kScaled, kBlocked>(w, act, x, g0 * kRows, std::min(w.N, g1 * kRows));
  });
}

}  // namespace
}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
