"""The MoE kernels on the Vulkan device from Python: moe_route, moe_experts and
grouped_mm with device tensors against the CPU on the same inputs (the C++ tests in
tests/cpp/test_vulkan_moe.cpp and test_vulkan_grouped_mm.cpp cover every dtype and
layout; these check the bindings pass device tensors through)."""
import os

os.environ.setdefault("KILN_VULKAN_VALIDATION", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import kiln  # noqa: E402

_avail = kiln.vulkan.availability()
pytestmark = pytest.mark.skipif(not _avail["usable"], reason="no usable Vulkan device: " + _avail["reason"])


def _distinct_logits(rng, tokens, experts):
    # Scores 0.05 apart: the device's exp cannot reorder them.
    return np.stack([rng.permutation(experts) * 0.05 for _ in range(tokens)]).astype(np.float32)


def _host(t):
    return t.cpu().float().numpy()


def test_moe_route_on_device_matches_cpu():
    rng = np.random.default_rng(1)
    logits = kiln.from_numpy(_distinct_logits(rng, 3, 40))
    bias = kiln.from_numpy((rng.permutation(40) * 0.01).astype(np.float32))
    for scoring in ("softmax", "sigmoid"):
        want_w, want_ids = kiln.moe_route(logits, 4, scoring=scoring, renormalize=True, selection_bias=bias,
                                          routed_scaling_factor=2.0, renorm_eps=1e-6)
        got_w, got_ids = kiln.moe_route(logits.to("vulkan"), 4, scoring=scoring, renormalize=True,
                                        selection_bias=bias.to("vulkan"), routed_scaling_factor=2.0, renorm_eps=1e-6)
        assert str(got_ids.device) == "vulkan:0"
        np.testing.assert_array_equal(got_ids.cpu().numpy(), want_ids.numpy())
        # float32 sums over 40 experts where the CPU sums in float64: ~100 ulp at most.
        np.testing.assert_allclose(_host(got_w), want_w.numpy(), rtol=1e-5)


def test_moe_experts_on_device_matches_cpu():
    rng = np.random.default_rng(2)
    E, H, I, T, k = 6, 48, 20, 2, 2
    gate_up = kiln.from_numpy((rng.standard_normal((E, 2 * I, H)) / np.sqrt(H)).astype(np.float32)).to(kiln.bfloat16)
    down = kiln.from_numpy((rng.standard_normal((E, H, I)) / np.sqrt(I)).astype(np.float32)).to(kiln.bfloat16)
    x = kiln.from_numpy(rng.standard_normal((T, H)).astype(np.float32)).to(kiln.bfloat16)
    logits = kiln.from_numpy(_distinct_logits(rng, T, E))
    w, ids = kiln.moe_route(logits.to("vulkan"), k, renormalize=True)
    got = kiln.moe_experts(x.to("vulkan"), w, ids, gate_up.to("vulkan"), down.to("vulkan"))
    want_w, want_ids = kiln.moe_route(logits, k, renormalize=True)
    want = kiln.moe_experts(x, want_w, want_ids, gate_up, down)
    assert got.dtype == kiln.bfloat16 and str(got.device) == "vulkan:0"
    # One bfloat16 rounding of the result on each side (2^-8 relative), float32 sums.
    np.testing.assert_allclose(_host(got), _host(want), rtol=2 ** -7, atol=1e-3)


def test_grouped_mm_reads_offs_on_the_device():
    rng = np.random.default_rng(3)
    a = kiln.from_numpy(rng.standard_normal((10, 16)).astype(np.float32))
    b = kiln.from_numpy(rng.standard_normal((3, 16, 8)).astype(np.float32))
    offs = kiln.from_numpy(np.array([2, 2, 7], dtype=np.int32))
    want = kiln.grouped_mm(a, b, offs=offs)
    got = kiln.grouped_mm(a.to("vulkan"), b.to("vulkan"), offs=offs.to("vulkan"))
    np.testing.assert_allclose(_host(got), want.numpy(), rtol=1e-5, atol=1e-5)
    assert not _host(got)[7:].any()  # rows past offs[-1] are zeros
    with pytest.raises(RuntimeError, match="same device"):
        kiln.grouped_mm(a.to("vulkan"), b.to("vulkan"), offs=offs)
