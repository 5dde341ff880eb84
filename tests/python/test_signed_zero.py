"""The sign of zero results through Python (-0 == +0, so only the sign bit tells):
sin, tanh, expm1, log1p, sqrt of -0 are -0 as in PyTorch, for every float dtype and
lengths that put the zero in a full SIMD vector and in the tail."""

import numpy as np
import pytest

import kiln

ODD = ["sin", "tanh", "expm1", "log1p", "sqrt", "trunc", "floor", "ceil", "round", "silu"]


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16])
@pytest.mark.parametrize("n", [1, 7, 17, 33])
def test_odd_unary_ops_keep_negative_zero(dtype, n):
    values = np.zeros(n)
    values[::2] = -0.0
    x = kiln.from_numpy(values).to(dtype)
    for name in ODD:
        got = getattr(kiln, name)(x).to(kiln.float64).numpy()
        assert np.array_equal(np.signbit(got), np.signbit(values)), name
        assert not got.any(), name
