"""frexp, logspace, heaviside, special.laguerre_polynomial_l, take, put_, bincount against numpy."""

import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(13)


def k(a):
    return kiln.from_numpy(np.ascontiguousarray(a))


def test_frexp_every_float32_class_matches_numpy():
    special = np.array([0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, 1.17549435e-38, 1.0, -1.5, 3.4028235e38,
                        np.inf, -np.inf, np.nan], dtype=np.float32)
    sweep = np.arange(0, 2**32, 65537, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([special, sweep])
    m, e = kiln.frexp(k(x))
    ref_m, ref_e = np.frexp(x)
    assert e.dtype == kiln.int32
    np.testing.assert_array_equal(m.numpy(), ref_m)  # NaN positions equal too
    finite = np.isfinite(x)
    np.testing.assert_array_equal(e.numpy()[finite], ref_e[finite])
    np.testing.assert_array_equal(np.signbit(m.numpy()[x == 0]), np.signbit(x[x == 0]))
    m2, e2 = k(x).frexp()
    np.testing.assert_array_equal(e2.numpy()[finite], ref_e[finite])
    with pytest.raises(RuntimeError, match="floating-point"):
        kiln.frexp(k(np.arange(3)))


def test_logspace():
    np.testing.assert_allclose(kiln.logspace(-2, 3, 11, base=2.0, dtype=kiln.float64).numpy(),
                               np.logspace(-2, 3, 11, base=2.0), rtol=1e-15)
    assert kiln.logspace(0, 1, 0).shape == (0,)
    assert kiln.logspace(2, 9, 1).numpy().tolist() == [100.0]
    assert kiln.logspace(0, 2, 3, dtype=kiln.int64).numpy().tolist() == [1, 10, 100]
    assert kiln.logspace(0, 1, 3).dtype == kiln.float32


def test_heaviside():
    x = np.array([-1.0, -0.0, 0.0, 2.0, np.nan], np.float32)
    v = np.array([0.5], np.float32)
    np.testing.assert_array_equal(kiln.heaviside(k(x), k(v)).numpy(), [0, 0.5, 0.5, 1, 0])
    np.testing.assert_array_equal(k(x).heaviside(k(v)).numpy(), np.heaviside(np.nan_to_num(x, nan=-1), v))
    with pytest.raises(RuntimeError, match="different dtypes"):
        kiln.heaviside(k(x), k(v.astype(np.float64)))


def test_laguerre_polynomial_l():
    from numpy.polynomial import laguerre
    x = np.linspace(-3, 5, 17)
    for n in range(8):
        got = kiln.special.laguerre_polynomial_l(k(x), n).numpy()
        ref = laguerre.lagval(x, [0] * n + [1])
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    assert kiln.special.laguerre_polynomial_l(k(x.astype(np.float32)), -1).numpy().tolist() == [0.0] * 17
    assert kiln.special.laguerre_polynomial_l(k(np.array([1, 2])), 2).dtype == kiln.float32


def test_take_and_put_exact():
    a = np.arange(24, dtype=np.int64).reshape(4, 6).T  # non-contiguous
    idx = np.array([[0, -1], [7, 23]])
    np.testing.assert_array_equal(kiln.take(k(a).contiguous(), k(idx)).numpy(), np.take(a, idx))
    t = kiln.from_numpy(np.arange(24, dtype=np.int64).reshape(4, 6)).transpose(0, 1)
    np.testing.assert_array_equal(kiln.take(t, k(idx)).numpy(), np.take(a, idx))
    with pytest.raises(IndexError, match="out of range: tried to access index 24 on a tensor of 24 elements"):
        kiln.take(t, k(np.array([24])))
    s = kiln.zeros(5, dtype=kiln.int64)
    s.put_(k(np.array([1, 1, 1, -1])), k(np.array([2, 3, 4, 9])), accumulate=True)
    assert s.numpy().tolist() == [0, 9, 0, 0, 9]
    s.put_(k(np.array([0])), k(np.array([7])))
    assert s.numpy().tolist() == [7, 9, 0, 0, 9]
    out = kiln.put(s, k(np.array([2])), k(np.array([5])))
    assert out.numpy().tolist() == [7, 9, 5, 0, 9] and s.numpy().tolist() == [7, 9, 0, 0, 9]


def test_bincount_exact_and_weighted():
    v = np.where(RNG.random(500000) < 0.999, 3, RNG.integers(0, 1000, 500000)).astype(np.int64)
    np.testing.assert_array_equal(kiln.bincount(k(v)).numpy(), np.bincount(v))
    w = RNG.random(500000).astype(np.float32)
    got = kiln.bincount(k(v), k(w))
    assert got.dtype == kiln.float32
    np.testing.assert_allclose(got.numpy(), np.bincount(v, w), rtol=1e-4)
    np.testing.assert_array_equal(kiln.bincount(k(np.array([1, 1], np.int32)), minlength=4).numpy(), [0, 2, 0, 0])
    assert kiln.bincount(k(np.array([0, 2])), k(np.array([1, 2]))).dtype == kiln.float64
    with pytest.raises(RuntimeError, match="non-negative"):
        kiln.bincount(k(np.array([-1])))
