"""repeat, tile, tril/triu, unique, isclose/allclose/equal, any/all, mT/mH/H, the
Tensor.new_* methods and the factories' requires_grad= / device= keywords, against numpy
(and PyTorch's documented rules where numpy differs)."""

import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(3)

# One dtype of every class numpy also has (bf16/fp8 are covered in the C++ tests).
NUMPY_DTYPES = [np.bool_, np.uint8, np.int16, np.int64, np.uint64, np.float16, np.float32, np.float64, np.complex64]


def sample(shape, dtype):
    base = RNG.integers(1, 9, size=shape)
    if dtype == np.bool_:
        return base % 2 == 1
    if np.issubdtype(dtype, np.complexfloating):
        return (base + 0.5j * base).astype(dtype)
    return base.astype(dtype)


def k(a):
    return kiln.from_numpy(np.array(a, order="C"))  # a copy; 0-d stays 0-d


# ---------------------------------------------------------------- repeat and tile


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("shape,reps", [((2, 3), (2, 2)), ((3,), (2, 1, 4)), ((2, 1, 3), (1, 5, 1)),
                                        ((0, 2), (3, 1)), ((), (2, 3)), ((), ()), ((4,), (0,))])
def test_repeat_matches_np_tile(dtype, shape, reps):
    a = sample(shape, dtype)
    got = k(a).repeat(*reps) if reps else k(a).repeat(())
    want = np.tile(a, reps) if reps else a.copy()
    assert got.shape == want.shape and got.dtype == k(a).dtype
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(k(a).repeat(list(reps)).numpy(), want)


def test_repeat_non_contiguous_and_broadcast_inputs():
    a = sample((4, 3), np.float32)
    np.testing.assert_array_equal(k(a).t().repeat(2, 3).numpy(), np.tile(a.T, (2, 3)))
    col = sample((3, 1), np.int32)
    np.testing.assert_array_equal(k(col).expand(3, 4).repeat(1, 2).numpy(), np.tile(np.broadcast_to(col, (3, 4)), (1, 2)))
    np.testing.assert_array_equal(k(a)[:, ::2].repeat(2, 1).numpy(), np.tile(a[:, ::2], (2, 1)))


@pytest.mark.parametrize("shape,dims", [((2, 3), (2,)), ((2, 3), (2, 2)), ((3,), (2, 2)), ((2, 2, 2), ()),
                                        ((2, 3), (1, 1, 2))])
def test_tile_follows_numpy(shape, dims):
    a = sample(shape, np.float64)
    np.testing.assert_array_equal(kiln.tile(k(a), dims).numpy(), np.tile(a, dims))
    if dims:
        np.testing.assert_array_equal(k(a).tile(*dims).numpy(), np.tile(a, dims))
    np.testing.assert_array_equal(k(a).tile(dims).numpy(), np.tile(a, dims))


def test_repeat_errors_and_gradient():
    with pytest.raises(RuntimeError, match="Number of dimensions of repeat dims can not be smaller"):
        kiln.ones(2, 3).repeat(2)
    with pytest.raises(RuntimeError, match=r"Trying to create tensor with negative dimension -2: \[-2, 3\]"):
        kiln.ones(2, 3).repeat(-1, 1)
    assert kiln.ones(0, 2).repeat(-1, 1).shape == (0, 2)  # PyTorch multiplies first: 0 * -1 is 0
    x = kiln.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (x.repeat(3, 2) * kiln.arange(24.0).view(6, 4)).sum().backward()
    w = np.arange(24.0).reshape(6, 4)
    want = sum(w[i * 2:(i + 1) * 2, j * 2:(j + 1) * 2] for i in range(3) for j in range(2))
    np.testing.assert_array_equal(x.grad.numpy(), want)


# ---------------------------------------------------------------- tril and triu


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("diagonal", [-4, -1, 0, 1, 3])
def test_tril_triu_match_numpy(dtype, diagonal):
    a = sample((2, 3, 5), dtype)
    for name in ("tril", "triu"):
        want = getattr(np, name)(a, diagonal)
        np.testing.assert_array_equal(getattr(kiln, name)(k(a), diagonal).numpy(), want)
        np.testing.assert_array_equal(getattr(k(a), name)(diagonal=diagonal).numpy(), want)
        inplace = k(a.copy())
        assert getattr(inplace, name + "_")(diagonal) is not None
        np.testing.assert_array_equal(inplace.numpy(), want)


def test_tril_triu_edge_sizes_layouts_and_errors():
    for shape in [(0, 3), (3, 0), (1, 1), (4, 0, 2), (17, 1)]:
        a = sample(shape, np.float32)
        np.testing.assert_array_equal(kiln.tril(k(a)).numpy(), np.tril(a))
        np.testing.assert_array_equal(kiln.triu(k(a), 1).numpy(), np.triu(a, 1))
    a = sample((5, 4), np.float32)
    np.testing.assert_array_equal(k(a).t().tril().numpy(), np.tril(a.T))
    row = sample((1, 4), np.float32)
    np.testing.assert_array_equal(k(row).expand(4, 4).triu().numpy(), np.triu(np.broadcast_to(row, (4, 4))))
    with pytest.raises(RuntimeError, match="tril: input tensor must have at least 2 dimensions"):
        kiln.tril(kiln.ones(3))
    with pytest.raises(RuntimeError, match="input tensor must have at least 2 dimensions"):
        kiln.ones(3).triu_()


def test_tril_gradient_and_in_place_under_autograd():
    x = kiln.ones(3, 3, requires_grad=True)
    kiln.tril(x, -1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.tril(np.ones((3, 3)), -1))
    y = kiln.ones(3, 3, requires_grad=True)
    z = y * 3
    z.triu_()
    z.sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), 3 * np.triu(np.ones((3, 3))))


# ---------------------------------------------------------------- unique


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(0,), (1,), (17,), (3, 5), ()])
def test_unique_matches_numpy(dtype, shape):
    a = sample(shape, dtype)
    values, inverse, counts = kiln.unique(k(a), return_inverse=True, return_counts=True)
    want, want_inverse, want_counts = np.unique(a, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(values.numpy(), want)
    assert inverse.shape == a.shape and inverse.dtype == kiln.int64
    np.testing.assert_array_equal(inverse.numpy().reshape(-1), want_inverse.reshape(-1))
    np.testing.assert_array_equal(counts.numpy(), want_counts)
    np.testing.assert_array_equal(k(a).unique().numpy(), want)
    v, c = k(a).unique(return_counts=True)
    np.testing.assert_array_equal(c.numpy(), want_counts)
    v, i = kiln.unique(k(a), sorted=False, return_inverse=True)
    np.testing.assert_array_equal(v.numpy()[i.numpy()], a)


def test_unique_nan_non_contiguous_and_dim():
    a = np.array([2.0, np.nan, 1.0, np.nan, 2.0], np.float32)
    values = kiln.unique(k(a)).numpy()
    # Every NaN is its own value in PyTorch (numpy >= 1.21 merges them).
    np.testing.assert_array_equal(values[:2], [1.0, 2.0])
    assert values.shape == (4,) and np.isnan(values[2:]).all()
    m = sample((6, 3), np.int64) % 2
    np.testing.assert_array_equal(k(m).t().unique().numpy(), np.unique(m.T))
    values, inverse, counts = kiln.unique(k(m), dim=0, return_inverse=True, return_counts=True)
    want, want_inverse, want_counts = np.unique(m, axis=0, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(values.numpy(), want)
    np.testing.assert_array_equal(inverse.numpy(), want_inverse.reshape(-1))
    np.testing.assert_array_equal(counts.numpy(), want_counts)
    np.testing.assert_array_equal(kiln.unique(k(m.T), dim=1).numpy(), np.unique(m.T, axis=1))
    with pytest.raises(RuntimeError, match="There are 0 sized dimensions, and they aren't selected"):
        kiln.unique(kiln.zeros(3, 0), dim=0)
    with pytest.raises(RuntimeError, match="\"unique\" not implemented for 'ComplexFloat'"):
        kiln.unique(kiln.zeros(2, dtype=kiln.complex64))


def test_unique_consecutive():
    a = np.array([1, 1, 2, 2, 3, 1, 1, 2], np.int64)
    values, inverse, counts = kiln.unique_consecutive(k(a), return_inverse=True, return_counts=True)
    assert values.tolist() == [1, 2, 3, 1, 2]
    assert inverse.tolist() == [0, 0, 1, 1, 2, 3, 3, 4]
    assert counts.tolist() == [2, 2, 1, 2, 1]
    assert k(a).unique_consecutive().tolist() == [1, 2, 3, 1, 2]


# ---------------------------------------------------------------- isclose, allclose, equal


@pytest.mark.parametrize("equal_nan", [False, True])
@pytest.mark.parametrize("rtol,atol", [(1e-5, 1e-8), (0.0, 0.0), (1e-3, 0.0), (0.0, 1e-2)])
def test_isclose_matches_numpy(rtol, atol, equal_nan):
    a = np.array([1.0, 1.0, np.inf, np.inf, -np.inf, np.nan, np.nan, 0.0, 1e-9, 100.0, 1.0 + 1e-4], np.float64)
    b = np.array([1.0, 1.0 + 1e-6, np.inf, -np.inf, 1.0, np.nan, 1.0, 1e-8, 0.0, 100.05, 1.0], np.float64)
    want = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    np.testing.assert_array_equal(kiln.isclose(k(a), k(b), rtol=rtol, atol=atol, equal_nan=equal_nan).numpy(), want)
    np.testing.assert_array_equal(k(a).isclose(k(b), rtol, atol, equal_nan).numpy(), want)
    assert kiln.allclose(k(a), k(b), rtol, atol, equal_nan) is bool(want.all())
    assert kiln.allclose(k(a[:2]), k(b[:2])) is True


def test_isclose_dtypes_broadcast_and_errors():
    a, b = np.arange(6, dtype=np.int32).reshape(2, 3), np.array([0, 1, 3], np.int32)
    np.testing.assert_array_equal(kiln.isclose(k(a), k(b)).numpy(), np.isclose(a, b))
    np.testing.assert_array_equal(kiln.isclose(k(a).t(), k(a).t().contiguous()).numpy(), np.ones((3, 2), bool))
    u = k(np.array([3], np.uint8))
    assert not kiln.isclose(u, k(np.array([5], np.uint8)), atol=1.0).item()  # no uint8 wrap
    z = kiln.tensor([1 + 1j, complex("nan+1j")])
    assert kiln.isclose(z, z, equal_nan=True).tolist() == [True, True]
    assert kiln.isclose(z, z).tolist() == [True, False]
    with pytest.raises(RuntimeError, match="Float did not match Double"):
        kiln.isclose(kiln.ones(2), kiln.ones(2, dtype=kiln.float64))
    with pytest.raises(RuntimeError, match="Long did not match Float"):
        kiln.allclose(kiln.tensor([1]), kiln.tensor([1.0]))
    with pytest.raises(RuntimeError, match="rtol must be greater than or equal to zero, but got -1"):
        kiln.isclose(kiln.ones(2), kiln.ones(2), rtol=-1)


def test_equal():
    a = kiln.arange(6.0).view(2, 3)
    assert kiln.equal(a, a.clone()) is True and a.equal(a.t().t())
    assert kiln.equal(a, a.long())  # promoted
    assert not kiln.equal(a, a.view(3, 2)) and not kiln.equal(a, kiln.ones(1, 3))
    nan = kiln.tensor([float("nan")])
    assert not kiln.equal(nan, nan)
    assert kiln.equal(kiln.zeros(0), kiln.zeros(0, dtype=kiln.int8))


# ---------------------------------------------------------------- any and all


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_any_all_match_numpy(dtype):
    a = sample((3, 4), dtype)
    a[0] = 0
    for name in ("any", "all"):
        ref = getattr(np, name)
        assert getattr(k(a), name)().item() == ref(a)
        np.testing.assert_array_equal(getattr(kiln, name)(k(a), dim=1).numpy(), ref(a, axis=1))
        np.testing.assert_array_equal(getattr(k(a), name)(0, keepdim=True).numpy(), ref(a, axis=0, keepdims=True))
        np.testing.assert_array_equal(getattr(k(a).t(), name)(dim=0).numpy(), ref(a.T, axis=0))
    assert kiln.zeros(0).any().item() is False and kiln.zeros(0).all().item() is True
    assert kiln.ones(2, dtype=kiln.uint8).all().dtype == kiln.uint8


# ---------------------------------------------------------------- mT, mH, H, conj


def test_matrix_transposes():
    a = sample((2, 3, 4), np.complex64)
    np.testing.assert_array_equal(k(a).mT.numpy(), np.swapaxes(a, -1, -2))
    np.testing.assert_array_equal(k(a).mH.numpy(), np.conj(np.swapaxes(a, -1, -2)))
    np.testing.assert_array_equal(k(a[0]).H.numpy(), a[0].conj().T)
    np.testing.assert_array_equal(k(a).adjoint().numpy(), np.conj(np.swapaxes(a, -1, -2)))
    np.testing.assert_array_equal(k(a).conj().numpy(), np.conj(a))
    r = sample((3, 2), np.float32)
    np.testing.assert_array_equal(k(r).mH.numpy(), r.T)
    assert kiln.tensor(2.0).mT.item() == 2.0
    with pytest.raises(RuntimeError, match="tensor.mT is only supported on matrices or batches of matrices. Got 1-D"):
        kiln.ones(3).mT
    with pytest.raises(RuntimeError, match="tensor.H is only supported on matrices"):
        kiln.ones(2, 2, 2).H


# ---------------------------------------------------------------- factories


@pytest.mark.parametrize("make", [
    lambda: kiln.zeros(2, 3, requires_grad=True), lambda: kiln.ones((2,), requires_grad=True),
    lambda: kiln.empty(2, requires_grad=True), lambda: kiln.full((2,), 3.0, requires_grad=True),
    lambda: kiln.rand(2, requires_grad=True), lambda: kiln.randn(2, 2, requires_grad=True),
    lambda: kiln.arange(0.0, 3.0, requires_grad=True), lambda: kiln.linspace(0, 1, 4, requires_grad=True),
    lambda: kiln.eye(3, requires_grad=True), lambda: kiln.zeros_like(kiln.ones(2), requires_grad=True),
    lambda: kiln.ones_like(kiln.ones(2), requires_grad=True), lambda: kiln.randn_like(kiln.ones(2), requires_grad=True),
    lambda: kiln.full_like(kiln.ones(2), 2.0, requires_grad=True), lambda: kiln.tensor([1.0], device="cpu", requires_grad=True),
])
def test_factories_take_requires_grad_and_device(make):
    t = make()
    assert t.requires_grad and t.is_leaf and str(t.device) == "cpu"
    (t * 2).sum().backward()
    assert np.all(t.grad.numpy() == 2)


def test_factory_keywords_refuse_what_pytorch_refuses():
    with pytest.raises(RuntimeError, match="floating point"):
        kiln.zeros(2, dtype=kiln.int64, requires_grad=True)
    assert kiln.zeros(2, device="cpu").device == "cpu" and kiln.zeros(2, device=kiln.device("cpu")).shape == (2,)
    kiln.manual_seed(1)
    r = kiln.rand_like(kiln.ones(2, 3, dtype=kiln.float64))
    assert r.shape == (2, 3) and r.dtype == kiln.float64
    i = kiln.randint_like(kiln.ones(4), 10)
    assert i.dtype == kiln.float32 and ((i >= 0) & (i < 10)).all().item()


def test_new_methods_take_self_dtype_and_device():
    x = kiln.ones(2, dtype=kiln.float64)
    for t in (x.new_zeros(3), x.new_zeros((2, 2)), x.new_ones(2, 2), x.new_empty(4), x.new_full((2,), 5),
              x.new_tensor([1, 2])):
        assert t.dtype == kiln.float64
    assert x.new_zeros(2, 3).shape == (2, 3) and x.new_zeros(3).sum().item() == 0
    assert x.new_ones(2).tolist() == [1.0, 1.0] and x.new_full((2,), 5).tolist() == [5.0, 5.0]
    assert x.new_tensor([1, 2]).tolist() == [1.0, 2.0]
    assert x.new_zeros(2, dtype=kiln.int32).dtype == kiln.int32
    assert x.new_ones(2, requires_grad=True).requires_grad
    assert x.new_empty(()).shape == ()
