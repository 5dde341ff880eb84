// LU with partial pivoting by recursion on the columns (Toledo 1997, LAPACK's getrf2),
// for the sizes where OpenBLAS 0.3.21's getrf runs far from the core's peak: the
// updates are OpenBLAS gemm calls (optionally cut by columns over kiln's pool), the
// narrow panels at the bottom of the recursion a tight kernel. Internal to
// src/backend/cpu/linalg.
//
// Same semantics as getrf: the pivot of each column is the first row of largest |x|
// (|re| + |im| for complex, as i?amax), a zero pivot is recorded (first one, 1-based) in
// the returned info and the factorisation goes on, NaN never wins a pivot search unless
// it stands on the diagonal (i?amax's comparisons). The values agree with getrf's to
// rounding (the operations run in another order), so pivots agree unless two candidates
// tie to within rounding.
#pragma once

#include <cstdint>

#include "kiln/thread_pool.h"

namespace kiln::cpu::linalg {

// Factors the m x n column-major matrix a (leading dimension lda >= max(1, m)) in place
// into L\U; pivots[0, min(m, n)) gets getrf's 1-based row interchanges. Returns info.
// With a pool (not inside one of its chunks) the large trailing updates are split over
// its threads; nullptr runs everything on the caller (what lu_factor does: the split
// was not measured faster on the 2-vCPU build machines, docs/bench.md). OpenBLAS must be
// single-threaded (lapack::prepare()); the caller holds a BlasBufferGuard for its own
// thread.
template <typename T>
int32_t recursive_lu(ThreadPool* pool, T* a, int64_t m, int64_t n, int64_t lda, int32_t* pivots);

// Whether recursive_lu on one thread is measurably faster than getrf for an m x n
// matrix of T.
template <typename T>
bool recursive_lu_pays(int64_t m, int64_t n);

}  // namespace kiln::cpu::linalg
