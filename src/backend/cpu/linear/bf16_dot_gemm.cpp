// The bf16 dot-product GEMM (see bf16_dot_gemm.h): the vdpbf16ps tile, the activation
// packing, the FP8 row decode and scale epilogue, and many-row linear with bfloat16 and
// float8_e4m3fn weights.
//
// The tile functions carry their own target attribute instead of per-file flags, so the
// rest of the file (and every caller) stays baseline x86-64; they run only after
// kiln::cpu_has_bf16_dot() said yes.
#include "backend/cpu/linear/bf16_dot_gemm.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/cast/cast.h"
#include "backend/cpu/common/fp8_decode.h"
#include "kiln/cpu_features.h"
#include "kiln/error.h"
#include "kiln/tensor.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define KILN_BF16_DOT_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#endif

namespace kiln::cpu::bf16dot {

void pack_block(const uint16_t* const* rows, int count, int64_t K, uint32_t* block) {
  const int64_t pairs = K / 2;
  // Pair-major, so each row is read front to back and the block written in order.
  for (int64_t p = 0; p < pairs; ++p) {
    uint32_t* out = block + p * kBlockTokens;
    for (int t = 0; t < count; ++t) std::memcpy(out + t, rows[t] + 2 * p, sizeof(uint32_t));
    for (int t = count; t < kBlockTokens; ++t) out[t] = 0;
  }
  if (K % 2 != 0) {
    uint32_t* out = block + pairs * kBlockTokens;
    for (int t = 0; t < kBlockTokens; ++t) out[t] = t < count ? rows[t][K - 1] : 0u;  // high half (k = K) zero
  }
}

void round_to_bf16(DType dtype, const void* src, int64_t n, uint16_t* dst, float* wide) {
  switch (dtype) {
    case DType::BFloat16: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(uint16_t)); return;
    case DType::Float32: from_f32(static_cast<const float*>(src), DType::BFloat16, dst, n); return;
    case DType::Float16:
      to_f32(DType::Float16, src, wide, n);
      from_f32(wide, DType::BFloat16, dst, n);
      return;
    default: fail(ErrorKind::Type, "linear", "bf16 dot: unsupported activation dtype {}", dtype_name(dtype));
  }
}

#if defined(__x86_64__)

namespace {

// The register tile: kRows weight rows by kFull blocks of 16 tokens, then (kHalf) the
// first 8 tokens of one more block in 256-bit registers: a token group's last block
// holding at most 8 tokens costs half of a full one, which matters for MoE experts of a
// few dozen tokens each. Rows are prefetched kPrefetchBytes ahead once per 16 pairs (a
// cache line): MoE expert rows come from memory, and a dozen concurrent streams are more
// than the hardware prefetcher follows reliably. 2 KiB ahead against 512 bytes: bf16
// experts at 32 tokens each 1.45-1.49x -> 1.57-1.63x the float32 path's speed in the
// same runs (one thread, alternating binaries); the linears (weights in L2) the same.
// The next tile's rows (the kRows rows after these, at the same column) are prefetched
// into L2 as well, so a tile does not start on rows straight from memory: bf16 experts
// 1.54-1.64x -> 1.79-1.95x the float32 path's speed (4 runs each, alternating).
constexpr int kPrefetchBytes = 2048;

template <int kRows, int kFull, bool kHalf>
struct Tile {
  static constexpr int kSlots = kFull > 0 ? kFull : 1;
  __m512 acc[kRows][kSlots];
  __m256 half[kRows];

  // One pair step: x at the step's first word of block 0, word_of(r) row r's pair.
  template <class WordOf>
  KILN_BF16_DOT_TARGET __attribute__((always_inline)) inline void step(const uint32_t* x_at, int64_t block_stride,
                                                                        const WordOf& word_of) {
    __m512bh x[kSlots];
    __m256bh xh;
#pragma GCC unroll 2
    for (int j = 0; j < kFull; ++j) x[j] = (__m512bh)_mm512_loadu_si512(static_cast<const void*>(x_at + j * block_stride));
    if constexpr (kHalf) {
      xh = (__m256bh)_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x_at + kFull * block_stride));
    }
#pragma GCC unroll 32
    for (int r = 0; r < kRows; ++r) {
      const __m512i wb = _mm512_set1_epi32(static_cast<int>(word_of(r)));
#pragma GCC unroll 2
      for (int j = 0; j < kFull; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], (__m512bh)wb, x[j]);
      if constexpr (kHalf) half[r] = _mm256_dpbf16_ps(half[r], (__m256bh)_mm512_castsi512_si256(wb), xh);
    }
  }
};

template <int kRows, int kFull, bool kHalf>
KILN_BF16_DOT_TARGET void tile(const uint16_t* w, int64_t ldw, const uint32_t* xp, int64_t block_stride, int64_t K,
                               float* sums, int64_t ld, const CodeStream& next) {
  Tile<kRows, kFull, kHalf> t;
#pragma GCC unroll 32
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 2
    for (int j = 0; j < kFull; ++j) t.acc[r][j] = _mm512_setzero_ps();
    if constexpr (kHalf) t.half[r] = _mm256_setzero_ps();
  }
  const int64_t pairs = K / 2;
  for (int64_t p = 0; p < pairs; ++p) {
    if (p % 16 == 0) {
#pragma GCC unroll 32
      for (int r = 0; r < kRows; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(w + r * ldw + 2 * p) + kPrefetchBytes, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(w + (r + kRows) * ldw + 2 * p), _MM_HINT_T1);
      }
      if (next.codes != nullptr && p % 32 == 0) {
#pragma GCC unroll 32
        for (int r = 0; r < kRows; ++r) {
          _mm_prefetch(reinterpret_cast<const char*>(next.codes + r * next.ld + 2 * p), _MM_HINT_T0);
        }
      }
    }
    t.step(xp + p * kBlockTokens, block_stride, [&](int r) {
      uint32_t word;
      std::memcpy(&word, w + r * ldw + 2 * p, sizeof(word));
      return word;
    });
  }
  if (K % 2 != 0) {
    // The last weight alone, its pair's high half zero (never read past the row); the
    // packed activations' high halves are zero there too.
    t.step(xp + pairs * kBlockTokens, block_stride, [&](int r) { return static_cast<uint32_t>(w[r * ldw + K - 1]); });
  }
#pragma GCC unroll 32
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 2
    for (int j = 0; j < kFull; ++j) _mm512_storeu_ps(sums + r * ld + j * kBlockTokens, t.acc[r][j]);
    if constexpr (kHalf) _mm256_storeu_ps(sums + r * ld + kFull * kBlockTokens, t.half[r]);
  }
}

// The register tile's rows. A 6-row tile (12 accumulators at 32 tokens) ran 1.15-1.4x
// faster than one 12-row tile (24 accumulators) on a Zen 4 (one-thread CPU time of the
// 512-token q_proj / o_proj, alternating binaries: 46-53 / 48-58 ms against 40-41 /
// 39-43 ms), although it broadcasts each x vector pair to half as many rows; 8 + 4 rows
// measured the same as 6 + 6.
constexpr int kRegisterRows = 6;

template <int kFull, bool kHalf>
void rows_of(const uint16_t* w, int64_t ldw, int64_t rows, const uint32_t* xp, int64_t block_stride, int64_t K,
             float* sums, int64_t ld, const CodeStream& next) {
  int64_t r = 0;
  for (; r + kRegisterRows <= rows; r += kRegisterRows) {
    tile<kRegisterRows, kFull, kHalf>(w + r * ldw, ldw, xp, block_stride, K, sums + r * ld, ld, next.rows_from(r));
  }
  for (; r + 4 <= rows; r += 4) {
    tile<4, kFull, kHalf>(w + r * ldw, ldw, xp, block_stride, K, sums + r * ld, ld, next.rows_from(r));
  }
  for (; r < rows; ++r) {
    tile<1, kFull, kHalf>(w + r * ldw, ldw, xp, block_stride, K, sums + r * ld, ld, next.rows_from(r));
  }
}

// 2^8: the FP8 Kernel decode's factor undone (exact).
constexpr float kUndoFp8Decode = 1.0f / kFp8KernelDecodedPerReal;

// The block-scaled FP8 tile: kRows rows whose 128-wide K ranges each carry their own
// scale (block_scale[r][kb / 128], times 2^8 for the decode). Each range accumulates into
// `part` registers, which are then scaled and added into `total` registers (24 of the 32
// vector registers at 6 rows and 32 tokens), with no store and reload per range: running
// each range as its own dot_rows call and adding its scaled sums in memory cost
// block-scaled FP8 ~35% more than row scales; this runs at their speed.
template <int kRows, int kFull, bool kHalf>
KILN_BF16_DOT_TARGET void tile_block_scaled(const uint16_t* w, int64_t ldw, const uint32_t* xp, int64_t block_stride,
                                            int64_t K, const float* const* block_scale, float* sums, int64_t ld,
                                            const CodeStream& next) {
  Tile<kRows, kFull, kHalf> part;
  __m512 total[kRows][Tile<kRows, kFull, kHalf>::kSlots];
  __m256 total_half[kRows];
#pragma GCC unroll 32
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 2
    for (int j = 0; j < kFull; ++j) total[r][j] = _mm512_setzero_ps();
    if constexpr (kHalf) total_half[r] = _mm256_setzero_ps();
  }
  const int64_t pairs = K / 2;
  for (int64_t kb = 0; kb < K; kb += kFp8ScaleBlock) {
#pragma GCC unroll 32
    for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 2
      for (int j = 0; j < kFull; ++j) part.acc[r][j] = _mm512_setzero_ps();
      if constexpr (kHalf) part.half[r] = _mm256_setzero_ps();
    }
    const int64_t p_end = std::min(pairs, (kb + kFp8ScaleBlock) / 2);
    for (int64_t p = kb / 2; p < p_end; ++p) {
      if (p % 16 == 0) {
#pragma GCC unroll 32
        for (int r = 0; r < kRows; ++r) {
          _mm_prefetch(reinterpret_cast<const char*>(w + r * ldw + 2 * p) + kPrefetchBytes, _MM_HINT_T0);
        }
        if (next.codes != nullptr && p % 32 == 0) {
#pragma GCC unroll 32
          for (int r = 0; r < kRows; ++r) {
            _mm_prefetch(reinterpret_cast<const char*>(next.codes + r * next.ld + 2 * p), _MM_HINT_T0);
          }
        }
      }
      part.step(xp + p * kBlockTokens, block_stride, [&](int r) {
        uint32_t word;
        std::memcpy(&word, w + r * ldw + 2 * p, sizeof(word));
        return word;
      });
    }
    if (K % 2 != 0 && kb + kFp8ScaleBlock >= K) {
      // The last weight alone in the last range (as in tile()).
      part.step(xp + pairs * kBlockTokens, block_stride,
                [&](int r) { return static_cast<uint32_t>(w[r * ldw + K - 1]); });
    }
#pragma GCC unroll 32
    for (int r = 0; r < kRows; ++r) {
      const __m512 s = _mm512_set1_ps(block_scale[r][kb / kFp8ScaleBlock] * kUndoFp8Decode);
#pragma GCC unroll 2
      for (int j = 0; j < kFull; ++j) total[r][j] = _mm512_fmadd_ps(part.acc[r][j], s, total[r][j]);
      if constexpr (kHalf) {
        total_half[r] = _mm512_castps512_ps256(
            _mm512_fmadd_ps(_mm512_castps256_ps512(part.half[r]), s, _mm512_castps256_ps512(total_half[r])));
      }
    }
  }
#pragma GCC unroll 32
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 2
    for (int j = 0; j < kFull; ++j) _mm512_storeu_ps(sums + r * ld + j * kBlockTokens, total[r][j]);
    if constexpr (kHalf) _mm256_storeu_ps(sums + r * ld + kFull * kBlockTokens, total_half[r]);
  }
}

template <int kFull, bool kHalf>
void rows_block_scaled(const uint16_t* w, int64_t ldw, int64_t rows, const uint32_t* xp, int64_t block_stride,
                       int64_t K, const float* const* block_scale, float* sums, int64_t ld, const CodeStream& next) {
  int64_t r = 0;
  for (; r + kRegisterRows <= rows; r += kRegisterRows) {
    tile_block_scaled<kRegisterRows, kFull, kHalf>(w + r * ldw, ldw, xp, block_stride, K, block_scale + r,
                                                   sums + r * ld, ld, next.rows_from(r));
  }
  for (; r < rows; ++r) {
    tile_block_scaled<1, kFull, kHalf>(w + r * ldw, ldw, xp, block_stride, K, block_scale + r, sums + r * ld, ld,
                                       next.rows_from(r));
  }
}

// rows x lanes sums (row stride ld, lanes a multiple of 8): sums[r] *= scale[r] (first),
// else sums[r] += scale[r] * part[r]: the FP8 scale epilogue in vector registers (the
// plain loops stayed scalar at -O2 and cost block-scaled FP8 about a fifth of its time).
KILN_BF16_DOT_TARGET void scale_rows(float* sums, const float* part, int64_t ld, int64_t rows, int64_t lanes,
                                     const float* scale, bool first) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = sums + r * ld;
    const float* add = part + r * ld;
    const __m512 s = _mm512_set1_ps(scale[r]);
    int64_t i = 0;
    for (; i + 16 <= lanes; i += 16) {
      const __m512 v = _mm512_loadu_ps(row + i);
      _mm512_storeu_ps(row + i, first ? _mm512_mul_ps(v, s) : _mm512_fmadd_ps(_mm512_loadu_ps(add + i), s, v));
    }
    if (i < lanes) {  // 8 lanes: masked, so nothing past them is read or written
      const __mmask16 m = 0x00FF;
      const __m512 v = _mm512_maskz_loadu_ps(m, row + i);
      _mm512_mask_storeu_ps(row + i, m,
                            first ? _mm512_mul_ps(v, s) : _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, add + i), s, v));
    }
  }
}

}  // namespace

void dot_rows(const uint16_t* w, int64_t ldw, int64_t rows, const uint32_t* xp, int64_t block_stride, int tokens,
              int64_t K, float* sums, int64_t ld, const CodeStream& next) {
  KILN_CHECK_KIND(cpu_has_bf16_dot(), Runtime, "bf16 dot", "called on a CPU without AVX512-BF16");
  KILN_CHECK_KIND(tokens >= 1 && tokens <= 2 * kBlockTokens, Runtime, "bf16 dot", "tokens must be in 1..32, got {}",
                  tokens);
  // Whole 16-token blocks, and 8 lanes for a last block of at most 8 tokens.
  constexpr int kHalfTokens = kBlockTokens / 2;
  if (tokens <= kHalfTokens) return rows_of<0, true>(w, ldw, rows, xp, block_stride, K, sums, ld, next);
  if (tokens <= kBlockTokens) return rows_of<1, false>(w, ldw, rows, xp, block_stride, K, sums, ld, next);
  if (tokens <= kBlockTokens + kHalfTokens) return rows_of<1, true>(w, ldw, rows, xp, block_stride, K, sums, ld, next);
  rows_of<2, false>(w, ldw, rows, xp, block_stride, K, sums, ld, next);
}

// dot_rows with per-row, per-128-wide-range scales (block_scale[r][kb / 128] * 2^8).
void dot_rows_block_scaled(const uint16_t* w, int64_t ldw, int64_t rows, const uint32_t* xp, int64_t block_stride,
                           int tokens, int64_t K, const float* const* block_scale, float* sums, int64_t ld,
                           const CodeStream& next) {
  constexpr int kHalfTokens = kBlockTokens / 2;
  const auto run = [&](auto full, auto half) {
    rows_block_scaled<decltype(full)::value, decltype(half)::value>(w, ldw, rows, xp, block_stride, K, block_scale,
                                                                    sums, ld, next);
  };
  using Half = std::true_type;
  using Whole = std::false_type;
  if (tokens <= kHalfTokens) return run(std::integral_constant<int, 0>{}, Half{});
  if (tokens <= kBlockTokens) return run(std::integral_constant<int, 1>{}, Whole{});
  if (tokens <= kBlockTokens + kHalfTokens) return run(std::integral_constant<int, 1>{}, Half{});
  run(std::integral_constant<int, 2>{}, Whole{});
}

#else  // not x86-64: cpu_has_bf16_dot() is false, so no caller gets here.

void dot_rows_block_scaled(const uint16_t*, int64_t, int64_t, const uint32_t*, int64_t, int, int64_t,
                           const float* const*, float*, int64_t, const CodeStream&) {}

void dot_rows(const uint16_t*, int64_t, int64_t, const uint32_t*, int64_t, int, int64_t, float*, int64_t,
              const CodeStream&) {
  fail(ErrorKind::Runtime, "bf16 dot", "AVX512-BF16 kernels exist only on x86-64");
}

namespace {
void scale_rows(float*, const float*, int64_t, int64_t, int64_t, const float*, bool) {}
}  // namespace

#endif

void decode_fp8_rows(const uint8_t* codes, int64_t ldc, int64_t rows, int64_t K, uint16_t* out, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) fp8_e4m3fn_to_bf16(codes + r * ldc, out + r * ld, K, Fp8Decode::Kernel);
}

void dot_rows_fp8(const uint16_t* w, int64_t ldw, int64_t rows, const uint32_t* xp, int64_t block_stride, int tokens,
                  int64_t K, const Fp8Scales& scales, int64_t n0, float* sums, int64_t ld, const CodeStream& next) {
  constexpr float kUndoDecode = 1.0f / kFp8KernelDecodedPerReal;  // 2^8: exact
  // dot_rows writes the lanes up to the next multiple of 8 (zero past `tokens`).
  const int64_t lanes = (tokens + 7) / 8 * 8;
  KILN_CHECK_KIND(cpu_has_bf16_dot(), Runtime, "bf16 dot", "called on a CPU without AVX512-BF16");
  if (K <= 0) return dot_rows(w, ldw, rows, xp, block_stride, tokens, 0, sums, ld);  // zeros
  KILN_CHECK_KIND(rows <= kMaxScaledRows, Runtime, "bf16 dot", "dot_rows_fp8 takes at most {} rows, got {}",
                  kMaxScaledRows, rows);
  float row_scale[kMaxScaledRows];
  if (scales.layout == Fp8ScaleLayout::PerRow) {
    dot_rows(w, ldw, rows, xp, block_stride, tokens, K, sums, ld, next);
    for (int64_t r = 0; r < rows; ++r) row_scale[r] = scales.scale[n0 + r] * kUndoDecode;
    scale_rows(sums, sums, ld, rows, lanes, row_scale, true);
    return;
  }
  // Block128: the partial sums of each 128-wide K range, scaled and added in K order, in
  // the tile's registers. 128 is even, so a range starts at a whole pair of the packed
  // blocks; only the last range can have an odd length, and it ends where the rows end.
  KILN_CHECK_KIND(tokens >= 1 && tokens <= 2 * kBlockTokens, Runtime, "bf16 dot", "tokens must be in 1..32, got {}",
                  tokens);
  const int64_t col_blocks = ceil_div(scales.cols, kFp8ScaleBlock);
  const float* row_blocks[kMaxScaledRows];
  for (int64_t r = 0; r < rows; ++r) row_blocks[r] = scales.scale + (n0 + r) / kFp8ScaleBlock * col_blocks;
  dot_rows_block_scaled(w, ldw, rows, xp, block_stride, tokens, K, row_blocks, sums, ld, next);
}

}  // namespace kiln::cpu::bf16dot

namespace kiln::cpu {

namespace {

using bf16dot::block_words;
using bf16dot::kBlockTokens;
using bf16dot::kTileRows;

// Bytes of packed activations a chunk of blocks may take: the chunk stays in L2 while
// every weight tile of a panel runs over it.
constexpr int64_t kChunkBytes = int64_t{256} << 10;
// Bytes of a panel of weight rows: read from memory once, then from L2 once per chunk.
constexpr int64_t kPanelBytes = int64_t{512} << 10;
// Multiply-adds a task should have at least (the figure of linear_gemm.cpp).
constexpr double kMinTaskWork = 1 << 20;

}  // namespace

namespace {

// Many-row linear on the dot tiles, bf16 weights read in place or FP8 weights decoded per
// panel (kFp8).
template <bool kFp8>
void linear_dot(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act) {
  const int64_t M = act.M, N = w.N, K = w.K;
  const int64_t blocks = ceil_div(M, kBlockTokens);
  const int64_t bw = block_words(K);
  const size_t act_isz = itemsize(act.dtype);
  // 1. x rounded to bf16 and packed, block by block over the pool.
  Tensor packed_keep = Tensor::empty({checked_mul(blocks, bw, "linear")}, DType::Int32);
  uint32_t* packed = static_cast<uint32_t*>(packed_keep.data_ptr());
  pool.parallel_for(blocks, std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(K * kBlockTokens, 1)),
                    [&](int64_t b0, int64_t b1) {
                      std::vector<uint16_t> narrow;
                      std::vector<float> wide;
                      if (act.dtype != DType::BFloat16) {
                        narrow.resize(static_cast<size_t>(kBlockTokens * K));
                        wide.resize(static_cast<size_t>(K));
                      }
                      for (int64_t b = b0; b < b1; ++b) {
                        const int count = static_cast<int>(std::min<int64_t>(kBlockTokens, M - b * kBlockTokens));
                        const uint16_t* rows[kBlockTokens];
                        for (int t = 0; t < count; ++t) {
                          const char* src = static_cast<const char*>(act.x) + (b * kBlockTokens + t) * K * act_isz;
                          if (act.dtype == DType::BFloat16) {
                            rows[t] = reinterpret_cast<const uint16_t*>(src);
                          } else {
                            bf16dot::round_to_bf16(act.dtype, src, K, narrow.data() + t * K, wide.data());
                            rows[t] = narrow.data() + t * K;
                          }
                        }
                        bf16dot::pack_block(rows, count, K, packed + b * bw);
                      }
                    });
  // 2. The bias in float32, added before the one rounding of y.
  std::vector<float> bias;
  if (act.bias != nullptr) {
    bias.resize(static_cast<size_t>(act.bias_stride == 0 ? 1 : N));
    to_f32(act.dtype, act.bias, bias.data(), static_cast<int64_t>(bias.size()));
  }
  // 3. Tiles of 12 weight rows, split over the pool; each task walks its rows in panels
  // and each panel's rows over the packed x in chunks. FP8: the task decodes each panel
  // into bf16 scratch first (the panel is then read from L2 once per chunk, as bf16
  // weights are), so the decode costs one pass over the weights per call.
  const int64_t tiles = ceil_div(N, kTileRows);
  const int64_t panel_tiles = std::max<int64_t>(1, kPanelBytes / (kTileRows * K * 2));
  const int64_t chunk_blocks = std::max<int64_t>(2, kChunkBytes / (bw * 4) / 2 * 2);
  const double tile_work = static_cast<double>(kTileRows) * static_cast<double>(M) * static_cast<double>(K);
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(kMinTaskWork / std::max(tile_work, 1.0)));
  const bf16dot::Fp8Scales scales{w.scale, w.scale_layout, K};
  pool.parallel_for(tiles, grain, [&](int64_t t0, int64_t t1) {
    float sums[kTileRows * 2 * kBlockTokens];
    float out[kTileRows * 2 * kBlockTokens];
    uint16_t narrow_out[kTileRows * 2 * kBlockTokens];
    float row_bias[kTileRows];
    Tensor panel_keep;
    uint16_t* panel = nullptr;
    if constexpr (kFp8) {
      panel_keep = Tensor::empty({checked_mul(std::min(panel_tiles, t1 - t0) * kTileRows, K, "linear_fp8")},
                                 DType::BFloat16);
      panel = static_cast<uint16_t*>(panel_keep.data_ptr());
    }
    for (int64_t pt0 = t0; pt0 < t1; pt0 += panel_tiles) {
      const int64_t pt1 = std::min(t1, pt0 + panel_tiles);
      const int64_t pn0 = pt0 * kTileRows;
      // Row n of the panel is at wp + (n - pn0) * ldw.
      const uint16_t* wp;
      int64_t ldw;
      if constexpr (kFp8) {
        const int64_t panel_rows = std::min(N, pt1 * kTileRows) - pn0;
        bf16dot::decode_fp8_rows(static_cast<const uint8_t*>(w.data) + pn0 * w.row_stride, w.row_stride, panel_rows,
                                 K, panel, K);
        wp = panel;
        ldw = K;
      } else {
        ldw = w.row_stride;
        wp = static_cast<const uint16_t*>(w.data) + pn0 * ldw;
      }
      for (int64_t c0 = 0; c0 < blocks; c0 += chunk_blocks) {
        const int64_t c1 = std::min(blocks, c0 + chunk_blocks);
        for (int64_t t = pt0; t < pt1; ++t) {
          const int64_t n0 = t * kTileRows;
          const int64_t rows = std::min(kTileRows, N - n0);
          const uint16_t* wt = wp + (n0 - pn0) * ldw;
          // FP8: the last chunk's first block pair prefetches the codes of the rows this tile
          // will hold in the task's next panel, which is decoded right after it.
          bf16dot::CodeStream next_codes;
          if constexpr (kFp8) {
            const int64_t next_n0 = n0 + (pt1 - pt0) * kTileRows;
            if (c1 == blocks && pt1 < t1 && next_n0 < N) {
              next_codes = {static_cast<const uint8_t*>(w.data) + next_n0 * w.row_stride, w.row_stride};
            }
          }
          for (int64_t b = c0; b < c1; b += 2) {
            const int64_t tokens = std::min((std::min<int64_t>(2, c1 - b)) * kBlockTokens, M - b * kBlockTokens);
            if constexpr (kFp8) {
              bf16dot::dot_rows_fp8(wt, ldw, rows, packed + b * bw, bw, static_cast<int>(tokens), K, scales, n0, sums,
                                    2 * kBlockTokens, b == c0 ? next_codes : bf16dot::CodeStream{});
            } else {
              bf16dot::dot_rows(wt, ldw, rows, packed + b * bw, bw, static_cast<int>(tokens), K, sums,
                                2 * kBlockTokens);
            }
            // The tile's outputs token-major, rounded to the output dtype in one call (one
            // call per token was ~4% of a 512-row projection), then copied row by row.
            for (int64_t r = 0; r < rows; ++r) {
              row_bias[r] = bias.empty() ? 0.0f : bias[act.bias_stride == 0 ? 0 : static_cast<size_t>(n0 + r)];
            }
            for (int64_t i = 0; i < tokens; ++i) {
              for (int64_t r = 0; r < rows; ++r) out[i * rows + r] = sums[r * 2 * kBlockTokens + i] + row_bias[r];
            }
            const char* rounded = reinterpret_cast<const char*>(out);
            if (act.dtype != DType::Float32) {
              from_f32(out, act.dtype, narrow_out, tokens * rows);
              rounded = reinterpret_cast<const char*>(narrow_out);
            }
            for (int64_t i = 0; i < tokens; ++i) {
              std::memcpy(static_cast<char*>(act.y) + ((b * kBlockTokens + i) * N + n0) * act_isz,
                          rounded + i * rows * act_isz, static_cast<size_t>(rows) * act_isz);
            }
          }
        }
      }
    }
  });
}

}  // namespace

void linear_gemm_bf16_dot(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act) {
  linear_dot<false>(pool, w, act);
}

void linear_gemm_fp8_bf16_dot(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act) {
  linear_dot<true>(pool, w, act);
}

}  // namespace kiln::cpu
