// MoeBlockDecode (the fused one-token MoE block) against the unfused chain it replaces:
// rms_norm -> linear (router) -> moe_route -> moe_experts -> add. The fused kernel calls
// the same row kernels on the same row ranges, so the result must be bit-identical, on
// every SIMD target, for every thread count, and it must allocate nothing per call.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <vector>

#include "backend/cpu/moe/moe_kernels.h"
#include "bf16_dot_mode.h"
#include "kiln/allocator.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/decode_block.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/nn.h"
#include "linear_test_util.h"
#include "moe_test_util.h"
#include "simd_targets.h"

namespace {

using namespace kiln;
using linear_test::random_tensor;
using moe_test::random_expert;

struct BlockCase {
  int64_t H, I, E, k;
  DType wdtype;
  DType router_dtype = DType::BFloat16;
  bool block_scales = false;
  bool shared = false;
  bool sigmoid = false;  // LFM2: sigmoid scores, selection bias, scaling, eps
  bool one_plus = false;  // Qwen3-Next zero-centred norm
  uint64_t seed = 1;
};

struct Block {
  MoeBlockDecodeConfig config;
};

Block make_block(const BlockCase& c) {
  Block b;
  MoeBlockDecodeConfig& cfg = b.config;
  cfg.norm_weight = add(mul(random_tensor({c.H}, DType::Float32, c.seed), Scalar(0.3)), Scalar(c.one_plus ? 0.0 : 1.0));
  cfg.norm_one_plus = c.one_plus;
  cfg.norm_eps = 1e-6;
  cfg.router = mul(random_tensor({c.E, c.H}, DType::Float32, c.seed + 1), Scalar(2.0 / std::sqrt(c.H))).to(c.router_dtype);
  cfg.top_k = c.k;
  if (c.sigmoid) {
    cfg.scoring = MoeScoring::Sigmoid;
    cfg.renormalize = true;
    cfg.selection_bias = mul(random_tensor({c.E}, DType::Float32, c.seed + 2), Scalar(0.1));
    cfg.routed_scaling_factor = 1.5;
    cfg.renorm_eps = 1e-6;
  } else {
    cfg.scoring = MoeScoring::Softmax;
    cfg.renormalize = true;
  }
  for (int64_t e = 0; e < c.E; ++e) {
    cfg.experts.experts.push_back(random_expert(c.H, c.I, c.wdtype, c.block_scales, false, c.seed + 10 * (e + 1)));
  }
  if (c.shared) {
    cfg.shared = SharedExpert{random_expert(c.H, c.I + 3, c.wdtype, c.block_scales, false, c.seed + 7),
                              mul(random_tensor({1, c.H}, DType::Float32, c.seed + 8), Scalar(0.2)).to(c.router_dtype)};
  }
  return b;
}

// The unfused chain, exactly as the decoder runs it without the fused block.
Tensor unfused(const MoeBlockDecodeConfig& c, const Tensor& x) {
  const Tensor h = c.norm_one_plus ? rms_norm_one_plus(x, c.norm_weight, c.norm_eps)
                                   : rms_norm_llama(x, c.norm_weight, c.norm_eps);
  const Tensor logits = linear(h.to(c.router.dtype()), c.router);
  const MoeRouting r = moe_route(logits, c.top_k, c.scoring, c.renormalize, c.selection_bias,
                                 c.routed_scaling_factor, c.renorm_eps);
  return add(x, moe_experts(h, r.weights, r.ids, c.experts, c.shared));
}

std::vector<uint32_t> bits(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint32_t> out(static_cast<size_t>(c.numel()));
  std::memcpy(out.data(), c.data_ptr(), out.size() * sizeof(float));
  return out;
}

void expect_bit_identical(const BlockCase& c) {
  const Block b = make_block(c);
  const std::optional<MoeBlockDecode> fused = MoeBlockDecode::prepare(b.config);
  ASSERT_TRUE(fused.has_value());
  for (int token = 0; token < 3; ++token) {
    const Tensor x = mul(random_tensor({1, c.H}, DType::Float32, c.seed + 100 + token), Scalar(2.0));
    const Tensor expected = unfused(b.config, x);
    const Tensor out = Tensor::empty({1, c.H}, DType::Float32);
    (*fused)(x, out);
    ASSERT_EQ(bits(out), bits(expected)) << "H " << c.H << " I " << c.I << " E " << c.E << " k " << c.k << " "
                                         << dtype_name(c.wdtype) << " token " << token;
  }
}

const DType kWide[] = {DType::Float32, DType::BFloat16, DType::Float16};

TEST(MoeBlockDecode, WideExpertsBitIdenticalToUnfusedChain) {
  for (DType w : kWide) {
    expect_bit_identical({64, 32, 8, 2, w, w});
    expect_bit_identical({96, 48, 6, 3, w, DType::BFloat16, false, true});
  }
}

// Both FP8 decode paths (the bf16 dot one where the CPU has it): the fused block picks
// the unfused kernels' decoder, so it stays bit-identical either way.
TEST(MoeBlockDecode, Fp8ExpertsBitIdenticalToUnfusedChain) {
  for (int mode : {0, 1}) {
    SCOPED_TRACE(::testing::Message() << "bf16 dot mode " << mode);
    const bf16_dot_test::Bf16DotMode forced(mode);
    expect_bit_identical({256, 128, 8, 2, DType::Float8_e4m3fn, DType::BFloat16, false});
    expect_bit_identical({256, 128, 8, 2, DType::Float8_e4m3fn, DType::BFloat16, true, true});
    expect_bit_identical({130, 40, 5, 2, DType::Float8_e4m3fn, DType::Float32, true});
  }
}

TEST(MoeBlockDecode, RoutingVariantsAndZeroCentredNorm) {
  expect_bit_identical({64, 32, 8, 2, DType::BFloat16, DType::BFloat16, false, false, /*sigmoid=*/true});
  expect_bit_identical({64, 32, 8, 2, DType::BFloat16, DType::BFloat16, false, true, false, /*one_plus=*/true});
  expect_bit_identical({48, 16, 4, 4, DType::Float32, DType::Float32, false, false, true, true});  // k = E
  expect_bit_identical({32, 16, 1, 1, DType::BFloat16, DType::Float16});                            // one expert
}

TEST(MoeBlockDecode, SizesAroundSimdWidths) {
  // Hidden and intermediate sizes around the lane counts and the 4/8-row passes.
  for (int64_t H : {1, 7, 15, 16, 17, 31, 33, 63, 65}) {
    for (int64_t I : {1, 3, 4, 5, 9}) expect_bit_identical({H, I, 9, 2, DType::BFloat16, DType::BFloat16, false, true});
  }
  expect_bit_identical({70, 37, 17, 3, DType::Float32, DType::Float32});  // router rows not a multiple of 8
}

TEST(MoeBlockDecode, ThreadCountDoesNotChangeTheResult) {
  const BlockCase c{200, 96, 16, 4, DType::BFloat16, DType::BFloat16, false, true};
  const Block b = make_block(c);
  const Tensor x = random_tensor({1, c.H}, DType::Float32, 5);
  const Tensor expected = unfused(b.config, x);
  for (int threads : {1, 2, 3, 5}) {
    const ThreadsScope scope(threads);
    const std::optional<MoeBlockDecode> fused = MoeBlockDecode::prepare(b.config);
    const Tensor out = Tensor::empty({1, c.H}, DType::Float32);
    for (int repeat = 0; repeat < 5; ++repeat) {
      (*fused)(x, out);
      ASSERT_EQ(bits(out), bits(expected)) << threads << " threads, repeat " << repeat;
    }
  }
}

TEST(MoeBlockDecode, NestedInsideAParallelRegionRunsInline) {
  const BlockCase c{64, 32, 8, 2, DType::BFloat16};
  const Block b = make_block(c);
  const std::optional<MoeBlockDecode> fused = MoeBlockDecode::prepare(b.config);
  const Tensor x = random_tensor({1, c.H}, DType::Float32, 6);
  const Tensor expected = unfused(b.config, x);
  const ThreadsScope scope(2);
  std::vector<Tensor> outs = {Tensor::empty({1, c.H}, DType::Float32), Tensor::empty({1, c.H}, DType::Float32)};
  current_context().pool().parallel_for(2, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) (*fused)(x, outs[static_cast<size_t>(i)]);
  });
  EXPECT_EQ(bits(outs[0]), bits(expected));
  EXPECT_EQ(bits(outs[1]), bits(expected));
}

TEST(MoeBlockDecode, EveryTarget) {
  simd_targets::for_each(cpu::moe_simd_targets(), [] {
    expect_bit_identical({70, 37, 5, 2, DType::BFloat16, DType::BFloat16, false, true});
    expect_bit_identical({65, 33, 5, 2, DType::Float16, DType::Float32});
    expect_bit_identical({130, 40, 4, 2, DType::Float8_e4m3fn, DType::BFloat16, true});
    expect_bit_identical({130, 40, 4, 2, DType::Float8_e4m3fn, DType::BFloat16, false, true, true});
  });
}

TEST(MoeBlockDecode, AllocatesNothingPerCall) {
  const BlockCase c{256, 64, 16, 4, DType::BFloat16, DType::BFloat16, false, true};
  const Block b = make_block(c);
  const std::optional<MoeBlockDecode> fused = MoeBlockDecode::prepare(b.config);
  const Tensor x = random_tensor({1, c.H}, DType::Float32, 9);
  const Tensor out = Tensor::empty({1, c.H}, DType::Float32);
  for (int i = 0; i < 3; ++i) (*fused)(x, out);  // scratch and per-thread plans grow here
  const AllocatorStats before = allocator_stats();
  for (int i = 0; i < 20; ++i) (*fused)(x, out);
  const AllocatorStats after = allocator_stats();
  EXPECT_EQ(after.num_allocs, before.num_allocs);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
}

TEST(MoeBlockDecode, BadInputs) {
  const BlockCase c{64, 32, 8, 2, DType::BFloat16};
  Block b = make_block(c);
  const std::optional<MoeBlockDecode> fused = MoeBlockDecode::prepare(b.config);
  ASSERT_TRUE(fused.has_value());
  const Tensor x = random_tensor({1, c.H}, DType::Float32, 3);
  const Tensor out = Tensor::empty({1, c.H}, DType::Float32);
  const auto expect_error = [](auto&& fn, ErrorKind kind, const char* text) {
    try {
      fn();
      ADD_FAILURE() << "no error; expected one containing '" << text << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("moe_block_decode"), std::string::npos) << e.what();
    }
  };
  expect_error([&] { (*fused)(random_tensor({2, c.H}, DType::Float32, 1), out); }, ErrorKind::Runtime, "one token");
  expect_error([&] { (*fused)(x, Tensor::empty({1, c.H + 1}, DType::Float32)); }, ErrorKind::Runtime, "out must be");
  expect_error([&] { (*fused)(x.to(DType::BFloat16), out); }, ErrorKind::Type, "x must be float32");
  expect_error([&] { (*fused)(x, x); }, ErrorKind::Runtime, "");
  expect_error([&] { (*fused)(Tensor(), out); }, ErrorKind::Runtime, "x");
  const Tensor strided = random_tensor({c.H, 2}, DType::Float32, 4).select(1, 0).unsqueeze(0);
  expect_error([&] { (*fused)(strided, out); }, ErrorKind::Runtime, "contiguous");

  MoeBlockDecodeConfig bad = b.config;
  bad.top_k = c.E + 1;
  expect_error([&] { MoeBlockDecode::prepare(bad); }, ErrorKind::Value, "top_k");
  bad = b.config;
  bad.experts.experts.pop_back();
  expect_error([&] { MoeBlockDecode::prepare(bad); }, ErrorKind::Runtime, "experts are given");
  bad = b.config;
  bad.norm_weight = random_tensor({c.H + 1}, DType::Float32, 2);
  expect_error([&] { MoeBlockDecode::prepare(bad); }, ErrorKind::Runtime, "norm_weight");
  bad = b.config;
  bad.experts.experts[3].up = bad.experts.experts[3].up.to(DType::Float32);
  expect_error([&] { MoeBlockDecode::prepare(bad); }, ErrorKind::Type, "one dtype");
  bad = b.config;
  bad.router = bad.router.to(DType::Float8_e4m3fn);
  EXPECT_FALSE(MoeBlockDecode::prepare(bad).has_value());  // an FP8 router: the unfused path
}

// ---- AttentionEntryDecode ----

struct EntryCase {
  int64_t H, heads, kv_heads, head_dim;
  DType wdtype;
  DType cache_dtype = DType::BFloat16;
  bool block_scales = false;
  bool gate = false;      // Qwen3-Next gated attention
  bool one_plus = false;  // zero-centred norms
  int64_t rotary_dim = 0;
  uint64_t seed = 1;
};

struct Entry {
  AttentionEntryDecodeConfig config;
};

Entry make_entry(const EntryCase& c) {
  Entry e;
  AttentionEntryDecodeConfig& cfg = e.config;
  const auto weight = [&](int64_t rows, std::optional<Tensor>& scale, uint64_t seed) {
    if (c.wdtype == DType::Float8_e4m3fn) {
      const Shape shape = c.block_scales ? Shape{(rows + 127) / 128, (c.H + 127) / 128} : Shape{rows};
      scale = mul(add(abs(random_tensor(shape, DType::Float32, seed + 7)), Scalar(0.5)), Scalar(0.01 / std::sqrt(c.H)));
      return linear_test::random_fp8({rows, c.H}, seed);
    }
    return mul(random_tensor({rows, c.H}, DType::Float32, seed), Scalar(1.0 / std::sqrt(c.H))).to(c.wdtype);
  };
  cfg.norm_weight = add(mul(random_tensor({c.H}, DType::Float32, c.seed), Scalar(0.3)), Scalar(c.one_plus ? 0.0 : 1.0));
  cfg.norm_one_plus = c.one_plus;
  cfg.q_weight = weight(c.heads * c.head_dim * (c.gate ? 2 : 1), cfg.q_scale, c.seed + 1);
  cfg.k_weight = weight(c.kv_heads * c.head_dim, cfg.k_scale, c.seed + 2);
  cfg.v_weight = weight(c.kv_heads * c.head_dim, cfg.v_scale, c.seed + 3);
  cfg.num_heads = c.heads;
  cfg.num_kv_heads = c.kv_heads;
  cfg.head_dim = c.head_dim;
  cfg.output_gate = c.gate;
  cfg.q_norm = add(mul(random_tensor({c.head_dim}, DType::Float32, c.seed + 4), Scalar(0.3)), Scalar(c.one_plus ? 0.0 : 1.0));
  cfg.k_norm = add(mul(random_tensor({c.head_dim}, DType::Float32, c.seed + 5), Scalar(0.3)), Scalar(c.one_plus ? 0.0 : 1.0));
  cfg.head_norm_one_plus = c.one_plus;
  cfg.rotary_dim = c.rotary_dim;
  cfg.rope_theta = 1e6;
  cfg.cache_dtype = c.cache_dtype;
  return e;
}

std::vector<uint8_t> raw(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return {p, p + c.nbytes()};
}

// The unfused entry, as AttentionBlock::forward runs it: returns q (cache dtype), the gate
// (float32) and writes k, v into the caches at `pos` with copy_, as KvCache::write does.
AttentionEntryDecode::Output unfused_entry(const AttentionEntryDecodeConfig& c, const Tensor& x, const Tensor& keys,
                                           const Tensor& values, int64_t pos) {
  const Tensor h = c.norm_one_plus ? rms_norm_one_plus(x, c.norm_weight, c.norm_eps)
                                   : rms_norm_llama(x, c.norm_weight, c.norm_eps);
  const bool fp8 = c.q_weight.dtype() == DType::Float8_e4m3fn;
  const Tensor xin = h.to(fp8 ? DType::Float32 : c.q_weight.dtype());
  const auto proj = [&](const Tensor& w, const std::optional<Tensor>& scale) {
    return scale ? linear_fp8(xin, w, *scale) : linear(xin, w);
  };
  const auto head_norm = [&](const Tensor& t, const Tensor& w) {
    return c.head_norm_one_plus ? rms_norm_one_plus(t.to(DType::Float32), w, c.head_norm_eps)
                                : rms_norm_llama(t, w, c.head_norm_eps);
  };
  Tensor q_raw = proj(c.q_weight, c.q_scale), gate;
  if (c.output_gate) {
    const Tensor qg = q_raw.view({1, c.num_heads, 2 * c.head_dim});
    q_raw = qg.narrow(2, 0, c.head_dim);
    gate = qg.narrow(2, c.head_dim, c.head_dim).to(DType::Float32);
  } else {
    q_raw = q_raw.view({1, c.num_heads, c.head_dim});
  }
  const int64_t rotary = c.rotary_dim > 0 ? c.rotary_dim : c.head_dim;
  const RopeTables rope = rope_cos_sin(arange(Scalar(pos), Scalar(pos + 1)), rotary, c.rope_theta, DType::Float32);
  Tensor q = apply_rotary_emb_cos_sin(head_norm(q_raw, c.q_norm), rope.cos, rope.sin);
  Tensor k = apply_rotary_emb_cos_sin(head_norm(proj(c.k_weight, c.k_scale).view({1, c.num_kv_heads, c.head_dim}),
                                                c.k_norm),
                                      rope.cos, rope.sin);
  const Tensor v = proj(c.v_weight, c.v_scale).view({1, c.num_kv_heads, c.head_dim});
  keys.select(0, 0).narrow(1, pos, 1).copy_(k.transpose(0, 1));
  values.select(0, 0).narrow(1, pos, 1).copy_(v.transpose(0, 1));
  return {q.to(c.cache_dtype), gate};
}

void expect_entry_bit_identical(const EntryCase& c) {
  const Entry e = make_entry(c);
  const std::optional<AttentionEntryDecode> fused = AttentionEntryDecode::prepare(e.config);
  ASSERT_TRUE(fused.has_value());
  constexpr int64_t kCapacity = 9;
  const Shape cache_shape{1, c.kv_heads, kCapacity, c.head_dim};
  const Tensor keys = random_tensor(cache_shape, DType::Float32, 77).to(c.cache_dtype);
  const Tensor values = random_tensor(cache_shape, DType::Float32, 78).to(c.cache_dtype);
  const Tensor ref_keys = keys.clone(), ref_values = values.clone();
  for (int64_t pos : {int64_t{0}, int64_t{5}, kCapacity - 1}) {
    const Tensor x = mul(random_tensor({1, c.H}, DType::Float32, c.seed + 50 + pos), Scalar(2.0));
    const AttentionEntryDecode::Output want = unfused_entry(e.config, x, ref_keys, ref_values, pos);
    const AttentionEntryDecode::Output got = (*fused)(x, keys, values, pos);
    const std::string what = std::string(dtype_name(c.wdtype)) + " H " + std::to_string(c.H) + " heads " +
                             std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " hd " +
                             std::to_string(c.head_dim) + " pos " + std::to_string(pos);
    ASSERT_EQ(raw(got.q), raw(want.q)) << what;
    ASSERT_EQ(raw(keys), raw(ref_keys)) << what;  // the new slot, and every other slot untouched
    ASSERT_EQ(raw(values), raw(ref_values)) << what;
    ASSERT_EQ(got.gate.defined(), c.gate);
    if (c.gate) ASSERT_EQ(raw(got.gate), raw(want.gate)) << what;
  }
}

TEST(AttentionEntryDecode, WideProjectionsBitIdenticalToUnfusedOps) {
  for (DType w : kWide) {
    expect_entry_bit_identical({64, 4, 2, 16, w});
    expect_entry_bit_identical({96, 6, 2, 32, w, DType::Float32});
  }
}

TEST(AttentionEntryDecode, Fp8ProjectionsBitIdenticalToUnfusedOps) {
  for (int mode : {0, 1}) {
    SCOPED_TRACE(::testing::Message() << "bf16 dot mode " << mode);
    const bf16_dot_test::Bf16DotMode forced(mode);
    expect_entry_bit_identical({256, 4, 2, 64, DType::Float8_e4m3fn});
    expect_entry_bit_identical({200, 4, 1, 64, DType::Float8_e4m3fn, DType::BFloat16, /*block=*/true});
  }
}

TEST(AttentionEntryDecode, GatedZeroCentredPartialRotary) {
  // Qwen3-Next / Qwen3.5: [query | gate] heads, (1 + w) norms, RoPE on a quarter of each head.
  expect_entry_bit_identical({64, 4, 2, 32, DType::BFloat16, DType::BFloat16, false, true, true, 8});
  expect_entry_bit_identical({256, 2, 1, 64, DType::Float8_e4m3fn, DType::BFloat16, true, true, true, 16});
  expect_entry_bit_identical({48, 3, 3, 8, DType::Float32, DType::Float32, false, false, false, 2});
}

TEST(AttentionEntryDecode, ThreadCountsAndEveryTarget) {
  for (int threads : {1, 2, 3}) {
    const ThreadsScope scope(threads);
    expect_entry_bit_identical({72, 8, 2, 16, DType::BFloat16});
  }
  simd_targets::for_each(cpu::moe_simd_targets(), [] {
    expect_entry_bit_identical({65, 2, 1, 16, DType::BFloat16});
    expect_entry_bit_identical({130, 2, 2, 16, DType::Float8_e4m3fn, DType::BFloat16, true, true, true, 8});
  });
}

TEST(AttentionEntryDecode, AllocatesNothingPerCall) {
  const Entry e = make_entry({128, 8, 2, 32, DType::BFloat16});
  const std::optional<AttentionEntryDecode> fused = AttentionEntryDecode::prepare(e.config);
  const Tensor keys = Tensor::empty({1, 2, 16, 32}, DType::BFloat16), values = Tensor::empty({1, 2, 16, 32}, DType::BFloat16);
  const Tensor x = random_tensor({1, 128}, DType::Float32, 3);
  for (int i = 0; i < 3; ++i) (*fused)(x, keys, values, i);
  const AllocatorStats before = allocator_stats();
  for (int i = 3; i < 16; ++i) (*fused)(x, keys, values, i);
  EXPECT_EQ(allocator_stats().num_allocs, before.num_allocs);
}

TEST(AttentionEntryDecode, BadInputs) {
  const EntryCase c{64, 4, 2, 16, DType::BFloat16};
  const Entry e = make_entry(c);
  const std::optional<AttentionEntryDecode> fused = AttentionEntryDecode::prepare(e.config);
  ASSERT_TRUE(fused.has_value());
  const Tensor x = random_tensor({1, c.H}, DType::Float32, 3);
  const Tensor keys = Tensor::empty({1, 2, 8, 16}, DType::BFloat16), values = Tensor::empty({1, 2, 8, 16}, DType::BFloat16);
  const auto expect_error = [](auto&& fn, ErrorKind kind, const char* text) {
    try {
      fn();
      ADD_FAILURE() << "no error; expected one containing '" << text << "'";
    } catch (const Error& err) {
      EXPECT_EQ(err.kind(), kind) << err.what();
      EXPECT_NE(std::string(err.what()).find(text), std::string::npos) << err.what();
      EXPECT_NE(std::string(err.what()).find("attention_entry_decode"), std::string::npos) << err.what();
    }
  };
  expect_error([&] { (*fused)(x, keys, values, 8); }, ErrorKind::Index, "position 8");
  expect_error([&] { (*fused)(x, keys, values, -1); }, ErrorKind::Index, "position -1");
  expect_error([&] { (*fused)(x, keys.to(DType::Float32), values, 0); }, ErrorKind::Type, "cache dtype");
  expect_error([&] { (*fused)(x, Tensor::empty({1, 3, 8, 16}, DType::BFloat16), values, 0); }, ErrorKind::Runtime,
               "k_cache must be");
  expect_error([&] { (*fused)(x, keys, keys, 0); }, ErrorKind::Runtime, "");
  expect_error([&] { (*fused)(random_tensor({2, c.H}, DType::Float32, 1), keys, values, 0); }, ErrorKind::Runtime,
               "one token");
  AttentionEntryDecodeConfig bad = e.config;
  bad.k_weight = bad.k_weight.to(DType::Float32);
  expect_error([&] { AttentionEntryDecode::prepare(bad); }, ErrorKind::Type, "one dtype");
  bad = e.config;
  bad.num_kv_heads = 3;
  expect_error([&] { AttentionEntryDecode::prepare(bad); }, ErrorKind::Value, "multiple of the KV heads");
  bad = e.config;
  bad.rotary_dim = 3;
  expect_error([&] { AttentionEntryDecode::prepare(bad); }, ErrorKind::Value, "rotary_dim");
  bad = e.config;
  bad.q_norm = random_tensor({15}, DType::Float32, 1);
  expect_error([&] { AttentionEntryDecode::prepare(bad); }, ErrorKind::Runtime, "q_norm");
  bad = e.config;
  bad.num_heads = int64_t{1} << 62;  // heads x head_dim x 2 wraps int64
  expect_error([&] { AttentionEntryDecode::prepare(bad); }, ErrorKind::Runtime, "overflow");
  // head_dim 12 (not a multiple of 8): not fused, the unfused ops run instead.
  const Entry odd = make_entry({48, 2, 1, 12, DType::BFloat16});
  EXPECT_FALSE(AttentionEntryDecode::prepare(odd.config).has_value());
}

}  // namespace
