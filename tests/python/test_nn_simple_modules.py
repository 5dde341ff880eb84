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
