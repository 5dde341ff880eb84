"""The Vulkan causal conv with a carried state and the transcendental unary ops from
Python, against the CPU on the same inputs (the C++ tests derive the tolerances: these
use looser round figures). Skipped, with the probe's reason, where no Vulkan device is
usable."""
import os

os.environ.setdefault("KILN_VULKAN_VALIDATION", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import kiln  # noqa: E402

_avail = kiln.vulkan.availability()
pytestmark = pytest.mark.skipif(not _avail["usable"], reason="no usable Vulkan device: " + _avail["reason"])
RNG = np.random.default_rng(7)


def k(a):
    return kiln.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def test_causal_conv1d_prompt_then_token_on_the_device():
    T, C, K = 6, 19, 4
    x, w, state = RNG.uniform(-2, 2, (T + 1, C)), RNG.uniform(-1, 1, (C, K)), RNG.uniform(-2, 2, (K - 1, C))
    host_state, dev_state = k(state), k(state).to("vulkan")
    for rows in (slice(0, T), slice(T, T + 1)):
        want = kiln.causal_conv1d(k(x[rows]), k(w), host_state)
        got = kiln.causal_conv1d(k(x[rows]).to("vulkan"), k(w).to("vulkan"), dev_state)
        assert str(got.device).startswith("vulkan")
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(dev_state.cpu().numpy(), host_state.numpy())


def test_gated_delta_gates_on_the_device():
    a, b = RNG.uniform(-10, 30, (4, 6)), RNG.uniform(-4, 4, (4, 6))
    A_log, dt = RNG.uniform(-2, 2, 6), RNG.uniform(-1, 1, 6)
    want = kiln.gated_delta_gates(k(a), k(b), k(A_log), k(dt))
    got = kiln.gated_delta_gates(*(k(t).to("vulkan") for t in (a, b, A_log, dt)))
    np.testing.assert_allclose(got[0].cpu().numpy(), want[0].numpy(), rtol=1e-5)
    np.testing.assert_allclose(got[1].cpu().numpy(), want[1].numpy(), rtol=1e-5)


def test_causal_conv1d_mixed_devices_raise():
    with pytest.raises(RuntimeError, match="same device"):
        kiln.causal_conv1d(k(np.zeros((2, 8))).to("vulkan"), k(np.zeros((8, 4))), k(np.zeros((3, 8))))


@pytest.mark.parametrize("name, fn", [
    ("exp2", kiln.exp2),
    ("sin", kiln.sin),
    ("cos", kiln.cos),
    ("tanh", kiln.tanh),
    ("gelu", lambda x: kiln.nn.functional.gelu(x)),
    ("gelu_tanh", lambda x: kiln.nn.functional.gelu(x, approximate="tanh")),
    ("softplus", lambda x: kiln.nn.functional.softplus(x, beta=2.0, threshold=5.0)),
])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_unary_math_on_the_device_matches_cpu(name, fn, dtype):
    x = k(RNG.uniform(-4, 4, (9, 37))).to(getattr(kiln, dtype))
    got = fn(x.to("vulkan").t())
    assert str(got.device).startswith("vulkan")
    want = fn(x.t()).float().numpy()
    tol = 1e-5 if dtype == "float32" else 1e-2
    np.testing.assert_allclose(got.cpu().float().numpy(), want, rtol=tol, atol=1e-6)


def test_sin_cos_of_huge_arguments_match_cpu():
    # Payne-Hanek reduction on the device beyond 2^24: the CPU's values, not NaN.
    x = k(np.array([1.7e7, -3e7, 2.19993846e10, 1e20, -7.72917892e28, 3.4028234e38], np.float32))
    for fn in (kiln.sin, kiln.cos):
        got = fn(x.to("vulkan")).cpu().numpy()
        np.testing.assert_allclose(got, fn(x).numpy(), rtol=5e-7, atol=0)
    inf = k(np.array([np.inf, -np.inf, np.nan], np.float32)).to("vulkan")
    assert np.isnan(kiln.sin(inf).cpu().numpy()).all()
