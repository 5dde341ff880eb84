"""bincount's one-pass kernel and its two-pass fall-back against numpy: one hot bin,
runs broken at every offset, all-distinct and very large values, minlength, negative
values inside a run of equal values."""
import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(31)


def k(a):
    return kiln.from_numpy(np.ascontiguousarray(a))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_hot_bin_runs_distinct_and_large_values(threads):
    with kiln.threads(threads):
        for n in (1, 7, 8, 9, 17, 100003):
            v = np.full(n, 6, np.int64)
            np.testing.assert_array_equal(kiln.bincount(k(v)).numpy(), np.bincount(v))
        for at in range(24):
            v = np.full(24, 9, np.int64)
            v[at] = 2
            np.testing.assert_array_equal(kiln.bincount(k(v)).numpy(), np.bincount(v))
        v = np.full(300001, 3, np.int64)
        v[::1000] = np.arange(0, 300001, 1000) % 97
        np.testing.assert_array_equal(kiln.bincount(k(v), minlength=200).numpy(), np.bincount(v, minlength=200))
        distinct = RNG.permutation(200000).astype(np.int64)
        np.testing.assert_array_equal(kiln.bincount(k(distinct)).numpy(), np.bincount(distinct))
        sparse = np.ones(1000, np.int64)
        sparse[10] = 5_000_000
        np.testing.assert_array_equal(kiln.bincount(k(sparse)).numpy(), np.bincount(sparse))
        w = (RNG.integers(-8, 8, v.size) / 8).astype(np.float64)  # dyadic: exact in any order
        np.testing.assert_array_equal(kiln.bincount(k(v), k(w)).numpy(), np.bincount(v, w))


def test_negative_value_inside_a_run():
    with pytest.raises(RuntimeError, match=r"non-negative integral inputs. \(got the value -1\)"):
        kiln.bincount(k(np.full(64, -1, np.int64)))
    v = np.full(100000, 4, np.int64)
    v[99999] = -5
    with pytest.raises(RuntimeError, match=r"got the value -5"):
        kiln.bincount(k(v))
