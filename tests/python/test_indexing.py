"""Tensor indexing as PyTorch: boolean masks, integer-tensor (advanced) indexing, lists,
mixed with ints, slices, None and `...`, in getitem and setitem, and index_put_.

The oracle is numpy on the same data, for every key where numpy and PyTorch agree. Where
they differ, the test pins PyTorch's rule with its own fixed expectation: an int next to
an index tensor is a plain select in PyTorch (never an advanced index), and a short list
holding lists is a tuple of indices (x[[[0, 1], [1, 0]]] is x[[0, 1], [1, 0]]).
"""

import numpy as np
import pytest

import kiln


def make(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(-50, 50, size=shape) * 0.5).astype(dtype)


def as_kiln(key):
    """The same key with numpy arrays turned into kiln tensors."""
    if isinstance(key, tuple):
        return tuple(as_kiln(k) for k in key)
    if isinstance(key, np.ndarray):
        return kiln.tensor(key)
    return key


A = make((4, 5, 6))
MASK_2D = A[:, :, 0] > 0
KEYS = [
    A > 0,                                              # full-shape mask
    MASK_2D,                                            # mask of fewer dims
    (slice(None), A[0, :, 0] > 0),                      # mask after a slice
    (Ellipsis, A[0, 0] > 0),                            # mask after ...
    (MASK_2D, slice(1, 4)),                             # 2-d mask then a slice
    np.array([0, 3, -1, 2]),                            # one index tensor
    (np.array([0, 3]), np.array([4, 1])),               # adjacent pair
    (np.array([0, 3]), slice(None), np.array([5, 1])),  # separated: advanced dims first
    (slice(None), np.array([[0], [2]]), np.array([1, 5, 3])),  # broadcast [2,1] x [3]
    (np.array([[0], [2]]), slice(1, 3), np.array([1, 5, 3])),  # broadcast and separated
    (None, np.array([1, 2]), Ellipsis, np.array([0])),  # None and ... around them
    (Ellipsis, np.array([0, -1])),
    (slice(None, None, 2), np.array([True, False, True, True, False])),
    np.array([], dtype=np.int64),                       # empty index
    (slice(None), np.zeros(5, dtype=bool)),             # all-false mask
    ([0, 2], [1, 1]),                                   # lists as indices
    ([True, False, True, False],),                      # a bool list is a mask
]


@pytest.mark.parametrize("key", KEYS, ids=range(len(KEYS)))
def test_getitem_matches_numpy(key):
    x = kiln.from_numpy(A)
    got = x[as_kiln(key)].numpy()
    want = A[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("key", KEYS, ids=range(len(KEYS)))
def test_getitem_on_non_contiguous_input(key):
    base = make((6, 5, 4), seed=1)
    view = base.transpose(2, 1, 0)  # the same shape as A, strides reversed
    x = kiln.from_numpy(base).permute(2, 1, 0)
    assert not x.is_contiguous()
    np.testing.assert_array_equal(x[as_kiln(key)].numpy(), view[key])


@pytest.mark.parametrize("key", KEYS, ids=range(len(KEYS)))
def test_setitem_matches_numpy(key):
    want = A.copy()
    want[key] = -7.0
    x = kiln.tensor(A)
    x[as_kiln(key)] = -7.0
    np.testing.assert_array_equal(x.numpy(), want)
    # A tensor value broadcast to the indexed shape.
    shape = A[key].shape
    if len(shape):
        values = make(shape[-1:], seed=2)
        want = A.copy()
        want[key] = values
        x = kiln.tensor(A)
        x[as_kiln(key)] = kiln.tensor(values)
        np.testing.assert_array_equal(x.numpy(), want)


def test_broadcast_input_and_zero_size():
    b = np.broadcast_to(make((1, 5)), (3, 5))
    x = kiln.from_numpy(np.ascontiguousarray(b[:1])).expand(3, 5)
    np.testing.assert_array_equal(x[[0, 2], [4, 1]].numpy(), b[[0, 2], [4, 1]])
    np.testing.assert_array_equal(x[x > 0].numpy(), b[b > 0])
    z = np.zeros((0, 3), np.float32)
    k = kiln.from_numpy(z)
    assert k[k > 0].shape == (0,)
    assert k[:, [0, 2]].shape == (0, 2)
    assert kiln.zeros(3)[kiln.tensor([], dtype=kiln.int64)].shape == (0,)


def test_pytorch_rules_where_numpy_differs():
    x = kiln.arange(24).view(2, 3, 4)
    # An int selects first, so the index tensor stays in place: [3, 2], numpy gives [2, 3].
    assert x[0, :, [0, 1]].shape == (3, 2)
    np.testing.assert_array_equal(x[0, :, [0, 1]].numpy(), np.arange(24).reshape(2, 3, 4)[0][:, [0, 1]])
    # A short list of lists is a tuple of indices.
    np.testing.assert_array_equal(x[[[0, 1], [1, 0]]].numpy(), x[[0, 1], [1, 0]].numpy())
    # A 0-dim integer tensor selects; a Python or 0-dim bool adds a dim kept or emptied.
    assert x[kiln.tensor(1)].shape == (3, 4)
    assert x[True].shape == (1, 2, 3, 4)
    assert x[False].shape == (0, 2, 3, 4)
    assert x[kiln.tensor(True)].shape == (1, 2, 3, 4)
    assert x[..., None, kiln.tensor(False)].shape == (2, 3, 4, 1, 0)
    # So is a short 2-d numpy array (its rows are the indices); a 0-d array selects.
    np.testing.assert_array_equal(x[np.array([[0, 1], [1, 0]])].numpy(), x[[0, 1], [1, 0]].numpy())
    assert x[np.array(1)].shape == (3, 4)
    assert x[[True, 1]].shape == (2, 3, 4)  # a mixed list is integers: [1, 1]
    # uint8 tensors are masks, as in PyTorch.
    assert x[kiln.tensor([1, 0], dtype=kiln.uint8)].shape == (1, 3, 4)
    # An index result is a copy, never a view.
    y = x[[0]]
    y[...] = 0
    assert x.numpy().sum() == sum(range(24))


def test_index_put_accumulate_and_last_write():
    x = kiln.zeros(5)
    idx = kiln.tensor([0, 0, 3, -1])
    vals = kiln.tensor([1.0, 2.0, 3.0, 4.0])
    x.index_put_((idx,), vals, accumulate=True)
    want = np.zeros(5, np.float32)
    np.add.at(want, np.array([0, 0, 3, -1]), np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    np.testing.assert_array_equal(x.numpy(), want)
    y = kiln.zeros(5).index_put_((idx,), vals)
    assert y.numpy().tolist() == [2.0, 0.0, 0.0, 3.0, 4.0]  # the last write wins
    base = kiln.zeros(2, 3)
    out = kiln.index_put(base, (None, kiln.tensor([2, 0])), kiln.tensor([5.0]), accumulate=True)
    assert out.numpy().tolist() == [[5.0, 0.0, 5.0], [5.0, 0.0, 5.0]]
    assert base.numpy().sum() == 0
    assert base.index_put((kiln.tensor([1]),), kiln.ones(3)).numpy().tolist() == [[0, 0, 0], [1, 1, 1]]


def test_nonzero():
    x = np.array([[0.0, -0.0, 1.5], [np.nan, 0.0, -2.0]], np.float32)
    k = kiln.from_numpy(x)
    np.testing.assert_array_equal(kiln.nonzero(k).numpy(), np.argwhere(x))
    rows, cols = k.nonzero(as_tuple=True)
    np.testing.assert_array_equal(rows.numpy(), np.nonzero(x)[0])
    np.testing.assert_array_equal(cols.numpy(), np.nonzero(x)[1])
    assert kiln.nonzero(kiln.tensor(3)).shape == (1, 0)
    assert [t.numpy().tolist() for t in kiln.nonzero(kiln.tensor(3), as_tuple=True)] == [[0]]


ERRORS = [
    (lambda x: x[[4]], IndexError, "index 4 is out of bounds for dimension 0 with size 4"),
    (lambda x: x[:, [-6]], IndexError, "index -6 is out of bounds for dimension 1 with size 5"),
    (lambda x: x[4], IndexError, "index 4 is out of bounds for dimension 0 with size 4"),
    (lambda x: x[[0, 1], [0, 1, 2]], IndexError,
     "shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]"),
    (lambda x: x[kiln.ones(4, 4, dtype=kiln.bool)], IndexError,
     "The shape of the mask [4, 4] at index 1 does not match the shape of the indexed tensor [4, 5, 6] at index 1"),
    (lambda x: x[kiln.ones(5, dtype=kiln.bool)], IndexError,
     "The shape of the mask [5] at index 0 does not match the shape of the indexed tensor [4, 5, 6] at index 0"),
    (lambda x: x[kiln.tensor([0.5])], IndexError, "tensors used as indices must be long, int, byte or bool tensors"),
    (lambda x: x[1.5], IndexError, "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables"),
    (lambda x: x["a"], IndexError, "only integers, slices"),
    (lambda x: x[[2 ** 70]], IndexError, "a list used as an index must hold integers or booleans"),
    (lambda x: x[[1j]], TypeError, "'complex' object cannot be interpreted as an integer"),
    (lambda x: x[0, 0, 0, 0], IndexError, "too many indices for tensor of dimension 3"),
    (lambda x: x[..., 0, ...], IndexError, "an index can only have a single ellipsis"),
    (lambda x: x.__setitem__([0, 1], kiln.ones(3)), RuntimeError,
     "shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result of shape [2, 5, 6]"),
    (lambda x: x.__setitem__([0], kiln.ones(6, dtype=kiln.int64)), RuntimeError,
     "Index put requires the source and destination dtypes match, got float32 for the destination and int64"),
    (lambda x: x.__setitem__(x > 0, kiln.ones(2)), RuntimeError, "shape mismatch"),
    (lambda x: x.__setitem__([9], 1.0), IndexError, "index 9 is out of bounds for dimension 0 with size 4"),
    (lambda x: x.__setitem__(([0, 1, 2], [0, 1, 7]), 1.0), IndexError,
     "index 7 is out of bounds for dimension 1 with size 5"),  # checked before any write
    (lambda x: x.__setitem__([0], [1, 2]), TypeError, "can't assign a list"),
    (lambda x: kiln.zeros(2, dtype=kiln.uint8).__setitem__([0], 300), RuntimeError,
     "value cannot be converted to type uint8 without overflow"),
    (lambda x: kiln.zeros(2, dtype=kiln.int32).__setitem__(kiln.tensor([True, False]), float("nan")), RuntimeError,
     "value cannot be converted to type int32 without overflow"),
    (lambda x: x.index_put_((kiln.tensor([0]),), 1.0), TypeError, ""),
    (lambda x: x.index_put_(kiln.tensor([0]), kiln.ones(1)), TypeError, "must be a tuple of Tensors"),
    (lambda x: kiln.zeros(3, dtype=kiln.float8_e4m3fn).index_put_(
        (kiln.tensor([0]),), kiln.zeros(1, dtype=kiln.float8_e4m3fn), accumulate=True), TypeError,
     "accumulate is not implemented for float8_e4m3fn"),
    (lambda x: kiln.zeros(1).expand(3).__setitem__([0], 1.0), RuntimeError, "index_put_"),
]


@pytest.mark.parametrize("case", ERRORS, ids=range(len(ERRORS)))
def test_errors_match_pytorch(case):
    fn, exc, text = case
    x = kiln.tensor(A)
    before = x.numpy().copy()
    with pytest.raises(exc) as info:
        fn(x)
    assert text in str(info.value)
    np.testing.assert_array_equal(x.numpy(), before)  # a failed call writes nothing


def test_read_only_tensors_refuse_index_writes():
    arr = make((3,))
    arr.setflags(write=False)
    x = kiln.from_numpy(arr)
    assert x[[0, 2]].numpy().tolist() == arr[[0, 2]].tolist()
    with pytest.raises(RuntimeError, match="read-only"):
        x[[0]] = 1.0


def test_against_torch_when_installed():
    torch = pytest.importorskip("torch")
    data = make((4, 5, 6))
    t, k = torch.from_numpy(data), kiln.from_numpy(data)
    keys = [
        lambda m: (m.tensor([0, 3]), slice(None), m.tensor([5, 1])),
        lambda m: (0, slice(None), [0, 1]),
        lambda m: [[0, 1], [1, 0]],
        lambda m: (m.tensor([[0], [2]]), slice(1, 3), m.tensor([1, 5, 3])),
        lambda m: (None, m.tensor(True), Ellipsis, [2]),
    ]
    for key in keys:
        np.testing.assert_array_equal(k[key(kiln)].numpy(), t[key(torch)].numpy())
