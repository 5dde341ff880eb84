"""DLPack interchange: zero-copy both ways with numpy (>= 1.22), writes visible on the other
side, the capsule keeping kiln's memory alive, dtype codes, and the refusals. PyTorch
(Debian's python3-torch) is used when installed, for bfloat16 and bool."""

import gc

import numpy as np
import pytest

import kiln

NUMPY_DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.uint16, np.uint32, np.uint64,
                np.float16, np.float32, np.float64, np.complex64, np.complex128]


def _numpy_takes(dtype):
    """Whether this numpy imports the dtype through DLPack (bool needs DLPack 0.8's code)."""
    try:
        np.from_dlpack(kiln.zeros(1, dtype=kiln.tensor(np.zeros(1, dtype)).dtype))
        return True
    except (BufferError, TypeError, RuntimeError):
        return False


@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_to_kiln_is_zero_copy(dtype):
    arr = (np.arange(12) % 3).astype(dtype).reshape(3, 4)
    try:
        arr.__dlpack__()
    except BufferError:
        pytest.skip(f"numpy {np.__version__} does not export {arr.dtype} through DLPack")
    t = kiln.from_dlpack(arr)
    assert t.shape == (3, 4)
    assert t.data_ptr() == arr.ctypes.data
    np.testing.assert_array_equal(t.numpy(), arr)
    t[0, 0] = 1
    assert arr[0, 0] == 1  # kiln's write is numpy's


@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_kiln_to_numpy_is_zero_copy(dtype):
    if not _numpy_takes(dtype):
        pytest.skip(f"numpy {np.__version__} does not import {np.dtype(dtype).name} through DLPack")
    t = kiln.tensor((np.arange(12) % 3).astype(dtype).reshape(3, 4))
    arr = np.from_dlpack(t)
    assert arr.ctypes.data == t.data_ptr()
    np.testing.assert_array_equal(arr, t.numpy())
    if arr.flags.writeable:
        arr[1, 2] = 1
        assert t[1, 2].item() == 1  # numpy's write is kiln's


def test_strided_views_keep_their_strides():
    base = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    view = base[::2, :, 1::2].transpose(2, 0, 1)
    t = kiln.from_dlpack(view)
    assert t.stride() == tuple(s // 4 for s in view.strides)
    np.testing.assert_array_equal(t.numpy(), view)
    back = np.from_dlpack(kiln.from_numpy(base).permute(2, 0, 1)[1:, :, ::2])
    np.testing.assert_array_equal(back, base.transpose(2, 0, 1)[1:, :, ::2])
    assert np.shares_memory(back, base)
    neg = base[::-1]  # numpy exports negative strides
    np.testing.assert_array_equal(kiln.from_dlpack(neg).numpy(), neg)


def test_zero_size_and_scalars():
    for shape in [(0,), (2, 0, 3), ()]:
        arr = np.ones(shape, np.float32)
        assert kiln.from_dlpack(arr).shape == shape
        assert np.from_dlpack(kiln.tensor(arr)).shape == shape


def test_capsule_keeps_kiln_memory_alive():
    t = kiln.arange(1000, dtype=kiln.float64)
    capsule = t.__dlpack__()
    del t
    gc.collect()
    back = kiln.from_dlpack(capsule)  # the legacy protocol: a capsule
    del capsule
    gc.collect()
    assert back.numpy().sum() == sum(range(1000))
    arr = np.from_dlpack(kiln.arange(5))
    gc.collect()
    assert arr.tolist() == [0, 1, 2, 3, 4]


def test_numpy_memory_outlives_the_array():
    arr = np.arange(6, dtype=np.int32)
    t = kiln.from_dlpack(arr)
    del arr
    gc.collect()
    assert t.numpy().tolist() == [0, 1, 2, 3, 4, 5]


def test_unused_capsule_is_freed_and_used_capsule_refused():
    gc.collect()
    before = kiln.memory_stats()["allocated_bytes"]
    capsule = kiln.zeros(1 << 16).__dlpack__()
    assert kiln.memory_stats()["allocated_bytes"] > before
    del capsule  # never consumed: its destructor releases the tensor
    gc.collect()
    assert kiln.memory_stats()["allocated_bytes"] == before
    capsule = kiln.zeros(3).__dlpack__()
    kiln.from_dlpack(capsule)
    with pytest.raises(ValueError, match="capsule can be imported once"):
        kiln.from_dlpack(capsule)


def test_device_and_protocol_errors():
    t = kiln.zeros(2)
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(ValueError, match="stream must be None"):
        t.__dlpack__(stream=1)
    with pytest.raises(TypeError, match="expected an object with __dlpack__"):
        kiln.from_dlpack([1, 2])

    class OnGpu:
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, stream=None):
            raise AssertionError("not asked for once the device is refused")

    with pytest.raises(BufferError, match="host memory only"):
        kiln.from_dlpack(OnGpu())
    ro = np.arange(3.0)
    ro.setflags(write=False)
    with pytest.raises(BufferError, match="read-only"):
        kiln.from_numpy(ro).__dlpack__()
    assert np.from_dlpack(kiln.from_numpy(ro).clone()).tolist() == [0.0, 1.0, 2.0]
    copied = np.from_dlpack(type("Copy", (), {"__dlpack__": lambda s, **k: t.__dlpack__(copy=True),
                                               "__dlpack_device__": lambda s: (1, 0)})())
    assert copied.ctypes.data != t.data_ptr()


def test_narrow_floats_travel_by_dtype_code():
    for dtype in [kiln.bfloat16, kiln.float8_e4m3fn, kiln.float8_e5m2]:
        t = kiln.tensor([1.5, -2.0, 0.25]).to(dtype)
        back = kiln.from_dlpack(t.__dlpack__())
        assert back.dtype == dtype
        assert back.data_ptr() == t.data_ptr()
        assert back.to(kiln.float32).numpy().tolist() == [1.5, -2.0, 0.25]
    with pytest.raises((BufferError, TypeError, RuntimeError)):
        np.from_dlpack(kiln.zeros(2, dtype=kiln.bfloat16))  # numpy has no bfloat16


def test_array_protocol():
    t = kiln.arange(6).view(2, 3)
    arr = np.asarray(t)
    assert arr.ctypes.data == t.data_ptr()
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    with pytest.raises(TypeError, match="bfloat16"):
        np.asarray(kiln.zeros(2, dtype=kiln.bfloat16))


def test_exchange_with_torch_when_installed():
    torch = pytest.importorskip("torch")
    x = torch.arange(12, dtype=torch.float32).view(3, 4)[:, 1:]
    k = kiln.from_dlpack(x)
    assert k.data_ptr() == x.data_ptr() and k.stride() == x.stride()
    k[0, 0] = 100.0
    assert x[0, 0].item() == 100.0
    b = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
    kb = kiln.from_dlpack(b)
    assert kb.dtype == kiln.bfloat16 and kb.to(kiln.float32).numpy().tolist() == [1.5, -2.0]
    back = torch.from_dlpack(kiln.arange(6).view(2, 3).permute(1, 0))
    assert back.tolist() == [[0, 3], [1, 4], [2, 5]]
    tb = torch.from_dlpack(kiln.tensor([0.5, 3.0]).to(kiln.bfloat16))
    assert tb.dtype == torch.bfloat16 and tb.float().tolist() == [0.5, 3.0]
