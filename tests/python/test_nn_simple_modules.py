"""kiln.nn.Tanh, Sigmoid, Softmax, Flatten, MSELoss and CrossEntropyLoss against numpy."""

import numpy as np
import pytest

import kiln
import kiln.nn as nn

RNG = np.random.default_rng(5)


def test_activation_modules_match_numpy():
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    x = kiln.tensor(a)
    np.testing.assert_allclose(nn.Tanh()(x).numpy(), np.tanh(a), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(nn.Sigmoid()(x).numpy(), 1 / (1 + np.exp(-a)), rtol=1e-6, atol=1e-6)
    e = np.exp(a - a.max(0, keepdims=True))
    np.testing.assert_allclose(nn.Softmax(dim=0)(x).numpy(), e / e.sum(0, keepdims=True), rtol=1e-6, atol=1e-6)
    assert repr(nn.Softmax(dim=1)) == "Softmax(dim=1)"
    with pytest.raises(ValueError, match="pass dim="):
        nn.Softmax()(x)


def test_flatten_keeps_the_batch_dim():
    x = kiln.zeros(2, 3, 4, 5)
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 1)(x).shape == (6, 4, 5)
    assert nn.Flatten(start_dim=2)(x).shape == (2, 3, 20)
    assert repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"


def test_loss_modules_match_the_functional_ops():
    logits = RNG.standard_normal((4, 5)).astype(np.float32)
    target = np.array([1, 0, 4, 2])
    lp = logits.astype(np.float64) - np.log(np.exp(logits.astype(np.float64)).sum(-1, keepdims=True))
    picked = -lp[np.arange(4), target]
    got = nn.CrossEntropyLoss()(kiln.tensor(logits), kiln.tensor(target))
    np.testing.assert_allclose(got.item(), picked.mean(), rtol=1e-5)
    got = nn.CrossEntropyLoss(reduction="sum")(kiln.tensor(logits), kiln.tensor(target))
    np.testing.assert_allclose(got.item(), picked.sum(), rtol=1e-5)
    got = nn.CrossEntropyLoss(ignore_index=0, reduction="none")(kiln.tensor(logits), kiln.tensor(target))
    np.testing.assert_allclose(got.numpy(), np.where(target == 0, 0, picked), rtol=1e-5)
    weight = kiln.tensor([1.0, 2.0, 1.0, 1.0, 0.5])
    loss = nn.CrossEntropyLoss(weight=weight)
    assert "weight" in dict(loss.named_buffers())
    w = weight.numpy()[target]
    np.testing.assert_allclose(loss(kiln.tensor(logits), kiln.tensor(target)).item(), (w * picked).sum() / w.sum(),
                               rtol=1e-5)
    a, b = RNG.standard_normal((3, 2)).astype(np.float32), RNG.standard_normal((3, 2)).astype(np.float32)
    np.testing.assert_allclose(nn.MSELoss()(kiln.tensor(a), kiln.tensor(b)).item(), ((a - b) ** 2).mean(), rtol=1e-6)
    np.testing.assert_allclose(nn.MSELoss(reduction="none")(kiln.tensor(a), kiln.tensor(b)).numpy(), (a - b) ** 2,
                               rtol=1e-6)


def test_loss_module_gradient_flows():
    x = kiln.tensor(RNG.standard_normal((2, 3)).astype(np.float32), requires_grad=True)
    nn.CrossEntropyLoss()(x, kiln.tensor([2, 0])).backward()
    assert x.grad.shape == (2, 3)
    np.testing.assert_allclose(x.grad.numpy().sum(-1), 0, atol=1e-6)


def test_one_hot_and_normalize():
    F = nn.functional
    idx = np.array([[0, 3], [2, 1]])
    got = F.one_hot(kiln.tensor(idx))
    assert got.dtype == kiln.int64 and got.shape == (2, 2, 4)
    np.testing.assert_array_equal(got.numpy(), np.eye(4, dtype=np.int64)[idx])
    assert F.one_hot(kiln.tensor([1]), num_classes=3).tolist() == [[0, 1, 0]]
    assert F.one_hot(kiln.zeros(0, dtype=kiln.int64), 2).shape == (0, 2)
    for bad, match in [(kiln.tensor([1.0]), "LongTensor"), (kiln.tensor([-1]), "non-negative"),
                       (kiln.zeros(0, dtype=kiln.int64), "empty tensor")]:
        with pytest.raises(RuntimeError, match=match):
            F.one_hot(bad)
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        F.one_hot(kiln.tensor([3]), 3)
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    a[1] = 0
    want = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    np.testing.assert_allclose(F.normalize(kiln.tensor(a)).numpy(), want, rtol=1e-6, atol=1e-7)
    want = a / np.maximum(np.abs(a).sum(0, keepdims=True), 1e-12)
    np.testing.assert_allclose(F.normalize(kiln.tensor(a), p=1, dim=0).numpy(), want, rtol=1e-6, atol=1e-7)
