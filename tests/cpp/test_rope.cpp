// Rotary embedding against a reference that literally follows HF: float32 inv_freq,
// float32 angles, tables concatenated with themselves and cast to x's dtype, then
// x * cos + rotate_half(x) * sin (and GPT-J's rotate_every_two for interleaved pairs);
// partial rotary, positions not starting at 0, per-token positions, non-contiguous x,
// every float dtype, precomputed tables, and the error paths.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/nn/rope_kernels.h"
#include "kiln/ops/nn.h"
#include "nn_test_utils.h"

namespace kiln {
namespace {

using nn_test::compute_roundoff;
using nn_test::expect_error;
using nn_test::for_each_target;
using nn_test::from_doubles;
using nn_test::near;
using nn_test::random_sample;
using nn_test::round_to;
using nn_test::to_doubles;
using nn_test::underflow_error;
using nn_test::unit_roundoff;

// HF's full-width tables for one position: emb = cat(freqs, freqs), cos/sin in float32,
// cast to `dtype`. inv_freq[i] = 1 / theta^(2i/d) in float32 steps.
void hf_tables(int64_t position, int64_t d, double theta, DType dtype, std::vector<double>& cos,
               std::vector<double>& sin) {
  cos.assign(d, 0.0);
  sin.assign(d, 0.0);
  for (int64_t i = 0; i < d / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(d);
    const float inv = 1.0f / static_cast<float>(std::pow(static_cast<double>(static_cast<float>(theta)), exponent));
    const float angle = static_cast<float>(position) * inv;
    for (int64_t k : {i, i + d / 2}) {
      cos[k] = round_to(static_cast<float>(std::cos(static_cast<double>(angle))), dtype);
      sin[k] = round_to(static_cast<float>(std::sin(static_cast<double>(angle))), dtype);
    }
  }
}

// One head: out = x * cos + rotate(x) * sin over the first d entries, the rest copied.
// rotate_half(x) = cat(-x[d/2:], x[:d/2]); rotate_every_two pairs (2i, 2i+1) and uses
// cos/sin repeated per pair (emb interleaved). Returns out and each entry's tolerance:
// the kernel forms a*c - b*s with one FMA and one product, within 2u (|a c| + |b s|)
// in the compute dtype, then rounds to x's dtype once.
void reference_head(const double* x, int64_t head_dim, int64_t d, const std::vector<double>& cos_half_cat,
                    const std::vector<double>& sin_half_cat, bool interleaved, DType dtype, double* out,
                    double* tol) {
  const double u = compute_roundoff(dtype);
  for (int64_t k = 0; k < head_dim; ++k) {
    out[k] = x[k];
    tol[k] = 0.0;
  }
  for (int64_t k = 0; k < d; ++k) {
    double rotated, c, s;
    if (interleaved) {
      const int64_t i = k / 2;  // cos/sin of pair i, HF's repeat_interleave(2)
      c = cos_half_cat[i];
      s = sin_half_cat[i];
      rotated = k % 2 == 0 ? -x[k + 1] : x[k - 1];
    } else {
      c = cos_half_cat[k];
      s = sin_half_cat[k];
      rotated = k < d / 2 ? -x[k + d / 2] : x[k - d / 2];
    }
    out[k] = x[k] * c + rotated * s;
    tol[k] = 2 * u * (std::fabs(x[k] * c) + std::fabs(rotated * s)) + 2 * unit_roundoff(dtype) * std::fabs(out[k]) +
             underflow_error(dtype);
  }
}

// Checks apply_rotary_emb(x [..., seq, heads, head_dim], positions) against HF.
void check_rope(const Shape& shape, const std::vector<int64_t>& positions, const Shape& positions_shape,
                int64_t rotary_dim, bool interleaved, DType dtype, double theta, uint32_t seed) {
  const auto x = random_sample(shape, dtype, seed, -3, 3);
  const Tensor pos = from_doubles(std::vector<double>(positions.begin(), positions.end()), positions_shape,
                                  DType::Int64);
  const Tensor got = apply_rotary_emb(x.tensor, pos, theta, rotary_dim, interleaved);
  ASSERT_EQ(got.sizes(), shape);
  ASSERT_EQ(got.dtype(), dtype);
  const std::vector<double> y = to_doubles(got);
  const int64_t heads = shape[shape.size() - 2], head_dim = shape.back(), seq = shape[shape.size() - 3];
  const int64_t tokens = x.tensor.numel() / (heads * head_dim);
  std::vector<double> cos, sin, out(head_dim), tol(head_dim);
  int failures = 0;
  for (int64_t t = 0; t < tokens && failures < 5; ++t) {
    const int64_t p = positions[static_cast<int64_t>(positions.size()) == seq ? t % seq : t];
    hf_tables(p, rotary_dim, theta, dtype, cos, sin);
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t base = (t * heads + h) * head_dim;
      reference_head(x.values.data() + base, head_dim, rotary_dim, cos, sin, interleaved, dtype, out.data(),
                     tol.data());
      for (int64_t k = 0; k < head_dim && failures < 5; ++k) {
        const auto ok = near(y[base + k], round_to(out[k], dtype), tol[k]);
        if (!ok) {
          ++failures;
          ADD_FAILURE() << "token " << t << " head " << h << " entry " << k << ": " << ok.message();
        }
      }
    }
  }
}

std::vector<int64_t> iota(int64_t n, int64_t start) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

TEST(RopeApply, BothLayoutsEveryTarget) {
  for_each_target(cpu::rope_simd_targets(), [] {
    for (bool interleaved : {false, true}) {
      // head_dim 128 (Qwen3), 64 (4 f32 vectors of 16), 18 and 6 (tails), 2 (one pair).
      for (int64_t head_dim : {128, 64, 18, 6, 2}) {
        SCOPED_TRACE("head_dim " + std::to_string(head_dim) + (interleaved ? " interleaved" : " rotate_half"));
        check_rope({5, 3, head_dim}, iota(5, 0), {5}, head_dim, interleaved, DType::Float32, 1e6, 1);
        check_rope({4, 2, head_dim}, iota(4, 7), {4}, head_dim, interleaved, DType::Float64, 10000, 2);
      }
    }
  });
}

TEST(RopeApply, PartialRotary) {
  // Qwen3-Next: 64 of 256 rotate (pairs (i, i + 32)), the other 192 pass through.
  for (bool interleaved : {false, true}) {
    check_rope({3, 2, 256}, {0, 1, 4096}, {3}, 64, interleaved, DType::Float32, 1e7, 3);
    check_rope({2, 4, 10}, {3, 9}, {2}, 4, interleaved, DType::BFloat16, 10000, 4);
  }
  const auto x = random_sample({2, 2, 256}, DType::Float32, 5);
  const Tensor y = apply_rotary_emb(x.tensor, from_doubles({5, 6}, {2}, DType::Int64), 1e7, 64);
  const std::vector<double> yv = to_doubles(y);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t k = 64; k < 256; ++k) EXPECT_EQ(yv[i * 256 + k], x.values[i * 256 + k]);
  }
}

TEST(RopeApply, PositionsNotFromZeroAndPerToken) {
  // Large and unordered positions, shared by the batch ([seq]) or one per token.
  check_rope({2, 3, 4, 32}, {1000, 37, 40959}, {3}, 32, false, DType::Float32, 1e6, 6);
  check_rope({2, 3, 4, 32}, {5, 6, 7, 100, 101, 102}, {2, 3}, 32, false, DType::Float32, 1e6, 7);
  check_rope({2, 3, 4, 32}, {5, 6, 7, 100, 101, 102}, {2, 3}, 16, true, DType::Float16, 1e6, 8);
  // Negative positions rotate backwards.
  check_rope({2, 1, 8}, {-3, -1}, {2}, 8, false, DType::Float64, 10000, 9);
}

TEST(RopeApply, NarrowDtypesAndThreads) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    check_rope({7, 4, 128}, iota(7, 11), {7}, 128, false, dt, 1e6, 10);
    check_rope({7, 4, 64}, iota(7, 11), {7}, 64, true, dt, 10000, 11);
  }
  // 96 tokens x 8 heads x 128 spreads over the pool.
  check_rope({96, 8, 128}, iota(96, 3), {96}, 128, false, DType::Float32, 1e6, 12);
  check_rope({2, 48, 8, 128}, iota(48, 0), {48}, 96, true, DType::BFloat16, 1e6, 13);
}

TEST(RopeApply, NonContiguousX) {
  // HF's [heads, seq, head_dim] transposed into kiln's layout, and a strided head slice.
  const auto x = random_sample({4, 6, 32}, DType::Float32, 14);
  const Tensor xs = x.tensor.transpose(0, 1);  // [6, 4, 32]
  const Tensor pos = from_doubles({3, 4, 5, 6, 7, 8}, {6}, DType::Int64);
  const Tensor a = apply_rotary_emb(xs, pos, 1e6);
  const Tensor b = apply_rotary_emb(xs.contiguous(), pos, 1e6);
  EXPECT_EQ(to_doubles(a), to_doubles(b));
  const Tensor stepped = xs.slice(1, 0, 4, 2);  // heads 0 and 2
  EXPECT_EQ(to_doubles(apply_rotary_emb(stepped, pos, 1e6, 16, true)),
            to_doubles(apply_rotary_emb(stepped.contiguous(), pos, 1e6, 16, true)));
}

TEST(RopeTables, InvFreqAndCosSinMatchHf) {
  // inv_freq within 1 ulp of 1 / theta^(2i/d); exact at i = 0 and where HF's float32
  // exponent is exact (theta^(-1/2) for i = d/4).
  const Tensor inv = rope_inv_freq(128, 10000);
  ASSERT_EQ(inv.sizes(), (Shape{64}));
  ASSERT_EQ(inv.dtype(), DType::Float32);
  const std::vector<double> iv = to_doubles(inv);
  EXPECT_EQ(iv[0], 1.0);
  EXPECT_EQ(iv[32], static_cast<double>(0.01f));
  for (int64_t i = 0; i < 64; ++i) {
    const double exact = std::pow(10000.0, -static_cast<double>(2 * i) / 128);
    EXPECT_TRUE(near(iv[i], exact, 2 * std::ldexp(exact, -24)));
  }
  // Tables: [*positions, d/2] in the requested dtype, the HF values.
  const Tensor pos = from_doubles({0, 17, 40000, 5, 6, 7}, {2, 3}, DType::Int32);
  const RopeTables t = rope_cos_sin(pos, 64, 1e6, DType::BFloat16);
  ASSERT_EQ(t.cos.sizes(), (Shape{2, 3, 32}));
  ASSERT_EQ(t.sin.dtype(), DType::BFloat16);
  const std::vector<double> c = to_doubles(t.cos), s = to_doubles(t.sin);
  const std::vector<double> pv = to_doubles(pos);
  std::vector<double> hc, hs;
  for (int64_t p = 0; p < 6; ++p) {
    hf_tables(static_cast<int64_t>(pv[p]), 64, 1e6, DType::BFloat16, hc, hs);
    for (int64_t i = 0; i < 32; ++i) {
      EXPECT_EQ(c[p * 32 + i], hc[i]) << p << " " << i;
      EXPECT_EQ(s[p * 32 + i], hs[i]) << p << " " << i;
    }
  }
}

TEST(RopeTables, PrecomputedTablesAnyValues) {
  // apply_rotary_emb_cos_sin rotates by whatever tables it gets, [seq, d/2] or per token.
  for (bool interleaved : {false, true}) {
    const auto x = random_sample({3, 2, 12}, DType::Float32, 15);
    const auto c = random_sample({3, 4}, DType::Float32, 16);
    const auto s = random_sample({3, 4}, DType::Float64, 17);
    const std::vector<double> y = to_doubles(apply_rotary_emb_cos_sin(x.tensor, c.tensor, s.tensor, interleaved));
    std::vector<double> out(12), tol(12);
    for (int64_t t = 0; t < 3; ++t) {
      std::vector<double> ch(8), sh(8);
      for (int64_t i = 0; i < 4; ++i) {
        ch[i] = ch[i + 4] = c.values[t * 4 + i];
        sh[i] = sh[i + 4] = static_cast<float>(s.values[t * 4 + i]);  // used as float32 values
      }
      for (int64_t h = 0; h < 2; ++h) {
        reference_head(x.values.data() + (t * 2 + h) * 12, 12, 8, ch, sh, interleaved, DType::Float32, out.data(),
                       tol.data());
        for (int64_t k = 0; k < 12; ++k) EXPECT_TRUE(near(y[(t * 2 + h) * 12 + k], out[k], tol[k]));
      }
    }
  }
  // The tables of rope_cos_sin in x's dtype reproduce apply_rotary_emb exactly.
  const auto x = random_sample({4, 3, 32}, DType::BFloat16, 18);
  const Tensor pos = from_doubles({9, 10, 11, 12}, {4}, DType::Int64);
  const RopeTables t = rope_cos_sin(pos, 32, 1e6, DType::BFloat16);
  EXPECT_EQ(to_doubles(apply_rotary_emb_cos_sin(x.tensor, t.cos, t.sin)),
            to_doubles(apply_rotary_emb(x.tensor, pos, 1e6)));
}

TEST(RopeApply, EmptyInputs) {
  EXPECT_EQ(apply_rotary_emb(Tensor::empty({0, 2, 8}), Tensor::empty({0}, DType::Int64), 1e4).sizes(),
            (Shape{0, 2, 8}));
  EXPECT_EQ(apply_rotary_emb(Tensor::empty({3, 0, 8}), from_doubles({1, 2, 3}, {3}, DType::Int64), 1e4).sizes(),
            (Shape{3, 0, 8}));
}

TEST(RopeErrors, ShapesDtypesAndValues) {
  const Tensor x = Tensor::empty({3, 2, 8});
  const Tensor pos = from_doubles({0, 1, 2}, {3}, DType::Int64);
  expect_error([&] { apply_rotary_emb(Tensor::empty({2, 8}), pos, 1e4); }, ErrorKind::Runtime,
               {"apply_rotary_emb:", "[..., seq, heads, head_dim]", "[2, 8]"});
  expect_error([&] { apply_rotary_emb(x.to(DType::Int32), pos, 1e4); }, ErrorKind::Type, {"int32"});
  expect_error([&] { apply_rotary_emb(x, pos, 1e4, 5); }, ErrorKind::Value, {"rotary_dim must be even", "5"});
  expect_error([&] { apply_rotary_emb(x, pos, 1e4, 0); }, ErrorKind::Value, {"at least 2"});
  expect_error([&] { apply_rotary_emb(x, pos, 1e4, 10); }, ErrorKind::Value, {"must not exceed head_dim (8)"});
  expect_error([&] { apply_rotary_emb(x, from_doubles({0, 1}, {2}, DType::Int64), 1e4); }, ErrorKind::Runtime,
               {"positions of shape [seq] = [3]", "got [2]"});
  expect_error([&] { apply_rotary_emb(x, pos.to(DType::Float32), 1e4); }, ErrorKind::Type,
               {"integer positions", "float32"});
  expect_error([&] { apply_rotary_emb(x, pos, 0.0); }, ErrorKind::Value, {"rope_theta", "positive"});
  expect_error([&] { apply_rotary_emb(x, pos, std::nan("")); }, ErrorKind::Value, {"rope_theta"});
  const Tensor c = Tensor::empty({3, 4});
  expect_error([&] { apply_rotary_emb_cos_sin(x, c, Tensor::empty({3, 3})); }, ErrorKind::Runtime,
               {"cos and sin of one shape"});
  expect_error([&] { apply_rotary_emb_cos_sin(x, Tensor::empty({2, 4}), Tensor::empty({2, 4})); },
               ErrorKind::Runtime, {"[seq, rotary_dim / 2]", "[2, 4]"});
  expect_error([&] { apply_rotary_emb_cos_sin(x, Tensor::empty({3, 5}), Tensor::empty({3, 5})); },
               ErrorKind::Value, {"rotary_dim (10) must not exceed head_dim (8)"});
  expect_error([&] { apply_rotary_emb_cos_sin(x, c.to(DType::Int64), c.to(DType::Int64)); }, ErrorKind::Type,
               {"float cos and sin"});
  expect_error([&] { rope_cos_sin(pos, 8, 1e4, DType::Int8); }, ErrorKind::Type, {"table dtype", "int8"});
  expect_error([&] { rope_inv_freq(7, 1e4); }, ErrorKind::Value, {"rope_inv_freq:", "even"});
}

}  // namespace
}  // namespace kiln
