"""Issue 9, class 6 (silent results): grouped_mm's rows past offs[-1] and mismatched K,
attention's NaN propagation (masks, scales, inputs) against PyTorch's math path written
in numpy, pow on bool, and out-of-range seeds."""

import os
import subprocess

import numpy as np
import pytest

import kiln

F = kiln.nn.functional
NAN = float("nan")
INF = float("inf")


def offs(*ends):
    return kiln.tensor(list(ends), dtype=kiln.int32)


# ---------------------------------------------------------------- grouped_mm


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.bfloat16, kiln.float16])
def test_grouped_mm_rows_and_cols_past_last_offset_are_zero(dtype):
    for _ in range(3):  # freed buffers full of other numbers are the likely reuse
        kiln.full((4096,), 7.0)
    a = kiln.randn(40, 16).to(dtype)
    out = kiln.grouped_mm(a, kiln.randn(2, 16, 16).to(dtype), offs=offs(3, 20)).float().numpy()
    assert (out[20:] == 0).all()
    assert np.isfinite(out[:20]).all()
    out = kiln.grouped_mm(kiln.randn(2, 5, 16).to(dtype), kiln.randn(16, 72).to(dtype), offs=offs(8, 24))
    assert (out.float().numpy()[:, 24:] == 0).all()
    assert (kiln.grouped_mm(a, kiln.randn(0, 16, 16).to(dtype), offs=offs()).float().numpy() == 0).all()


def test_grouped_mm_2d_2d_refuses_mismatched_k():
    with pytest.raises(RuntimeError, match=r"contraction dimension of mat_a and mat_b must match, got \[4, 8\]"):
        kiln.grouped_mm(kiln.ones(4, 8), kiln.ones(4, 4), offs=offs(2, 4))
    out = kiln.grouped_mm(kiln.ones(4, 8), kiln.ones(8, 4), offs=offs(2, 6)).numpy()
    assert out.shape == (2, 4, 4) and (out[0] == 2).all() and (out[1] == 4).all()


# ---------------------------------------------------------------- attention


def math_sdpa(q, k, v, mask=None, is_causal=False, scale=None):
    """PyTorch's _scaled_dot_product_attention_math in float64: sqrt(|scale|) on q and k,
    masks (and is_causal) added as 0 / -inf biases, _safe_softmax (rows of only -inf give
    zeros, NaN and +inf give NaN), then the product with v."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / np.sqrt(E) if scale is None else scale
    sf = np.sqrt(abs(scale))
    with np.errstate(all="ignore"):
        qs = q * (-sf if scale < 0 else sf)
        ks = k * sf
        # Elementwise products summed, so inf and NaN follow IEEE exactly (no BLAS).
        attn = (qs[..., :, None, :] * ks[..., None, :, :]).sum(-1)
        if is_causal:
            mask = np.tril(np.ones((L, S), bool))
        if mask is not None:
            mask = np.asarray(mask)
            attn = attn + (np.where(mask, 0.0, -INF) if mask.dtype == bool else mask.astype(np.float64))
        mx = attn.max(-1, keepdims=True)  # NaN propagates, as PyTorch's softmax max
        e = np.exp(attn - mx)
        w = e / e.sum(-1, keepdims=True)
        w = np.where((attn == -INF).all(-1, keepdims=True), 0.0, w)
        return w @ v


def same(got, want, tol):
    got = got.float().numpy().astype(np.float64) if isinstance(got, kiln.Tensor) else got
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=tol, atol=tol)


def test_sdpa_nan_in_mask_gives_nan_row():
    q, k, v = (kiln.randn(2, 3, n, 8) for n in (6, 150, 150))
    mask = np.zeros((6, 150), np.float32)
    mask[1, 0] = mask[2, 63] = mask[3, 64] = mask[4, 149] = NAN
    mask[5, 70] = INF
    want = math_sdpa(q.numpy(), k.numpy(), v.numpy(), mask)
    assert np.isnan(want[:, :, 1:]).all() and np.isfinite(want[:, :, 0]).all()
    same(F.scaled_dot_product_attention(q, k, v, attn_mask=kiln.from_numpy(mask)), want, 1e-5)


@pytest.mark.parametrize("L", [1, 4])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("scale", [NAN, INF, -INF, 0.0])
def test_sdpa_non_finite_scale_follows_the_math_path(L, is_causal, scale):
    # q > 0, and each key either all negative or all positive (or with a zero), so the
    # infinite-scale scores are a mix of -inf, +inf and NaN rows.
    rng = np.random.default_rng(0)
    S = 600
    q = rng.uniform(0.5, 1, (2, 2, L, 4)).astype(np.float32)
    k = (1 if scale < 0 else -1) * rng.uniform(0.5, 1, (2, 2, S, 4)).astype(np.float32)
    k[0, 1, 5] *= -1  # +inf for head (0, 1), key 5 (hidden from the first queries by is_causal)
    k[1, 0, S - 1, 2] = 0  # inf * 0 = NaN for head (1, 0), last key
    v = rng.uniform(-1, 1, (2, 2, S, 4)).astype(np.float32)
    want = math_sdpa(q, k, v, is_causal=is_causal, scale=scale)
    with kiln.threads(4):
        got = F.scaled_dot_product_attention(*(kiln.from_numpy(x) for x in (q, k, v)), is_causal=is_causal,
                                             scale=scale)
    same(got, want, 1e-5)
    if scale in (INF, -INF):
        assert (want[1, 1] == 0).all() and np.isnan(want[1, 0]).all()  # the cases all occur


def test_attention_decode_nan_and_inf_scale():
    q = kiln.ones(1, 4, 8)
    k = kiln.full((1, 2, 1100, 8), -1.0)
    v = kiln.randn(1, 2, 1100, 8)
    with kiln.threads(4):
        assert (kiln.attention_decode(q, k, v, 1000, scale=INF).numpy() == 0).all()
        assert np.isnan(kiln.attention_decode(q, k, v, 1000, scale=NAN).numpy()).all()
        k[0, 1, 900] = 1.0
        got = kiln.attention_decode(q, k, v, 1000, scale=INF).numpy()
    assert (got[0, :2] == 0).all() and np.isnan(got[0, 2:]).all()


def test_sdpa_nan_query_row_is_nan_not_zero():
    q, k, v = kiln.randn(3, 1, 8), kiln.randn(3, 700, 8), kiln.randn(3, 700, 8)
    q[1, 0, 3] = NAN
    got = F.scaled_dot_product_attention(q, k, v).numpy()
    assert np.isnan(got[1]).all() and np.isfinite(got[[0, 2]]).all()


# ---------------------------------------------------------------- number op tensor


def test_number_divided_by_unsigned_tensor_divides_the_number():
    # The dividend used to be converted to the tensor's dtype first (-7 -> uint32 4294967289).
    t = kiln.tensor([3, 0], dtype=kiln.uint32)
    for got in (-7 / t, kiln.div(-7, t), kiln.true_divide(-7, t)):
        assert got.dtype == kiln.float32
        np.testing.assert_allclose(got.numpy(), [-7 / 3, -INF])
    assert (300 / kiln.tensor([3], dtype=kiln.int8)).tolist() == [100.0]
    assert kiln.div(-7, t[:1], rounding_mode="floor").dtype == kiln.uint32  # stays integral


def test_number_with_zero_dim_narrow_tensor_keeps_the_tensor_dtype():
    # A number never decides the dtype (it used to promote with a 0-dim bf16 tensor to float32).
    b = kiln.tensor(2.0).to(kiln.bfloat16)
    for got in (1.5 - b, 2 / b, 2 ** b, 3 % b, 2 // b, kiln.sub(1.5, b), kiln.div(1, b, rounding_mode="trunc")):
        assert got.dtype == kiln.bfloat16
    assert (1.5 - b).float().item() == -0.5 and (3 % b).float().item() == 1.0
    assert (1.5 - kiln.tensor([2.0]).to(kiln.float16)).dtype == kiln.float16


# ---------------------------------------------------------------- pow on bool


def test_pow_on_bool_follows_pytorch():
    b = kiln.tensor([True, False, True])
    r = kiln.pow(b, 2)
    assert r.dtype == kiln.int64 and r.tolist() == [1, 0, 1]
    assert (b ** 2).dtype == kiln.int64
    assert kiln.pow(b, 0.5).dtype == kiln.float32
    assert kiln.pow(b, True).tolist() == [True, False, True]
    assert kiln.pow(b, False).tolist() == [True, True, True]
    with pytest.raises(TypeError, match="pow: not supported for bool"):
        kiln.pow(b, b)
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        kiln.pow(b, -1)


# ---------------------------------------------------------------- seeds


@pytest.mark.parametrize("seed", [-1, 2**64])
def test_out_of_range_seed_is_refused(tmp_path, seed):
    with pytest.raises(ValueError, match=r"seed must be in \[0, 2\*\*64 - 1\], got " + str(seed)):
        kiln.llm.make_model(tmp_path, "qwen3_moe", "tiny", seed=seed)
    kiln.llm.make_model(tmp_path, "qwen3_moe", "tiny", layers=1)
    model = kiln.llm.load(tmp_path, "f32")
    with pytest.raises(ValueError, match="seed must be in"):
        model.generate("hi", 2, temperature=1.0, seed=seed)
    with pytest.raises(TypeError, match="seed must be an int, got float"):
        model.generate("hi", 2, temperature=1.0, seed=1.5)
    assert model.generate("hi", 2, temperature=1.0, seed=2**64 - 1) is not None


CLI = os.path.join(os.path.dirname(kiln.__file__), "..", "..", "kiln")


@pytest.mark.skipif(not os.path.exists(CLI), reason="the kiln executable is not next to the module")
@pytest.mark.parametrize("seed", ["-1", "18446744073709551616", "1e3", ""])
def test_cli_refuses_bad_seed(seed):
    r = subprocess.run([CLI, "run", "--model", "no-such-folder", "--prompt", "hi", "--seed", seed],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "--seed: the seed must be an integer in [0, 18446744073709551615]" in r.stderr + r.stdout
