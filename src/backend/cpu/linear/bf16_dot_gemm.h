// The bf16 dot-product GEMM of prefill (AVX512-BF16, vdpbf16ps), internal to the CPU
// backend: many-row `linear` with bfloat16 weights and the many-token MoE expert kernel
// with bfloat16 experts use it when kiln::bf16_dot_enabled() (kiln/cpu_features.h).
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
// pair step of 16 tokens. The 12-row by 32-token tile keeps 24 accumulators in registers
// and loads 2 vectors and 12 broadcast words per 24 vdpbf16ps, so the loop is bound by
// the dot instruction, not by loads; a last block of at most 8 tokens runs in 256-bit
// registers at half the cost. Broadcasting the weights (instead of packing them
// into vectors, as an sgemm packs its B panel) means the weights are never copied: MoE
// experts with a few dozen tokens each cannot amortise a weight copy, and a linear's
// weights stream from L2 in place.
#pragma once

#include <cstdint>

#include "backend/cpu/linear/linear_kernels.h"
#include "kiln/dtype.h"
#include "kiln/int_math.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu::bf16dot {

// Tokens per packed activation block (the float32 lanes of one 512-bit vector).
constexpr int64_t kBlockTokens = 16;
// Weight rows of the full tile.
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
void dot_rows(const uint16_t* w, int64_t ldw, int64_t rows, const uint32_t* xp, int64_t block_stride, int tokens,
              int64_t K, float* sums, int64_t ld);

}  // namespace kiln::cpu::bf16dot

namespace kiln::cpu {

// Many-row linear with a bfloat16 weight through dot_rows: y = x W^T (+ bias) with x
// rounded to bf16, float32 accumulation, one rounding of y to act.dtype. act.dtype may
// be float32, bfloat16 or float16; M, N, K > 0. Only when kiln::cpu_has_bf16_dot().
void linear_gemm_bf16_dot(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act);

}  // namespace kiln::cpu
