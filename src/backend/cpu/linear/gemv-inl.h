// The one-row linear kernel, y[n] = scale_n * sum_k x[k] W[n, k] + bias[n], compiled once
// per Highway target by gemv_<dtype>.cpp (internal).
//
// Decode is a bandwidth race. At ~25 GB/s per core a core sees 16 bf16 weights every
// ~1.3 ns, and the decode must also leave the core free to keep enough cache-line fills
// in flight. Measured on the Zen 5 VM (one core, weights in L2) the kernels sustain ~3
// vector instructions per cycle, so instructions per weight is the figure to minimise.
// Zen 4 runs each 512-bit operation as two 256-bit halves: there (one core, weights in
// L2, thread CPU time) bf16 decodes ~56 GB/s, far above its DRAM share, but the FP8
// float32 path below only ~21 GB/s of FP8, under two cores' share of the probe.
//   - x is converted to f32 once per call and per thread into scratch, in whatever lane
//     order the weight decode produces, and shared by 8 output rows per pass (8 rows x 2
//     accumulators hide the FMA latency).
//   - bf16: a 32-bit lane holds two bf16 weights; `lane << 16` is the even weight as an
//     f32 and `lane & 0xFFFF0000` the odd one. One load, one shift, one and, two FMAs per
//     2L weights (~60 G weights/s per core in L2). vdpbf16ps on the words as loaded
//     (the path FP8 takes below) measured no faster from DRAM on Zen 4 (1.01x, 1.05x,
//     0.75x on 4096x4096, 768x2048, 2048x768), so bf16 keeps the FMAs.
//   - f16: F16C's vcvtph2ps, one per L weights, exact for every code.
//   - float8_e4m3fn, every path exact for every code (normal, subnormal, zero), the
//     decoded value being 2^-8 times the real one (the 2^8 is folded into the scale); the
//     decodes live in common/fp8_decode-inl.h, shared with the prefill kernels:
//     . AVX3_DL (AVX-512 VBMI): two 128-entry byte-table lookups (vpermi2b) give the high
//       and low byte of each weight's bf16 pattern, the sign is OR-ed into the high byte,
//       two byte unpacks make bf16 words, then the bf16 split above: 14 instructions per
//       64 weights (~45 G weights/s per core in L2 on Zen 5, ~21 on Zen 4).
//       With AVX512-BF16, where kiln::bf16_dot_enabled(), vdpbf16ps multiplies the words
//       themselves against x rounded to bf16 (VbmiFp8DotWeights, below): 7 instructions
//       per 64 weights and row, ~30-35 G weights/s per core in L2 on Zen 4 (1.45-1.6x);
//       streaming from DRAM on 2 threads, same process, interleaved, 1.1-1.2x the float32
//       path with the same prefetch (4096x4096, 1536x2048, 2048x768). (On Zen 5 it was
//       no faster from DRAM, 24.9 vs 28.0 GB/s on one core, with prefetcht0 1 KiB ahead.)
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
//     The FP8 files build AVX3_DL on request (HWY_WANT_AVX3_DL; Highway 1.0.3 leaves it
//     out otherwise), so their dispatch picks it on CPUs with VBMI (Ice Lake, Zen 4+).
//   - scales stay out of the inner product: a per-row scale multiplies the final sum;
//     128x128 block scales multiply each 128-wide block's vector partial sums once
//     (the 8 rows of a pass always share a row block).
//   - each step requests the weights 2 KiB further along its row into L2 (prefetcht1),
//     wrapping into the next pass near the row's end (Prefetch::kRolling); why L2 and
//     not L1 at kPrefetchAheadBytes.
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
#include "kiln/cpu_features.h"
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
  // begins with its first lines in flight. Measured on 2 threads over the decode shapes
  // (Zen 5), the one-row linear with 8-row passes and this prefetch streams 1.08x (bf16)
  // to 1.25x (FP8) faster than with 4-row passes and kNextPass.
  kRolling,
};
// The requests are prefetcht1 (into L2, __builtin_prefetch locality 2), 2 KiB ahead. On
// the Zen 4 VM (2 threads, same process, interleaved with the bandwidth probe, under
// load), against prefetcht0 1 KiB ahead (what the Zen 5 VM measured best, keeping the
// lines in L1): bf16 4096x4096 1.50x, 768x2048 1.46x, 2048x768 1.83x; FP8 (float32 path)
// 1.11x, 1.61x (1536x2048), 2.10x. No software prefetch at all also beat prefetcht0
// (bf16 1.27x), and 1 or 4 KiB ahead with prefetcht1 measured within the noise of 2 KiB.
// A prefetcht0 holds an L1 miss buffer until its line arrives, and L1 has far fewer of
// those than L2 has, so requests into L1 cap the lines in flight below what DRAM latency
// needs; with prefetcht1 the L2 holds them and L1's own prefetcher covers the short hop.
constexpr int64_t kPrefetchAheadBytes = 2048;

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
  for (int64_t off = 0; off < step * static_cast<int64_t>(sizeof(T)); off += kLine) {
    __builtin_prefetch(bytes + off, /*rw=*/0, /*locality=*/2);
  }
}

// ---- the bf16 dot path (AVX512-BF16's vdpbf16ps, FP8 weights on AVX3_DL) ----
// Where kiln::bf16_dot_enabled() (kiln/cpu_features.h), the FP8 kernels multiply the
// VBMI decode's bf16 words with vdpbf16ps against x rounded to bf16, instead of splitting
// the words into float32 and FMA-ing them: 7 instructions per 64 weights and row instead
// of 13, which is what decides the speed on Zen 4 (its 512-bit operations take two passes
// through 256-bit units, so the float32 path decodes only ~21 GB/s of FP8 per core in L2,
// the dot path ~30-35; figures in the header comment).
//
// x is rounded once per call (round to nearest even, NaN quieted, as float_to_bf16_bits),
// as PyTorch's bf16 models and llama.cpp do, and as kiln's bf16 dot prefill GEMMs do; the
// MoE kernels round their SwiGLU activations before the down projection the same way.
// vdpbf16ps adds the two exact products of a word pair to the float32 lane, rounding each
// add, and reads subnormal inputs as zero: the decoded weights are never subnormal, and
// an x below 2^-126 in magnitude counts as zero.
#undef KILN_GEMV_BF16_DOT
#if HWY_TARGET == HWY_AVX3_DL
#define KILN_GEMV_BF16_DOT 1
#else
#define KILN_GEMV_BF16_DOT 0
#endif

#if KILN_GEMV_BF16_DOT
// The dot kernel carries the instruction's target on top of this target's, so it is only
// called (never inlined) from code of this target, and only after bf16_dot_enabled().
#undef KILN_GEMV_BF16_DOT_ATTR
#define KILN_GEMV_BF16_DOT_ATTR __attribute__((target(HWY_TARGET_STR ",avx512bf16")))

// float32 lanes -> their bf16 patterns (float_to_bf16_bits) in the low 16 bits.
HWY_INLINE __m512i RoundToBf16Lanes(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), odd)), 16);
  const __mmask16 nan =
      _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
  return _mm512_mask_or_epi32(rounded, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
}

// vpermt2w indices: the even words of two vectors (the low halves of 32 lanes), and the
// FP8 decode's native word order (fp8_decode-inl.h) of 64 words in natural order.
struct DotWordIndices {
  alignas(64) uint16_t even[32] = {};
  alignas(64) uint16_t native[64] = {};
  constexpr DotWordIndices() {
    for (int i = 0; i < 32; ++i) even[i] = static_cast<uint16_t>(2 * i);
    for (int w = 0; w < 64; ++w) native[w] = static_cast<uint16_t>(fp8::detail::NativeSourceOf(w));
  }
};
inline constexpr DotWordIndices kDotWordIndices{};

// 32 floats at p -> their bf16 patterns in one vector, natural order.
HWY_INLINE __m512i RoundToBf16Words(const float* HWY_RESTRICT p) {
  return _mm512_permutex2var_epi16(RoundToBf16Lanes(_mm512_loadu_ps(p)), _mm512_load_si512(kDotWordIndices.even),
                                   RoundToBf16Lanes(_mm512_loadu_ps(p + 16)));
}

// FP8 weights for the dot kernel: a step is VbmiFp8Weights' 64 weights, decoded to two
// vectors of bf16 words in the native order. ArrangeX rounds the step's x to bf16 in the
// same order and stores the 64 words over the step's first 32 floats (the rest of the
// step is unused), so x scratch sizes, strides and zero padding are the float32 path's.
struct VbmiFp8DotWeights {
  using T = uint8_t;
  static constexpr int kVecs = 4;
  static constexpr bool kPermutesX = true;
  static constexpr bool kBf16Dot = true;
  static constexpr int kWordVecs = 2;
  static constexpr float kDecodedPerReal = detail::exp2_float(-8);
  static void ArrangeX(float* HWY_RESTRICT step) {
    const __m512i first = RoundToBf16Words(step), second = RoundToBf16Words(step + 32);
    const __m512i w0 = _mm512_permutex2var_epi16(first, _mm512_load_si512(kDotWordIndices.native), second);
    const __m512i w1 = _mm512_permutex2var_epi16(first, _mm512_load_si512(kDotWordIndices.native + 32), second);
    _mm512_storeu_si512(step, w0);
    _mm512_storeu_si512(step + 16, w1);
  }
  HWY_INLINE void LoadWords(const T* HWY_RESTRICT p, __m512i* words) const {
    fp8::VU16 v[2];
    fp8::Bf16Native<fp8::Kernel>(p, v);
    words[0] = v[0].raw;
    words[1] = v[1].raw;
  }
};

// DotRows (same contract, same prefetch) for a kBf16Dot decoder and x arranged by it.
template <class Dec, int R, bool kBlocked, Prefetch P>
KILN_GEMV_BF16_DOT_ATTR HWY_NOINLINE void DotRowsBf16Dot(const typename Dec::T* HWY_RESTRICT w, int64_t ldw,
                                                         const float* HWY_RESTRICT xs, int64_t K,
                                                         const float* HWY_RESTRICT block_scale,
                                                         float* HWY_RESTRICT sums) {
  using T = typename Dec::T;
  constexpr int W = Dec::kWordVecs;
  constexpr int64_t kStep = Dec::kVecs * 16;
  const Dec dec;
  const int64_t block = kBlocked ? kFp8ScaleBlock : K;
  __m512 total[R];
  __m512 acc[R][W];
  for (int r = 0; r < R; ++r) total[r] = _mm512_setzero_ps();
  const auto dot_step = [&](int64_t k, const T* const* rows) KILN_GEMV_BF16_DOT_ATTR {
    __m512i x[W];
    for (int j = 0; j < W; ++j) x[j] = _mm512_loadu_si512(xs + k + 16 * j);
    for (int r = 0; r < R; ++r) {
      __m512i words[W];
      dec.LoadWords(rows[r], words);
      for (int j = 0; j < W; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], (__m512bh)words[j], (__m512bh)x[j]);
    }
  };
  for (int64_t kb = 0; kb < K; kb += block) {
    const int64_t kend = std::min(K, kb + block);
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < W; ++j) acc[r][j] = _mm512_setzero_ps();
    }
    const T* rows[R];
    int64_t k = kb;
    for (; k + kStep <= kend; k += kStep) {
      const int64_t ahead = PrefetchOffset<P, R, T>(k, K, ldw);
      for (int r = 0; r < R; ++r) {
        rows[r] = w + r * ldw + k;
        PrefetchStep(rows[r] + ahead, kStep);
      }
      dot_step(k, rows);
    }
    if (k < kend) {
      // The tail through zero-padded copies (x is zero past K).
      alignas(64) T tail[R][kStep] = {};
      for (int r = 0; r < R; ++r) {
        std::memcpy(tail[r], w + r * ldw + k, static_cast<size_t>(kend - k) * sizeof(T));
        rows[r] = tail[r];
      }
      dot_step(k, rows);
    }
    for (int r = 0; r < R; ++r) {
      __m512 sum = acc[r][0];
      for (int j = 1; j < W; ++j) sum = _mm512_add_ps(sum, acc[r][j]);
      total[r] = kBlocked ? _mm512_fmadd_ps(sum, _mm512_set1_ps(block_scale[kb / kFp8ScaleBlock]), total[r]) : sum;
    }
  }
  for (int r = 0; r < R; ++r) sums[r] = hn::GetLane(hn::SumOfLanes(DF(), VF{total[r]}));
}
#endif  // KILN_GEMV_BF16_DOT

// Calls fn(decoder) with the FP8 decoder of this call: the bf16 dot one where this target
// has it and kiln::bf16_dot_enabled(), else Fp8Weights. The fused decode blocks choose
// the same way as the unfused kernels, so they stay bit-identical to them.
template <class Fn>
HWY_INLINE void WithFp8Decoder(Fn&& fn) {
#if KILN_GEMV_BF16_DOT
  if (bf16_dot_enabled()) return fn(VbmiFp8DotWeights());
#endif
  fn(Fp8Weights());
}

// Whether Dec is a bf16 dot decoder (its x is arranged as bf16 words).
template <class Dec>
constexpr bool IsBf16Dot() {
  if constexpr (requires { Dec::kBf16Dot; }) {
    return Dec::kBf16Dot;
  } else {
    return false;
  }
}

// DotRows for the float32 decoders: decoded vectors times x with FMAs.
template <class Dec, int R, bool kBlocked, Prefetch P>
HWY_INLINE void DotRowsFma(const typename Dec::T* HWY_RESTRICT w, int64_t ldw, const float* HWY_RESTRICT xs, int64_t K,
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

// sums[r] = sum_k x[k] * decoded W[r, k], over R rows starting at w with row stride ldw,
// x prepared for Dec (PrepareX). kBlocked: each 128-wide block's partial sums are
// multiplied by block_scale[block].
template <class Dec, int R, bool kBlocked, Prefetch P = Prefetch::kNextPass>
HWY_INLINE void DotRows(const typename Dec::T* HWY_RESTRICT w, int64_t ldw, const float* HWY_RESTRICT xs, int64_t K,
                        const float* HWY_RESTRICT block_scale, float* HWY_RESTRICT sums) {
#if KILN_GEMV_BF16_DOT
  if constexpr (IsBf16Dot<Dec>()) DotRowsBf16Dot<Dec, R, kBlocked, P>(w, ldw, xs, K, block_scale, sums);
#endif
  if constexpr (!IsBf16Dot<Dec>()) DotRowsFma<Dec, R, kBlocked, P>(w, ldw, xs, K, block_scale, sums);
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
