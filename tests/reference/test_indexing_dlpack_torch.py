"""Indexing and DLPack against PyTorch (Debian's python3-torch, 1.13) on the same inputs:
getitem and setitem with masks, index tensors (adjacent, separated, broadcast), lists,
None and `...`, on contiguous, non-contiguous and zero-size tensors; index_put_ with
accumulate over repeated indices; the exception class of each error path; DLPack both
ways, zero-copy, with strides, bfloat16 and other dtypes. tests/python/test_indexing.py holds the
numpy comparison that `make test` runs. Run with `make test-torch-reference`; skipped
when torch is absent."""

import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

_build = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "release", "python")
if os.path.isdir(_build) and _build not in sys.path:
    sys.path.insert(0, _build)
import kiln  # noqa: E402


def data(shape, seed=0):
    return np.random.default_rng(seed).integers(-50, 50, size=shape).astype(np.float32) * 0.5


# Each key is built by a function of the library (m = kiln or torch), so index tensors are
# that library's own.
KEYS = [
    lambda m, a: m.from_numpy(a > 0),
    lambda m, a: m.from_numpy(a[:, :, 0] > 0),
    lambda m, a: (slice(None), m.from_numpy(a[0, :, 0] > 0)),
    lambda m, a: (Ellipsis, m.from_numpy(a[0, 0] > 0)),
    lambda m, a: m.tensor([0, 3, -1, 2]),
    lambda m, a: (m.tensor([0, 3]), m.tensor([4, 1])),
    lambda m, a: (m.tensor([0, 3]), slice(None), m.tensor([5, 1])),
    lambda m, a: (slice(None), m.tensor([[0], [2]]), m.tensor([1, 5, 3])),
    lambda m, a: (m.tensor([[0], [2]]), slice(1, 3), m.tensor([1, 5, 3])),
    lambda m, a: (None, m.tensor([1, 2]), Ellipsis, m.tensor([0])),
    lambda m, a: (0, slice(None), [0, 1]),
    lambda m, a: [[0, 1], [1, 0]],
    lambda m, a: ([True, False, True, False],),
    lambda m, a: (slice(None, None, 2), m.tensor([True, False, True, True, False])),
    lambda m, a: m.tensor([], dtype=m.int64),
    lambda m, a: (1, Ellipsis, None, slice(1, None)),
]

LAYOUTS = {
    "contiguous": lambda m, a: m.from_numpy(a.copy()),
    "transposed": lambda m, a: m.from_numpy(np.ascontiguousarray(a.transpose(2, 1, 0))).permute(2, 1, 0),
    "sliced": lambda m, a: m.from_numpy(np.concatenate([a, a], axis=2).copy())[:, :, ::2],
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("key", range(len(KEYS)))
def test_getitem_matches_torch(layout, key):
    a = data((4, 5, 6))
    got = LAYOUTS[layout](kiln, a)[KEYS[key](kiln, a)]
    want = LAYOUTS[layout](torch, a)[KEYS[key](torch, a)]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("key", range(len(KEYS)))
def test_setitem_scalar_and_broadcast_value_match_torch(key):
    a = data((4, 5, 6))
    for value in (lambda m, shape: 7.5, lambda m, shape: m.arange(shape[-1], dtype=m.float32) if shape else 1.0):
        k, t = kiln.from_numpy(a.copy()), torch.from_numpy(a.copy())
        shape = tuple(t[KEYS[key](torch, a)].shape)
        if shape and shape[-1] == 0:
            continue
        k[KEYS[key](kiln, a)] = value(kiln, shape)
        t[KEYS[key](torch, a)] = value(torch, shape)
        np.testing.assert_array_equal(k.numpy(), t.numpy())


def test_zero_size_tensors_match_torch():
    a = np.zeros((0, 3), np.float32)
    for key in (lambda m: m.tensor([], dtype=m.int64), lambda m: m.from_numpy(np.zeros((0, 3), bool)),
                lambda m: (slice(None), m.tensor([0, 2]))):
        got, want = kiln.from_numpy(a)[key(kiln)], torch.from_numpy(a)[key(torch)]
        assert tuple(got.shape) == tuple(want.shape)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_with_repeated_indices_matches_torch(accumulate):
    a = data((5, 3))
    vals = data((4, 3), seed=1)
    k, t = kiln.from_numpy(a.copy()), torch.from_numpy(a.copy())
    idx = [0, 2, 0, 4]
    k.index_put_((kiln.tensor(idx),), kiln.from_numpy(vals), accumulate=accumulate)
    t.index_put_((torch.tensor(idx),), torch.from_numpy(vals), accumulate=accumulate)
    if accumulate:
        np.testing.assert_allclose(k.numpy(), t.numpy(), rtol=1e-6)
    else:  # repeated indices without accumulate: some write wins in both; the others match
        np.testing.assert_array_equal(k.numpy()[[1, 2, 3, 4]], t.numpy()[[1, 2, 3, 4]])


ERRORS = [
    lambda m, x: x[m.tensor([5])],                        # index out of range
    lambda m, x: x[m.tensor([-6])],
    lambda m, x: x[m.from_numpy(np.ones((3, 3), bool))],  # mask shape mismatch
    lambda m, x: x[0, 0, 0, 0],                          # too many indices
    lambda m, x: x[m.tensor([0.5])],                      # float index tensor
    lambda m, x: x.__setitem__(m.tensor([9]), 1.0),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_error_classes_match_torch(case):
    a = data((4, 5, 6))
    with pytest.raises(Exception) as t_info:
        ERRORS[case](torch, torch.from_numpy(a.copy()))
    with pytest.raises(Exception) as k_info:
        ERRORS[case](kiln, kiln.from_numpy(a.copy()))
    assert isinstance(k_info.value, type(t_info.value)) or isinstance(t_info.value, type(k_info.value)), (
        f"kiln raised {type(k_info.value).__name__}, torch {type(t_info.value).__name__}")


def test_dlpack_from_torch_is_zero_copy_and_keeps_strides():
    t = torch.arange(24, dtype=torch.float32).view(4, 6)[:, 1::2]
    k = kiln.from_dlpack(t)
    assert tuple(k.shape) == tuple(t.shape) and tuple(k.stride()) == tuple(t.stride())
    t[0, 0] = 100.0
    assert k[0, 0].item() == 100.0
    np.testing.assert_array_equal(k.numpy(), t.numpy())


def test_dlpack_to_torch_is_zero_copy_and_keeps_strides():
    k = kiln.arange(12, dtype=kiln.float32).view(3, 4).permute(1, 0)
    t = torch.from_dlpack(k)
    assert tuple(t.shape) == (4, 3) and tuple(t.stride()) == tuple(k.stride())
    k[1, 2] = -1.0
    assert t[1, 2].item() == -1.0


# Not bool: PyTorch 1.13 refuses it in DLPack ("Bool type is not supported by dlpack");
# tests/python/test_dlpack.py exchanges bool with numpy.
@pytest.mark.parametrize("dtype", ["bfloat16", "int8", "uint8", "float16", "float64", "complex64"])
def test_dlpack_dtypes_round_trip_with_torch(dtype):
    t = (torch.arange(6) - 2).to(getattr(torch, dtype)) if dtype != "uint8" else torch.arange(6, dtype=torch.uint8)
    k = kiln.from_dlpack(t)
    assert str(k.dtype).split(".")[-1] == dtype
    back = torch.from_dlpack(k)
    assert back.dtype == t.dtype and torch.equal(back, t)


def test_dlpack_zero_size_with_torch():
    t = torch.zeros(0, 3)
    k = kiln.from_dlpack(t)
    assert tuple(k.shape) == (0, 3)
    assert tuple(torch.from_dlpack(kiln.zeros(2, 0)).shape) == (2, 0)
