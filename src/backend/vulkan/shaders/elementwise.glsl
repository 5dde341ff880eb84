// out[i] = op(a[i]) or op(a[i], b[i]) over strided, broadcast operands of any float
// storage dtype, computed in float32 (backend/elementwise.h). OP is a UnaryOp code when
// ARITY is 1, a BinaryOp code when 2 (the numbering of backend/elementwise.h).
//
// The body of elementwise.comp and elementwise_many_dims.comp.
#include "common.glsl"
#include "strided.glsl"
#include "unary_math.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint ARITY = 2;
layout(constant_id = 1) const uint OP = 0;
layout(constant_id = 2) const uint A_DT = DT_F32;
layout(constant_id = 3) const uint B_DT = DT_F32;
layout(constant_id = 4) const uint OUT_DT = DT_F32;

KILN_BUFFER(0, out_, writeonly)
KILN_BUFFER(1, a_, readonly)
KILN_BUFFER(2, b_, readonly)
KILN_LOAD_FLOAT(a_)
KILN_LOAD_FLOAT(b_)
KILN_STORE_FLOAT(out_)

#define NAN uintBitsToFloat(0x7FC00000u)

// UnaryOp codes (backend/elementwise.h).
#define U_ABS 0u
#define U_NEG 1u
#define U_SQUARE 3u
#define U_RECIPROCAL 5u
#define U_SQRT 7u
#define U_RSQRT 8u
#define U_EXP 9u
#define U_EXP2 10u
#define U_LOG 12u
#define U_SIN 15u
#define U_COS 16u
#define U_TANH 17u
#define U_SIGMOID 18u
#define U_SILU 19u
#define U_GELU 20u
#define U_GELU_TANH 21u
#define U_SOFTPLUS 22u
#define U_RELU 23u
#define U_FLOOR 24u
#define U_CEIL 25u
#define U_ROUND 26u
#define U_TRUNC 27u
#define U_BITWISE_NOT 28u  // bool only: logical not
#define U_LOGICAL_NOT 29u
#define U_ISNAN 30u
#define U_ISINF 31u
#define U_ISFINITE 32u

// BinaryOp codes.
#define B_ADD 0u
#define B_MUL 1u
#define B_DIV 2u
#define B_MAXIMUM 7u
#define B_MINIMUM 8u
#define B_BITWISE_AND 10u  // bool only, as the logical ops
#define B_BITWISE_OR 11u
#define B_BITWISE_XOR 12u
#define B_EQ 15u
#define B_NE 16u
#define B_LT 17u
#define B_LE 18u
#define B_GT 19u
#define B_GE 20u
#define B_LOGICAL_AND 21u
#define B_LOGICAL_OR 22u
#define B_LOGICAL_XOR 23u
// Not a BinaryOp: silu_and_mul's up * silu(gate), with a = gate and b = up.
#define B_SILU_MUL 200u

float sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }

float unary(float x) {
  if (OP == U_ABS) return abs(x);
  if (OP == U_NEG) return -x;
  if (OP == U_SQUARE) return x * x;
  if (OP == U_RECIPROCAL) return 1.0 / x;
  if (OP == U_SQRT) return sqrt(x);
  if (OP == U_RSQRT) return 1.0 / sqrt(x);
  if (OP == U_EXP) return exp(x);
  if (OP == U_LOG) return log(x);
  if (OP == U_SIGMOID) return sigmoid(x);
  if (OP == U_SILU) return x * sigmoid(x);
  if (OP == U_RELU) return isnan(x) ? x : max(x, 0.0);
  if (OP == U_FLOOR) return floor(x);
  if (OP == U_CEIL) return ceil(x);
  if (OP == U_ROUND) return roundEven(x);
  if (OP == U_TRUNC) return trunc(x);
  if (OP == U_EXP2) return exp2_f(x);
  if (OP == U_SIN) return sin_cos(x, false);
  if (OP == U_COS) return sin_cos(x, true);
  if (OP == U_TANH) return tanh_f(x);
  if (OP == U_GELU) return gelu_f(x);
  if (OP == U_GELU_TANH) return gelu_tanh_f(x);
  if (OP == U_SOFTPLUS) return softplus_f(x, pc.alpha, pc.threshold);  // alpha carries beta
  // Bool results (NaN is true, as nonzero).
  if (OP == U_LOGICAL_NOT || OP == U_BITWISE_NOT) return x == 0.0 ? 1.0 : 0.0;
  if (OP == U_ISNAN) return isnan(x) ? 1.0 : 0.0;
  if (OP == U_ISINF) return isinf(x) ? 1.0 : 0.0;
  if (OP == U_ISFINITE) return isnan(x) || isinf(x) ? 0.0 : 1.0;
  return NAN;
}

float binary(float a, float b) {
  if (OP == B_ADD) return a + pc.alpha * b;
  if (OP == B_MUL) return a * b;
  if (OP == B_DIV) return a / b;
  if (OP == B_MAXIMUM) return isnan(a) || isnan(b) ? NAN : max(a, b);
  if (OP == B_MINIMUM) return isnan(a) || isnan(b) ? NAN : min(a, b);
  if (OP == B_SILU_MUL) return b * (a * sigmoid(a));
  bool r = false;
  if (OP == B_EQ) r = a == b;
  if (OP == B_NE) r = a != b;
  if (OP == B_LT) r = a < b;
  if (OP == B_LE) r = a <= b;
  if (OP == B_GT) r = a > b;
  if (OP == B_GE) r = a >= b;
  if (OP == B_LOGICAL_AND || OP == B_BITWISE_AND) r = a != 0.0 && b != 0.0;
  if (OP == B_LOGICAL_OR || OP == B_BITWISE_OR) r = a != 0.0 || b != 0.0;
  if (OP == B_LOGICAL_XOR || OP == B_BITWISE_XOR) r = (a != 0.0) != (b != 0.0);
  return r ? 1.0 : 0.0;
}

void main() {
  const uint i = linear_index(256u);
  if (i >= pc.n) return;
  const uvec3 off = strided_offsets(i);
  const float a = load_a_(A_DT, off.y);
  const float r = ARITY == 1u ? unary(a) : binary(a, load_b_(B_DT, off.z));
  if (OUT_DT == DT_BOOL) {
    out_8[off.x] = uint8_t(r != 0.0 ? 1u : 0u);
  } else {
    store_out_(OUT_DT, off.x, r);
  }
}
