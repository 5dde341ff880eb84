"""kiln's autograd against PyTorch (Debian's python3-torch, 1.13): values and gradients
of the same computations from the same inputs. Run with `make test-torch-reference`; not
part of `make test` (skipped when torch is absent)."""

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


def pair(array):
    """The same float64 leaf in kiln and in torch."""
    array = np.ascontiguousarray(array)
    return kiln.from_numpy(array).clone().requires_grad_(), torch.tensor(array, requires_grad=True)


def compare(kiln_fn, torch_fn, *arrays, rtol=1e-10, atol=1e-12):
    ks, ts = zip(*(pair(a) for a in arrays))
    k_out, t_out = kiln_fn(*ks), torch_fn(*ts)
    np.testing.assert_allclose(k_out.detach().numpy(), t_out.detach().numpy(), rtol=rtol, atol=atol)
    rng = np.random.default_rng(1)
    g = rng.standard_normal(tuple(t_out.shape))
    if np.iscomplexobj(t_out.detach().numpy()):
        g = g + 1j * rng.standard_normal(g.shape)
    k_out.backward(kiln.from_numpy(np.array(g)).clone())  # np.array keeps 0-dim
    t_out.backward(torch.tensor(g))
    for k, t in zip(ks, ts):
        np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)


rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4))
B = rng.standard_normal((4,))
P = rng.uniform(0.5, 1.5, (3, 4))
C = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
D = rng.standard_normal((4,)) + 1j * rng.standard_normal((4,))

CASES = [
    ("add", lambda a, b: a + 2 * b, None, (A, B)),
    ("mul_div", lambda a, b: a * b / (b * b + 1), None, (A, B)),
    ("pow", lambda p: p ** 2.5, None, (P,)),
    ("exp_log", lambda p: (p.exp() + 1).log(), None, (P,)),
    ("tanh_sigmoid", lambda a: a.tanh() * a.sigmoid(), None, (A,)),
    ("gelu", lambda a: KF.gelu(a), lambda a: F.gelu(a), (A,)),
    ("gelu_tanh", lambda a: KF.gelu(a, approximate="tanh"), lambda a: F.gelu(a, approximate="tanh"), (A,)),
    ("silu", lambda a: KF.silu(a), lambda a: F.silu(a), (A,)),
    ("softplus", lambda a: KF.softplus(a, beta=2, threshold=1), lambda a: F.softplus(a, beta=2, threshold=1), (A,)),
    ("softmax", lambda a: KF.softmax(a, 1), lambda a: F.softmax(a, 1), (A,)),
    ("log_softmax", lambda a: KF.log_softmax(a, 0), lambda a: F.log_softmax(a, 0), (A,)),
    ("sum_mean", lambda a: a.sum(1) + a.mean(1), None, (A,)),
    ("var_std", lambda a: kiln.var(a, 1) + kiln.std(a, 0).sum(), lambda a: torch.var(a, 1) + torch.std(a, 0).sum(),
     (A,)),
    ("prod", lambda a: kiln.prod(a, 1), lambda a: torch.prod(a, 1), (A,)),
    ("amax", lambda a: kiln.amax(a, 0), lambda a: torch.amax(a, 0), (A,)),
    ("norm", lambda a: kiln.norm(a, 3, 1), lambda a: torch.linalg.vector_norm(a, 3, 1), (A,)),
    ("cumsum", lambda a: kiln.cumsum(a, 1), lambda a: torch.cumsum(a, 1), (A,)),
    ("matmul", lambda a, b: kiln.matmul(a, b), lambda a, b: torch.matmul(a, b), (A, B)),
    ("linear", lambda a, w: KF.linear(a, w), lambda a, w: F.linear(a, w), (A, rng.standard_normal((5, 4)))),
    ("layer_norm", lambda a, w: KF.layer_norm(a, [4], w), lambda a, w: F.layer_norm(a, [4], w), (A, B)),
    ("views", lambda a: a.t()[1:, ::2].reshape(-1), lambda a: a.t()[1:, ::2].reshape(-1), (A,)),
    ("cat", lambda a: kiln.cat([a, a * 2], 0), lambda a: torch.cat([a, a * 2], 0), (A,)),
    ("where_clamp", lambda a: kiln.where(a > 0, kiln.clamp(a, -1, 0.5), a * 3),
     lambda a: torch.where(a > 0, torch.clamp(a, -1, 0.5), a * 3), (A,)),
    ("complex_mul_exp", lambda c, d: (c * d).exp(), lambda c, d: (c * d).exp(), (C, D)),
    ("complex_div_abs", lambda c, d: kiln.abs(c / d), lambda c, d: torch.abs(c / d), (C, D)),
    ("complex_matmul", lambda c, d: kiln.matmul(c, d), lambda c, d: torch.matmul(c, d), (C, D)),
]


@pytest.mark.parametrize("name,kiln_fn,torch_fn,arrays", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, kiln_fn, torch_fn, arrays):
    compare(kiln_fn, torch_fn or kiln_fn, *arrays)


@pytest.mark.parametrize("smoothing", [0.0, 0.15])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_torch(smoothing, weighted, reduction):
    target = np.array([0, 3, 1, -100, 2])
    weight = np.array([1.0, 2.0, 0.5, 1.5])
    x = rng.standard_normal((5, 4))
    kw = dict(ignore_index=-100, label_smoothing=smoothing, reduction=reduction)

    def k(a):
        return KF.cross_entropy(a, kiln.from_numpy(target).clone(),
                                weight=kiln.from_numpy(weight).clone() if weighted else None, **kw)

    def t(a):
        return F.cross_entropy(a, torch.tensor(target), weight=torch.tensor(weight) if weighted else None, **kw)

    compare(k, t, x)


def torch_causal_attention(q, k, v):
    # torch 1.13 has no scaled_dot_product_attention: its math form, top-left causal.
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    hidden = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(hidden, float("-inf")), -1) @ v


def test_sdpa_matches_torch():
    q, kk, v = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4)), rng.standard_normal((2, 5, 3))
    compare(lambda a, b, c: KF.scaled_dot_product_attention(a, b, c, is_causal=True), torch_causal_attention,
            q, kk, v)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pads", [(2, 3), (1, 2, 2, 1), (1, 0, 0, 2, 2, 1), (-1, 2, 1, -1)])
def test_pad_matches_torch(mode, pads):
    k = len(pads) // 2
    x = rng.standard_normal((2, 3, 4, 5, 6)[-(k + 2):])
    if mode == "constant":
        compare(lambda a: KF.pad(a, pads, value=1.5), lambda a: F.pad(a, pads, value=1.5), x)
    elif mode == "circular" and min(pads) < 0:
        pytest.skip("torch 1.13's circular pad refuses negative pads")
    else:
        compare(lambda a: KF.pad(a, pads, mode=mode), lambda a: F.pad(a, pads, mode=mode), x)


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_group_norm_matches_torch(groups):
    x = rng.standard_normal((2, 4, 3, 5))
    compare(lambda a, w, b: KF.group_norm(a, groups, w, b), lambda a, w, b: F.group_norm(a, groups, w, b),
            x, rng.standard_normal(4), rng.standard_normal(4))


INTERPOLATE_CASES = [
    ((2, 3, 5), dict(size=9, mode="nearest")),
    ((2, 3, 8), dict(scale_factor=0.5, mode="nearest")),
    ((1, 2, 4, 5), dict(scale_factor=2, mode="nearest")),
    ((1, 2, 4, 5), dict(size=(7, 3), mode="nearest-exact")),
    ((2, 3, 5), dict(size=8, mode="linear", align_corners=False)),
    ((2, 3, 5), dict(size=8, mode="linear", align_corners=True)),
    ((1, 2, 4, 5), dict(scale_factor=2, mode="bilinear", align_corners=False)),
    ((1, 2, 4, 5), dict(size=(3, 7), mode="bilinear", align_corners=True)),
    ((1, 1, 3, 4, 2), dict(scale_factor=(2, 1.5, 3), mode="trilinear", align_corners=False)),
    ((1, 1, 3, 4, 2), dict(size=(2, 5, 3), mode="nearest")),
]


@pytest.mark.parametrize("shape,kw", INTERPOLATE_CASES)
def test_interpolate_matches_torch(shape, kw):
    x = rng.standard_normal(shape)
    compare(lambda a: KF.interpolate(a, **kw), lambda a: F.interpolate(a, **kw), x)


CONV_CASES = [
    ("conv2d", (2, 4, 6, 5), (6, 4, 3, 3), dict()),
    ("conv2d", (2, 4, 7, 6), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)),
    ("conv2d", (3, 5, 5), (3, 1, 2, 2), dict(padding=1, groups=3)),
    ("conv1d", (2, 4, 9), (4, 1, 3), dict(stride=2, padding=1, groups=4)),
    ("conv1d", (2, 3, 8), (5, 3, 2), dict(dilation=3)),
]


@pytest.mark.parametrize("name,xs,ws,kw", CONV_CASES)
def test_conv_matches_torch(name, xs, ws, kw):
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    if len(xs) == 3 and name == "conv2d":
        x = rng.standard_normal((3, 5, 5))
        w = rng.standard_normal((6, 1, 2, 2))
        b = rng.standard_normal(6)
    compare(lambda a, c, d: getattr(KF, name)(a, c, d, **kw), lambda a, c, d: getattr(F, name)(a, c, d, **kw), x, w, b)
