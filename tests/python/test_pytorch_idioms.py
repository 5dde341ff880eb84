"""The everyday PyTorch idioms a user tries first, written as a PyTorch user writes them
with `kiln` in place of `torch`: each case is one idiom, its result checked against
numpy on the same data (or against the value PyTorch documents where numpy has no
counterpart). The list is the Python library's acceptance check: a new idiom that
PyTorch users reach for goes here.
"""

import copy

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.nn.functional as F


def data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def close(got, want, tol=1e-5):
    got = got.numpy() if isinstance(got, kiln.Tensor) else np.asarray(got)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def idiom_tensor_from_nested_lists():
    x = kiln.tensor([[1, 2], [3, 4]], dtype=kiln.float32)
    assert x.shape == (2, 2) and x.dtype == kiln.float32
    assert kiln.tensor([1, 2]).dtype == kiln.int64 and kiln.tensor([1.0]).dtype == kiln.float32


def idiom_factories_and_seeded_random():
    assert kiln.zeros(2, 3).sum().item() == 0 and kiln.ones((2, 3)).sum().item() == 6
    close(kiln.arange(0, 10, 2), np.arange(0, 10, 2))
    close(kiln.linspace(0, 1, 5), np.linspace(0, 1, 5, dtype=np.float32))
    kiln.manual_seed(7)
    a = kiln.randn(4, 4)
    kiln.manual_seed(7)
    assert kiln.equal(a, kiln.randn(4, 4))
    r = kiln.rand(1000)
    assert 0 <= r.min().item() and r.max().item() < 1


def idiom_shape_and_metadata():
    x = kiln.zeros(2, 3, 4)
    assert x.shape == (2, 3, 4) and x.size() == (2, 3, 4) and x.size(-1) == 4
    assert x.dim() == 3 and x.ndim == 3 and x.numel() == 24 and len(x) == 2
    assert str(x.device) == "cpu" and x.is_contiguous()


def idiom_broadcast_arithmetic_with_scalars():
    a, b = data(3, 4), data(4, seed=1)
    ka, kb = kiln.tensor(a), kiln.tensor(b)
    close(ka * 2 + kb - 1, a * 2 + b - 1)
    close(1 / (ka.abs() + 1), 1 / (np.abs(a) + 1))
    close(ka[:, None, :] - kb[None, :, None], a[:, None, :] - b[None, :, None])
    close(ka ** 2, a ** 2)


def idiom_matmul_operator_and_transpose():
    a, b = data(5, 3), data(3, 4, seed=1)
    ka, kb = kiln.tensor(a), kiln.tensor(b)
    close(ka @ kb, a @ b)
    close(ka.T @ ka, a.T @ a)
    close(kiln.matmul(ka, kb), a @ b)
    close(ka.mT, a.T)


def idiom_reductions_with_dim_and_keepdim():
    a = data(3, 5)
    ka = kiln.tensor(a)
    close(ka.sum(dim=1, keepdim=True), a.sum(axis=1, keepdims=True))
    close(ka.mean(), a.mean())
    close(ka.std(dim=0), a.std(axis=0, ddof=1))
    values, indices = ka.max(dim=0)
    close(values, a.max(axis=0))
    assert indices.tolist() == a.argmax(axis=0).tolist()
    assert ka.argmax(dim=-1).tolist() == a.argmax(axis=-1).tolist()


def idiom_view_reshape_permute_squeeze():
    a = data(2, 3, 4)
    ka = kiln.tensor(a)
    close(ka.view(-1), a.reshape(-1))
    close(ka.reshape(6, 4), a.reshape(6, 4))
    close(ka.permute(2, 0, 1), a.transpose(2, 0, 1))
    close(ka.transpose(0, 1), a.swapaxes(0, 1))
    close(ka.unsqueeze(0).squeeze(0), a)
    close(ka.flatten(1), a.reshape(2, 12))
    assert ka.unsqueeze(1).shape == (2, 1, 3, 4)


def idiom_slicing_and_ellipsis():
    a = data(4, 5, 6)
    ka = kiln.tensor(a)
    close(ka[:, 1:3], a[:, 1:3])
    close(ka[..., -1], a[..., -1])
    close(ka[1, ::2, None], a[1, ::2, None])


def idiom_boolean_mask_get_and_set():
    a = data(4, 5)
    ka = kiln.tensor(a)
    close(ka[ka > 0], a[a > 0])
    ka[ka < 0] = 0
    close(ka, np.where(a < 0, 0, a))


def idiom_integer_tensor_indexing():
    a = data(5, 4)
    ka = kiln.tensor(a)
    close(ka[[0, 2, 4]], a[[0, 2, 4]])
    close(ka[kiln.tensor([3, 1])], a[[3, 1]])
    close(ka[kiln.tensor([0, 1]), kiln.tensor([3, 2])], a[[0, 1], [3, 2]])


def idiom_index_put_accumulate():
    x = kiln.zeros(4)
    x.index_put_((kiln.tensor([0, 0, 2]),), kiln.tensor([1.0, 2.0, 5.0]), accumulate=True)
    assert x.tolist() == [3.0, 0.0, 5.0, 0.0]


def idiom_cat_stack_split_chunk():
    a, b = data(2, 3), data(2, 3, seed=1)
    ka, kb = kiln.tensor(a), kiln.tensor(b)
    close(kiln.cat([ka, kb], dim=0), np.concatenate([a, b], axis=0))
    close(kiln.stack([ka, kb], dim=1), np.stack([a, b], axis=1))
    parts = kiln.tensor(data(7)).split(3)
    assert [p.shape[0] for p in parts] == [3, 3, 1]
    assert [c.shape[0] for c in kiln.arange(10).chunk(3)] == [4, 4, 2]


def idiom_dtype_conversions():
    x = kiln.tensor([1.7, -2.2])
    assert x.long().tolist() == [1, -2] and x.int().dtype == kiln.int32
    assert x.half().dtype == kiln.float16 and x.to(kiln.bfloat16).float().dtype == kiln.float32
    assert x.double().dtype == kiln.float64 and (x > 0).dtype == kiln.bool


def idiom_item_tolist_and_numpy_round_trip():
    a = data(2, 3)
    ka = kiln.from_numpy(a)
    assert isinstance(ka.sum().item(), float)
    assert np.array_equal(ka.numpy(), a) and ka.tolist() == a.tolist()
    assert np.array_equal(np.asarray(ka), a)


def idiom_in_place_methods():
    x = kiln.tensor([-1.0, 0.5, 2.0])
    x.add_(1).mul_(2).clamp_(0, 4)
    assert x.tolist() == [0.0, 3.0, 4.0]
    x.zero_()
    assert x.tolist() == [0.0, 0.0, 0.0]
    x.fill_(3)
    assert x.sum().item() == 9


def idiom_where_and_masked_fill():
    a = data(3, 3)
    ka = kiln.tensor(a)
    close(kiln.where(ka > 0, ka, kiln.zeros_like(ka)), np.where(a > 0, a, 0))
    mask = kiln.ones(3, 3, dtype=kiln.bool).triu(1)
    filled = ka.masked_fill(mask, float("-inf"))
    close(filled, np.where(np.triu(np.ones((3, 3), bool), 1), -np.inf, a))


def idiom_functional_activations_and_softmax():
    a = data(4, 6)
    ka = kiln.tensor(a)
    e = np.exp(a - a.max(-1, keepdims=True))
    close(F.softmax(ka, dim=-1), e / e.sum(-1, keepdims=True))
    close(F.relu(ka), np.maximum(a, 0))
    close(F.silu(ka), a / (1 + np.exp(-a)))
    close(kiln.sigmoid(ka), 1 / (1 + np.exp(-a)))
    close(ka.tanh(), np.tanh(a))


def idiom_cross_entropy_loss():
    logits, target = data(4, 5), np.array([0, 3, 1, 4])
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    want = -log_probs[np.arange(4), target].mean()
    close(F.cross_entropy(kiln.tensor(logits), kiln.tensor(target)), want)


def idiom_topk_and_sort():
    a = data(10)
    ka = kiln.tensor(a)
    values, indices = ka.topk(3)
    close(values, np.sort(a)[::-1][:3].copy())
    assert indices.tolist() == np.argsort(-a)[:3].tolist()
    close(kiln.sort(ka, descending=True).values, np.sort(a)[::-1].copy())


def idiom_autograd_backward_and_grad():
    x = kiln.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x ** 2).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0]
    with kiln.no_grad():
        y = x * 2
    assert not y.requires_grad and x.detach().requires_grad is False


def idiom_linear_layer_and_optimizer_step():
    kiln.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = kiln.optim.SGD(model.parameters(), lr=0.1)
    x, y = kiln.tensor(data(16, 3)), kiln.tensor(data(16, 1, seed=1))
    first = None
    for _ in range(20):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
    assert loss.item() < first
    assert sum(p.numel() for p in model.parameters()) == 3 * 8 + 8 + 8 + 1


def idiom_module_state_dict_round_trip():
    model = nn.Linear(4, 2)
    clone = copy.deepcopy(model)
    with kiln.no_grad():
        clone.weight.add_(1)
    model.load_state_dict(clone.state_dict())
    assert kiln.equal(model.weight, clone.weight)
    assert list(model.state_dict().keys()) == ["weight", "bias"]


def idiom_train_eval_and_dropout():
    drop = nn.Dropout(0.5)
    x = kiln.ones(1000)
    assert drop.eval()(x).sum().item() == 1000
    out = drop.train()(x)
    assert set(out.unique().tolist()) <= {0.0, 2.0}


def idiom_clone_contiguous_and_expand():
    a = data(3, 1)
    ka = kiln.tensor(a)
    e = ka.expand(3, 4)
    assert not e.is_contiguous() and e.contiguous().is_contiguous()
    close(e, np.broadcast_to(a, (3, 4)))
    c = ka.clone()
    c.add_(1)
    close(ka, a)
    close(ka.repeat(2, 2), np.tile(a, (2, 2)))


def idiom_comparisons_and_allclose():
    a = kiln.tensor([1.0, 2.0, 3.0])
    assert (a == kiln.tensor([1.0, 0.0, 3.0])).tolist() == [True, False, True]
    assert kiln.allclose(a, a + 1e-9) and not kiln.allclose(a, a + 1)
    assert kiln.equal(a, a.clone()) and (a > 1).any().item() and not (a > 5).all().item()


def idiom_triangular_and_eye():
    a = data(4, 4)
    ka = kiln.tensor(a)
    close(ka.tril(), np.tril(a))
    close(kiln.triu(ka, diagonal=1), np.triu(a, 1))
    close(kiln.eye(3), np.eye(3, dtype=np.float32))


def idiom_iterate_rows():
    a = data(3, 2)
    rows = [row.tolist() for row in kiln.tensor(a)]
    assert rows == a.tolist()


def idiom_elementwise_math():
    a = np.abs(data(5)) + 0.1
    ka = kiln.tensor(a)
    close(ka.exp(), np.exp(a))
    close(ka.log(), np.log(a))
    close(ka.sqrt(), np.sqrt(a))
    close(kiln.tensor(data(4, 3)).norm(), np.linalg.norm(data(4, 3)))


def idiom_integer_division_and_remainder():
    x = kiln.tensor([7, -7, 5])
    assert (x // 2).tolist() == [3, -4, 2]
    assert (x % 3).tolist() == [1, 2, 2]
    assert (x / 2).dtype == kiln.float32


def idiom_cumsum_and_unique():
    x = kiln.tensor([3, 1, 3, 2, 1])
    assert x.cumsum(0).tolist() == [3, 4, 7, 9, 10]
    assert x.unique().tolist() == [1, 2, 3]


def idiom_pad_and_interpolate():
    a = data(1, 2, 3, 3)
    ka = kiln.tensor(a)
    close(F.pad(ka, (1, 1)), np.pad(a, ((0, 0), (0, 0), (0, 0), (1, 1))))
    up = F.interpolate(ka, scale_factor=2, mode="nearest")
    close(up, a.repeat(2, axis=2).repeat(2, axis=3))


def idiom_like_factories():
    x = kiln.ones(2, 3, dtype=kiln.float64)
    assert kiln.zeros_like(x).dtype == kiln.float64 and kiln.full_like(x, 7).sum().item() == 42
    assert x.new_zeros(4).shape == (4,) and x.new_zeros(4).dtype == kiln.float64
    assert kiln.empty_like(x).shape == (2, 3)


def idiom_dlpack_exchange_with_numpy():
    a = data(3, 4)
    k = kiln.from_dlpack(a)
    a[0, 0] = 42.0  # zero-copy: the kiln tensor sees the write
    assert k[0, 0].item() == 42.0
    back = np.from_dlpack(k)
    assert back.shape == (3, 4) and back[0, 0] == 42.0


def idiom_conv2d_module():
    kiln.manual_seed(0)
    conv = nn.Conv2d(2, 4, kernel_size=3, padding=1)
    out = conv(kiln.randn(1, 2, 8, 8))
    assert out.shape == (1, 4, 8, 8)


def idiom_embedding_and_layer_norm():
    emb = nn.Embedding(10, 4)
    ids = kiln.tensor([[1, 2], [3, 9]])
    assert emb(ids).shape == (2, 2, 4)
    ln = nn.LayerNorm(4)
    y = ln(emb(ids))
    close(y.mean(dim=-1), np.zeros((2, 2)), tol=1e-5)


def idiom_repr_like_pytorch():
    assert repr(kiln.tensor([1.5, 2.0])) == "tensor([1.5000, 2.0000])"
    assert repr(kiln.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(kiln.tensor([1.0], dtype=kiln.float64)) == "tensor([1.], dtype=torch.float64)".replace("torch", "kiln")


def idiom_no_grad_decorator():
    @kiln.no_grad()
    def double(t):
        return t * 2

    x = kiln.ones(2, requires_grad=True)
    assert not double(x).requires_grad


def idiom_factory_device_and_requires_grad():
    w = kiln.zeros(3, 2, device="cpu", requires_grad=True)
    assert w.requires_grad and w.is_leaf and str(w.device) == "cpu"
    noise = kiln.randn_like(w)
    assert noise.shape == (3, 2) and not noise.requires_grad
    b = kiln.ones(2, dtype=kiln.float64, requires_grad=True)
    (w.sum() + b.sum()).backward()
    assert w.grad.tolist() == [[1.0, 1.0]] * 3 and b.grad.dtype == kiln.float64


def idiom_shape_and_dtype_of_another_tensor():
    a, b = data(2, 6), data(3, 4, seed=1)
    ka, kb = kiln.tensor(a), kiln.tensor(b)
    close(ka.view_as(kb), a.reshape(3, 4))
    close(ka.t().reshape_as(kb), a.T.reshape(3, 4))
    ids = kiln.tensor([1, 2])
    assert ids.type_as(ka).dtype == kiln.float32 and ids.to(ka).dtype == kiln.float32
    assert ka.is_floating_point() and not ids.is_floating_point()
    close(ka.clip(-0.5, 0.5), np.clip(a, -0.5, 0.5))


def idiom_causal_attention_mask():
    t = 5
    scores = data(2, t, t)
    mask = kiln.ones(t, t, dtype=kiln.bool).tril()
    probs = F.softmax(kiln.tensor(scores).masked_fill(~mask, float("-inf")), dim=-1)
    causal = np.where(np.tril(np.ones((t, t), bool)), scores, -np.inf)
    e = np.exp(causal - causal.max(-1, keepdims=True))
    close(probs, e / e.sum(-1, keepdims=True))


def idiom_unique_with_counts_and_isclose():
    labels = np.array([3, 1, 3, 2, 1, 3])
    values, counts = kiln.tensor(labels).unique(return_counts=True)
    want_values, want_counts = np.unique(labels, return_counts=True)
    assert values.tolist() == want_values.tolist() and counts.tolist() == want_counts.tolist()
    a, b = data(6), data(6, seed=1)
    b[:3] = a[:3] + 1e-7
    assert kiln.isclose(kiln.tensor(a), kiln.tensor(b)).tolist() == np.isclose(a, b).tolist()
    assert kiln.tensor(a).isclose(kiln.tensor(b), atol=10).all().item()


def idiom_any_all_over_a_dim_and_tile():
    a = data(3, 4)
    ka = kiln.tensor(a)
    assert (ka > 1).any(dim=1).tolist() == (a > 1).any(axis=1).tolist()
    assert (ka > -3).all(dim=0).tolist() == (a > -3).all(axis=0).tolist()
    close(kiln.tile(ka, (2,)), np.tile(a, 2))


def idiom_conjugate_transpose():
    z = kiln.tensor([[1 + 2j, 3j], [4.0, 5 - 1j]])
    assert z.mH.tolist() == np.array([[1 + 2j, 3j], [4.0, 5 - 1j]]).conj().T.tolist()
    assert z.H.tolist() == z.mH.tolist() and z.mT.tolist() == z.transpose(0, 1).tolist()


def idiom_loss_and_activation_modules():
    kiln.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(6, 4), nn.Tanh(), nn.Linear(4, 3))
    x, y = kiln.tensor(data(5, 2, 3)), kiln.tensor([0, 2, 1, 1, 0])
    logits = model(x)
    assert logits.shape == (5, 3)
    z = logits.detach().numpy().astype(np.float64)
    log_probs = z - np.log(np.exp(z).sum(-1, keepdims=True))
    close(nn.CrossEntropyLoss()(logits, y), -log_probs[np.arange(5), y.numpy()].mean())
    close(nn.Softmax(dim=-1)(logits), np.exp(log_probs))
    close(nn.MSELoss()(logits, kiln.zeros(5, 3)), (z ** 2).mean())
    close(nn.Sigmoid()(logits), 1 / (1 + np.exp(-z)))


def idiom_one_hot_and_normalize():
    labels = np.array([2, 0, 1])
    assert F.one_hot(kiln.tensor(labels), num_classes=4).tolist() == np.eye(4, dtype=int)[labels].tolist()
    emb = data(3, 5)
    close(F.normalize(kiln.tensor(emb), dim=-1), emb / np.linalg.norm(emb, axis=-1, keepdims=True))


IDIOMS = {name: fn for name, fn in sorted(globals().items()) if name.startswith("idiom_")}


@pytest.mark.parametrize("name", list(IDIOMS))
def test_pytorch_idiom(name):
    IDIOMS[name]()


def test_the_idiom_list_is_not_shrinking():
    # The issue counted 35 everyday idioms; each case here holds one or more of them.
    assert len(IDIOMS) >= 35
