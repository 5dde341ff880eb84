// The CPU's bf16 dot-product instruction (AVX512-BF16's vdpbf16ps) and whether kiln's
// prefill GEMMs use it. Light: no SIMD headers.
//
// With the instruction, many-row `linear` / `linear_fp8` with bfloat16 or float8_e4m3fn
// weights, the many-token MoE expert kernel with bfloat16 or float8_e4m3fn experts and
// (on CPUs with AVX-512 VBMI too) the one-row FP8 kernels round their activations to
// bfloat16 (as PyTorch's bf16 models and llama.cpp do) and multiply with vdpbf16ps,
// accumulating in float32 (FP8 weights decode exactly to bf16); elsewhere (no
// instruction, or KILN_BF16_DOT=0) they keep float32 activations and FMAs. One-row
// kernels with bfloat16 weights keep float32 FMAs (no faster with the instruction).
#pragma once

namespace kiln {

// The CPU has AVX512-BF16 with AVX512F/BW/VL and the OS saves the ZMM state. Fixed for
// the process; false on every non-x86 CPU.
bool cpu_has_bf16_dot();

// cpu_has_bf16_dot() and not switched off: the environment variable KILN_BF16_DOT=0
// (read once) forces the float32 paths; set_bf16_dot_enabled overrides both.
bool bf16_dot_enabled();

// Process-wide override for tests and benchmarks that compare the two paths in one
// process: 0 forces the float32 path, 1 the bf16 dot path where the CPU has it (never
// where it does not), -1 returns to KILN_BF16_DOT. Read once per kernel call.
void set_bf16_dot_enabled(int mode);

}  // namespace kiln
