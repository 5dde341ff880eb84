"""kiln's convolutions against PyTorch (Debian's python3-torch, 1.13): values and the
input, weight and bias gradients of conv1d/2d/3d and conv_transpose1d/2d/3d, contiguous
and channels-last, float64 and float32. Run with `make test-torch-reference`; not part of
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

F = torch.nn.functional
KF = kiln.nn.functional


def kiln_channels_last(t):
    nd = t.dim()
    to = (0,) + tuple(range(2, nd)) + (1,)
    back = (0, nd - 1) + tuple(range(1, nd - 1))
    return t.permute(*to).contiguous().permute(*back)


def kiln_is_channels_last(t):
    nd = t.dim()
    return t.permute(*((0,) + tuple(range(2, nd)) + (1,))).is_contiguous()


def torch_channels_last(t):
    return t.contiguous(memory_format=torch.channels_last if t.dim() == 4 else torch.channels_last_3d)


CASES = [
    ("conv1d", (2, 4, 9), (4, 1, 3), dict(stride=2, padding=1, groups=4)),
    ("conv1d", (2, 8, 17), (8, 1, 4), dict(padding=3, groups=8)),
    ("conv1d", (2, 3, 8), (5, 3, 2), dict(dilation=3)),
    ("conv1d", (1, 4, 10), (4, 4, 4), dict(padding="same")),
    ("conv2d", (2, 4, 6, 5), (6, 4, 3, 3), dict()),
    ("conv2d", (2, 4, 7, 6), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)),
    ("conv2d", (2, 8, 9, 9), (16, 1, 3, 3), dict(padding=1, groups=8)),
    ("conv2d", (1, 5, 11, 7), (3, 5, 1, 1), dict(stride=3)),
    ("conv2d", (2, 3, 8, 7), (4, 3, 4, 3), dict(padding="same", dilation=(1, 2))),
    ("conv2d", (2, 16, 20, 18), (8, 16, 3, 3), dict(padding=1)),
    ("conv3d", (1, 2, 4, 5, 6), (3, 2, 2, 3, 2), dict(stride=(1, 2, 1), padding=(1, 0, 1))),
    ("conv3d", (2, 4, 3, 4, 5), (4, 1, 3, 3, 3), dict(padding=1, groups=4)),
    ("conv_transpose1d", (2, 4, 7), (4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ("conv_transpose1d", (1, 6, 5), (6, 2, 4), dict(stride=3, groups=3, dilation=2)),
    ("conv_transpose2d", (2, 4, 5, 4), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=(1, 0))),
    ("conv_transpose2d", (1, 4, 6, 5), (4, 2, 3, 2), dict(stride=(1, 2), padding=(0, 1), groups=2, dilation=(2, 1))),
    ("conv_transpose3d", (1, 2, 3, 4, 3), (2, 3, 2, 2, 3), dict(stride=2, padding=(0, 1, 1))),
]

rng = np.random.default_rng(13)


@pytest.mark.parametrize("name,xs,ws,kw", CASES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_conv_matches_torch(name, xs, ws, kw, dtype, layout):
    if layout == "channels_last" and len(xs) == 3:
        pytest.skip("channels-last is a 4-D / 5-D format")
    transposed = name.startswith("conv_transpose")
    out_channels = ws[1] * kw.get("groups", 1) if transposed else ws[0]
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(out_channels)
    x, w, b = (a.astype(dtype) for a in (x, w, b))

    kx = kiln.from_numpy(x).clone()
    tx = torch.tensor(x)
    if layout == "channels_last":
        kx, tx = kiln_channels_last(kx), torch_channels_last(tx)
    kx.requires_grad_(True)
    tx.requires_grad_(True)
    kw_, tw = kiln.from_numpy(w).clone().requires_grad_(True), torch.tensor(w, requires_grad=True)
    kb, tb = kiln.from_numpy(b).clone().requires_grad_(True), torch.tensor(b, requires_grad=True)

    ky = getattr(KF, name)(kx, kw_, kb, **kw)
    ty = getattr(F, name)(tx, tw, tb, **kw)
    # float32: the sums run in float32 in a different order (reduction length <= ~150).
    tol = dict(rtol=1e-10, atol=1e-10) if dtype == "float64" else dict(rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ky.detach().numpy(), ty.detach().numpy(), **tol)
    if layout == "channels_last" and not transposed and len(xs) == 4:
        # PyTorch 1.13 keeps channels_last through conv2d (its 3-D and transposed CPU
        # paths return contiguous outputs; kiln keeps the format there too).
        assert kiln_is_channels_last(ky) == ty.is_contiguous(memory_format=torch.channels_last)

    g = rng.standard_normal(tuple(ty.shape)).astype(dtype)
    ky.backward(kiln.from_numpy(g).clone())
    ty.backward(torch.tensor(g))
    for k, t in ((kx, tx), (kw_, tw), (kb, tb)):
        np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), **tol)
    if layout == "channels_last" and not isinstance(kw.get("padding"), str):
        # The backward computes grad_input channels-last (a leaf's .grad is stored by
        # autograd's accumulation, which copies it contiguous today).
        gi = kiln.convolution_backward(kiln.from_numpy(g).clone(), kx.detach(), kw_.detach(), None,
                                       kw.get("stride", 1), kw.get("padding", 0),
                                       kw.get("dilation", 1), transposed, kw.get("output_padding", 0),
                                       kw.get("groups", 1), [True, False, False])[0]
        assert kiln_is_channels_last(gi)


def test_convolution_backward_matches_aten():
    x, w = rng.standard_normal((2, 6, 9, 8)), rng.standard_normal((4, 3, 3, 3))
    g = rng.standard_normal((2, 4, 5, 8))
    args = ([2, 1], [1, 1], [1, 1], False, [0, 0], 2, [True, True, True])
    want = torch.ops.aten.convolution_backward(torch.tensor(g), torch.tensor(x), torch.tensor(w), [4], *args)
    got = kiln.convolution_backward(kiln.from_numpy(g), kiln.from_numpy(x), kiln.from_numpy(w), [4], *args)
    for k, t in zip(got, want):
        np.testing.assert_allclose(k.numpy(), t.numpy(), rtol=1e-10, atol=1e-10)


def test_bfloat16_forward_matches_torch():
    x, w = rng.standard_normal((2, 8, 10, 9)), rng.standard_normal((4, 8, 3, 3))
    kx, kw_ = kiln.from_numpy(x).to(kiln.bfloat16), kiln.from_numpy(w).to(kiln.bfloat16)
    tx, tw = torch.tensor(x).to(torch.bfloat16), torch.tensor(w).to(torch.bfloat16)
    got = KF.conv2d(kx, kw_, padding=1).float().numpy()
    want = F.conv2d(tx, tw, padding=1).float().numpy()
    # Same bf16 inputs, f32 sums of 72 terms, one bf16 rounding each: within 2 bf16 ulps.
    np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=2 ** -6)
