"""Tensor geometry, numpy interop and errors, with numpy as the reference."""

import numpy as np
import pytest

import kiln

NUMPY_DTYPES = [np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16,
                np.int32, np.int64, np.float16, np.float32, np.float64, np.complex64, np.complex128]


@pytest.mark.parametrize("np_dtype", NUMPY_DTYPES)
def test_numpy_round_trip_is_zero_copy(np_dtype):
    arr = (np.arange(24) % 7).astype(np_dtype).reshape(2, 3, 4)
    t = kiln.from_numpy(arr)
    assert t.shape == (2, 3, 4)
    assert t.dtype.itemsize == arr.itemsize
    back = t.numpy()
    np.testing.assert_array_equal(back, arr)
    arr[1, 2, 3] = 1
    assert back[1, 2, 3] == 1  # both views share the same memory
    assert t.data_ptr() == arr.ctypes.data


def test_from_numpy_keeps_the_array_alive():
    t = kiln.from_numpy(np.arange(5.0) * 2)
    import gc
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), [0, 2, 4, 6, 8])


def test_from_numpy_negative_and_sliced_strides():
    base = np.arange(30.0).reshape(5, 6)
    view = base[::-2, 1::3]
    t = kiln.from_numpy(view)
    np.testing.assert_array_equal(t.numpy(), view)
    np.testing.assert_array_equal(t.contiguous().numpy(), view)
    assert not t.is_contiguous()


def test_views_match_numpy():
    arr = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    t = kiln.from_numpy(arr)
    np.testing.assert_array_equal(t.permute(2, 0, 1).numpy(), arr.transpose(2, 0, 1))
    np.testing.assert_array_equal(t.transpose(0, 2).numpy(), arr.swapaxes(0, 2))
    np.testing.assert_array_equal(t.view(12, 5).numpy(), arr.reshape(12, 5))
    np.testing.assert_array_equal(t.reshape(-1).numpy(), arr.reshape(-1))
    np.testing.assert_array_equal(t.transpose(0, 1).reshape(20, 3).numpy(), arr.swapaxes(0, 1).reshape(20, 3))
    np.testing.assert_array_equal(t.unsqueeze(1).numpy(), arr[:, None])
    np.testing.assert_array_equal(t[:, :1].squeeze(1).numpy(), arr[:, 0])
    np.testing.assert_array_equal(t.flatten(1).numpy(), arr.reshape(3, 20))
    np.testing.assert_array_equal(t[:1].expand(4, 4, 5).numpy(), np.broadcast_to(arr[:1], (4, 4, 5)))
    np.testing.assert_array_equal(t.narrow(2, 1, 3).numpy(), arr[:, :, 1:4])
    np.testing.assert_array_equal(t.T.numpy(), arr.T)


@pytest.mark.parametrize("key", [
    1, -1, (1, 2), (slice(None), 2), (Ellipsis, 1), (None, 0), (slice(1, None, 2), slice(None, None, 3)),
    (0, Ellipsis, None), slice(-2, None), (2, 3, 4),
])
def test_basic_indexing_matches_numpy(key):
    arr = np.arange(60, dtype=np.int64).reshape(3, 4, 5)
    t = kiln.from_numpy(arr)
    got = t[key]
    want = arr[key]
    np.testing.assert_array_equal(np.asarray(got.numpy()), want)


def test_setitem_scalar_and_tensor():
    t = kiln.zeros(3, 4)
    t[1] = 5
    t[:, 2] = kiln.tensor([1.0, 2.0, 3.0])
    want = np.zeros((3, 4), np.float32)
    want[1] = 5
    want[:, 2] = [1, 2, 3]
    np.testing.assert_array_equal(t.numpy(), want)


def test_tensor_infers_dtypes_like_pytorch():
    assert kiln.tensor([1, 2]).dtype == kiln.int64
    assert kiln.tensor([1.0, 2]).dtype == kiln.float32
    assert kiln.tensor([True]).dtype == kiln.bool
    assert kiln.tensor([1j]).dtype == kiln.complex64
    assert kiln.tensor(np.zeros(2, np.float64)).dtype == kiln.float64
    assert kiln.tensor(3.5).shape == ()
    assert kiln.tensor([[1, 2]], dtype=kiln.bfloat16).dtype == kiln.bfloat16


def test_reduced_precision_conversions():
    values = np.array([0.0, -0.0, 1.0, 0.1, 448.0, 500.0, -1e9, 2.0 ** -9], dtype=np.float32)
    t = kiln.from_numpy(values)
    fp8 = t.to(kiln.float8_e4m3fn)
    back = fp8.to(kiln.float32).numpy()
    # 0.1 rounds to the nearest e4m3 value 0.1015625; beyond 448 saturates.
    np.testing.assert_array_equal(back, [0.0, -0.0, 1.0, 0.1015625, 448.0, 448.0, -448.0, 2.0 ** -9])
    bf = t.to(kiln.bfloat16).to(kiln.float32).numpy()
    np.testing.assert_array_equal(bf[:3], [0.0, -0.0, 1.0])
    assert bf[3] == np.float32(0.10009765625)
    with pytest.raises(TypeError, match="bfloat16"):
        t.to(kiln.bfloat16).numpy()
    assert t.to(kiln.bfloat16).tolist()[2] == 1.0


def test_item_and_python_conversions():
    assert kiln.tensor([[7]]).item() == 7
    assert isinstance(kiln.tensor(2.5).item(), float)
    assert float(kiln.tensor([1.5])) == 1.5
    assert int(kiln.tensor(3)) == 3
    assert bool(kiln.tensor([True]))
    with pytest.raises(ValueError):
        bool(kiln.zeros(2))
    with pytest.raises(RuntimeError, match="2 elements"):
        kiln.zeros(2).item()


def test_errors_map_to_pytorch_exceptions():
    t = kiln.zeros(2, 3)
    with pytest.raises(IndexError):
        t[2]
    with pytest.raises(IndexError):
        t[0, 0, 0]
    with pytest.raises(IndexError):
        t.transpose(0, 5)
    with pytest.raises(RuntimeError, match="invalid for input of size 6"):
        t.view(4, 2)
    with pytest.raises(TypeError):
        kiln.zeros(2, dtype="float32")
    with pytest.raises(TypeError):
        kiln.from_numpy(np.array(["a"]))
    with pytest.raises(TypeError):
        kiln.promote_types(kiln.float8_e4m3fn, kiln.float32)
    with pytest.raises(ValueError):
        t[::-1]


def test_creation_ops():
    np.testing.assert_array_equal(kiln.arange(5).numpy(), np.arange(5))
    np.testing.assert_allclose(kiln.arange(0, 1, 0.25).numpy(), [0, 0.25, 0.5, 0.75])
    np.testing.assert_allclose(kiln.linspace(-1, 1, 5).numpy(), np.linspace(-1, 1, 5), rtol=0, atol=1e-7)
    np.testing.assert_array_equal(kiln.eye(3, 2).numpy(), np.eye(3, 2, dtype=np.float32))
    np.testing.assert_array_equal(kiln.full((2, 2), 7).numpy(), np.full((2, 2), 7))
    assert kiln.full((2,), 7).dtype == kiln.int64
    assert kiln.ones(2, 3, dtype=kiln.float16).numpy().dtype == np.float16
    g1, g2 = kiln.Generator(5), kiln.Generator(5)
    np.testing.assert_array_equal(kiln.randn(100, generator=g1).numpy(), kiln.randn(100, generator=g2).numpy())
    # Without a generator: kiln's default one, seeded by manual_seed.
    kiln.manual_seed(3)
    a = kiln.randn(2, 3).numpy()
    kiln.manual_seed(3)
    np.testing.assert_array_equal(a, kiln.randn((2, 3), generator=None).numpy())
    assert kiln.rand(4).shape == (4,)
    r = kiln.randint(3, 9, (1000,)).numpy()
    assert r.min() >= 3 and r.max() < 9
    assert kiln.randint(4, (3,)).shape == (3,)


def test_memory_stats_track_allocations():
    kiln.reset_peak_memory_stats()
    before = kiln.memory_allocated()
    t = kiln.empty(1 << 20)
    assert kiln.memory_allocated() >= before + 4 * (1 << 20)
    assert kiln.max_memory_allocated() >= kiln.memory_allocated()
    del t
    assert kiln.memory_allocated() == before
    stats = kiln.memory_stats()
    assert stats["reserved_bytes"] >= stats["allocated_bytes"]


def test_threads_and_version():
    n = kiln.get_num_threads()
    assert n >= 1
    kiln.set_num_threads(1)
    assert kiln.get_num_threads() == 1
    kiln.set_num_threads(n)
    with pytest.raises(ValueError):
        kiln.set_num_threads(0)
    assert kiln.__version__
