"""scaled_dot_product_attention and attention_decode on the Vulkan device from Python,
against the CPU (tests/cpp/test_vulkan_attention.cpp derives the tolerances and covers
every dtype and head dim), and the exception types PyTorch raises for what has no
Vulkan kernel. Skipped, with the probe's reason, where no Vulkan device is usable."""
import os

os.environ.setdefault("KILN_VULKAN_VALIDATION", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import kiln  # noqa: E402

F = kiln.nn.functional
_avail = kiln.vulkan.availability()
pytestmark = pytest.mark.skipif(not _avail["usable"], reason="no usable Vulkan device: " + _avail["reason"])


def uniform(shape, seed):
    return kiln.from_numpy(np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32))


def test_prefill_with_gqa_causal_and_float_mask_matches_cpu():
    q, k, v = uniform((1, 8, 9, 64), 1), uniform((1, 2, 9, 64), 2), uniform((1, 2, 9, 64), 3)
    mask = uniform((9, 9), 4)
    qd, kd, vd = q.to("vulkan"), k.to("vulkan"), v.to("vulkan")
    # float32 sums of 64 products in another order and Vulkan's exp: far below 1e-5 here.
    for kwargs in ({"is_causal": True}, {"attn_mask": mask}):
        dev_mask = {"attn_mask": mask.to("vulkan")} if "attn_mask" in kwargs else kwargs
        got = F.scaled_dot_product_attention(qd, kd, vd, enable_gqa=True, **dev_mask)
        want = F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kwargs)
        assert str(got.device) == "vulkan:0"
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=0, atol=1e-5)


def test_attention_decode_on_a_bf16_cache_matches_cpu():
    q = uniform((1, 4, 128), 5).to(kiln.bfloat16)
    k, v = uniform((1, 1, 40, 128), 6).to(kiln.bfloat16), uniform((1, 1, 40, 128), 7).to(kiln.bfloat16)
    want = kiln.attention_decode(q, k, v, 33).float().numpy()
    got = kiln.attention_decode(q.to("vulkan"), k.to("vulkan"), v.to("vulkan"), 33).cpu().float().numpy()
    np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=1e-5)  # one bfloat16 unit of the output


def test_what_has_no_vulkan_kernel_raises_not_implemented():
    q = uniform((1, 2, 4, 16), 8).to("vulkan")
    with pytest.raises(NotImplementedError, match="dropout"):
        F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    with pytest.raises(RuntimeError, match="same device"):
        F.scaled_dot_product_attention(q, q.cpu(), q)


def test_bool_mask_on_the_device_matches_cpu():
    q = uniform((1, 2, 4, 16), 9)
    bool_mask = kiln.from_numpy(np.tril(np.ones((4, 4), dtype=bool)))
    want = F.scaled_dot_product_attention(q, q, q, attn_mask=bool_mask).numpy()
    qd = q.to("vulkan")
    got = F.scaled_dot_product_attention(qd, qd, qd, attn_mask=bool_mask.to("vulkan")).cpu().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
