// Keeps OpenBLAS from hanging when memory runs out.
//
// OpenBLAS takes the work buffer of a gemm or a long gemv (128 MiB and a page on x86-64
// builds) from a pool that it grows with mmap, then malloc; when both fail, 0.3.21 retries
// forever (memory.c: `while (map_address == -1)`), so a process at its address-space
// limit (ulimit -v) hangs inside BLAS instead of failing. The pool grows on a call that
// finds every buffer in use (one more call in flight than ever before), or, in builds
// with thread-local buffers, on a thread's first call. Before such a call this guard maps
// and releases a buffer of that size; when the system refuses it, the call fails with a
// Runtime error instead of entering OpenBLAS. Other calls pay two relaxed atomic
// operations. (Memory taken by another thread between the check and OpenBLAS's own
// mapping can still reach the retry loop: the guard narrows the window, it cannot close
// it from outside the library.)
#pragma once

namespace kiln::cpu {

class BlasBufferGuard {
 public:
  BlasBufferGuard();
  ~BlasBufferGuard();
  BlasBufferGuard(const BlasBufferGuard&) = delete;
  BlasBufferGuard& operator=(const BlasBufferGuard&) = delete;
};

}  // namespace kiln::cpu
