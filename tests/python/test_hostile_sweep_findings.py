"""What `scripts/hostile-sweep` found after the first round of fixes: Python complex
numbers as scalars, ints past int64 handed to int arguments, rand in narrow dtypes,
log_softmax of huge values, chunk of an empty dim, and messages that named the wrong op
or leaked an internal step. Each case pins PyTorch's behaviour or a typed error."""

import math

import numpy as np
import pytest

import kiln


# ---- Python complex numbers as scalars: complex results, as in PyTorch ----

def test_complex_scalar_times_real_tensor_is_complex():
    x = kiln.tensor([1.0, -2.0])
    y = x * 1j
    assert y.dtype == kiln.complex64
    assert y.tolist() == [1j, -2j]
    assert (1j * x).tolist() == [1j, -2j]
    z = kiln.tensor([1.0, 2.0], dtype=kiln.float64) + (1 + 2j)
    assert z.dtype == kiln.complex128
    assert z.tolist() == [2 + 2j, 3 + 2j]
    # An integer tensor with a complex number: complex64 (the default complex dtype).
    w = kiln.tensor([1, 2]) - 1j
    assert w.dtype == kiln.complex64
    assert w.tolist() == [1 - 1j, 2 - 1j]


def test_complex_fill_values():
    t = kiln.full((2,), 1j)
    assert t.dtype == kiln.complex64
    assert t.tolist() == [1j, 1j]
    s = kiln.scalar_tensor(2 - 3j)
    assert s.dtype == kiln.complex64
    assert s.item() == 2 - 3j
    assert isinstance(s.item(), complex)
    c = kiln.zeros(2, dtype=kiln.complex128)
    c.fill_(0.5 + 1j)
    assert c.tolist() == [0.5 + 1j, 0.5 + 1j]
    assert kiln.where(kiln.tensor([True, False]), kiln.zeros(2), 1j).tolist() == [0j, 1j]


def test_complex_scalar_where_pytorch_refuses_it():
    x = kiln.tensor([1.0, 2.0])
    # Ordering is not defined on complex numbers (PyTorch: "not implemented for 'ComplexFloat'").
    with pytest.raises(RuntimeError, match=r"^lt"):
        kiln.lt(x, 1j)
    # A complex value cannot be stored in a real tensor.
    with pytest.raises(RuntimeError, match=r"^full: value cannot be converted to type float32"):
        kiln.full((2,), 1j, dtype=kiln.float32)
    with pytest.raises(RuntimeError):
        x.add_(1j)
    # Equality is defined.
    assert kiln.eq(kiln.tensor([1j, 2j]), 1j).tolist() == [True, False]


# ---- ints past int64 handed to int arguments: PyTorch's RuntimeError ----

OVERFLOW = r"Overflow when unpacking long: the int argument {} is out of range for int64"


@pytest.mark.parametrize("call", [
    lambda t: t.narrow(0, 2**64, 1),
    lambda t: t.narrow(0, 0, 2**63),
    lambda t: kiln.cumsum(t, 2**63),
    lambda t: t.select(0, -2**63 - 1),
    lambda t: t.transpose(0, 2**70),
    lambda t: kiln.softmax(t, 2**64),
    lambda t: t.squeeze(2**63),
    lambda t: kiln.topk(t, 2**63),
])
def test_int_arguments_past_int64(call):
    t = kiln.zeros(4)
    with pytest.raises(RuntimeError, match=r"^Overflow when unpacking long: the int argument -?\d+ is out of range"):
        call(t)


def test_int_argument_message_names_value_and_range():
    with pytest.raises(RuntimeError, match="^" + OVERFLOW.format(2**64) + r" \(expected -2\*\*63 to 2\*\*63 - 1\)$"):
        kiln.zeros(4).narrow(0, 2**64, 1)
    with pytest.raises(RuntimeError, match=r"the int argument 18446744073709551616 is out of range for uint64"):
        kiln.manual_seed(2**64)
    # Wrong types are still pybind11's TypeError (not an int at all).
    with pytest.raises(TypeError):
        kiln.zeros(4).narrow(0, "1", 1)
    with pytest.raises(TypeError):
        kiln.zeros(4).narrow(0, 1.5, 1)


# ---- rand in narrow dtypes stays in [0, 1) ----

@pytest.mark.parametrize("dtype, digits", [
    (kiln.bfloat16, 8), (kiln.float16, 11), (kiln.float8_e4m3fn, 4), (kiln.float8_e5m2, 3)])
def test_rand_in_narrow_dtypes_stays_below_one(dtype, digits):
    kiln.manual_seed(1)
    x = kiln.rand(200_000, dtype=dtype)
    assert x.dtype == dtype
    v = np.asarray(x.to(kiln.float64).tolist())
    assert v.min() >= 0.0
    assert v.max() < 1.0
    # Multiples of 2^-digits, as PyTorch draws them: every one is exact in the dtype, and
    # with 200,000 draws the largest, 1 - 2^-digits, shows up.
    scaled = v * 2.0**digits
    assert np.array_equal(scaled, np.floor(scaled))
    assert v.max() == 1.0 - 2.0**-digits
    assert abs(v.mean() - (1.0 - 2.0**-digits) / 2) < 0.01  # the mean of k / 2^digits


# ---- log_softmax of huge values: (x - max) - log(sum), as PyTorch ----

@pytest.mark.parametrize("dtype", [kiln.float32, kiln.bfloat16, kiln.float16])
def test_log_softmax_of_values_near_the_top_of_the_range(dtype):
    big = {kiln.float32: 3.0e38, kiln.bfloat16: 3.0e38, kiln.float16: 60000.0}[dtype]
    x = kiln.full((2, 4), big, dtype=dtype)
    for dim in (0, 1):
        n = x.shape[dim]
        got = np.asarray(kiln.log_softmax(x, dim).to(kiln.float64).tolist())
        want = -math.log(n)
        tol = {kiln.float32: 1e-6, kiln.bfloat16: 8e-3, kiln.float16: 1e-3}[dtype]
        assert np.allclose(got, want, rtol=0, atol=tol * abs(want)), (dim, got)
    # One large value among small ones: the large one gets ~0, the others x - max.
    y = kiln.tensor([1.0e38, 0.0, 1.0e38], dtype=kiln.float32)
    got = kiln.log_softmax(y, 0).tolist()
    assert got[0] == pytest.approx(-math.log(2), rel=1e-6)
    assert got[2] == pytest.approx(-math.log(2), rel=1e-6)
    assert got[1] == pytest.approx(-1.0e38, rel=1e-6)


# ---- chunk of an empty dim: `chunks` empty pieces, as PyTorch ----

def test_chunk_of_an_empty_dim_gives_every_chunk():
    pieces = kiln.chunk(kiln.zeros(0, 3), 3, 0)
    assert [tuple(p.shape) for p in pieces] == [(0, 3)] * 3
    assert [tuple(p.shape) for p in kiln.zeros(2, 0).chunk(4, 1)] == [(2, 0)] * 4
    # A non-empty dim keeps split's rule: fewer chunks when they do not divide evenly.
    assert [p.shape[0] for p in kiln.zeros(5).chunk(4)] == [2, 2, 1]


# ---- sizes at the edges: the op's own message, never an internal step ----

def test_slice_with_a_huge_step():
    t = kiln.arange(10)
    assert t[::2**62].tolist() == [0]
    assert t[3::2**63 - 1].tolist() == [3]
    assert t[::2**70].tolist() == [0]  # Python slice bounds clamp


def test_eye_too_large_names_eye():
    with pytest.raises(RuntimeError, match=r"^eye: ") as info:
        kiln.eye(2**31)
    assert "setStorage" not in str(info.value) and "as_strided" not in str(info.value)
    with pytest.raises(RuntimeError, match=r"^eye: "):
        kiln.eye(3, 2**62)


def test_outputs_too_large_name_the_op():
    huge = kiln.ones(1).expand(2**40, 2**20)  # 2**60 elements, 2**62 bytes
    for name, call in [("add", lambda: huge + 1), ("mul", lambda: huge * huge), ("exp", lambda: kiln.exp(huge)),
                       ("where", lambda: kiln.where(kiln.ones(1, dtype=kiln.bool).expand(2**40, 2**20), huge, 0.0)), ("cumsum", lambda: kiln.cumsum(huge, 1)),
                       ("cat", lambda: kiln.cat([huge, huge])), ("sort", lambda: kiln.sort(huge)),
                       ("clamp", lambda: kiln.clamp(huge, 0, 1))]:
        with pytest.raises(RuntimeError, match=f"^{name}: ") as info:
            call()
        assert not str(info.value).startswith("empty:"), name


def test_index_select_refuses_the_output_before_reading_the_index():
    # 2**50 rows of 16 bytes: past the 2**48-byte limit of one allocation, so refused
    # whatever the system's overcommit policy (the index's own 2**53 bytes never read).
    index = kiln.zeros(1, dtype=kiln.int64).expand(2**50)
    with pytest.raises(RuntimeError, match=r"^index_select: not enough memory: you tried to allocate"):
        kiln.index_select(kiln.zeros(3, 4), 0, index)
    with pytest.raises(RuntimeError, match=r"^embedding: not enough memory: you tried to allocate"):
        kiln.nn.functional.embedding(index, kiln.zeros(3, 4))


def test_from_numpy_with_strides_that_wrap_int64():
    base = np.zeros(4, dtype=np.float32)
    # numpy's as_strided checks the element count, not where the strides reach.
    wrapped = np.lib.stride_tricks.as_strided(base, shape=(3,), strides=(2**62,))
    with pytest.raises((ValueError, RuntimeError), match=r"^from_numpy: "):
        kiln.from_numpy(wrapped)
    # Each span fits, their distance does not.
    both = np.lib.stride_tricks.as_strided(base, shape=(2, 2), strides=(2**62, -2**62))
    with pytest.raises((ValueError, RuntimeError), match=r"^from_numpy: "):
        kiln.from_numpy(both)
    # int8: the two spans are each 2**62 elements, their distance 2**63.
    both8 = np.lib.stride_tricks.as_strided(np.zeros(4, dtype=np.int8), shape=(2, 2), strides=(2**62, -2**62))
    with pytest.raises((ValueError, RuntimeError), match=r"^from_numpy: "):
        kiln.from_numpy(both8)


# ---- in-place methods PyTorch has: sub_ and div_ ----

def test_sub_and_div_in_place():
    t = kiln.tensor([4.0, 6.0])
    assert t.sub_(1).tolist() == [3.0, 5.0]
    assert t.sub_(kiln.tensor([1.0, 1.0]), alpha=2).tolist() == [1.0, 3.0]
    assert t.div_(2).tolist() == [0.5, 1.5]
    assert t.div_(kiln.tensor([0.5, 0.5]), rounding_mode="floor").tolist() == [1.0, 3.0]
    assert t.tolist() == [1.0, 3.0]
    i = kiln.tensor([3, 4])
    with pytest.raises(RuntimeError, match=r"result type Float can't be cast to the desired output type Long"):
        i.div_(2)
    expanded = kiln.zeros(1, 3).expand(4, 3)
    with pytest.raises(RuntimeError, match=r"more than one element of the written-to tensor refers to a single memory"):
        expanded.sub_(expanded)


# ---- clamp with one tensor bound and one number ----

def test_clamp_with_a_tensor_and_a_number_bound():
    x = kiln.tensor([-2.0, 0.5, 3.0])
    assert kiln.clamp(x, kiln.tensor(0.0), 1.0).tolist() == [0.0, 0.5, 1.0]
    assert kiln.clamp(x, -1.0, kiln.tensor([2.0, 0.0, 2.0])).tolist() == [-1.0, 0.0, 2.0]
    assert kiln.clamp(x, kiln.tensor(0.0), None).tolist() == [0.0, 0.5, 3.0]
    with pytest.raises(TypeError, match=r"expected a number"):
        kiln.clamp(x, kiln.tensor(0.0), "1")
