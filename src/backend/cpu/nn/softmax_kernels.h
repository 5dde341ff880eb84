// Softmax and log_softmax on the CPU (internal header: no Highway here).
//
// softmax_kernels.cpp holds the SIMD primitives, compiled once per Highway target;
// softmax_driver.cpp splits the work across the thread pool and stages f16/bf16 rows
// through float32 scratch.
#pragma once

#include <cstdint>

#include "backend/softmax.h"
#include "kiln/dtype.h"

namespace kiln {
class ThreadPool;
}

namespace kiln::cpu {

// ---- SIMD row kernels on contiguous arrays (float32 or float64) ----
//
// A row (or one thread's piece of a long row) goes through two calls. softmax_reduce
// walks it in blocks of `block` elements: the block's max (read from L2), then
// e^(x - R) summed (re-read from L1), R being a reference for the running max of the
// blocks so far: the running max itself, or on 16-lane float32 targets the nearest
// point of the grid ln2/16 * integer (within ln2/32 of it), which lets the exp start
// its range reduction from x (fast_exp-inl.h, ShiftedExp16). When R rises the sum so
// far is rescaled by e^(R_old - R_new), which happens about log(blocks) times, not per
// block. softmax_finish then scales each block by e^(R_b - M) / S for the row's
// reference M and sum S (log_softmax: x - M - log S). So the row is read from memory
// twice instead of three times, and only a handful of scalar exps are taken per row.

// Blocks per call at most: callers size `block` so a piece has no more (the running
// maxes live in a caller's array of this many elements).
inline constexpr int64_t kSoftmaxMaxBlocks = 256;
// The block length callers use unless a piece is too long for kSoftmaxMaxBlocks.
inline constexpr int64_t kSoftmaxBlock = 1024;

// A piece's reference max M (its max, or within ln2/32 of it) and the sum of
// e^(x - M) over it.
struct SoftmaxStats {
  double max;
  double sum;
};

// Pass A over x[0, n), n >= 1. Stores e^(x - R_b) to y when y is not null (y may
// equal x), and the reference R_b of each block to block_max[b]. With y null (the
// log_softmax pass) every R_b is the running max itself, never a grid shift. A NaN anywhere
// makes the sum NaN; a piece of only -inf returns max -inf and sum 0 (y unwritten).
// Lanes sum in the compute dtype over at most kSoftmaxBlock elements; those sums add
// in double.
SoftmaxStats softmax_reduce(const float* x, float* y, int64_t n, int64_t block, float* block_max);
SoftmaxStats softmax_reduce(const double* x, double* y, int64_t n, int64_t block, double* block_max);

// Pass C over the same piece, given the whole row's reference and sum (combined from
// every piece). A NaN sum, or a row max of -inf (a row of only -inf), makes every output
// NaN, as e^(-inf - -inf) does in PyTorch. softmax: y[i] *= e^(R_b - max) / sum,
// and blocks whose R_b is -inf (y never written) get 0. log: y[i] = (x[i] - max) -
// log sum, in that order as PyTorch. y may equal x.
void softmax_finish(const float* x, float* y, int64_t n, int64_t block, const float* block_max, SoftmaxStats row,
                    bool log);
void softmax_finish(const double* x, double* y, int64_t n, int64_t block, const double* block_max, SoftmaxStats row,
                    bool log);

// Softmax (or log_softmax) down each of the columns [0, width) of a [dim, row_stride]
// row-major block at x (element (d, j) at x[d * row_stride + j]), written to y with
// the same layout. dim >= 1, width >= 1.
void softmax_columns(const float* x, float* y, int64_t dim, int64_t row_stride, int64_t width, bool log);
void softmax_columns(const double* x, double* y, int64_t dim, int64_t row_stride, int64_t width, bool log);

// The Highway targets (HWY_* bits) the primitives were compiled for; tests pin each.
int64_t softmax_simd_targets();

// ---- the driver ----

using backend::SoftmaxProblem;

// Runs p on `pool`. A single long row is split across the pool's threads (each
// reduces its part, then all rescale by the combined max and sum), so even one
// [1, vocab] softmax uses every core. Results do not depend on the thread count
// beyond the order of the final double-precision sum of the parts.
void softmax_cpu(const SoftmaxProblem& p, ThreadPool& pool);

}  // namespace kiln::cpu
