// The state of one sequence: the rotated keys and values of every attention layer, the
// last inputs of every short-conv layer, and the conv history and recurrent state of
// every Gated DeltaNet layer (spec: models.md §0.2 — the cache stores keys after RoPE;
// §3.2 — LFM2's conv keeps its last L-1 inputs; §2.7 — the hybrids' fixed state).
//
// Layout: per attention layer one key and one value tensor [1, kv_heads, capacity,
// head_dim], preallocated at load. Head-major, so a decode step streams each head's
// keys contiguously, and the tensor is exactly what attention_decode reads; a prefill
// passes the valid prefix (.narrow on dim 2). Nothing is cleared on reset: reads never
// go past the valid length. Conv layers keep float32 [L-1, channels], zeroed on reset
// (the conv sees zero history at the start of a sequence). Gated DeltaNet layers keep
// float32 [K-1, conv_channels] conv history and float32 [value_heads, key_head_dim,
// value_head_dim] recurrent state, both zeroed on reset.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/tensor.h"
#include "llm/config.h"

namespace kiln::llm {

// The bytes a KvCache of these arguments takes (K/V of every attention layer, the conv
// states), computed with overflow checks and compared with this machine's memory before
// anything is allocated: a context the machine cannot hold is a Runtime error naming it
// (an unchecked product wrapped around and the first forward pass wrote past a small
// buffer).
int64_t check_kv_cache_fits(const std::vector<MixerKind>& mixers, int64_t kv_heads, int64_t head_dim,
                            int64_t conv_kernel, int64_t conv_channels, int64_t capacity, DType dtype,
                            const DeltaNetGeometry& delta_net = {});

class KvCache {
 public:
  // One slot per layer of `mixers`; attention layers get K/V of `capacity` tokens in
  // `dtype` (float32 or bfloat16), conv layers a [conv_kernel - 1, conv_channels] state.
  // Gated DeltaNet layers take their state sizes from `delta_net`. Everything lives on
  // `device`, where the model's weights are.
  KvCache(const std::vector<MixerKind>& mixers, int64_t kv_heads, int64_t head_dim, int64_t conv_kernel,
          int64_t conv_channels, int64_t capacity, DType dtype, const DeltaNetGeometry& delta_net = {},
          Device device = kCPU);

  int64_t capacity() const { return capacity_; }
  DType dtype() const { return dtype_; }
  // K/V bytes one more token adds over every attention layer.
  int64_t kv_bytes_per_token() const { return kv_bytes_per_token_; }
  // Bytes of everything the cache holds (K/V for the whole context and every fixed state).
  int64_t total_bytes() const { return total_bytes_; }

  // Stores keys and values [T, kv_heads, head_dim] (any float dtype) of layer `layer`
  // at positions start .. start + T - 1.
  void write(int64_t layer, int64_t start, const Tensor& keys, const Tensor& values);
  // [1, kv_heads, capacity, head_dim] of an attention layer.
  const Tensor& keys(int64_t layer) const;
  const Tensor& values(int64_t layer) const;
  // float32 [conv_kernel - 1, conv_channels] of a short-conv layer (updated in place).
  Tensor& conv_state(int64_t layer);
  // float32 [K-1, conv_channels] and [value_heads, key_head_dim, value_head_dim] of a
  // Gated DeltaNet layer (updated in place).
  Tensor& delta_conv_state(int64_t layer);
  Tensor& delta_recurrent_state(int64_t layer);

  void reset();

 private:
  struct Slot {
    Tensor keys, values;           // attention layers
    Tensor conv;                   // short-conv layers
    Tensor delta_conv, recurrent;  // Gated DeltaNet layers
  };
  const Slot& slot(int64_t layer, MixerKind kind) const;

  std::vector<Slot> slots_;
  int64_t capacity_;
  DType dtype_;
  int64_t kv_bytes_per_token_ = 0;
  int64_t total_bytes_ = 0;
};

}  // namespace kiln::llm
