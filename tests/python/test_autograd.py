"""kiln.autograd from Python: the Tensor API, grad modes, gradcheck of the formulas
(float64, complex128, non-contiguous and broadcast inputs), the errors PyTorch raises,
cross_entropy, and a small MLP trained with plain SGD."""

import threading

import numpy as np
import pytest

import kiln
from kiln.autograd import gradcheck, gradgradcheck


def leaf(*shape, seed=0, low=None, complex=False, transposed=False):
    rng = np.random.default_rng(seed)
    if transposed:
        shape = shape[:-2] + (shape[-1], shape[-2])
    a = rng.standard_normal(shape) if low is None else rng.uniform(low, low + 1.0, shape)
    if complex:
        a = a + 1j * rng.standard_normal(shape)
    t = kiln.from_numpy(np.ascontiguousarray(a)).clone()
    if transposed:
        t = t.transpose(-1, -2)
    return t.requires_grad_()


def random_param(rng, *shape, scale):
    return kiln.from_numpy((rng.standard_normal(shape) * scale).astype(np.float32)).clone().requires_grad_()


def train_with_sgd(loss_fn, params, steps, lr):
    """Plain SGD on ``params`` for ``steps`` steps; the loss before each step."""
    losses = []
    for _ in range(steps):
        loss = loss_fn()
        losses.append(loss.item())
        for p in params:
            p.grad = None
        loss.backward()
        with kiln.no_grad():
            for p in params:
                p -= lr * p.grad
    return losses


def test_tensor_autograd_attributes():
    x = leaf(3)
    assert x.requires_grad and x.is_leaf and x.grad is None and x.grad_fn is None
    y = (x * 2).sum()
    assert y.requires_grad and not y.is_leaf
    assert y.grad_fn.name() == "SumBackward1"
    assert y.grad_fn.next_functions[0][0].name() == "MulBackward1"
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))
    x.grad = None
    assert x.grad is None
    plain = kiln.ones([2])
    assert not plain.requires_grad and not (plain * plain).requires_grad


def test_requires_grad_setter_and_tensor_kwarg():
    t = kiln.tensor([1.0, 2.0], requires_grad=True)
    assert t.requires_grad and t.is_leaf
    t.requires_grad = False
    assert not t.requires_grad
    with pytest.raises(RuntimeError, match="only Tensors of floating point and complex dtype"):
        kiln.tensor([1, 2]).requires_grad_()


def test_no_grad_enable_grad_and_decorator():
    x = leaf(2)
    with kiln.no_grad():
        assert not kiln.is_grad_enabled()
        assert not (x * x).requires_grad
        with kiln.enable_grad():
            assert (x * x).requires_grad
    assert kiln.is_grad_enabled()

    @kiln.no_grad()
    def f(t):
        return t * 3

    assert not f(x).requires_grad
    with kiln.set_grad_enabled(False):
        assert not (x + 1).requires_grad
    assert (x + 1).requires_grad


def test_grad_mode_is_thread_local():
    seen = []
    with kiln.no_grad():
        t = threading.Thread(target=lambda: seen.append(kiln.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]


def test_autograd_grad_and_create_graph():
    x = leaf(4, seed=1)
    y = (x * x * x).sum()
    (g,) = kiln.autograd.grad(y, x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 3 * x.detach().numpy() ** 2)
    assert x.grad is None
    (gg,) = kiln.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), 6 * x.detach().numpy())
    unused = leaf(2)
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        kiln.autograd.grad((x * 2).sum(), [x, unused])
    g2 = kiln.autograd.grad((x * 2).sum(), [x, unused], allow_unused=True)
    assert g2[1] is None


def test_backward_errors():
    x = leaf(3)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * 2).backward()
    y = x.exp().sum()
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()
    z = x.exp().sum()
    z.backward(retain_graph=True)
    z.backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.exp(x.detach().numpy()))


def test_inplace_errors():
    x = leaf(3)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        x += 1
    h = x * 1
    w = (h * h).sum()
    with kiln.no_grad():
        h += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        w.backward()
    d = x.detach()
    assert not d.requires_grad and d._version == x._version


# ---------------------------------------------------------------- gradcheck

UNARY = [
    (lambda t: t.exp(), {}), (lambda t: kiln.log(t), {"low": 0.5}), (lambda t: kiln.sqrt(t), {"low": 0.5}),
    (lambda t: kiln.tanh(t), {}), (lambda t: kiln.sigmoid(t), {}), (lambda t: kiln.silu(t), {}),
    (lambda t: kiln.gelu(t), {}), (lambda t: kiln.gelu(t, approximate="tanh"), {}),
    (lambda t: kiln.sin(t), {}), (lambda t: kiln.cos(t), {}), (lambda t: kiln.reciprocal(t), {"low": 0.5}),
    (lambda t: kiln.softplus(t), {}), (lambda t: t ** 3, {}), (lambda t: 2.0 ** t, {}),
    (lambda t: kiln.clamp(t, -0.3, 0.4), {}), (lambda t: kiln.rsqrt(t), {"low": 0.5}),
]


@pytest.mark.parametrize("fn,kw", UNARY)
def test_gradcheck_unary(fn, kw):
    assert gradcheck(fn, [leaf(3, 4, seed=2, transposed=True, **kw)])


def test_gradcheck_binary_broadcast_and_complex():
    a, b = leaf(3, 4, seed=3, transposed=True), leaf(4, seed=4)
    for fn in (lambda p, q: p + q, lambda p, q: p - 2 * q, lambda p, q: p * q, lambda p, q: p / (q * q + 1),
               lambda p, q: kiln.maximum(p, q), lambda p, q: kiln.where(p > 0, p, q)):
        assert gradcheck(fn, [a, b])
    ca, cb = leaf(3, 2, seed=5, complex=True), leaf(2, seed=6, complex=True)
    for fn in (lambda p, q: p * q, lambda p, q: p / q, lambda p, q: (p * q).exp(), lambda p, q: kiln.abs(p - q)):
        assert gradcheck(fn, [ca, cb])


def test_gradcheck_reductions_views_and_products():
    x = leaf(3, 4, seed=7, transposed=True)
    fns = [
        lambda t: t.sum(), lambda t: kiln.mean(t, 1), lambda t: kiln.prod(t, 0), lambda t: kiln.amax(t, 1),
        lambda t: kiln.var(t, 0), lambda t: kiln.std(t, 1), lambda t: kiln.softmax(t, -1),
        lambda t: kiln.log_softmax(t, 0), lambda t: t.permute(1, 0).reshape(12), lambda t: t[1:, ::2],
        lambda t: t[:, 2], lambda t: kiln.cat([t, t * 2], 1), lambda t: t.unsqueeze(0).expand(2, 3, 4),
    ]
    for fn in fns:
        assert gradcheck(fn, [x])
    w = leaf(5, 4, seed=8)
    assert gradcheck(lambda t, m: kiln.matmul(t, m.t()), [x, w])
    assert gradcheck(lambda t, m: kiln.nn.functional.linear(t, m), [x, w])


def test_gradgradcheck():
    x = leaf(2, 3, seed=9)
    assert gradgradcheck(lambda t: (t * t).tanh(), [x])
    assert gradgradcheck(lambda t: kiln.softmax(t, 1), [x])


def test_gradcheck_reports_a_wrong_jacobian():
    x = leaf(3, seed=10)

    # Detaching inside the function drops a dependence the numerical Jacobian still sees.
    def wrong(t):
        return t * t.detach()

    with pytest.raises(kiln.autograd.GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        gradcheck(wrong, [x])
    assert gradcheck(wrong, [x], raise_exception=False) is False


# ---------------------------------------------------------------- losses

def reference_cross_entropy(x, t, weight=None, ignore_index=-100, label_smoothing=0.0):
    logp = x - x.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    C = x.shape[1]
    w = np.ones(C) if weight is None else weight
    keep = t != ignore_index
    ts = np.where(keep, t, 0)
    nll = -logp[np.arange(len(t)), ts] * w[ts] * keep
    smooth = -(logp * w).sum(1) * keep
    denom = (w[ts] * keep).sum()
    return (1 - label_smoothing) * nll.sum() / denom + label_smoothing / C * smooth.sum() / denom


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("use_weight", [False, True])
def test_cross_entropy_values_and_gradcheck(smoothing, use_weight):
    x = leaf(5, 4, seed=11)
    target = kiln.tensor([0, 3, -100, 2, 1])
    weight = kiln.tensor([1.0, 2.0, 0.5, 1.5], dtype=kiln.float64) if use_weight else None
    loss = kiln.nn.functional.cross_entropy(x, target, weight=weight, label_smoothing=smoothing)
    expected = reference_cross_entropy(x.detach().numpy(), target.numpy(),
                                       None if weight is None else weight.numpy(), -100, smoothing)
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-12)
    assert gradcheck(lambda t: kiln.nn.functional.cross_entropy(t, target, weight=weight, label_smoothing=smoothing),
                     [x])


def test_cross_entropy_probabilities_and_errors():
    x = leaf(3, 4, seed=12)
    p = kiln.softmax(leaf(3, 4, seed=13).detach(), 1)
    assert gradcheck(lambda t: kiln.nn.functional.cross_entropy(t, p, label_smoothing=0.1), [x])
    with pytest.raises(IndexError, match="Target 7 is out of bounds."):
        kiln.nn.functional.cross_entropy(x, kiln.tensor([0, 7, 1]))
    with pytest.raises(ValueError, match="label_smoothing"):
        kiln.nn.functional.cross_entropy(x, kiln.tensor([0, 1, 1]), label_smoothing=1.5)


# ---------------------------------------------------------------- training

def test_small_mlp_trains_with_sgd():
    rng = np.random.default_rng(0)
    n, d, h, classes = 64, 4, 16, 3
    centres = rng.standard_normal((classes, d)) * 2.0
    labels = rng.integers(0, classes, n)
    inputs = centres[labels] + 0.3 * rng.standard_normal((n, d))
    x = kiln.from_numpy(inputs.astype(np.float32)).clone()
    y = kiln.from_numpy(labels.astype(np.int64)).clone()

    w1, b1 = random_param(rng, h, d, scale=0.5), random_param(rng, h, scale=0.0)
    w2, b2 = random_param(rng, classes, h, scale=0.5), random_param(rng, classes, scale=0.0)
    params = [w1, b1, w2, b2]

    def logits():
        hidden = kiln.relu(kiln.nn.functional.linear(x, w1, b1))
        return kiln.nn.functional.linear(hidden, w2, b2)

    def loss_fn():
        return kiln.nn.functional.cross_entropy(logits(), y)

    losses = train_with_sgd(loss_fn, params, steps=60, lr=0.5)
    assert losses[-1] < 0.25 * losses[0], losses
    with kiln.no_grad():
        predicted = kiln.argmax(logits(), 1).numpy()
    assert (predicted == labels).mean() > 0.9


# ---------------------------------------------------------------- pad

@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_gradcheck(mode):
    x = leaf(2, 4, 3, seed=14, transposed=True)
    assert gradcheck(lambda t: kiln.nn.functional.pad(t, (2, 1, -1, 2), mode=mode), [x])


def test_pad_values_and_errors():
    x = kiln.arange(1.0, 9.0).view(1, 8)
    np.testing.assert_array_equal(kiln.nn.functional.pad(x, (2, 3), mode="reflect").numpy()[0],
                                  [3, 2, 1, 2, 3, 4, 5, 6, 7, 8, 7, 6, 5])
    np.testing.assert_array_equal(kiln.nn.functional.pad(x, (1, -6), value=-1.0).numpy()[0], [-1, 1, 2])
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding input dimension"):
        kiln.nn.functional.pad(x, (8, 0), mode="reflect")
    with pytest.raises(ValueError, match="Unrecognised padding mode"):
        kiln.nn.functional.pad(x, (1, 1), mode="wrap")


# ---------------------------------------------------------------- dropout

def test_dropout_mask_seed_and_backward():
    F = kiln.nn.functional
    x = leaf(1000, seed=15)
    y1 = F.dropout(x, 0.25, generator=kiln.Generator(5))
    y2 = F.dropout(x, 0.25, generator=kiln.Generator(5))
    np.testing.assert_array_equal(y1.detach().numpy(), y2.detach().numpy())
    kept = y1.detach().numpy() != 0
    np.testing.assert_allclose(y1.detach().numpy()[kept], x.detach().numpy()[kept] / 0.75, rtol=1e-15)
    y1.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.75)
    np.testing.assert_array_equal(F.dropout(x, 0.5, training=False).detach().numpy(), x.detach().numpy())
    np.testing.assert_array_equal(F.dropout(x, 1.0).detach().numpy(), np.zeros(1000))
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.dropout(x, 2.0)


# ---------------------------------------------------------------- interpolate

@pytest.mark.parametrize("kw", [dict(scale_factor=2, mode="nearest"), dict(size=(5, 3), mode="nearest-exact"),
                                dict(size=(5, 6), mode="bilinear", align_corners=False),
                                dict(scale_factor=1.5, mode="bilinear", align_corners=True)])
def test_interpolate_gradcheck(kw):
    x = leaf(1, 2, 3, 4, seed=16, transposed=True)
    assert gradcheck(lambda t: kiln.nn.functional.interpolate(t, **kw), [x])


def test_interpolate_nearest_backward_sums_contributors():
    x = kiln.ones([1, 1, 2, 2], dtype=kiln.float64).requires_grad_()
    kiln.nn.functional.interpolate(x, scale_factor=2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((1, 1, 2, 2), 4.0))


def test_small_conv_net_trains_with_sgd():
    # Two classes of 1x6x6 images: a bright vertical or a bright horizontal bar.
    rng = np.random.default_rng(1)
    n = 32
    labels = rng.integers(0, 2, n)
    images = 0.1 * rng.standard_normal((n, 1, 6, 6))
    for i, label in enumerate(labels):
        k = rng.integers(1, 5)
        if label:
            images[i, 0, :, k] += 1.0
        else:
            images[i, 0, k, :] += 1.0
    x = kiln.from_numpy(images.astype(np.float32)).clone()
    y = kiln.from_numpy(labels.astype(np.int64)).clone()
    F = kiln.nn.functional

    conv_w, conv_b = random_param(rng, 4, 1, 3, 3, scale=0.3), random_param(rng, 4, scale=0.0)
    head_w, head_b = random_param(rng, 2, 4 * 4 * 4, scale=0.1), random_param(rng, 2, scale=0.0)
    params = [conv_w, conv_b, head_w, head_b]

    def loss_fn():
        features = kiln.relu(F.conv2d(x, conv_w, conv_b)).reshape(n, -1)
        return F.cross_entropy(F.linear(features, head_w, head_b), y)

    losses = train_with_sgd(loss_fn, params, steps=40, lr=0.3)
    assert losses[-1] < 0.3 * losses[0], losses
