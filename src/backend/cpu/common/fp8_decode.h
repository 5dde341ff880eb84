// float8_e4m3fn codes to bfloat16 bit patterns or float32, over contiguous arrays, with
// the one SIMD decoder of the CPU kernels (fp8_decode-inl.h; kernels include that header
// and call its per-target functions directly, see there for the instruction counts).
#pragma once

#include <cstdint>

namespace kiln::cpu {

// What a decoded code means.
//   Exact: the real value; the NaN codes 0x7F / 0xFF give a quiet NaN with their sign
//     (bf16 0x7FC0 | sign), i.e. float_to_bf16_bits(fp8_e4m3fn_bits_to_float(code)).
//   Kernel: what the FP8 kernels read: the real value times 2^-8 (the kernels fold 2^8
//     into their row or block scale), and the NaN codes as ±480 * 2^-8.
enum class Fp8Decode { Exact, Kernel };

// The Kernel policy's decoded value per real value: kernels multiply their sums (or their
// scales) by the inverse, 2^8, which is exact.
inline constexpr float kFp8KernelDecodedPerReal = 1.0f / 256.0f;

// dst[i] = the bf16 pattern of src[i], for n >= 0 codes (any n; no alignment needed).
void fp8_e4m3fn_to_bf16(const uint8_t* src, uint16_t* dst, int64_t n, Fp8Decode mode);
// dst[i] = the same value as a float32 (the bf16 pattern shifted up 16 bits).
void fp8_e4m3fn_to_f32(const uint8_t* src, float* dst, int64_t n, Fp8Decode mode);

// The Highway targets (HWY_* bits, AVX3_DL included) the decoder was compiled for.
int64_t fp8_decode_simd_targets();

}  // namespace kiln::cpu
