"""A fill value the dtype cannot hold raises PyTorch's RuntimeError ("value cannot be
converted to type uint8 without overflow") in kiln.full, Tensor.fill_, kiln.full_like,
kiln.scalar_tensor and masked_fill, instead of wrapping. Expected values are PyTorch
1.13's (c10::checked_convert)."""
import math

import pytest

import kiln

INF = float("inf")
NAN = float("nan")

# dtype, lowest, highest integer it takes (unsigned ones also take negatives down to -max,
# which wrap).
INTEGER_RANGES = [
    (kiln.int8, -128, 127),
    (kiln.int16, -(2**15), 2**15 - 1),
    (kiln.int32, -(2**31), 2**31 - 1),
    (kiln.int64, -(2**63), 2**63 - 1),
    (kiln.uint8, -255, 255),
    (kiln.uint16, -(2**16 - 1), 2**16 - 1),
    (kiln.uint32, -(2**32 - 1), 2**32 - 1),
]


def writers(value, dtype):
    """Every way of writing one number into a tensor, each giving the element back."""
    return {
        "full": lambda: kiln.full((2,), value, dtype=dtype).tolist()[1],
        "fill_": lambda: kiln.zeros(2, dtype=dtype).fill_(value).tolist()[1],
        "full_like": lambda: kiln.full_like(kiln.zeros(2, dtype=dtype), value).tolist()[1],
        "masked_fill": lambda: kiln.zeros(2, dtype=dtype).masked_fill(kiln.tensor([True, True]), value).tolist()[1],
    }


def assert_fits(value, dtype, want):
    for name, write in writers(value, dtype).items():
        got = write()
        if isinstance(want, float) and math.isnan(want):
            assert math.isnan(got), name
        else:
            assert got == want, (name, value, dtype, got)


def assert_overflows(value, dtype):
    name = str(dtype).replace("kiln.", "")
    for op, write in writers(value, dtype).items():
        with pytest.raises(RuntimeError, match=rf"value cannot be converted to type {name} without overflow"):
            write()


@pytest.mark.parametrize("dtype,lo,hi", INTEGER_RANGES, ids=lambda v: str(v))
def test_integer_edges(dtype, lo, hi):
    assert_fits(hi, dtype, hi)
    unsigned = dtype in (kiln.uint8, kiln.uint16, kiln.uint32)
    assert_fits(lo, dtype, 1 if unsigned else lo)  # -max wraps to 1
    if dtype != kiln.int64:  # past int64 is Python's own "Overflow when unpacking long"
        assert_overflows(hi + 1, dtype)
        assert_overflows(lo - 1, dtype)
    for v in (NAN, INF, -INF, hi + 0.5 if dtype != kiln.int64 else 2.0**63):
        assert_overflows(v, dtype)
    assert_fits(1.5, dtype, 1)


def test_issue_examples():
    with pytest.raises(RuntimeError, match=r"^full: value cannot be converted to type uint8 without overflow \(got 300; "
                       r"uint8 takes integers from -255 \(negatives wrap\) to 255\)"):
        kiln.full((2,), 300, dtype=kiln.uint8)
    with pytest.raises(RuntimeError, match=r"^full: value cannot be converted to type int32 without overflow"):
        kiln.full((2,), 2**40, dtype=kiln.int32)
    with pytest.raises(RuntimeError, match=r"^fill_: value cannot be converted to type int8"):
        kiln.zeros(3, dtype=kiln.int8).fill_(128)
    # A refused fill_ writes nothing.
    t = kiln.full((3,), 7, dtype=kiln.uint8)
    with pytest.raises(RuntimeError):
        t.fill_(256)
    assert t.tolist() == [7, 7, 7]
    # Negative integers wrap into unsigned dtypes, as in PyTorch; negative floats do not.
    assert kiln.full((1,), -1, dtype=kiln.uint8).tolist() == [255]
    assert_overflows(-0.5, kiln.uint8)


def test_uint64_edges():
    assert_fits(2**64 - 1, kiln.uint64, 2**64 - 1)
    assert_fits(-1, kiln.uint64, 2**64 - 1)
    assert_overflows(2.0**64, kiln.uint64)


def test_bool_takes_every_number():
    for v in (2, -1, NAN, 1e300, 0.5):
        assert_fits(v, kiln.bool, True)
    assert_fits(0, kiln.bool, False)


@pytest.mark.parametrize("dtype,biggest,beyond,has_inf", [
    (kiln.float16, 65504.0, 65505.0, True),
    (kiln.bfloat16, 3.3895313892515355e38, 3.39e38, True),
    (kiln.float32, 3.4028234663852886e38, 1e39, True),
    (kiln.float8_e5m2, 57344.0, 57345.0, True),
    (kiln.float8_e4m3fn, 448.0, 449.0, False),
], ids=lambda v: str(v))
def test_float_edges(dtype, biggest, beyond, has_inf):
    assert_fits(biggest, dtype, biggest)
    assert_fits(-biggest, dtype, -biggest)
    assert_overflows(beyond, dtype)
    assert_overflows(-beyond, dtype)
    assert_fits(NAN, dtype, NAN)
    if has_inf:
        assert_fits(INF, dtype, INF)
        assert_fits(-INF, dtype, -INF)
    else:
        assert_overflows(INF, dtype)


def test_float64_and_defaults():
    assert_fits(1.7976931348623157e308, kiln.float64, 1.7976931348623157e308)
    assert_fits(INF, kiln.float64, INF)
    assert_overflows(70000, kiln.float16)
    # The default dtype of a float fill is float32, and it is checked too.
    with pytest.raises(RuntimeError, match=r"^full: value cannot be converted to type float32 without overflow"):
        kiln.full((2,), 1e39)
    with pytest.raises(RuntimeError, match=r"^scalar_tensor: value cannot be converted to type uint8"):
        kiln.scalar_tensor(300, dtype=kiln.uint8)
    # Arithmetic with a Python number is not a fill: float16 overflow gives inf there.
    assert (kiln.ones(1, dtype=kiln.float16) * 1e6).tolist() == [INF]


def test_complex_values():
    assert_overflows(1 + 2j, kiln.float32)
    assert_fits(3 + 0j, kiln.float32, 3.0)
    with pytest.raises(RuntimeError, match=r"value cannot be converted to type complex64 without overflow"):
        kiln.full((1,), complex(1, 1e39), dtype=kiln.complex64)
    assert kiln.full((1,), complex(1e39, 2), dtype=kiln.complex128).tolist() == [complex(1e39, 2)]
