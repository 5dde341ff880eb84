// The causal depthwise conv over tokens with a carried history (backend/gated_delta.h):
// u = [state (K-1 rows); x (T rows)], all [rows, C] float32 and contiguous.
//   MODE 0: out[t, c] = act(sum_{j<K} w[c, j] * u[t + j, c]), one invocation per output;
//   MODE 1: state <- rows T .. T+K-2 of u, one invocation per channel.
// The two modes are two commands, so every read of the old state in MODE 0 comes before
// MODE 1 overwrites it (the recorder puts a barrier between commands). Within MODE 1,
// new row r reads old row r + T (> r) when it comes from the state, so one invocation
// walking its channel's rows in ascending order never reads a row already replaced.
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint SILU = 1;

layout(binding = 0, std430) writeonly buffer Out { float out_[]; };
layout(binding = 1, std430) readonly buffer X { float x_[]; };
layout(binding = 2, std430) readonly buffer W { float w_[]; };
layout(binding = 3, std430) buffer State { float state_[]; };

layout(push_constant, std430) uniform Push {
  uint tokens;
  uint channels;
  uint kernel;
  uint out_first;
  uint x_first;
  uint w_first;
  uint state_first;
} pc;

// Row s of u = [state; x], channel c.
float history(uint s, uint c) {
  const uint hist = pc.kernel - 1u;
  return s >= hist ? x_[pc.x_first + (s - hist) * pc.channels + c] : state_[pc.state_first + s * pc.channels + c];
}

void main() {
  const uint i = linear_index(256u);
  if (MODE == 0u) {
    if (i >= pc.tokens * pc.channels) return;
    const uint t = i / pc.channels, c = i % pc.channels;
    // The CPU kernel's order: taps ascending from zero.
    float acc = 0.0;
    for (uint j = 0u; j < pc.kernel; ++j) acc += w_[pc.w_first + c * pc.kernel + j] * history(t + j, c);
    out_[pc.out_first + i] = SILU != 0u ? acc / (1.0 + exp(-acc)) : acc;
  } else {
    if (i >= pc.channels) return;
    for (uint r = 0u; r + 1u < pc.kernel; ++r) {
      state_[pc.state_first + r * pc.channels + i] = history(pc.tokens + r, i);
    }
  }
}
