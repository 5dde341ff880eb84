"""Views whose one-element (or empty) dims carry strides near 2**62: PyTorch accepts any
stride on a dim that is never stepped. Converting such a view to numpy must not scale
that stride to bytes (it would overflow int64) and must give the view's values."""

import numpy as np
import pytest

import kiln


@pytest.mark.parametrize("huge", [2**61, 2**62, 2**63 - 1, -(2**63), -(2**62)])
def test_numpy_of_a_one_element_dim_with_a_huge_stride(huge):
    v = kiln.arange(6, dtype=kiln.float32).as_strided((3, 1, 2), (2, huge, 1))
    a = v.numpy()
    assert a.shape == (3, 1, 2)
    np.testing.assert_array_equal(a, np.arange(6, dtype=np.float32).reshape(3, 1, 2))


@pytest.mark.parametrize("huge", [2**62, 2**63 - 1])
def test_numpy_of_an_empty_view_with_a_huge_stride(huge):
    v = kiln.zeros(4, dtype=kiln.float32).as_strided((0, 3), (huge, 1))
    assert v.numpy().shape == (0, 3)
