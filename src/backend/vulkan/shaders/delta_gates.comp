// The Gated DeltaNet gates (backend/gated_delta.h), one invocation per (token, head):
//   g = -exp(A_log[h]) * softplus(a + dt_bias[h]),  beta = sigmoid(b)
// with torch's softplus (beta 1, threshold 20) on unary_math.glsl's log1p. All float32,
// contiguous; a, b, g, beta [tokens, heads], A_log and dt_bias [heads].
#version 450
#include "common.glsl"
#include "unary_math.glsl"

layout(local_size_x = 256) in;

layout(binding = 0, std430) writeonly buffer G { float g_[]; };
layout(binding = 1, std430) writeonly buffer Beta { float beta_[]; };
layout(binding = 2, std430) readonly buffer A { float a_[]; };
layout(binding = 3, std430) readonly buffer B { float b_[]; };
layout(binding = 4, std430) readonly buffer ALog { float a_log_[]; };
layout(binding = 5, std430) readonly buffer DtBias { float dt_bias_[]; };

layout(push_constant, std430) uniform Push {
  uint n;
  uint heads;
  uint g_first, beta_first, a_first, b_first, a_log_first, dt_bias_first;
} pc;

void main() {
  const uint i = linear_index(256u);
  if (i >= pc.n) return;
  const uint h = i % pc.heads;
  const float x = a_[pc.a_first + i] + dt_bias_[pc.dt_bias_first + h];
  g_[pc.g_first + i] = -exp(a_log_[pc.a_log_first + h]) * softplus_f(x, 1.0, 20.0);
  beta_[pc.beta_first + i] = 1.0 / (1.0 + exp(-b_[pc.b_first + i]));
}
