"""Memory formats, elementwise stride propagation, constant pad and interpolate against
PyTorch (Debian's python3-torch, 1.13): strides, predicates and values from the same
inputs laid out the same way. Run with `make test-torch-reference`; not part of
`make test` (skipped when torch is absent)."""

import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

_build = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "release", "python")
if os.path.isdir(_build) and _build not in sys.path:
    sys.path.insert(0, _build)
import kiln  # noqa: E402

FORMATS = ("contiguous_format", "channels_last", "channels_last_3d", "preserve_format")


def fmt(lib, name):
    return getattr(lib, name)


# Layouts built with the same view ops in both libraries (lib is kiln or torch).
LAYOUTS = {
    "row-major 4-D": ((2, 3, 4, 5), lambda lib, t: t),
    "channels_last": ((2, 3, 4, 5), lambda lib, t: t.contiguous(memory_format=lib.channels_last)),
    "channels_last 1x1": ((2, 3, 1, 1), lambda lib, t: t.contiguous(memory_format=lib.channels_last)),
    "channels_last N1H1": ((2, 1, 3, 1), lambda lib, t: t.contiguous(memory_format=lib.channels_last)),
    "channels_last C=1": ((2, 1, 4, 5), lambda lib, t: t.contiguous(memory_format=lib.channels_last)),
    "channels_last_3d": ((2, 3, 2, 4, 5), lambda lib, t: t.contiguous(memory_format=lib.channels_last_3d)),
    "permuted NHWC view": ((2, 4, 5, 3), lambda lib, t: t.permute(0, 3, 1, 2)),
    "transposed": ((4, 3), lambda lib, t: t.t()),
    "sliced": ((4, 6), lambda lib, t: t[:, ::2]),
    "sliced transposed": ((4, 6), lambda lib, t: t[:, ::2].t()),
    "channels_last sliced": ((2, 3, 8, 5), lambda lib, t: t.contiguous(memory_format=lib.channels_last)[:, :, ::2]),
    "expanded": ((3, 1), lambda lib, t: t.expand(3, 4)),
    "3-D permuted": ((2, 3, 4), lambda lib, t: t.permute(2, 0, 1)),
}


def make(layout, dtype=np.float32, seed=0):
    shape, view = LAYOUTS[layout]
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return view(kiln, kiln.from_numpy(a.copy())), view(torch, torch.from_numpy(a.copy()))


def outcome(fn):
    """fn's strides, or the error type and the PyTorch wording it must share."""
    try:
        r = fn()
    except RuntimeError as e:
        return ("RuntimeError", "required rank" in str(e) or "preserve memory format" in str(e))
    return r.stride() if hasattr(r, "stride") else r


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_layout_predicates_and_copies(layout):
    k, t = make(layout)
    assert k.stride() == t.stride()
    for name in FORMATS:
        assert k.is_contiguous(memory_format=fmt(kiln, name)) == t.is_contiguous(memory_format=fmt(torch, name)), name
        if name != "preserve_format":
            assert outcome(lambda: k.contiguous(memory_format=fmt(kiln, name))) == outcome(
                lambda: t.contiguous(memory_format=fmt(torch, name))), name
        assert outcome(lambda: k.clone(memory_format=fmt(kiln, name))) == outcome(
            lambda: t.clone(memory_format=fmt(torch, name))), name
        assert outcome(lambda: kiln.empty_like(k, memory_format=fmt(kiln, name))) == outcome(
            lambda: torch.empty_like(t, memory_format=fmt(torch, name))), name
        assert outcome(lambda: k.to(kiln.float64, memory_format=fmt(kiln, name))) == outcome(
            lambda: t.to(torch.float64, memory_format=fmt(torch, name))), name
    assert k.clone().stride() == t.clone().stride()
    assert k.to(kiln.float64).stride() == t.to(torch.float64).stride()
    assert kiln.zeros_like(k).stride() == torch.zeros_like(t).stride()
    np.testing.assert_array_equal(k.clone().numpy(), t.clone().numpy())


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_elementwise_output_strides(layout):
    k, t = make(layout)
    k2, t2 = make(layout, seed=1)
    kc, tc = kiln.from_numpy(t2.contiguous().numpy().copy()), t2.contiguous()
    cases = [
        ("sin", lambda lib, a, b: lib.sin(a)),
        ("neg", lambda lib, a, b: -a),
        ("same layout", lambda lib, a, b: a + b),
        ("scalar", lambda lib, a, b: a * 2.5),
        ("compare", lambda lib, a, b: a > b),
    ]
    for name, op in cases:
        kr, tr = op(kiln, k, k2), op(torch, t, t2)
        assert kr.stride() == tr.stride(), name
        np.testing.assert_allclose(kr.numpy(), tr.numpy(), rtol=1e-6, err_msg=name)
    # Mixed layouts: the first input decides.
    for kr, tr in (((k + kc), (t + tc)), ((kc + k), (tc + t))):
        assert kr.stride() == tr.stride()
        np.testing.assert_allclose(kr.numpy(), tr.numpy(), rtol=1e-6)
    if k.dim() == 4:
        kb = kiln.from_numpy(np.arange(k.size(1), dtype=np.float32).reshape(-1, 1, 1))
        tb = torch.arange(t.size(1), dtype=torch.float32).reshape(-1, 1, 1)
        assert (k + kb).stride() == (t + tb).stride()
        np.testing.assert_allclose((k + kb).numpy(), (t + tb).numpy(), rtol=1e-6)


@pytest.mark.parametrize("layout", ["row-major 4-D", "channels_last", "channels_last sliced", "permuted NHWC view"])
@pytest.mark.parametrize("pads", [(1, 1, 1, 1), (2, 0, -1, 1), (0, 0, 0, 0, 1, 1)])
def test_constant_pad_matches_torch(layout, pads):
    k, t = make(layout)
    kr = kiln.nn.functional.pad(k, pads, value=1.5)
    tr = torch.nn.functional.pad(t, pads, value=1.5)
    assert kr.stride() == tr.stride()
    np.testing.assert_array_equal(kr.numpy(), tr.numpy())


MODES = [
    ("nearest", None), ("nearest-exact", None), ("linear", False), ("linear", True),
    ("bilinear", False), ("bilinear", True), ("trilinear", False), ("trilinear", True),
]


@pytest.mark.parametrize("mode,align", MODES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kind", ["size", "scale", "downscale"])
def test_interpolate_values_and_gradients_match_torch(mode, align, dtype, kind):
    spatial = {"linear": 1, "bilinear": 2, "trilinear": 3}.get(mode, 2)
    shape = (2, 3) + (5, 4, 6)[:spatial]
    rng = np.random.default_rng(7)
    a = rng.standard_normal(shape).astype(dtype)
    args = {"size": {"size": tuple(s * 2 + 1 for s in shape[2:])},
            "scale": {"scale_factor": 2.0},
            "downscale": {"scale_factor": 0.5}}[kind]
    if align is not None:
        args["align_corners"] = align
    k = kiln.from_numpy(a.copy()).requires_grad_()
    t = torch.from_numpy(a.copy()).requires_grad_()
    if spatial == 2:  # and channels-last on the way
        k2 = k.contiguous(memory_format=kiln.channels_last)
        t2 = t.contiguous(memory_format=torch.channels_last)
    else:
        k2, t2 = k, t
    ky = kiln.nn.functional.interpolate(k2, mode=mode, **args)
    ty = torch.nn.functional.interpolate(t2, mode=mode, **args)
    assert ky.shape == tuple(ty.shape)
    assert ky.stride() == ty.stride()
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == "float64" else dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ky.detach().numpy(), ty.detach().numpy(), **tol)
    g = rng.standard_normal(tuple(ty.shape)).astype(dtype)
    ky.backward(kiln.from_numpy(g.copy()))
    ty.backward(torch.from_numpy(g.copy()))
    np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), **tol)


def test_upsample_nearest_2x_backward_bench_shape():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((8, 64, 64, 64)).astype(np.float32)
    g = rng.standard_normal((8, 64, 128, 128)).astype(np.float32)
    k = kiln.from_numpy(a.copy()).requires_grad_()
    t = torch.from_numpy(a.copy()).requires_grad_()
    (kg,) = kiln.autograd.grad([kiln.nn.functional.interpolate(k, scale_factor=2.0)], [k], [kiln.from_numpy(g)])
    (tg,) = torch.autograd.grad([torch.nn.functional.interpolate(t, scale_factor=2.0)], [t], [torch.from_numpy(g)])
    np.testing.assert_allclose(kg.numpy(), tg.numpy(), rtol=1e-5, atol=1e-5)
