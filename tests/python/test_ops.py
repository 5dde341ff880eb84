"""Ops through Python against numpy formulas (float64 references)."""

import math

import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(0)


def k(a):
    return kiln.from_numpy(np.ascontiguousarray(a))


def f32_close(got, want, rtol=2e-6, atol=1e-6):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=atol)


# ---------------------------------------------------------------- elementwise

UNARY = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs, "neg": np.negative,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "silu": lambda x: x / (1 + np.exp(-x)),
    "rsqrt": lambda x: 1 / np.sqrt(x), "sign": np.sign, "sin": np.sin, "cos": np.cos,
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "relu": lambda x: np.maximum(x, 0),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("n", [0, 1, 15, 17, 1000])
def test_unary_f32(name, n):
    x = RNG.uniform(0.1, 4.0, n) if name in ("log", "sqrt", "rsqrt") else RNG.uniform(-4, 4, n)
    x = x.astype(np.float32)
    got = getattr(kiln, name)(k(x)).numpy()
    assert got.dtype == np.float32
    # Highway's vector math is within a few float32 ulp.
    f32_close(got, UNARY[name](x.astype(np.float64)), rtol=8e-7 * 4, atol=1e-7)


def test_gelu_and_softplus():
    x = np.linspace(-6, 6, 101, dtype=np.float32)
    erf = np.vectorize(math.erf)
    want = 0.5 * x * (1 + erf(x.astype(np.float64) / math.sqrt(2)))
    f32_close(kiln.gelu(k(x)).numpy(), want, rtol=1e-5, atol=1e-6)
    inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x.astype(np.float64) ** 3)
    f32_close(kiln.gelu(k(x), approximate="tanh").numpy(), 0.5 * x * (1 + np.tanh(inner)), rtol=1e-5, atol=1e-6)
    f32_close(kiln.nn.functional.softplus(k(x)).numpy(), np.log1p(np.exp(x.astype(np.float64))), rtol=1e-5, atol=1e-6)


def test_binary_broadcasting_and_operators():
    a = RNG.standard_normal((3, 1, 5)).astype(np.float32)
    b = RNG.standard_normal((4, 1)).astype(np.float32)
    ka, kb = k(a), k(b)
    f32_close((ka + kb).numpy(), a + b)
    f32_close((ka - kb).numpy(), a - b)
    f32_close((ka * kb).numpy(), a * b)
    f32_close((ka / kb).numpy(), a.astype(np.float64) / b, rtol=1e-6)
    f32_close((2 - ka).numpy(), 2 - a)
    f32_close((ka ** 2).numpy(), a.astype(np.float64) ** 2, rtol=1e-6)
    f32_close(kiln.add(ka, kb, alpha=3).numpy(), a + 3 * b)
    np.testing.assert_array_equal((ka > kb).numpy(), a > b)
    np.testing.assert_array_equal((ka == ka).numpy(), np.ones(a.shape, bool))
    f32_close(kiln.maximum(ka, kb).numpy(), np.maximum(a, b))


def test_binary_dtypes_follow_pytorch_promotion():
    i = kiln.tensor([1, 2, 3], dtype=kiln.int32)
    assert (i + 1).dtype == kiln.int32
    assert (i + 1.5).dtype == kiln.float32
    assert (i / 2).dtype == kiln.float32
    np.testing.assert_array_equal((i / 2).numpy(), [0.5, 1.0, 1.5])
    assert (i * kiln.tensor([2.0], dtype=kiln.float64)).dtype == kiln.float64
    assert (kiln.tensor([True]) + 1).dtype == kiln.int64
    np.testing.assert_array_equal(kiln.div(kiln.tensor([-7, 7]), 2, rounding_mode="floor").numpy(), [-4, 3])
    np.testing.assert_array_equal(kiln.div(kiln.tensor([-7, 7]), 2, rounding_mode="trunc").numpy(), [-3, 3])
    np.testing.assert_array_equal(kiln.remainder(kiln.tensor([-7, 7]), 3).numpy(), [2, 1])
    bf = kiln.tensor([1.0, 2.0], dtype=kiln.bfloat16)
    assert (bf * 0.5).dtype == kiln.bfloat16
    with pytest.raises(TypeError):
        kiln.tensor([1.0]).to(kiln.float8_e4m3fn) + kiln.tensor([1.0])


def test_unsigned_comparisons():
    u = kiln.from_numpy(np.array([2 ** 63, 1], dtype=np.uint64))
    np.testing.assert_array_equal((u > 1).numpy(), [True, False])
    np.testing.assert_array_equal(kiln.gt(u, kiln.from_numpy(np.array([1, 2], np.uint64))).numpy(), [True, False])


def test_bitwise_where_clamp():
    a = np.array([0b1100, 0b1010, -1], dtype=np.int32)
    b = np.array([0b1010, 0b0110, 5], dtype=np.int32)
    np.testing.assert_array_equal((k(a) & k(b)).numpy(), a & b)
    np.testing.assert_array_equal((k(a) | k(b)).numpy(), a | b)
    np.testing.assert_array_equal((k(a) ^ k(b)).numpy(), a ^ b)
    np.testing.assert_array_equal((~k(a)).numpy(), ~a)
    with pytest.raises(TypeError):  # dtype problems raise TypeError in kiln
        kiln.bitwise_and(kiln.zeros(2), kiln.zeros(2))
    x = np.linspace(-2, 2, 9, dtype=np.float32)
    f32_close(kiln.where(k(x) > 0, k(x), 0.0).numpy(), np.where(x > 0, x, 0))
    f32_close(kiln.clamp(k(x), -1, 0.5).numpy(), np.clip(x, -1, 0.5))
    f32_close(kiln.clamp(k(x), min=0).numpy(), np.maximum(x, 0))


def test_in_place_arithmetic():
    t = kiln.ones(3)
    t += 2
    t *= kiln.tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(t.numpy(), [3, 6, 9])
    i = kiln.ones(2, dtype=kiln.int64)
    with pytest.raises(RuntimeError):
        i += 0.5  # float result cannot be stored in int64


# ---------------------------------------------------------------- reductions


@pytest.mark.parametrize("dim", [None, 0, 1, 2, (0, 2), -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions_match_numpy(dim, keepdim):
    x = RNG.standard_normal((4, 5, 6)).astype(np.float32)
    kx = k(x)
    x64 = x.astype(np.float64)
    axis = dim
    tol = dict(rtol=1e-5, atol=1e-5)
    f32_close(kiln.sum(kx, dim, keepdim).numpy(), x64.sum(axis=axis, keepdims=keepdim), **tol)
    f32_close(kiln.mean(kx, dim, keepdim).numpy(), x64.mean(axis=axis, keepdims=keepdim), **tol)
    f32_close(kiln.amax(kx, dim, keepdim).numpy(), x64.max(axis=axis, keepdims=keepdim))
    f32_close(kiln.amin(kx, dim, keepdim).numpy(), x64.min(axis=axis, keepdims=keepdim))
    f32_close(kiln.var(kx, dim, keepdim=keepdim).numpy(), x64.var(axis=axis, ddof=1, keepdims=keepdim), **tol)
    f32_close(kiln.std(kx, dim, correction=0, keepdim=keepdim).numpy(), x64.std(axis=axis, keepdims=keepdim), **tol)
    f32_close(kiln.norm(kx, 2, dim, keepdim).numpy(),
              np.sqrt((x64 ** 2).sum(axis=axis, keepdims=keepdim)), **tol)


def test_max_min_argmax_and_return_types():
    x = RNG.standard_normal((3, 7)).astype(np.float32)
    r = kiln.max(k(x), 1)
    np.testing.assert_array_equal(r.values.numpy(), x.max(1))
    np.testing.assert_array_equal(r.indices.numpy(), x.argmax(1))
    values, indices = kiln.min(k(x), 0, keepdim=True)
    assert values.shape == (1, 7)
    np.testing.assert_array_equal(indices.numpy()[0], x.argmin(0))
    assert kiln.argmax(k(x)).item() == x.argmax()
    assert kiln.max(k(x)).item() == x.max()
    f32_close(k(x).sum().numpy(), x.astype(np.float64).sum(), rtol=1e-5)


def test_integer_sum_and_mean_rules():
    i = kiln.tensor([[1, 2], [3, 4]], dtype=kiln.int32)
    s = kiln.sum(i)
    assert s.dtype == kiln.int64 and s.item() == 10
    with pytest.raises(TypeError, match="mean"):
        kiln.mean(i)
    assert kiln.mean(i, dtype=kiln.float64).item() == 2.5
    np.testing.assert_array_equal(kiln.cumsum(i, 1).numpy(), [[1, 3], [3, 7]])


def test_sort_topk():
    x = np.array([[3.0, 1.0, np.nan, 2.0], [0.0, -1.0, 5.0, 5.0]], np.float32)
    v, idx = kiln.sort(k(x), 1)
    np.testing.assert_array_equal(v.numpy()[1], [-1, 0, 5, 5])
    assert np.isnan(v.numpy()[0, -1])  # NaN sorts last
    v, idx = kiln.topk(k(x[1:]), 2)
    np.testing.assert_array_equal(v.numpy(), [[5, 5]])
    with pytest.raises(IndexError):
        kiln.topk(k(x), 5)


# ---------------------------------------------------------------- shape and index


def test_cat_stack_split_chunk():
    a = RNG.standard_normal((2, 3)).astype(np.float32)
    b = RNG.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_array_equal(kiln.cat([k(a), k(b)]).numpy(), np.concatenate([a, b]))
    np.testing.assert_array_equal(kiln.stack([k(a), k(a)], 1).numpy(), np.stack([a, a], 1))
    parts = kiln.split(k(b), 3)
    assert [p.shape for p in parts] == [(3, 3), (1, 3)]
    parts = kiln.chunk(k(b), 3, 0)
    assert [p.shape[0] for p in parts] == [2, 2]
    with pytest.raises(RuntimeError):
        kiln.cat([k(a), k(b.T.copy())])


def test_index_ops():
    w = RNG.standard_normal((10, 4)).astype(np.float32)
    idx = np.array([[1, 9], [0, 3]], np.int64)
    np.testing.assert_array_equal(kiln.nn.functional.embedding(k(idx), k(w)).numpy(), w[idx])
    np.testing.assert_array_equal(kiln.index_select(k(w), 0, k(idx[0])).numpy(), w[idx[0]])
    g = np.array([[0, 3], [2, 1]], np.int64)
    np.testing.assert_array_equal(kiln.gather(k(w[:2]), 1, k(g)).numpy(), np.take_along_axis(w[:2], g, 1))
    out = kiln.scatter_add(kiln.zeros(2, 4), 1, k(g), kiln.ones(2, 2)).numpy()
    want = np.zeros((2, 4), np.float32)
    np.add.at(want, (np.arange(2)[:, None], g), 1)
    np.testing.assert_array_equal(out, want)
    with pytest.raises(IndexError):
        kiln.index_select(k(w), 0, kiln.tensor([10]))


def test_matmul_family():
    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    b = RNG.standard_normal((4, 5)).astype(np.float32)
    f32_close((k(a) @ k(b)).numpy(), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    f32_close(kiln.mm(k(a[0]), k(b)).numpy(), a[0].astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    f32_close(kiln.matmul(k(b[:, 0].copy()), k(b)).numpy(), b[:, 0].astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    f32_close(kiln.bmm(k(a), k(a.transpose(0, 2, 1).copy())).numpy(), a.astype(np.float64) @ a.transpose(0, 2, 1),
              rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError):
        kiln.mm(k(a[0]), k(a[0]))


# ---------------------------------------------------------------- nn


def test_softmax_family():
    x = RNG.standard_normal((3, 50)).astype(np.float32) * 10
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(1, keepdims=True))
    want = e / e.sum(1, keepdims=True)
    f32_close(kiln.softmax(k(x), 1).numpy(), want, rtol=1e-5, atol=1e-7)
    f32_close(kiln.nn.functional.log_softmax(k(x), -1).numpy(), np.log(want), rtol=1e-5, atol=1e-5)
    f32_close(k(x).softmax(0).numpy(), np.exp(x64) / np.exp(x64).sum(0), rtol=1e-5, atol=1e-7)
    allneg = kiln.full((1, 4), float("-inf"))
    assert np.isnan(kiln.softmax(allneg, 1).numpy()).all()


def test_norms_and_rope():
    x = RNG.standard_normal((2, 3, 16)).astype(np.float32)
    w = RNG.standard_normal(16).astype(np.float32)
    x64 = x.astype(np.float64)
    rms = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * w
    f32_close(kiln.rms_norm(k(x), (16,), k(w), 1e-6).numpy(), rms, rtol=1e-5, atol=1e-6)
    mu = x64.mean(-1, keepdims=True)
    ln = (x64 - mu) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * w
    f32_close(kiln.layer_norm(k(x), [16], k(w)).numpy(), ln, rtol=1e-5, atol=1e-5)
    h = RNG.standard_normal((2, 8)).astype(np.float32)
    s = h[:, :4].astype(np.float64)
    f32_close(kiln.silu_and_mul(k(h)).numpy(), s / (1 + np.exp(-s)) * h[:, 4:], rtol=1e-5, atol=1e-6)


def test_linear_and_fp8_linear():
    x = RNG.standard_normal((1, 64)).astype(np.float32)
    w = RNG.standard_normal((33, 64)).astype(np.float32)
    b = RNG.standard_normal(33).astype(np.float32)
    want = x.astype(np.float64) @ w.T + b
    f32_close(kiln.nn.functional.linear(k(x), k(w), k(b)).numpy(), want, rtol=1e-5, atol=1e-5)
    qw, scale = kiln.quantize_fp8_rowwise(k(w))
    assert qw.dtype == kiln.float8_e4m3fn
    deq = kiln.dequantize_fp8(qw, scale).numpy().astype(np.float64)
    # One row runs the GEMV kernel, which rounds x to bfloat16 on its bf16 dot path (CPUs
    # with AVX512-BF16 and AVX-512 VBMI, KILN_BF16_DOT not 0): at most 2^-8 of sum |x w|.
    got = kiln.linear_fp8(k(x), qw, scale, k(b)).numpy()
    magnitude = np.abs(x.astype(np.float64)) @ np.abs(deq.T)
    assert np.all(np.abs(got - (x.astype(np.float64) @ deq.T + b)) <= 1e-4 + 2.0**-8 * magnitude)
    # Quantisation error of e4m3 (3 mantissa bits): relative 2^-4 per weight.
    assert np.abs(deq - w).max() <= np.abs(w).max() * 2.0 ** -4


def test_attention_matches_numpy():
    q = RNG.standard_normal((2, 4, 3, 8)).astype(np.float32)
    kk = RNG.standard_normal((2, 2, 5, 8)).astype(np.float32)
    v = RNG.standard_normal((2, 2, 5, 8)).astype(np.float32)
    out = kiln.nn.functional.scaled_dot_product_attention(k(q), k(kk), k(v), is_causal=True, enable_gqa=True).numpy()
    kr = np.repeat(kk, 2, axis=1).astype(np.float64)
    vr = np.repeat(v, 2, axis=1).astype(np.float64)
    s = q.astype(np.float64) @ kr.transpose(0, 1, 3, 2) / np.sqrt(8)
    s = np.where(np.tril(np.ones((3, 5), bool)), s, -np.inf)  # top-left causal
    p = np.exp(s - s.max(-1, keepdims=True))
    f32_close(out, (p / p.sum(-1, keepdims=True)) @ vr, rtol=1e-5, atol=1e-5)


def test_scaled_mm_and_grouped_mm():
    a = RNG.standard_normal((4, 32)).astype(np.float32)
    b = RNG.standard_normal((32, 6)).astype(np.float32)
    a8, b8 = k(a).to(kiln.float8_e4m3fn), k(b).to(kiln.float8_e4m3fn)
    sa, sb = kiln.tensor(0.5), kiln.tensor(2.0)
    F = kiln.nn.functional
    out = F.scaled_mm(a8, b8, sa, F.ScalingType.TensorWise, sb, F.ScalingType.TensorWise,
                      output_dtype=kiln.float32).numpy()
    ref = a8.to(kiln.float32).numpy().astype(np.float64) @ b8.to(kiln.float32).numpy() * 1.0
    f32_close(out, ref, rtol=1e-5, atol=1e-4)
    legacy = kiln._scaled_mm(a8, b8, sa, sb, out_dtype=kiln.float32).numpy()
    np.testing.assert_array_equal(legacy, out)
    # grouped: 3 experts, tokens 0-1 -> expert 0, none -> expert 1, 2-4 -> expert 2.
    x = RNG.standard_normal((5, 16)).astype(np.float32)
    w = RNG.standard_normal((3, 16, 4)).astype(np.float32)
    offs = kiln.tensor([2, 2, 5], dtype=kiln.int32)
    got = F.grouped_mm(k(x), k(w), offs=offs).numpy()
    f32_close(got[:2], x[:2].astype(np.float64) @ w[0], rtol=1e-5, atol=1e-5)
    f32_close(got[2:], x[2:].astype(np.float64) @ w[2], rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError):
        F.grouped_mm(k(x), k(w))  # offs is required when an operand is 2-D
