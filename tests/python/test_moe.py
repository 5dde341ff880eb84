"""MoE routing and the fused expert block through Python, against numpy formulas."""

import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(7)


def k(a):
    return kiln.from_numpy(np.ascontiguousarray(a))


def silu(x):
    return x / (1 + np.exp(-x))


def reference_route(logits, top_k, scoring, renormalize, bias=None, eps=0.0, scaling=1.0):
    logits = logits.astype(np.float64)
    if scoring == "softmax":
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        scores = e / e.sum(axis=1, keepdims=True)
    else:
        scores = 1 / (1 + np.exp(-logits))
    select = scores + (0 if bias is None else bias)
    ids = np.argsort(-select, axis=1, kind="stable")[:, :top_k]
    w = np.take_along_axis(scores, ids, axis=1)
    if renormalize:
        w = w / (w.sum(axis=1, keepdims=True) + eps)
    return w * scaling, ids


@pytest.mark.parametrize("scoring", ["softmax", "sigmoid"])
def test_moe_route(scoring):
    logits = RNG.standard_normal((6, 32)).astype(np.float32)
    bias = (0.1 * RNG.standard_normal(32)).astype(np.float32) if scoring == "sigmoid" else None
    w, ids = kiln.moe_route(k(logits), 4, scoring=scoring, renormalize=True,
                            selection_bias=None if bias is None else k(bias), renorm_eps=1e-6)
    want_w, want_ids = reference_route(logits, 4, scoring, True, bias, 1e-6)
    np.testing.assert_array_equal(ids.numpy(), want_ids)
    np.testing.assert_allclose(w.numpy(), want_w, rtol=1e-5)


def test_moe_route_errors():
    with pytest.raises(ValueError, match="scoring"):
        kiln.moe_route(k(np.zeros((1, 4), np.float32)), 1, scoring="relu")
    with pytest.raises(ValueError, match="top_k"):
        kiln.moe_route(k(np.zeros((1, 4), np.float32)), 5)


def test_moe_permute():
    ids = np.array([[2, 0], [1, 2], [2, 1]], np.int32)
    token_index, slot, offs = kiln.moe_permute(k(ids), 4)
    np.testing.assert_array_equal(offs.numpy(), [1, 3, 6, 6])
    np.testing.assert_array_equal(slot.numpy(), [1, 2, 5, 0, 3, 4])
    np.testing.assert_array_equal(token_index.numpy(), [0, 1, 2, 0, 1, 2])


def reference_experts(x, w, ids, gate_up, down, shared=None):
    x = x.astype(np.float64)
    inter = gate_up.shape[1] // 2
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = ids[t, j]
            g, u = gate_up[e, :inter] @ x[t], gate_up[e, inter:] @ x[t]
            out[t] += w[t, j] * (down[e] @ (silu(g) * u))
        if shared is not None:
            sgu, sd, sg = shared
            si = sgu.shape[0] // 2
            act = silu(sgu[:si] @ x[t]) * (sgu[si:] @ x[t])
            out[t] += 1 / (1 + np.exp(-(sg.reshape(-1) @ x[t]))) * (sd @ act)
    return out


@pytest.mark.parametrize("with_shared", [False, True])
def test_moe_experts_f32(with_shared):
    T, H, I, E = 3, 24, 10, 5
    x = RNG.standard_normal((T, H)).astype(np.float32)
    gate_up = (RNG.standard_normal((E, 2 * I, H)) / np.sqrt(H)).astype(np.float32)
    down = (RNG.standard_normal((E, H, I)) / np.sqrt(I)).astype(np.float32)
    w, ids = kiln.moe_route(k(RNG.standard_normal((T, E)).astype(np.float32)), 2, renormalize=True)
    kwargs, shared = {}, None
    if with_shared:
        sgu = (RNG.standard_normal((2 * 6, H)) / np.sqrt(H)).astype(np.float32)
        sd = (RNG.standard_normal((H, 6)) / np.sqrt(6)).astype(np.float32)
        sg = RNG.standard_normal((1, H)).astype(np.float32)
        kwargs = dict(shared_gate_up=k(sgu), shared_down=k(sd), shared_gate=k(sg))
        shared = (sgu.astype(np.float64), sd.astype(np.float64), sg.astype(np.float64))
    got = kiln.moe_experts(k(x), w, ids, k(gate_up), k(down), **kwargs).numpy()
    want = reference_experts(x, w.numpy().astype(np.float64), ids.numpy(), gate_up.astype(np.float64),
                             down.astype(np.float64), shared)
    # float32 accumulation over H + I terms of O(1) magnitude.
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_moe_experts_fp8_matches_dequantised():
    T, H, I, E = 2, 32, 16, 4
    gate_up = (RNG.standard_normal((E, 2 * I, H)) / np.sqrt(H)).astype(np.float32)
    down = (RNG.standard_normal((E, H, I)) / np.sqrt(I)).astype(np.float32)
    q_gu, s_gu = kiln.quantize_fp8_rowwise(k(gate_up.reshape(E * 2 * I, H)))
    q_d, s_d = kiln.quantize_fp8_rowwise(k(down.reshape(E * H, I)))
    x = RNG.standard_normal((T, H)).astype(np.float32)
    w, ids = kiln.moe_route(k(RNG.standard_normal((T, E)).astype(np.float32)), 2, renormalize=True)
    got = kiln.moe_experts(k(x), w, ids, q_gu.reshape([E, 2 * I, H]), q_d.reshape([E, H, I]),
                           gate_up_scale=s_gu.reshape([E, 2 * I]), down_scale=s_d.reshape([E, H])).numpy()
    deq_gu = kiln.dequantize_fp8(q_gu, s_gu).numpy().astype(np.float64).reshape(E, 2 * I, H)
    deq_d = kiln.dequantize_fp8(q_d, s_d).numpy().astype(np.float64).reshape(E, H, I)
    want = reference_experts(x, w.numpy().astype(np.float64), ids.numpy(), deq_gu, deq_d)
    # Where the CPU has AVX512-BF16 (and KILN_BF16_DOT is not 0), the one-token FP8 kernel
    # rounds x and the SwiGLU activations to bfloat16 (tests/cpp/moe_test_util.h derives the
    # bound: 1.01 * 2^-7 of the magnitude); on the float32 path it stays within 1e-5.
    magnitude = reference_magnitude(x, w.numpy().astype(np.float64), ids.numpy(), deq_gu, deq_d)
    assert np.all(np.abs(got - want) <= 1e-5 + 1e-5 * np.abs(want) + 1.01 * 2.0**-7 * magnitude)


def reference_magnitude(x, w, ids, gate_up, down):
    """sum over a token's experts of |w| |down| (1.1 ga |u| + |silu(g)| ua + |silu(g) u|),
    with ga, ua the gate and up magnitude sums: what bounds the effect of rounding x and
    the activations (moe_test_util.h)."""
    x = x.astype(np.float64)
    inter = gate_up.shape[1] // 2
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = ids[t, j]
            g, u = gate_up[e, :inter] @ x[t], gate_up[e, inter:] @ x[t]
            ga, ua = np.abs(gate_up[e, :inter]) @ np.abs(x[t]), np.abs(gate_up[e, inter:]) @ np.abs(x[t])
            act = 1.1 * ga * np.abs(u) + np.abs(silu(g)) * ua + np.abs(silu(g) * u)
            out[t] += abs(w[t, j]) * (np.abs(down[e]) @ act)
    return out


def test_moe_experts_errors():
    x = k(np.zeros((1, 8), np.float32))
    gate_up, down = k(np.zeros((2, 4, 8), np.float32)), k(np.zeros((2, 8, 2), np.float32))
    w, ids = k(np.ones((1, 1), np.float32)), k(np.array([[5]], np.int32))
    with pytest.raises(IndexError, match="out of range"):
        kiln.moe_experts(x, w, ids, gate_up, down)
    with pytest.raises(ValueError, match="shared expert needs"):
        kiln.moe_experts(x, w, k(np.array([[0]], np.int32)), gate_up, down, shared_down=down)
