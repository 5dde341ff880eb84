// The bf16 dot-product GEMM of prefill (AVX512-BF16, vdpbf16ps), internal to the CPU
// backend: many-row `linear` / `linear_fp8` with bfloat16 or float8_e4m3fn weights and
// the many-token MoE expert kernel with bfloat16 or float8_e4m3fn experts use it when
// kiln::bf16_dot_enabled() (kiln/cpu_features.h).
//
// vdpbf16ps multiplies 16 lanes of bf16 pairs by 16 lanes of bf16 pairs and adds both
// exact products to a float32 lane, in order (odd element, then even), rounding each
// add to float32; it treats subnormal inputs and results as zero. That is 32 multiply-
// adds per instruction against 16 for a float32 FMA, so both operands must be bf16: the
// weights as stored, the activations rounded to bf16 (round to nearest even) once per
// call, as PyTorch's bf16 models and llama.cpp do.
//
// Layout. A tile computes `rows` weight rows against 16 or 32 activation rows (tokens):
// the weights are read in place, each step broadcasting one 32-bit pair (W[n, k], W[n,
// k+1]) of a row to all lanes; the activations are packed once per call into blocks of 16
// tokens, word p * 16 + t of a block holding (x_t[2p], x_t[2p+1]) (the high half zero at
// an odd K's last pair, and zero lanes past the last token), so one 512-bit load feeds a
// pair step of 16 tokens. Callers hand over 12 rows at a time (kTileRows); they run as
// 6-row by 32-token register tiles (12 accumulators, 2 vector loads and 6 broadcast words
// per 12 vdpbf16ps), which measured 1.15-1.4x faster on a Zen 4 than one 12-row tile with
// 24 accumulators (bf16_dot_gemm.cpp); a last block of at most 8 tokens runs in 256-bit
// registers at half the cost. Broadcasting the weights (instead of packing them
// into vectors, as an sgemm packs its B panel) means the weights are never copied: MoE
// experts with a few dozen tokens each cannot amortise a weight copy, and a linear's
// weights stream from L2 in place.
//
// FP8 weights (float8_e4m3fn, row or 128x128 block scales) use the same tiles: every
// e4m3fn value is exactly a bf16 value, so a task decodes its rows once into bf16
// scratch (common/fp8_decode.h, the Kernel policy: the value times 2^-8) and runs
// dot_rows on them unchanged; dot_rows_fp8 applies the scales to the sums (128x128
// block scales in a variant of the tile that adds each 128-wide K range's partial sums,
// times its scale, in registers). The decoded products are exact, so the result differs
// from the dequantised reference only by float32 accumulation order (and x's rounding to
// bf16). The decode reads its codes from memory, so callers hand the tiles that run
// before it a CodeStream of those codes to prefetch.
#pragma once

#include <cstdint>

#include "backend/cpu/linear/linear_kernels.h"
#include "kiln/dtype.h"
#include "kiln/int_math.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu::bf16dot {

// Tokens per packed activation block (the float32 lanes of one 512-bit vector).
constexpr int64_t kBlockTokens = 16;
// Weight rows a caller hands to dot_rows at a time (two 6-row register tiles).
constexpr int64_t kTileRows = 12;

// 32-bit words of one packed block of K columns: ceil(K / 2) pairs of 16 lanes.
inline int64_t block_words(int64_t K) { return ceil_div(K, 2) * kBlockTokens; }

// Packs `count` (0..16) bf16 rows of K elements into one block (block_words(K) words).
void pack_block(const uint16_t* const* rows, int count, int64_t K, uint32_t* block);

// Rounds n activations of dtype (float32, bfloat16, float16) to bf16 bit patterns
// (round to nearest even; bfloat16 is copied). `wide` is work space of n floats, unused
// for bfloat16 and float32.
void round_to_bf16(DType dtype, const void* src, int64_t n, uint16_t* dst, float* wide);

// sums[r * ld + i] = sum_k W[r, k] * x_i[k] for r < rows and the first `tokens` (1..32)
// tokens i of the blocks at xp and xp + block_stride words (token i is lane i % 16 of
// block i / 16), with W's row r at w + r * ldw (bf16 bit patterns, read in place).
// Accumulation is float32 in k order. Lanes past `tokens` up to the next multiple of 8
// are written too (the packed zeros give zero); nothing past that. Only callable when
// kiln::cpu_has_bf16_dot(). rows >= 0, K >= 0 (K = 0 gives zeros).
// FP8 codes a caller decodes next (rows at codes + r * ld bytes), prefetched by the tiles
// while they run, so that the decode after them does not wait on memory: row r of the
// stream beside row r of the tile, the bytes [2p, 2p + 64) once every 32 pairs p.
struct CodeStream {
  const uint8_t* codes = nullptr;
  int64_t ld = 0;
  CodeStream rows_from(int64_t r) const { return codes == nullptr ? CodeStream{} : CodeStream{codes + r * ld, ld}; }
};

void dot_rows(const uint16_t* w, int64_t ldw, int64_t rows, const uint32_t* xp, int64_t block_stride, int tokens,
              int64_t K, float* sums, int64_t ld, const CodeStream& next = {});

// The scales of an FP8 matrix (`cols` = its K) in `layout`, as LinearWeight and
// ExpertMatrix hold them: PerRow scale[n]; Block128 scale[n / 128 * ceil(cols / 128) +
// k / 128].
struct Fp8Scales {
  const float* scale = nullptr;
  Fp8ScaleLayout layout = Fp8ScaleLayout::PerRow;
  int64_t cols = 0;
};

// Decodes rows [0, rows) of FP8 codes (row r at codes + r * ldc bytes, K codes) into bf16
// patterns of the Kernel policy (value * 2^-8, NaN codes as +-480 * 2^-8, as every FP8
// kernel reads them) at out + r * ld (ld >= K).
void decode_fp8_rows(const uint8_t* codes, int64_t ldc, int64_t rows, int64_t K, uint16_t* out, int64_t ld);

// The most rows one dot_rows_fp8 call takes (the MoE kernel's down items: 4 tiles).
constexpr int64_t kMaxScaledRows = 4 * kTileRows;

// dot_rows for rows [n0, n0 + rows) of an FP8 matrix whose rows were decoded by
// decode_fp8_rows to w (row stride ldw), with the scales applied: sums[r * ld + i] = the
// real dot product of row n0 + r with token i (the same lanes as dot_rows). PerRow: the
// sums times scale[n0 + r] * 2^8. Block128: a tile of 6 rows sums each 128-wide K range
// into its own registers and adds them, times the range's block scale * 2^8, into a
// second set, in K order. rows <= kMaxScaledRows. Only callable when
// kiln::cpu_has_bf16_dot().
void dot_rows_fp8(const uint16_t* w, int64_t ldw, int64_t rows, const uint32_t* xp, int64_t block_stride, int tokens,
                  int64_t K, const Fp8Scales& scales, int64_t n0, float* sums, int64_t ld, const CodeStream& next = {});

}  // namespace kiln::cpu::bf16dot

namespace kiln::cpu {

// Many-row linear with a bfloat16 weight through dot_rows: y = x W^T (+ bias) with x
// rounded to bf16, float32 accumulation, one rounding of y to act.dtype. act.dtype may
// be float32, bfloat16 or float16; M, N, K > 0. Only when kiln::cpu_has_bf16_dot().
void linear_gemm_bf16_dot(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act);

// The same with a float8_e4m3fn weight (row or 128x128 block scales): each task decodes
// its panels of weight rows to bf16 scratch once and runs dot_rows_fp8 on them.
void linear_gemm_fp8_bf16_dot(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act);

}  // namespace kiln::cpu
