"""kiln.composite: the unfused definitions of the fused ops agree with the fused kernels."""

import numpy as np

import kiln

RNG = np.random.default_rng(11)


def k(a):
    return kiln.from_numpy(np.ascontiguousarray(a))


def test_silu_and_mul_matches_fused():
    x = k(RNG.uniform(-6, 6, (5, 2 * 33)).astype(np.float32))
    np.testing.assert_allclose(kiln.composite.silu_and_mul(x).numpy(), kiln.silu_and_mul(x).numpy(),
                               rtol=1e-6, atol=1e-30)


def test_rms_norm_gated_matches_fused_in_bfloat16():
    x = k(RNG.uniform(-2, 2, (4, 64)).astype(np.float32)).to(kiln.bfloat16)
    gate = k(RNG.uniform(-4, 4, (4, 64)).astype(np.float32))
    w = k(RNG.uniform(-1.5, 1.5, 64).astype(np.float32))
    got = kiln.composite.rms_norm_gated(x, gate, w, 1e-6)
    want = kiln.rms_norm_gated(x, gate, w, 1e-6)
    assert got.dtype == kiln.bfloat16
    # Both round to bfloat16 last: at most one bfloat16 ulp (2^-7 relative) apart.
    np.testing.assert_allclose(got.to(kiln.float32).numpy(), want.to(kiln.float32).numpy(), rtol=2**-7, atol=1e-6)


def test_decode_attention_matches_fused():
    q = k(RNG.uniform(-1, 1, (2, 8, 1, 40)).astype(np.float32))
    kv = [k(RNG.uniform(-1, 1, (2, 2, 100, 40)).astype(np.float32)) for _ in range(2)]
    got = kiln.composite.scaled_dot_product_attention(q, kv[0], kv[1], enable_gqa=True)
    want = kiln.scaled_dot_product_attention(q, kv[0], kv[1], enable_gqa=True)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)


def test_linear_fp8_and_moe_experts_match_fused():
    w = k(RNG.standard_normal((48, 72)).astype(np.float32))
    q, scale = kiln.quantize_fp8_rowwise(w)
    # x holds bfloat16 values: many-row linear_fp8 on the bf16 dot path (AVX512-BF16)
    # rounds x to bfloat16 before its products, the composite does not; with such x the
    # two differ only by float32 accumulation order.
    x = k(RNG.standard_normal((3, 72)).astype(np.float32)).to(kiln.bfloat16).to(kiln.float32)
    np.testing.assert_allclose(kiln.composite.linear_fp8(x, q, scale).numpy(), kiln.linear_fp8(x, q, scale).numpy(),
                               rtol=1e-4, atol=1e-4)
    gate_up = k((RNG.standard_normal((4, 2 * 16, 24)) / 5).astype(np.float32))
    down = k((RNG.standard_normal((4, 24, 16)) / 4).astype(np.float32))
    xs = k(RNG.standard_normal((5, 24)).astype(np.float32))
    weights, ids = kiln.moe_route(k(RNG.standard_normal((5, 4)).astype(np.float32)), 2, renormalize=True)
    got = kiln.composite.moe_experts(xs, weights, ids, gate_up, down)
    want = kiln.moe_experts(xs, weights, ids, gate_up, down)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
