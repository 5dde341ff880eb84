"""where, masked_fill, clamp and the mask ops (~ & | ^, logical_*, isnan) on the Vulkan
device from Python, against the CPU on the same inputs (every result is exact: these ops
only move, compare or convert). Skipped, with the probe's reason, where no Vulkan device
is usable."""
import os

os.environ.setdefault("KILN_VULKAN_VALIDATION", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import kiln  # noqa: E402

_avail = kiln.vulkan.availability()
pytestmark = pytest.mark.skipif(not _avail["usable"], reason="no usable Vulkan device: " + _avail["reason"])
RNG = np.random.default_rng(3)


def both(a):
    t = kiln.from_numpy(np.ascontiguousarray(a))
    return t, t.to("vulkan")


def same(device_result, cpu_result):
    got, want = device_result.cpu().numpy(), cpu_result.numpy()
    assert str(device_result.device).startswith("vulkan")
    np.testing.assert_array_equal(got, want)


def test_where_masked_fill_and_clamp_match_cpu():
    cond, cond_d = both(RNG.uniform(size=(5, 1)) < 0.5)
    x, x_d = both(RNG.uniform(-2, 2, (5, 19)).astype(np.float32))
    y, y_d = both(RNG.uniform(-2, 2, (19,)).astype(np.float32))
    same(kiln.where(cond_d, x_d, y_d), kiln.where(cond, x, y))
    same(kiln.where(cond_d, x_d, 0.5), kiln.where(cond, x, 0.5))
    same(kiln.where(cond_d, 0.0, float("-inf")), kiln.where(cond, 0.0, float("-inf")))
    same(x_d.masked_fill(cond_d, -1.0), x.masked_fill(cond, -1.0))
    same(kiln.clamp(x_d, -0.5, 0.5), kiln.clamp(x, -0.5, 0.5))
    i, i_d = both(np.arange(95, dtype=np.int64).reshape(5, 19))
    j, j_d = both(-np.arange(19, dtype=np.int64))
    same(kiln.where(cond_d, i_d, j_d), kiln.where(cond, i, j))


def test_mask_ops_match_cpu():
    m, m_d = both(RNG.uniform(size=(4, 9)) < 0.5)
    n, n_d = both(RNG.uniform(size=(9,)) < 0.5)
    same(~m_d, ~m)
    same(m_d & n_d, m & n)
    same(m_d | n_d, m | n)
    same(m_d ^ n_d, m ^ n)
    same(kiln.logical_and(m_d, n_d), kiln.logical_and(m, n))
    f, f_d = both(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5], np.float32))
    same(kiln.isnan(f_d), kiln.isnan(f))
    same(kiln.isfinite(f_d), kiln.isfinite(f))
