// Element-type conversion between any two of kiln's 17 dtypes, with PyTorch semantics.
#pragma once

#include <kiln/dtype.h>

#include <cstdint>

namespace kiln::cpu {

// Converts n elements of src_type at src (stride src_stride_bytes) to dst_type at dst
// (stride dst_stride_bytes). Strides are in bytes, multiples of the item size, and may
// be zero (a broadcast source) or negative. Pointers must be aligned to the element
// size (as tensor data always is), not more. Source and destination must not overlap.
//
// Semantics (PyTorch's; the points it leaves undefined are fixed here):
//   - to bool: x != 0 (complex: either part nonzero; NaN is true).
//   - complex -> real drops the imaginary part; real -> complex has imaginary part 0.
//   - float -> integer truncates toward zero. NaN gives 0; otherwise the value
//     saturates to the int64 range and wraps modulo 2^bits into narrower types, so
//     -1.0 -> uint8 255 and 300.0 -> uint8 44 (what PyTorch gives on x86). uint64
//     saturates to [-2^63, 2^64 - 1] instead, so [2^63, 2^64) converts exactly.
//   - integer -> integer wraps (two's complement); integer -> float rounds to nearest.
//   - float16, bfloat16 and fp8 convert through float32 (see kiln/scalar_types.h), and
//     so does float64 into them. A same-dtype cast copies the bits.
// Contiguous conversions among f16, bf16, fp8, f32 and f64 use SIMD (cast_simd.cpp).
void cast_strided(DType src_type, const void* src, int64_t src_stride_bytes, DType dst_type, void* dst,
                  int64_t dst_stride_bytes, int64_t n);

// Contiguous conversions to and from float32 for kernels that compute in float32.
// SIMD for f16, bf16, fp8, f32 and f64; any other dtype goes through cast_strided.
void to_f32(DType src_type, const void* src, float* dst, int64_t n);
void from_f32(const float* src, DType dst_type, void* dst, int64_t n);

// The Highway targets (HWY_* bits) the SIMD paths were compiled for. Tests pin each
// one the CPU supports with hwy::SetSupportedTargetsForTest.
int64_t cast_simd_targets();

}  // namespace kiln::cpu
