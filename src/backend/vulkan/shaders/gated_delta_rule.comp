// The gated delta rule, recurrent form (backend/gated_delta.h), for a decode step and
// for a whole prompt in one dispatch. One work group per (value head, block of 32 value
// columns); each invocation owns one column c of its head's float32 state S [dk, dv]
// and keeps it in registers for every token of the call, so the state is read and
// written once per call however many tokens it has. Per token (key head kh = h / group):
//   q, k <- q * scale / |q|, k / |k|   (|x| = sqrt(sum x^2 + 1e-6), when L2NORM)
//   sk = S^T k, sq = S^T q   (the column's dot products, rows in order as on the CPU)
//   delta = beta (v - exp(g) sk);  out = exp(g) sq + delta (k . q);  S <- exp(g) S + k delta^T
// which is the CPU kernel's arithmetic (gated_delta_kernels.cpp) in the same order:
// S'^T q = exp(g) S^T q + delta (k . q), so the output needs no second pass over S.
// The token's q and k rows go through shared memory, loaded by the whole group.
// All buffers float32 and contiguous: q, k [T, Hk, dk]; v, out [T, Hv, dv];
// g, beta [T, Hv]; state [Hv, dk, dv].
#version 450
#include "common.glsl"

#define COLUMNS 32u
layout(local_size_x = 32) in;
// The key dim: the length of each invocation's register column and the shared rows.
layout(constant_id = 0) const uint DK = 1;
layout(constant_id = 1) const uint L2NORM = 1;

layout(binding = 0, std430) buffer State { float state_[]; };
layout(binding = 1, std430) writeonly buffer Out { float out_[]; };
layout(binding = 2, std430) readonly buffer Q { float q_[]; };
layout(binding = 3, std430) readonly buffer K { float k_[]; };
layout(binding = 4, std430) readonly buffer V { float v_[]; };
layout(binding = 5, std430) readonly buffer G { float g_[]; };
layout(binding = 6, std430) readonly buffer Beta { float beta_[]; };

layout(push_constant, std430) uniform Push {
  uint tokens;
  uint key_heads;
  uint value_heads;
  uint value_dim;
  uint column_blocks;  // ceil(value_dim / COLUMNS)
  float scale;
  uint state_first, out_first, q_first, k_first, v_first, g_first, beta_first;
} pc;

shared float q_row[DK];
shared float k_row[DK];

// sum x^2 over the row in the CPU's order (qk_scales in gated_delta_kernels.h): eight
// partial sums over blocks of eight, the tail into the first, added in a fixed tree.
float squared_norm(bool of_q) {
  float s[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
  uint r = 0u;
  for (; r + 8u <= DK; r += 8u) {
    [[unroll]] for (uint l = 0u; l < 8u; ++l) {
      const float x = of_q ? q_row[r + l] : k_row[r + l];
      s[l] += x * x;
    }
  }
  for (; r < DK; ++r) {
    const float x = of_q ? q_row[r] : k_row[r];
    s[0] += x * x;
  }
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

void main() {
  const uint group_id = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  const uint h = group_id / pc.column_blocks;
  if (h >= pc.value_heads) return;  // the grid's padding: the whole group leaves
  const uint lane = gl_LocalInvocationID.x;
  const uint c = (group_id % pc.column_blocks) * COLUMNS + lane;
  const bool in_range = c < pc.value_dim;
  const uint dv = pc.value_dim;
  const uint kh = h / (pc.value_heads / pc.key_heads);
  const uint column = pc.state_first + h * DK * dv + c;

  float S[DK];
  if (in_range) {
    for (uint r = 0u; r < DK; ++r) S[r] = state_[column + r * dv];
  }
  for (uint t = 0u; t < pc.tokens; ++t) {
    barrier();  // every invocation is done with the previous token's rows
    const uint qk = (t * pc.key_heads + kh) * DK;
    for (uint r = lane; r < DK; r += COLUMNS) {
      q_row[r] = q_[pc.q_first + qk + r];
      k_row[r] = k_[pc.k_first + qk + r];
    }
    barrier();
    if (in_range) {
      float q_scale = pc.scale, k_scale = 1.0;
      if (L2NORM != 0u) {
        q_scale /= sqrt(squared_norm(true) + 1e-6);
        k_scale /= sqrt(squared_norm(false) + 1e-6);
      }
      float kq = 0.0, sk = 0.0, sq = 0.0;
      for (uint r = 0u; r < DK; ++r) {
        const float kr = k_row[r] * k_scale, qr = q_row[r] * q_scale;
        kq += kr * qr;
        sk += S[r] * kr;
        sq += S[r] * qr;
      }
      const uint th = t * pc.value_heads + h;
      const float decay = exp(g_[pc.g_first + th]);
      const float delta = beta_[pc.beta_first + th] * (v_[pc.v_first + th * dv + c] - decay * sk);
      out_[pc.out_first + th * dv + c] = decay * sq + delta * kq;
      for (uint r = 0u; r < DK; ++r) S[r] = decay * S[r] + (k_row[r] * k_scale) * delta;
    }
  }
  if (in_range) {
    for (uint r = 0u; r < DK; ++r) state_[column + r * dv] = S[r];
  }
}
