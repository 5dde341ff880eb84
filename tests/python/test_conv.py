"""Convolutions from Python (kiln.nn.functional.conv1d/2d/3d, conv_transpose1d/2d/3d,
kiln.convolution_backward): argument forms, values against a numpy reference, the
channels-last format, autograd, and PyTorch's exception types for bad input."""
import itertools

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F


def k(a):
    return kiln.from_numpy(np.ascontiguousarray(a))


def conv_reference(x, w, b, stride, padding, dilation, groups):
    """Direct loops (numpy over channels) in float64; x [N, C, *s], w [O, C/g, *k]."""
    nd = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    n, c = x.shape[:2]
    o = w.shape[0]
    ksz = w.shape[2:]
    out = [(x.shape[2 + i] - dilation[i] * (ksz[i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
    y = np.zeros((n, o) + tuple(out))
    cg, og = c // groups, o // groups
    for pos in itertools.product(*[range(v) for v in out]):
        for tap in itertools.product(*[range(v) for v in ksz]):
            idx = tuple(pos[i] * stride[i] + tap[i] * dilation[i] for i in range(nd))
            for g in range(groups):
                xs = x[(slice(None), slice(g * cg, (g + 1) * cg)) + idx]  # [N, Cg]
                ws = w[(slice(g * og, (g + 1) * og), slice(None)) + tap]  # [Og, Cg]
                y[(slice(None), slice(g * og, (g + 1) * og)) + pos] += xs @ ws.T
    if b is not None:
        y += b.reshape((1, o) + (1,) * nd)
    return y


def channels_last(t):
    nd = t.dim()
    to = (0,) + tuple(range(2, nd)) + (1,)
    back = (0, nd - 1) + tuple(range(1, nd - 1))
    return t.permute(*to).contiguous().permute(*back)


def is_channels_last(t):
    nd = t.dim()
    return t.permute(*((0,) + tuple(range(2, nd)) + (1,))).is_contiguous()


rng = np.random.default_rng(3)


@pytest.mark.parametrize("name,xs,ws,kw", [
    ("conv1d", (2, 4, 11), (6, 2, 3), dict(stride=2, padding=1, dilation=2, groups=2)),
    ("conv1d", (2, 8, 9), (8, 1, 4), dict(padding=3, groups=8)),
    ("conv2d", (2, 3, 7, 6), (4, 3, 3, 2), dict(stride=(2, 1), padding=(1, 0))),
    ("conv2d", (1, 4, 5, 5), (4, 1, 3, 3), dict(padding=1, groups=4)),
    ("conv3d", (1, 2, 4, 5, 3), (3, 2, 2, 2, 1), dict(stride=1, padding=(1, 0, 0), dilation=(1, 2, 1))),
])
def test_conv_matches_reference(name, xs, ws, kw):
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    nd = len(xs) - 2
    full = {key: (v,) * nd if isinstance(v, int) else v for key, v in kw.items() if key != "groups"}
    want = conv_reference(x, w, b, full.get("stride", (1,) * nd), full.get("padding", (0,) * nd),
                          full.get("dilation", (1,) * nd), kw.get("groups", 1))
    got = getattr(F, name)(k(x), k(w), k(b), **kw)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-10)
    got32 = getattr(F, name)(k(x).float(), k(w).float(), k(b).float(), **kw)
    np.testing.assert_allclose(got32.numpy(), want, rtol=1e-4, atol=1e-4)


def test_padding_strings_and_positional_arguments():
    x, w = rng.standard_normal((1, 2, 7, 6)), rng.standard_normal((3, 2, 2, 3))
    same = F.conv2d(k(x), k(w), None, 1, "same")
    assert tuple(same.shape) == (1, 3, 7, 6)
    # An even kernel: the extra zero goes on the right / bottom.
    want = conv_reference(np.pad(x, [(0, 0), (0, 0), (0, 1), (1, 1)]), w, None, (1, 1), (0, 0), (1, 1), 1)
    np.testing.assert_allclose(same.numpy(), want, rtol=1e-10, atol=1e-10)
    valid = F.conv2d(k(x), k(w), padding="valid")
    np.testing.assert_allclose(valid.numpy(), F.conv2d(k(x), k(w)).numpy())


def test_conv_transpose_is_the_adjoint():
    # <conv(x, w), y> == <x, conv_transpose(y, w)> for the same stride/padding/dilation.
    x, w = rng.standard_normal((2, 4, 7, 8)), rng.standard_normal((6, 2, 3, 2))
    kw = dict(stride=(2, 3), padding=(1, 0), dilation=(1, 2), groups=2)
    y = F.conv2d(k(x), k(w), **kw)
    g = rng.standard_normal(tuple(y.shape))
    out_pad = ((7 + 2 * 1 - 3) % 2, (8 - 3) % 3)  # (in + 2p - span) mod stride restores the input size
    back = F.conv_transpose2d(k(g), k(w), None, kw["stride"], kw["padding"], out_pad, 2, kw["dilation"])
    assert tuple(back.shape) == x.shape
    np.testing.assert_allclose(np.sum(y.numpy() * g), np.sum(x * back.numpy()), rtol=1e-10)
    for name, shape, wshape in (("conv_transpose1d", (1, 3, 5), (3, 2, 3)),
                                ("conv_transpose3d", (1, 2, 3, 2, 3), (2, 2, 2, 2, 2))):
        out = getattr(F, name)(k(rng.standard_normal(shape)), k(rng.standard_normal(wshape)), stride=2)
        assert out.shape[1] == 2


def test_channels_last_in_and_out():
    x, w = rng.standard_normal((2, 5, 6, 7)), rng.standard_normal((4, 5, 3, 3))
    xt = channels_last(k(x).float())
    assert is_channels_last(xt) and not xt.is_contiguous()
    y = F.conv2d(xt, k(w).float(), padding=1)
    assert is_channels_last(y)
    np.testing.assert_allclose(y.numpy(), conv_reference(x, w, None, (1, 1), (1, 1), (1, 1), 1), rtol=1e-4, atol=1e-4)
    x3 = channels_last(k(rng.standard_normal((1, 2, 3, 4, 5))))
    assert is_channels_last(F.conv3d(x3, k(rng.standard_normal((3, 2, 1, 2, 2)))))


def test_autograd_and_convolution_backward_agree():
    x = k(rng.standard_normal((2, 3, 6, 5))).requires_grad_(True)
    w = k(rng.standard_normal((4, 3, 3, 3))).requires_grad_(True)
    b = k(rng.standard_normal(4)).requires_grad_(True)
    y = F.conv2d(x, w, b, stride=2, padding=1)
    g = rng.standard_normal(tuple(y.shape))
    y.backward(k(g))
    gi, gw, gb = kiln.convolution_backward(k(g), x.detach(), w.detach(), [4], [2, 2], [1, 1], [1, 1], False, [0, 0], 1,
                                           [True, True, True])
    np.testing.assert_allclose(x.grad.numpy(), gi.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), gw.numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), gb.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gb.numpy(), g.sum(axis=(0, 2, 3)), rtol=1e-12)
    _, gw_only, none = kiln.convolution_backward(k(g), x.detach(), w.detach(), None, 2, 1, 1, False, 0, 1,
                                                 [False, True, False])
    assert none is None
    np.testing.assert_allclose(gw_only.numpy(), gw.numpy(), rtol=1e-12)


def test_narrow_dtypes():
    x, w = rng.standard_normal((1, 3, 5, 5)), rng.standard_normal((2, 3, 3, 3))
    want = conv_reference(x, w, None, (1, 1), (0, 0), (1, 1), 1)
    for dtype, tol in ((kiln.bfloat16, 0.1), (kiln.float16, 0.02)):
        y = F.conv2d(k(x).to(dtype), k(w).to(dtype))
        assert y.dtype == dtype
        np.testing.assert_allclose(y.float().numpy(), want, rtol=tol, atol=tol)


def test_bad_input_raises_pytorch_exception_types():
    x, w = k(np.zeros((1, 4, 5, 5))), k(np.zeros((2, 3, 3, 3)))
    with pytest.raises(RuntimeError, match="expected input\\[1, 4, 5, 5\\] to have 3 channels"):
        F.conv2d(x, w)
    with pytest.raises(RuntimeError, match="divisible by 3"):
        F.conv2d(x, k(np.zeros((4, 2, 3, 3))), groups=3)
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        F.conv2d(x, k(np.zeros((2, 4, 7, 7))))
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided convolutions"):
        F.conv2d(x, k(np.zeros((2, 4, 3, 3))), stride=2, padding="same")
    with pytest.raises(RuntimeError, match="Invalid padding string"):
        F.conv2d(x, k(np.zeros((2, 4, 3, 3))), padding="full")
    with pytest.raises(RuntimeError, match="output padding must be smaller"):
        F.conv_transpose2d(x, k(np.zeros((4, 2, 3, 3))), output_padding=1)
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D \\(batched\\) input to conv2d"):
        F.conv2d(k(np.zeros((4, 5))), w)
    with pytest.raises(TypeError):
        F.conv2d(kiln.zeros(1, 1, 3, 3).to(kiln.int64), kiln.zeros(1, 1, 1, 1).to(kiln.int64))
    with pytest.raises(RuntimeError, match="conv2d: integer overflow"):
        F.conv2d(kiln.zeros(1, 1, 5, 5), kiln.zeros(1, 1, 3, 3), dilation=2**62)
