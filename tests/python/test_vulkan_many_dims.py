"""Views of more than 6 unmergeable dims on the Vulkan device (the copy and elementwise
kernels' geometry then goes in a storage buffer): the CPU's results, as PyTorch allows
any rank. Skipped, with the probe's reason, where no Vulkan device is usable."""
import os

os.environ.setdefault("KILN_VULKAN_VALIDATION", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import kiln  # noqa: E402

_avail = kiln.vulkan.availability()
pytestmark = pytest.mark.skipif(not _avail["usable"], reason="no usable Vulkan device: " + _avail["reason"])


@pytest.mark.parametrize("shape", [(2, 3, 2, 2, 3, 2, 2), (2,) * 8, (2, 3) * 6])
def test_permuted_high_rank_views_match_cpu(shape):
    base = np.random.default_rng(len(shape)).uniform(-2, 2, shape).astype(np.float32)
    order = tuple(reversed(range(len(shape))))  # strides grow along the dims: nothing merges
    x = kiln.from_numpy(base).permute(order)
    dx = kiln.from_numpy(base).to("vulkan").permute(order)
    want = base.transpose(order)
    np.testing.assert_array_equal(dx.contiguous().cpu().numpy(), want)
    bshape = [1 if d % 2 == 0 else s for d, s in enumerate(want.shape)]
    b = np.random.default_rng(1).uniform(-2, 2, bshape).astype(np.float32)
    np.testing.assert_array_equal((dx + kiln.from_numpy(b).to("vulkan")).cpu().numpy(), want + b)
    np.testing.assert_allclose(kiln.sin(dx).cpu().numpy(), kiln.sin(x).numpy(), rtol=1e-6, atol=1e-7)
