// The `_out` ops (kiln/ops/out_variants.h): each writes exactly the bits its allocating op
// returns (which the op's own tests compare against scalar references), over edge sizes
// (0, 1, lane width +- 1) and dtypes; takes nothing from the allocator once its inputs
// exist; and refuses an out of the wrong shape, dtype, device layout, an overlapping out
// and inputs that require grad.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "kiln/allocator.h"
#include "kiln/grad_mode.h"
#include "kiln/ops/attention.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/gated_delta.h"
#include "kiln/ops/index.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/out_variants.h"
#include "test_util.h"

namespace {

using namespace kiln;
using kiln::testing::expect_error;

void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const Tensor g = got.contiguous(), w = want.contiguous();
  if (g.nbytes() == 0) return;  // memcmp of empty (null) buffers is undefined
  EXPECT_EQ(std::memcmp(g.data_ptr(), w.data_ptr(), g.nbytes()), 0) << what << ": the _out op wrote other bits";
}

Tensor random(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, DType::Float32, &gen).to(dtype);
}

TEST(OutVariants, LinearMatchesLinearOverEdgeSizes) {
  uint64_t seed = 1;
  for (DType dtype : {DType::Float32, DType::BFloat16}) {
    for (int64_t M : {1, 3}) {
      for (int64_t K : {0, 1, 15, 16, 17}) {
        for (int64_t N : {0, 1, 9, 33}) {
          const Tensor x = random({M, K}, dtype, seed++);
          const Tensor w = random({N, K}, dtype, seed++);
          const Tensor bias = random({N}, dtype, seed++);
          const std::string what = std::string(dtype_name(dtype)) + " M " + std::to_string(M) + " K " +
                                   std::to_string(K) + " N " + std::to_string(N);
          Tensor out = Tensor::empty({M, N}, dtype);
          linear_out(out, x, w);
          expect_same_bits(out, linear(x, w), what);
          linear_out(out, x, w, bias);
          expect_same_bits(out, linear(x, w, bias), what + " with bias");
        }
      }
    }
  }
}

TEST(OutVariants, LinearFp8MatchesLinearFp8) {
  uint64_t seed = 100;
  for (DType dtype : {DType::Float32, DType::BFloat16}) {
    for (int64_t K : {1, 16, 33, 130}) {
      for (int64_t N : {1, 17, 129}) {
        const auto [w, scale] = quantize_fp8_rowwise(random({N, K}, DType::Float32, seed++));
        const Tensor x = random({1, K}, dtype, seed++);
        Tensor out = Tensor::empty({1, N}, dtype);
        linear_fp8_out(out, x, w, scale);
        expect_same_bits(out, linear_fp8(x, w, scale), "fp8 K " + std::to_string(K) + " N " + std::to_string(N));
      }
    }
  }
}

TEST(OutVariants, RmsNormsMatchTheirOps) {
  uint64_t seed = 200;
  for (int64_t H : {1, 15, 16, 17, 64}) {
    for (DType dtype : {DType::Float32, DType::BFloat16}) {
      const Tensor x = random({2, H}, dtype, seed++);
      const Tensor w = random({H}, DType::Float32, seed++);
      Tensor llama = Tensor::empty({2, H}, DType::Float32);  // promote(dtype, float32)
      rms_norm_llama_out(llama, x, w, 1e-6);
      expect_same_bits(llama, rms_norm_llama(x, w, 1e-6), "rms_norm_llama H " + std::to_string(H));
      Tensor scaled = Tensor::empty({2, H}, dtype);
      rms_norm_out(scaled, x, add(w, Scalar(1.0)), 1e-6);
      expect_same_bits(scaled, rms_norm_one_plus(x, w, 1e-6), "rms_norm_one_plus H " + std::to_string(H));
      rms_norm_out(scaled, x, w, 1e-5);
      expect_same_bits(scaled, rms_norm(x, {H}, w, 1e-5), "rms_norm H " + std::to_string(H));
    }
  }
}

TEST(OutVariants, AttentionDecodeMatchesAttentionDecode) {
  uint64_t seed = 300;
  for (DType dtype : {DType::Float32, DType::BFloat16}) {
    for (int64_t E : {1, 8, 17}) {
      const Tensor q = random({1, 4, E}, dtype, seed++);
      const Tensor k = random({1, 2, 16, E}, dtype, seed++);
      const Tensor v = random({1, 2, 16, E}, dtype, seed++);
      for (int64_t len : {0, 1, 5, 16}) {
        Tensor out = Tensor::empty({1, 4, E}, dtype);
        attention_decode_out(out, q, k, v, len);
        expect_same_bits(out, attention_decode(q, k, v, len),
                         std::string(dtype_name(dtype)) + " E " + std::to_string(E) + " len " + std::to_string(len));
      }
    }
  }
}

TEST(OutVariants, SigmoidAndSiluSeparateAndInPlace) {
  uint64_t seed = 400;
  for (DType dtype : {DType::Float32, DType::BFloat16}) {
    for (int64_t n : {0, 1, 15, 16, 17, 100}) {
      const Tensor x = mul(random({n}, dtype, seed++), Scalar(6.0));
      Tensor out = Tensor::empty({n}, dtype);
      sigmoid_out(out, x);
      expect_same_bits(out, sigmoid(x), "sigmoid n " + std::to_string(n));
      silu_out(out, x);
      expect_same_bits(out, silu(x), "silu n " + std::to_string(n));
      Tensor self = x.clone();
      silu_out(self, self);
      expect_same_bits(self, silu(x), "silu in place n " + std::to_string(n));
      self = x.clone();
      sigmoid_out(self, self);
      expect_same_bits(self, sigmoid(x), "sigmoid in place n " + std::to_string(n));
    }
  }
}

TEST(OutVariants, IndexSelectAndGatedNormMatchTheirOps) {
  uint64_t seed = 500;
  for (DType dtype : {DType::Float32, DType::BFloat16}) {
    const Tensor x = random({2, 17}, dtype, seed++);
    Tensor index = Tensor::empty({5}, DType::Int64);
    const int64_t rows[] = {16, 0, 3, 3, 9};
    std::memcpy(index.data<int64_t>(), rows, sizeof(rows));
    Tensor out = Tensor::empty({2, 5}, dtype);
    index_select_out(out, x, 1, index);
    expect_same_bits(out, index_select(x, 1, index), "index_select");
    Tensor empty_out = Tensor::empty({2, 0}, dtype);
    index_select_out(empty_out, x, 1, Tensor::empty({0}, DType::Int64));
    for (int64_t d : {1, 16, 17}) {
      const Tensor in = random({3, 2, d}, dtype, seed++);
      const Tensor gate = random({3, 2, d}, DType::Float32, seed++);
      const Tensor w = random({d}, DType::Float32, seed++);
      Tensor normed = Tensor::empty({3, 2, d}, dtype);
      rms_norm_gated_out(normed, in, gate, w, 1e-6);
      expect_same_bits(normed, rms_norm_gated(in, gate, w, 1e-6), "rms_norm_gated d " + std::to_string(d));
    }
  }
}

TEST(OutVariants, GatedDeltaOpsMatchTheirOps) {
  uint64_t seed = 600;
  const int64_t hk = 2, hv = 4, dk = 8, dv = 16, K = 4;
  const int64_t channels = 2 * hk * dk + hv * dv;
  for (int64_t tokens : {1, 3}) {
    for (DType dtype : {DType::Float32, DType::BFloat16}) {
      const Tensor x = random({tokens, channels}, dtype, seed++);
      const Tensor w = random({channels, K}, DType::Float32, seed++);
      const Tensor state0 = random({K - 1, channels}, DType::Float32, seed++);
      Tensor s1 = state0.clone(), s2 = state0.clone();
      Tensor mixed = Tensor::empty({tokens, channels}, dtype);
      causal_conv1d_out(mixed, x, w, s1, "silu");
      expect_same_bits(mixed, causal_conv1d(x, w, s2, "silu"), "causal_conv1d");
      expect_same_bits(s1, s2, "causal_conv1d state");
    }
    const Tensor a = random({tokens, hv}, DType::BFloat16, seed++);
    const Tensor b = random({tokens, hv}, DType::BFloat16, seed++);
    const Tensor A_log = random({hv}, DType::Float32, seed++);
    const Tensor dt_bias = random({hv}, DType::Float32, seed++);
    Tensor g = Tensor::empty({tokens, hv}), beta = Tensor::empty({tokens, hv});
    gated_delta_gates_out(g, beta, a, b, A_log, dt_bias);
    const DeltaGates want = gated_delta_gates(a, b, A_log, dt_bias);
    expect_same_bits(g, want.g, "gated_delta_gates g");
    expect_same_bits(beta, want.beta, "gated_delta_gates beta");
    expect_error([&] { gated_delta_gates_out(g, g, a, b, A_log, dt_bias); }, ErrorKind::Runtime,
                 "unsupported operation");
    const Tensor q = random({tokens, hk, dk}, DType::Float32, seed++);
    const Tensor k = random({tokens, hk, dk}, DType::Float32, seed++);
    const Tensor v = random({tokens, hv, dv}, DType::Float32, seed++);
    const Tensor st = random({hv, dk, dv}, DType::Float32, seed++);
    Tensor st1 = st.clone(), st2 = st.clone();
    Tensor o = Tensor::empty({tokens, hv, dv});
    gated_delta_rule_out(o, q, k, v, want.g, want.beta, st1, true);
    expect_same_bits(o, gated_delta_rule(q, k, v, want.g, want.beta, st2, true), "gated_delta_rule");
    expect_same_bits(st1, st2, "gated_delta_rule state");
    expect_error([&] { gated_delta_rule_out(Tensor::empty({tokens, hv, dv + 1}), q, k, v, want.g, want.beta, st1, true); },
                 ErrorKind::Runtime, "out must have shape");
  }
}

TEST(OutVariants, TakeNothingFromTheAllocator) {
  const Tensor x = random({1, 64}, DType::BFloat16, 1);
  const Tensor w = random({96, 64}, DType::BFloat16, 2);
  const Tensor nw = random({64}, DType::Float32, 3);
  const Tensor xf = x.to(DType::Float32);
  const Tensor q = random({1, 4, 16}, DType::BFloat16, 4);
  const Tensor kv = random({1, 2, 32, 16}, DType::BFloat16, 5);
  Tensor y = Tensor::empty({1, 96}, DType::BFloat16);
  Tensor normed = Tensor::empty({1, 64}, DType::Float32);
  Tensor attn = Tensor::empty({1, 4, 16}, DType::BFloat16);
  Tensor gated = Tensor::empty({1, 64});
  const Tensor conv_w = random({64, 4}, DType::Float32, 6);
  Tensor conv_state = zeros({3, 64});
  Tensor mixed = Tensor::empty({1, 64});
  const Tensor ab = random({1, 4}, DType::Float32, 7);
  const Tensor A_log = random({4}, DType::Float32, 8);
  Tensor gates_g = Tensor::empty({1, 4}), gates_beta = Tensor::empty({1, 4});
  const Tensor qk = random({1, 2, 8}, DType::Float32, 9);
  const Tensor rule_v = random({1, 4, 8}, DType::Float32, 10);
  Tensor rule_state = zeros({4, 8, 8});
  Tensor rule_out = Tensor::empty({1, 4, 8});
  const Tensor order = arange(Scalar(int64_t{63}), Scalar(int64_t{-1}), Scalar(int64_t{-1}));
  Tensor selected = Tensor::empty({1, 64});
  const auto run = [&] {
    linear_out(y, x, w);
    rms_norm_llama_out(normed, xf, nw, 1e-6);
    rms_norm_out(normed, xf, nw, 1e-6);
    attention_decode_out(attn, q, kv, kv, 20);
    silu_out(y, y);
    sigmoid_out(y, y);
    rms_norm_gated_out(gated, xf, xf, nw, 1e-6);
    causal_conv1d_out(mixed, xf, conv_w, conv_state, "silu");
    gated_delta_gates_out(gates_g, gates_beta, ab, ab, A_log, A_log);
    gated_delta_rule_out(rule_out, qk, qk, rule_v, gates_g, gates_beta, rule_state, true);
    index_select_out(selected, xf, 1, order);
  };
  run();  // the kernels' per-thread scratch grows here
  const AllocatorStats before = allocator_stats();
  for (int i = 0; i < 5; ++i) run();
  EXPECT_EQ(allocator_stats().num_allocs, before.num_allocs);
}

TEST(OutVariants, RefuseABadOut) {
  const Tensor x = random({2, 8}, DType::Float32, 1);
  const Tensor w = random({4, 8}, DType::Float32, 2);
  expect_error([&] { linear_out(Tensor::empty({2, 5}), x, w); }, ErrorKind::Runtime, "out must have shape [2, 4]");
  expect_error([&] { linear_out(Tensor::empty({2, 4}, DType::BFloat16), x, w); }, ErrorKind::Type,
               "Expected out tensor to have dtype float32, but got bfloat16");
  expect_error([&] { linear_out(Tensor::empty({4, 2}).t(), x, w); }, ErrorKind::Runtime, "out must be contiguous");
  expect_error([&] { linear_out(Tensor(), x, w); }, ErrorKind::Runtime, "out");
  // An out that is (part of) an input.
  const Tensor over_x = x.view({4, 4}).narrow(0, 0, 2);  // [2, 4], contiguous, x's first 8 values
  expect_error([&] { linear_out(over_x, x, w); }, ErrorKind::Runtime, "unsupported operation");
  const Tensor row = random({1, 9}, DType::Float32, 3);
  expect_error([&] { sigmoid_out(row.narrow(1, 1, 8), row.narrow(1, 0, 8)); }, ErrorKind::Runtime,
               "unsupported operation");
  expect_error([&] { rms_norm_llama_out(Tensor::empty({2, 8}, DType::BFloat16), x, random({8}, DType::Float32, 4), 1e-6); },
               ErrorKind::Type, "dtype float32");
  expect_error([&] { rms_norm_out(Tensor::empty({2, 8}), x, random({2, 8}, DType::Float32, 4), 1e-6); },
               ErrorKind::Runtime, "1-D weight");
  expect_error([&] {
    attention_decode_out(Tensor::empty({1, 4, 8}), random({1, 4, 8}, DType::Float32, 5),
                         random({1, 2, 8, 8}, DType::Float32, 6), random({1, 2, 8, 8}, DType::Float32, 7), 9);
  }, ErrorKind::Index, "valid_len 9 is out of range [0, 8]");
  // out= is not differentiable.
  Tensor leaf = random({2, 8}, DType::Float32, 8);
  leaf.requires_grad_(true);
  expect_error([&] { linear_out(Tensor::empty({2, 4}), leaf, w); }, ErrorKind::Runtime,
               "don't support automatic differentiation");
  expect_error([&] { silu_out(leaf, leaf); }, ErrorKind::Runtime, "don't support automatic differentiation");
}

}  // namespace
