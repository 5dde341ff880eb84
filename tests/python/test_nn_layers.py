"""kiln.nn layers: PyTorch's parameter names, shapes and initialisation distributions,
outputs equal to the functional ops (and to numpy references), padding modes and
padding='same', containers, and kiln.nn.init."""

import math

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.nn.functional as F

HAS_CONV3D = hasattr(F, "conv3d")
needs_conv3d = pytest.mark.skipif(not HAS_CONV3D, reason="kiln.nn.functional.conv3d is not in this build "
                                                         "(it lands with the conv3d/conv_transpose work)")


def rand(*shape, seed=0):
    return kiln.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def shapes(m):
    return {n: tuple(p.shape) for n, p in m.named_parameters()}


def assert_uniform_within(t, bound, n_min=200):
    a = t.detach().numpy().ravel()
    assert np.all(np.abs(a) <= bound + 1e-7)
    if a.size >= n_min:
        # U(-b, b): mean 0, std b/sqrt(3); generous limits for the sample size.
        assert abs(a.mean()) < 0.1 * bound
        assert abs(a.std() - bound / math.sqrt(3)) < 0.1 * bound
        assert np.abs(a).max() > 0.9 * bound


# ---- Linear -----------------------------------------------------------------------------
def test_linear_parameters_init_and_forward():
    m = nn.Linear(50, 40)
    assert shapes(m) == {"weight": (40, 50), "bias": (40,)}
    bound = 1 / math.sqrt(50)
    assert_uniform_within(m.weight, bound)
    assert_uniform_within(m.bias, bound)
    x = rand(3, 50)
    out = m(x)
    ref = x.numpy() @ m.weight.detach().numpy().T + m.bias.detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out.detach().numpy(), F.linear(x, m.weight, m.bias).detach().numpy())
    assert shapes(nn.Linear(3, 2, bias=False)) == {"weight": (2, 3)}
    assert nn.Linear(3, 2, bias=False).bias is None


def test_linear_dtype_and_batched_input():
    m = nn.Linear(4, 2, dtype=kiln.float64)
    assert m.weight.dtype == kiln.float64 and m.bias.dtype == kiln.float64
    out = m(rand(2, 3, 4).double())
    assert tuple(out.shape) == (2, 3, 2) and out.dtype == kiln.float64


def test_linear_zero_features_is_empty_but_valid():
    with pytest.warns(UserWarning, match="no-op"):  # PyTorch warns too
        m = nn.Linear(0, 3)
    assert tuple(m.weight.shape) == (3, 0)
    assert m.bias.abs().sum().item() == 0.0  # bound 0 for fan_in 0, as PyTorch
    assert tuple(m(kiln.zeros(2, 0)).shape) == (2, 3)


def test_linear_gradients_match_the_formula():
    m = nn.Linear(3, 2)
    x = rand(4, 3)
    m(x).sum().backward()
    np.testing.assert_allclose(m.weight.grad.numpy(), np.tile(x.numpy().sum(0), (2, 1)), rtol=1e-5)
    np.testing.assert_allclose(m.bias.grad.numpy(), [4.0, 4.0])


# ---- Embedding ----------------------------------------------------------------------------
def test_embedding_init_padding_row_and_forward():
    m = nn.Embedding(200, 30, padding_idx=-1)
    assert m.padding_idx == 199
    w = m.weight.detach().numpy()
    assert np.all(w[199] == 0)
    body = w[:199].ravel()
    assert abs(body.mean()) < 0.05 and abs(body.std() - 1.0) < 0.05  # N(0, 1)
    ids = kiln.tensor([[0, 199, 5]])
    out = m(ids)
    np.testing.assert_array_equal(out.detach().numpy(), w[[[0, 199, 5]]])
    out.sum().backward()
    assert np.all(m.weight.grad.numpy()[199] == 0)  # the padding row gets no gradient
    assert np.all(m.weight.grad.numpy()[5] == 1)


def test_embedding_errors_and_from_pretrained():
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(3, 2, padding_idx=3)
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(3, 2, padding_idx=-4)
    with pytest.raises(NotImplementedError, match="max_norm"):
        nn.Embedding(3, 2, max_norm=1.0)
    table = rand(4, 3)
    e = nn.Embedding.from_pretrained(table)
    assert not e.weight.requires_grad
    np.testing.assert_array_equal(e(kiln.tensor([2])).numpy(), table.numpy()[[2]])


# ---- norms ----------------------------------------------------------------------------
def test_layer_norm_parameters_and_forward():
    m = nn.LayerNorm([3, 4])
    assert shapes(m) == {"weight": (3, 4), "bias": (3, 4)}
    assert m.weight.tolist() == [[1.0] * 4] * 3 and m.bias.tolist() == [[0.0] * 4] * 3
    with kiln.no_grad():
        m.weight.copy_(rand(3, 4, seed=1))
        m.bias.copy_(rand(3, 4, seed=2))
    x = rand(2, 3, 4)
    a = x.numpy().reshape(2, 12)
    ref = (a - a.mean(1, keepdims=True)) / np.sqrt(a.var(1, keepdims=True) + 1e-5)
    ref = ref.reshape(2, 3, 4) * m.weight.detach().numpy() + m.bias.detach().numpy()
    np.testing.assert_allclose(m(x).detach().numpy(), ref, rtol=1e-4, atol=1e-5)
    plain = nn.LayerNorm(4, elementwise_affine=False)
    assert list(plain.parameters()) == [] and plain.weight is None
    no_bias = nn.LayerNorm(4, bias=False)
    assert shapes(no_bias) == {"weight": (4,)}
    np.testing.assert_allclose(no_bias(x).detach().numpy(), plain(x).detach().numpy(), rtol=1e-6)


def test_rms_norm_parameters_and_forward():
    m = nn.RMSNorm(8, eps=1e-6)
    assert shapes(m) == {"weight": (8,)}
    with kiln.no_grad():
        m.weight.copy_(rand(8, seed=3))
    x = rand(5, 8)
    a = x.numpy()
    ref = a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-6) * m.weight.detach().numpy()
    np.testing.assert_allclose(m(x).detach().numpy(), ref, rtol=1e-5, atol=1e-6)
    assert repr(m) == "RMSNorm((8,), eps=1e-06, elementwise_affine=True)"
    # eps=None: the dtype's machine epsilon, as PyTorch.
    small = kiln.from_numpy(np.full((1, 4), 1e-4, dtype=np.float32))
    ref = 1e-4 / np.sqrt(1e-8 + np.finfo(np.float32).eps)
    np.testing.assert_allclose(nn.RMSNorm(4)(small).detach().numpy(), np.full((1, 4), ref), rtol=1e-5)


# ---- convolutions ------------------------------------------------------------------------
def conv_ref_1d(x, w, b, stride=1, dilation=1, groups=1):
    """Direct 1-D cross-correlation in float64 (input already padded)."""
    n, cin, length = x.shape
    cout, cin_g, k = w.shape
    out_len = (length - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((n, cout, out_len))
    per_group = cout // groups
    for o in range(cout):
        g = o // per_group
        for t in range(out_len):
            window = x[:, g * cin_g:(g + 1) * cin_g, t * stride:t * stride + dilation * (k - 1) + 1:dilation]
            out[:, o, t] = (window * w[o]).sum(axis=(1, 2))
    return out + (b[None, :, None] if b is not None else 0)


def test_conv1d_parameters_init_and_forward():
    m = nn.Conv1d(6, 4, 3, stride=2, padding=1, dilation=1, groups=2)
    assert shapes(m) == {"weight": (4, 3, 3), "bias": (4,)}
    bound = 1 / math.sqrt(3 * 3)
    assert_uniform_within(m.weight, bound)
    assert_uniform_within(m.bias, bound)
    x = rand(2, 6, 9)
    xp = np.pad(x.numpy().astype(np.float64), ((0, 0), (0, 0), (1, 1)))
    ref = conv_ref_1d(xp, m.weight.detach().numpy(), m.bias.detach().numpy(), stride=2, groups=2)
    np.testing.assert_allclose(m(x).detach().numpy(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv1d_padding_modes_pad_then_convolve(mode):
    m = nn.Conv1d(2, 3, 3, padding=2, padding_mode=mode)
    x = rand(1, 2, 7)
    np_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    xp = np.pad(x.numpy().astype(np.float64), ((0, 0), (0, 0), (2, 2)), mode=np_mode)
    ref = conv_ref_1d(xp, m.weight.detach().numpy(), m.bias.detach().numpy())
    np.testing.assert_allclose(m(x).detach().numpy(), ref, rtol=1e-5, atol=1e-5)
    assert f"padding_mode={mode}" in repr(m)


@pytest.mark.parametrize("kernel,dilation", [(3, 1), (4, 1), (4, 2), (1, 1)])
def test_conv1d_padding_same_keeps_the_length(kernel, dilation):
    m = nn.Conv1d(2, 2, kernel, padding="same", dilation=dilation)
    x = rand(1, 2, 8)
    total = dilation * (kernel - 1)
    xp = np.pad(x.numpy().astype(np.float64), ((0, 0), (0, 0), (total // 2, total - total // 2)))
    ref = conv_ref_1d(xp, m.weight.detach().numpy(), m.bias.detach().numpy(), dilation=dilation)
    out = m(x)
    assert tuple(out.shape) == (1, 2, 8)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-5, atol=1e-5)
    valid = nn.Conv1d(2, 2, kernel, padding="valid", dilation=dilation)
    assert tuple(valid(x).shape) == (1, 2, 8 - total)


def test_conv2d_matches_functional_and_same_padding_modes():
    m = nn.Conv2d(3, 4, (3, 2), stride=1, padding="same", bias=False)
    assert shapes(m) == {"weight": (4, 3, 3, 2)}
    x = rand(2, 3, 5, 6)
    out = m(x)
    assert tuple(out.shape) == (2, 4, 5, 6)
    # kW=2: PyTorch pads 0 left and 1 right.
    ref = F.conv2d(F.pad(x, [0, 1, 1, 1]), m.weight)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6, atol=1e-6)
    r = nn.Conv2d(3, 4, 3, padding=(1, 2), padding_mode="reflect")
    ref = F.conv2d(F.pad(x, [2, 2, 1, 1], mode="reflect"), r.weight, r.bias)
    np.testing.assert_allclose(r(x).detach().numpy(), ref.detach().numpy(), rtol=1e-6, atol=1e-6)
    s = nn.Conv2d(3, 4, 3, stride=2, padding=1, dilation=2, groups=1)
    np.testing.assert_allclose(s(x).detach().numpy(),
                               F.conv2d(x, s.weight, s.bias, 2, 1, 2, 1).detach().numpy(), rtol=1e-6)
    assert repr(s) == "Conv2d(3, 4, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(2, 2))"
    assert repr(m) == "Conv2d(3, 4, kernel_size=(3, 2), stride=(1, 1), padding=same, bias=False)"


def test_conv_gradients_reach_weight_and_bias():
    m = nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular")
    m(rand(1, 2, 4, 4)).sum().backward()
    assert tuple(m.weight.grad.shape) == (3, 2, 3, 3)
    np.testing.assert_allclose(m.bias.grad.numpy(), [16.0] * 3)


def test_conv_constructor_errors():
    with pytest.raises(ValueError, match="groups must be a positive integer"):
        nn.Conv2d(2, 2, 3, groups=0)
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 2, 3, groups=2)
    with pytest.raises(ValueError, match="out_channels must be divisible by groups"):
        nn.Conv2d(2, 3, 3, groups=2)
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        nn.Conv1d(2, 2, 3, padding="full")
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        nn.Conv1d(2, 2, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv1d(2, 2, 3, padding_mode="mirror")


def test_conv3d_parameters_and_init_without_running():
    m = nn.Conv3d(4, 6, (1, 2, 3), groups=2)
    assert shapes(m) == {"weight": (6, 2, 1, 2, 3), "bias": (6,)}
    assert_uniform_within(m.weight, 1 / math.sqrt(2 * 1 * 2 * 3))
    assert repr(m) == "Conv3d(4, 6, kernel_size=(1, 2, 3), stride=(1, 1, 1), groups=2)"


@needs_conv3d
def test_conv3d_forward_matches_functional_and_padding_modes():
    m = nn.Conv3d(2, 3, 3, padding=1)
    x = rand(1, 2, 4, 5, 3)
    np.testing.assert_allclose(m(x).detach().numpy(),
                               F.conv3d(x, m.weight, m.bias, (1, 1, 1), (1, 1, 1), (1, 1, 1), 1).detach().numpy(),
                               rtol=1e-6)
    r = nn.Conv3d(2, 3, 3, padding=1, padding_mode="replicate")
    ref = F.conv3d(F.pad(x, [1] * 6, mode="replicate"), r.weight, r.bias, 1, 0, 1, 1)
    np.testing.assert_allclose(r(x).detach().numpy(), ref.detach().numpy(), rtol=1e-6, atol=1e-6)
    s = nn.Conv3d(2, 2, 2, padding="same")
    assert tuple(s(x).shape) == (1, 2, 4, 5, 3)


# ---- activations, dropout -------------------------------------------------------------------
def test_activations_match_their_formulas():
    x = rand(4, 5)
    a = x.numpy().astype(np.float64)
    np.testing.assert_allclose(nn.SiLU()(x).numpy(), a / (1 + np.exp(-a)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nn.ReLU()(x).numpy(), np.maximum(a, 0))
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(nn.GELU()(x).numpy(), 0.5 * a * (1 + erf(a / math.sqrt(2))), rtol=1e-5, atol=1e-6)
    tanh_ref = 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))
    np.testing.assert_allclose(nn.GELU("tanh")(x).numpy(), tanh_ref, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError):
        nn.GELU("fast")
    y = x.clone()
    out = nn.ReLU(inplace=True)(y)
    assert out is y and float(y.min()) >= 0
    ident = nn.Identity(3, foo=1)
    assert ident(x) is x


def test_dropout_train_and_eval():
    d = nn.Dropout(0.25)
    x = kiln.ones(4000)
    out = d(x).numpy()
    kept = out != 0
    assert 0.70 < kept.mean() < 0.80
    np.testing.assert_allclose(out[kept], 1 / 0.75, rtol=1e-6)
    d.eval()
    assert np.array_equal(d(x).numpy(), x.numpy())
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        nn.Dropout(1.5)


# ---- containers --------------------------------------------------------------------------
def test_sequential_indexing_len_append_and_forward():
    seq = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    assert len(seq) == 3 and isinstance(seq[1], nn.ReLU) and seq[-1] is seq[2]
    sub = seq[:2]
    assert isinstance(sub, nn.Sequential) and len(sub) == 2 and sub[0] is seq[0]
    with pytest.raises(IndexError, match="index 3 is out of range"):
        seq[3]
    x = rand(5, 4)
    ref = seq[2](seq[1](seq[0](x)))
    np.testing.assert_array_equal(seq(x).detach().numpy(), ref.detach().numpy())
    seq.append(nn.SiLU())
    assert [n for n, _ in seq.named_children()] == ["0", "1", "2", "3"]
    from collections import OrderedDict
    named = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.GELU())]))
    assert [n for n, _ in named.named_parameters()] == ["fc.weight", "fc.bias"]
    seq[1] = nn.GELU()
    assert isinstance(seq[1], nn.GELU)


def test_module_list_and_dict():
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(ml) == 3 and [n for n, _ in ml.named_children()] == ["0", "1", "2"]
    ml.append(nn.ReLU())
    ml.insert(0, nn.SiLU())
    assert isinstance(ml[0], nn.SiLU) and isinstance(ml[4], nn.ReLU)
    del ml[0]
    assert [n for n, _ in ml.named_children()] == ["0", "1", "2", "3"] and isinstance(ml[3], nn.ReLU)
    ml += [nn.Identity()]
    assert len(ml) == 5 and isinstance(ml[-1], nn.Identity)
    assert len(ml[1:3]) == 2
    with pytest.raises(TypeError, match="should be called with an iterable"):
        ml.extend(5)
    with pytest.raises(IndexError):
        ml[9]
    md = nn.ModuleDict({"a": nn.Linear(2, 3), "b": nn.ReLU()})
    assert list(md.keys()) == ["a", "b"] and "a" in md and len(md) == 2
    md["c"] = nn.Identity()
    assert [n for n, _ in md.named_parameters()] == ["a.weight", "a.bias"]
    assert md.pop("b") is not None and list(md) == ["a", "c"]


# ---- init --------------------------------------------------------------------------------
def test_init_functions_fill_in_place_without_recording():
    w = nn.Parameter(kiln.empty(64, 32))
    out = nn.init.xavier_uniform_(w)
    assert out is w and w.is_leaf and w.grad_fn is None
    assert_uniform_within(w, math.sqrt(6 / (64 + 32)))
    nn.init.kaiming_uniform_(w, a=0, mode="fan_out", nonlinearity="relu")
    assert_uniform_within(w, math.sqrt(2) * math.sqrt(3 / 64))
    nn.init.normal_(w, mean=2.0, std=0.5)
    a = w.detach().numpy()
    assert abs(a.mean() - 2.0) < 0.05 and abs(a.std() - 0.5) < 0.05
    nn.init.uniform_(w, 1.0, 3.0)
    assert 1.0 <= float(w.min()) and float(w.max()) <= 3.0
    nn.init.ones_(w)
    assert float(w.sum()) == 64 * 32
    nn.init.zeros_(w)
    assert float(w.abs().sum()) == 0
    nn.init.constant_(w, 0.5)
    assert float(w.mean()) == 0.5
    d = kiln.empty(100, 100, dtype=kiln.float64)
    nn.init.normal_(d)
    assert d.dtype == kiln.float64 and abs(float(d.std()) - 1.0) < 0.05


def test_init_seeded_generator_is_reproducible():
    a, b = kiln.empty(10), kiln.empty(10)
    nn.init.uniform_(a, generator=kiln.Generator(7))
    nn.init.uniform_(b, generator=kiln.Generator(7))
    assert a.tolist() == b.tolist()


def test_init_errors_and_gain():
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(kiln.empty(3))
    with pytest.raises(ValueError, match="Mode fan_middle not supported"):
        nn.init.kaiming_uniform_(kiln.empty(3, 3), mode="fan_middle")
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        nn.init.calculate_gain("swish")
    assert nn.init.calculate_gain("tanh") == 5.0 / 3
    assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    with pytest.warns(UserWarning, match="no-op"):
        nn.init.kaiming_uniform_(kiln.empty(0, 3))
