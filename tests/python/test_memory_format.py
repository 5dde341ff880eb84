"""Memory formats from Python: kiln.channels_last & co., Tensor.contiguous/is_contiguous/
clone/to with memory_format, the *_like ops (preserve_format by default, as in PyTorch),
the strides elementwise results get, and the errors. The expected strides are the ones
torch 1.13 gives (tests/reference/test_memory_format_torch.py checks against torch)."""

import numpy as np
import pytest

import kiln


def iota(*shape, dtype=np.float32):
    return kiln.from_numpy(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape))


def test_the_four_formats_exist_and_print_like_torch():
    assert repr(kiln.channels_last) == "kiln.channels_last"
    assert str(kiln.channels_last_3d) == "kiln.channels_last_3d"
    assert repr(kiln.contiguous_format) == "kiln.contiguous_format"
    assert repr(kiln.preserve_format) == "kiln.preserve_format"
    assert isinstance(kiln.channels_last, kiln.memory_format)
    assert kiln.channels_last != kiln.contiguous_format


def test_contiguous_and_is_contiguous():
    x = iota(2, 3, 4, 5)
    cl = x.contiguous(memory_format=kiln.channels_last)
    assert cl.stride() == (60, 1, 15, 3)
    assert cl.is_contiguous(memory_format=kiln.channels_last)
    assert not cl.is_contiguous()
    assert x.is_contiguous(memory_format=kiln.preserve_format)
    np.testing.assert_array_equal(cl.numpy(), x.numpy())
    cl3 = iota(2, 3, 2, 4, 5).contiguous(memory_format=kiln.channels_last_3d)
    assert cl3.stride() == (120, 1, 60, 15, 3)
    assert cl3.is_contiguous(memory_format=kiln.channels_last_3d)


def test_wrong_ranks_raise_torchs_errors():
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        iota(2, 3, 4).contiguous(memory_format=kiln.channels_last)
    with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d format"):
        iota(2, 3, 4, 5).to(memory_format=kiln.channels_last_3d)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        kiln.empty_like(iota(2, 3), memory_format=kiln.channels_last)
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported by the contiguous operator"):
        iota(3, 4).t().contiguous(memory_format=kiln.preserve_format)
    with pytest.raises(TypeError):
        iota(2, 3).contiguous(memory_format="channels_last")


def test_copies_preserve_by_default():
    cl = iota(2, 3, 4, 5).contiguous(memory_format=kiln.channels_last)
    assert cl.clone().stride() == (60, 1, 15, 3)
    assert cl.to(kiln.float64).stride() == (60, 1, 15, 3)
    assert cl.double().stride() == (60, 1, 15, 3)
    assert cl.clone(memory_format=kiln.contiguous_format).is_contiguous()
    assert cl.to(memory_format=kiln.contiguous_format).is_contiguous()
    assert kiln.empty_like(cl).stride() == (60, 1, 15, 3)
    assert kiln.zeros_like(cl).stride() == (60, 1, 15, 3)
    assert kiln.ones_like(cl, dtype=kiln.float64).stride() == (60, 1, 15, 3)
    assert kiln.full_like(cl, 2.0, memory_format=kiln.contiguous_format).is_contiguous()
    np.testing.assert_array_equal(kiln.ones_like(cl).numpy(), np.ones((2, 3, 4, 5), np.float32))
    t = iota(3, 4).t()
    assert t.clone().stride() == (1, 4)  # a transposed tensor is dense: its strides are kept
    assert iota(4, 6)[:, ::2].t().clone().stride() == (1, 3)  # not dense: its dim order is kept
    x = iota(2, 3, 4, 5)
    assert x.to(memory_format=kiln.channels_last).stride() == (60, 1, 15, 3)
    assert cl.to(memory_format=kiln.channels_last) is not None


def test_elementwise_results_keep_the_inputs_layout():
    x = iota(2, 3, 4, 5)
    cl = x.contiguous(memory_format=kiln.channels_last)
    bias = iota(3, 1, 1)
    assert (cl + bias).stride() == (60, 1, 15, 3)
    assert (cl * 2).stride() == (60, 1, 15, 3)
    assert kiln.sin(cl).stride() == (60, 1, 15, 3)
    assert (cl + x).stride() == (60, 1, 15, 3)
    assert (x + cl).stride() == (60, 20, 5, 1)
    assert (iota(3, 4).t() + 1).stride() == (1, 4)
    np.testing.assert_allclose((cl + bias).numpy(), x.numpy() + bias.numpy())
    np.testing.assert_allclose(kiln.sin(cl).numpy(), np.sin(x.numpy()), rtol=1e-6)


def test_recorded_copies_keep_the_format_and_the_gradient():
    x = iota(2, 3, 4, 5, dtype=np.float64).requires_grad_()
    y = x.contiguous(memory_format=kiln.channels_last) * 3
    assert y.is_contiguous(memory_format=kiln.channels_last)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3, 4, 5), 3.0))
