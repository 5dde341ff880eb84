// The transcendental unary ops of shaders/elementwise.comp that GLSL lacks or bounds too
// loosely: sin/cos with kiln's own range reduction (over the whole float range), tanh,
// gelu (exact and tanh), softplus on a log1p built from +-*/ only, and exp2 exact at
// integers. Ports of the CPU kernels'
// formulas (backend/cpu/elementwise/unary_math_kernels.cpp) where they fit float32.
//
// Vulkan bounds GLSL's exp to 3 + 2|x| ulp and log to 2^-21 absolute near 1 (useless for
// log1p of a small value); sin/cos only to 2^-11 absolute on [-pi, pi]. Everything here
// uses exp only where its relative error carries through as relative error, and
// otherwise only +, -, *, / (Vulkan: exact or 2.5 ulp).

#define KILN_INF uintBitsToFloat(0x7F800000u)
#define KILN_NAN uintBitsToFloat(0x7FC00000u)

// 1 / (1 + e^-v), as the CPU: e^-|v| <= 1 never overflows, so a very negative v gives
// its tiny (not zero) value.
float stable_sigmoid(float v) {
  const float e = exp(-abs(v));
  return (v < 0.0 ? e : 1.0) / (1.0 + e);
}

// sin and cos of r in [-pi/4, pi/4]: Cephes' sinf/cosf minimax polynomials (< 1 ulp).
float sin_poly(float r) {
  const float z = r * r;
  return r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
}
float cos_poly(float r) {
  const float z = r * r;
  return 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
}

// x = k pi/2 + r with r in [-pi/4, pi/4] for |x| < 2^24 (k's low two bits in `quadrant`),
// Cody-Waite. pi/2 is held as four floats, C1..C3 of at most 8 significant bits and C4,
// 48 bits in all. k is split into k_hi (a multiple of 2^12, at most 12 significant bits
// below 2^24) and k_lo (|k_lo| < 2^12), so every k_part C_i (i <= 3) is exact and each
// subtraction is exact or rounds once at the size of the final r: r is within about
// 2^-24 absolute. x (2/pi) rounded to float may miss the nearest k by one at large x, so
// r is brought back into [-pi/4, pi/4] by a step of pi/2 (r - C1 is exact there:
// Sterbenz).
float reduce_cody_waite(float x, out uint quadrant) {
  float k = roundEven(x * 0.636619772367581343);
  const float k_hi = trunc(k * (1.0 / 4096.0)) * 4096.0;
  const float k_lo = k - k_hi;
  precise float r = x - k_hi * 1.5703125;
  r = r - k_lo * 1.5703125;
  r = r - k_hi * 4.825592041015625e-4;
  r = r - k_lo * 4.825592041015625e-4;
  r = r - k_hi * 1.2665987014770508e-6;
  r = r - k_lo * 1.2665987014770508e-6;
  r = r - k * 9.920935184482005e-10;
  [[unroll]] for (int step = 0; step < 2; ++step) {
    if (abs(r) > 0.785398185253143310546875) {
      const float d = r > 0.0 ? 1.0 : -1.0;
      k += d;
      r = r - d * 1.5703125;
      r = r - d * 4.825592041015625e-4;
      r = r - d * 1.2665987014770508e-6;
      r = r - d * 9.920935184482005e-10;
    }
  }
  quadrant = uint(int(k)) & 3u;  // two's complement: the low bits are k mod 4
  return r;
}

// The bits of 2/pi after the binary point, most significant first, behind one zero word
// (the window below may start one bit before the point).
const uint kTwoOverPi[8] = uint[8](0u, 0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u, 0xF534DDC0u, 0xDB629599u,
                                  0x3C439041u, 0xFE5163ABu);

// The 32 bits of hi:lo starting `shift` bits below hi's top (shift < 32).
uint funnel_shift(uint hi, uint lo, uint shift) {
  return shift == 0u ? hi : (hi << shift) | (lo >> (32u - shift));
}

// The same for finite |x| >= 2^24, Payne-Hanek, in 32-bit integers: x = m 2^(e-23) with
// m a 24-bit integer, so x (2/pi) mod 4 needs only the bits of 2/pi from 2^-(e-25) on
// (earlier ones give multiples of 4). A 96-bit window of them times m is a 120-bit
// integer P with x (2/pi) = P 2^-94 (mod 4) to within 2^-71: its bits 95..94 are k mod
// 4 and bits 93..30 a 64-bit fraction f. Rounding to the nearest k leaves |f| <= 1/2;
// r = f pi/2 is formed from f's leading 32 bits (normalised: no float is within 2^-62 of
// a multiple of pi/2 relative to its size) times pi/4 as a 32-bit integer, then
// rounded once to float: within about 0.5 ulp of r + 2^-30 relative.
float reduce_payne_hanek(float ax, out uint quadrant) {
  const uint bits = floatBitsToUint(ax);
  const uint e = (bits >> 23) - 127u;  // 24..127
  const uint m = (bits & 0x7FFFFFu) | 0x800000u;
  const uint start = e + 7u;  // bit 2^-(e-25) of 2/pi, counted from kTwoOverPi's start
  const uint w = start >> 5u, s = start & 31u;
  const uint win2 = funnel_shift(kTwoOverPi[w], kTwoOverPi[w + 1u], s);
  const uint win1 = funnel_shift(kTwoOverPi[w + 1u], kTwoOverPi[w + 2u], s);
  const uint win0 = funnel_shift(kTwoOverPi[w + 2u], kTwoOverPi[w + 3u], s);
  uint h0, l0, h1, l1, h2, l2, c1, c2;
  umulExtended(m, win0, h0, l0);
  umulExtended(m, win1, h1, l1);
  umulExtended(m, win2, h2, l2);
  const uint p0 = l0;
  const uint p1 = uaddCarry(l1, h0, c1);
  const uint p2 = uaddCarry(l2, h1 + c1, c2);  // h1 < 2^24: no carry out of the sum
  uint q = p2 >> 30u;
  uint f_hi = (p2 << 2u) | (p1 >> 30u);
  uint f_lo = (p1 << 2u) | (p0 >> 30u);
  const bool round_up = f_hi >= 0x80000000u;  // f >= 1/2: the next k, r = -(1 - f) pi/2
  if (round_up) {
    q += 1u;
    f_lo = ~f_lo + 1u;
    f_hi = ~f_hi + (f_lo == 0u ? 1u : 0u);
  }
  quadrant = q & 3u;
  if (f_hi == 0u && f_lo == 0u) return 0.0;
  const int lead = f_hi != 0u ? 31 - findMSB(f_hi) : 63 - findMSB(f_lo);
  const uint top = lead < 32 ? funnel_shift(f_hi, f_lo, uint(lead)) : f_lo << uint(lead - 32);
  const bool below_top = lead < 32 && (f_lo << uint(lead)) != 0u;
  uint r_hi, r_lo;
  umulExtended(top, 0xC90FDAA2u, r_hi, r_lo);  // pi/4 2^32, to 2^-34 relative
  int norm = 0;
  if (r_hi < 0x80000000u) {
    r_hi = (r_hi << 1u) | (r_lo >> 31u);
    r_lo <<= 1u;
    norm = 1;
  }
  // The low bits only decide a rounding tie: fold them into bit 0 as a sticky bit.
  const uint sticky = (r_lo != 0u || below_top) ? 1u : 0u;
  const float r = ldexp(float(r_hi | sticky), -31 - lead - norm);
  return round_up ? -r : r;
}

// sin(x), or cos(x) = sin(x + pi/2): NaN for inf and NaN, x itself for +-0 (sin(-0) is
// -0), otherwise the reduction that fits |x| and Cephes' polynomials on r.
float sin_cos(float x, bool want_cos) {
  if (isnan(x) || isinf(x)) return KILN_NAN;
  if (x == 0.0) return want_cos ? 1.0 : x;
  uint q;
  float r;
  if (abs(x) < 16777216.0) {
    r = reduce_cody_waite(x, q);
  } else {
    // sin(-x) = -sin(x), cos(-x) = cos(x): -x = (-k) pi/2 + (-r).
    r = reduce_payne_hanek(abs(x), q);
    if (x < 0.0) {
      r = -r;
      q = (0u - q) & 3u;
    }
  }
  q = (q + (want_cos ? 1u : 0u)) & 3u;
  const float s = sin_poly(r), c = cos_poly(r);
  return q == 0u ? s : q == 1u ? c : q == 2u ? -s : -c;
}

// tanh: Cephes' tanhf polynomial below 0.625, else 1 - 2 / (e^(2|x|) + 1) with |x|
// clamped at 20 (tanh rounds to 1 there), the sign restored (tanh(-0) = -0).
float tanh_f(float x) {
  if (isnan(x)) return x;
  const float t = abs(x);
  if (t == 0.0) return x;  // keeps tanh(-0) = -0
  if (t < 0.625) {
    const float z = x * x;
    return x + x * z * ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z +
                         1.33314422036e-1) * z - 3.33332819422e-1);
  }
  const float y = 1.0 - 2.0 / (exp(2.0 * min(t, 20.0)) + 1.0);
  return x < 0.0 ? -y : y;
}

// Q(y) of gelu_f, highest degree first (the CPU's kErfcQ12).
const float kErfcQ12[13] = float[13](
    -8.50886990031912612698e-6, -1.32739551767619200368e-6, 6.7687806897345184758e-5, -3.29515392701853261769e-5,
    -3.28100147985141531385e-4, 4.27020150762249920039e-4, 1.54404768308925058605e-3, -3.24185489536750420494e-3,
    -1.07551161527546402106e-2, 1.82213842457571066067e-2, 1.39736032661886565329e-1, 3.43580332970096362957e-1,
    5.10791352761223577844e-1);

// gelu(x) = x Phi(x), the CPU's GeluOf for float32: erfc(z) = t exp(-z^2) Q(y) with
// t = 2 / (2 + z), y = (2 - z) / (2 + z), Q the degree-12 Chebyshev fit (1.7e-9
// relative), z = |x| / sqrt(2); x^2 split exactly into hi + lo so exp(-x^2/2) loses
// nothing to rounding x^2 first; the Gaussian applied last for negative x.
float gelu_f(float x) {
  if (isnan(x)) return x;
  const float ax = min(abs(x), 15.0);  // the tail underflows to 0 beyond
  const float z = ax * 0.707106781186547524400844;
  const float inv = 1.0 / (2.0 + z);
  const float t = inv + inv;
  const float y = (2.0 - z) * inv;
  float q = 0.0;
  [[unroll]] for (int i = 0; i < 13; ++i) q = q * y + kErfcQ12[i];
  precise const float hi = ax * ax;
  const float ah = uintBitsToFloat(floatBitsToUint(ax) & 0xFFFFF000u);
  const float al = ax - ah;
  precise const float lo = ((ah * ah - hi) + (ah + ah) * al) + al * al;
  const float gauss = exp(hi * -0.5) * (1.0 - lo * 0.5);
  const float tail_scale = t * (q * 0.5);
  return x < 0.0 ? (x * tail_scale) * gauss : x * (1.0 - tail_scale * gauss);
}

// gelu(approximate="tanh") = 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
float gelu_tanh_f(float x) {
  const float inner = (0.044715 * (x * x)) * x + x;
  return x * stable_sigmoid(inner * 1.59576912160573071175);
}

// log(1 + y) for y >= 0 (softplus's e^(beta x)), from +-*/ only: 1 + y = m 2^e with m in
// [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m - 1) / (m + 1) (|s| <= 0.172, the
// series to s^11 is within 2^-26), plus the rounding of 1 + y as a first-order
// correction, and e ln 2 as Cephes' exact-product pair.
float log1p_nonnegative(float y) {
  if (isinf(y) || isnan(y)) return y;  // frexp of inf or NaN is undefined
  const float u = 1.0 + y;
  int e;
  float m = frexp(u, e);  // m in [0.5, 1)
  if (m < 0.70710678118654752) {
    m *= 2.0;
    e -= 1;
  }
  const float correction = e < 25 ? (e > 0 ? 1.0 - (u - y) : y - (u - 1.0)) / u : 0.0;
  const float f = m - 1.0;
  const float s = f / (2.0 + f);
  const float z = s * s;
  const float atanh2 = 2.0 * s * (1.0 + z * (1.0 / 3.0 + z * (0.2 + z * (1.0 / 7.0 + z * (1.0 / 9.0 + z / 11.0)))));
  const float fe = float(e);
  return fe * 0.693359375 + ((atanh2 + correction) + fe * -2.12194440e-4);
}

// torch's softplus: beta x > threshold ? x : log1p(e^(beta x)) / beta.
float softplus_f(float x, float beta, float threshold) {
  const float bx = x * beta;
  return bx > threshold ? x : log1p_nonnegative(exp(bx)) / beta;
}

// 2^x = 2^n 2^r with n = round(x), |r| <= 1/2 (GLSL's exp2 within 4 ulp there), exactly
// 2^n for integer x; 2^n applied as two factors so that n down to -150 stays in range.
float exp2_f(float x) {
  if (isnan(x)) return x;
  if (x >= 128.0) return KILN_INF;
  if (x < -150.0) return 0.0;
  const float n = roundEven(x);
  const float r = x - n;
  const float p = r == 0.0 ? 1.0 : exp2(r);
  const int ni = int(n);
  const int half_n = ni / 2;
  return (p * ldexp(1.0, half_n)) * ldexp(1.0, ni - half_n);
}
