"""Hostile sizes from Python: element counts, byte counts, strides and offsets that
overflow 64 bits or exceed any memory raise PyTorch's exception with a message naming
the op; none crashes, wraps into a tiny allocation, or returns 0/NaN.

Nothing here allocates more than a few bytes: every size overflows, or exceeds what an
address space can map, before memory is committed. (Sizes stay below 2**63: Python ints
beyond int64 are a conversion matter of their own.)
"""

import math

import pytest

import kiln

BIG = 2**32


def broadcast_one(*sizes, dtype=kiln.float32):
    """A one-element tensor viewed at `sizes` through stride-0 dims (no memory)."""
    return kiln.ones(*([1] * len(sizes)), dtype=dtype).expand(*sizes)


@pytest.mark.parametrize("make, op", [
    (lambda: kiln.zeros(BIG, BIG), "zeros"),
    (lambda: kiln.ones(BIG, BIG), "ones"),
    (lambda: kiln.empty(BIG, BIG), "empty"),
    (lambda: kiln.empty(2**63 - 1), "empty"),
    (lambda: kiln.full((2**61,), 7, dtype=kiln.int64), "full"),
    (lambda: kiln.eye(BIG, BIG), "eye"),
    (lambda: kiln.rand(BIG, BIG), "rand"),
    (lambda: kiln.randn(BIG, BIG), "randn"),
    (lambda: kiln.arange(0, 2**62), "arange"),
    (lambda: kiln.arange(0.0, 2.0**62), "arange"),
    (lambda: kiln.linspace(0, 1, 2**62), "linspace"),
])
def test_creation_sizes_that_overflow_raise_naming_the_op(make, op):
    with pytest.raises(RuntimeError, match=rf"^{op}: Storage size calculation overflowed with sizes=\["):
        make()


def test_arange_counts_beyond_int64():
    with pytest.raises(RuntimeError, match="arange: invalid size, possible overflow"):
        kiln.arange(-2**63, 2**63 - 1)
    with pytest.raises(RuntimeError, match="arange: invalid size, possible overflow"):
        kiln.arange(0.0, 1e300, 1e-300)
    # The whole int64 range in four steps: exact values, though start + i * step wraps.
    t = kiln.arange(-2**63, 2**63 - 1, 2**62)
    assert t.tolist() == [-2**63, -2**62, 0, 2**62]


def test_allocations_beyond_memory_use_pytorchs_wording():
    # 2**61 bytes fit ptrdiff_t; no address space holds them.
    with pytest.raises(RuntimeError, match="empty: not enough memory: you tried to allocate 2305843009213693952 bytes"):
        kiln.empty(2**61, dtype=kiln.uint8)
    with pytest.raises(RuntimeError, match="you tried to allocate 9223372036854775807 bytes"):
        kiln.empty(2**63 - 1, dtype=kiln.uint8)


def test_expand_beyond_int64_elements_raises():
    with pytest.raises(RuntimeError, match=r"expand: numel: integer multiplication overflow: size \[4294967296, 4294967296\]"):
        kiln.ones(1).expand(BIG, BIG)
    assert kiln.ones(1, 1, 1).expand(0, BIG, BIG).numel() == 0


@pytest.mark.parametrize("op", [
    lambda t: t.contiguous(),
    lambda t: t.clone(),
    lambda t: t + t,
    lambda t: t * 2.0,
    lambda t: kiln.exp(t),
    lambda t: t.to(kiln.float64),
    lambda t: kiln.zeros_like(t),
])
def test_materialising_a_huge_broadcast_view_raises(op):
    # 2**62 elements: a valid view, but 2**64 bytes to write out.
    huge = broadcast_one(2**31, 2**31)
    assert huge.numel() == 2**62
    with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
        op(huge)


def test_materialising_a_view_too_large_for_memory_raises():
    big = broadcast_one(2**30, 2**30)  # 2**62 bytes of float32: fits ptrdiff_t
    with pytest.raises(RuntimeError, match="not enough memory: you tried to allocate 4611686018427387904 bytes"):
        big.contiguous()


def test_broadcast_beyond_int64_elements_raises_naming_the_op():
    col, row = broadcast_one(BIG, 1), broadcast_one(1, BIG)
    with pytest.raises(RuntimeError, match=r"numel: integer multiplication overflow: .*broadcast to \[4294967296, 4294967296\]"):
        col + row
    with pytest.raises(RuntimeError, match="numel: integer multiplication overflow"):
        kiln.maximum(col, row)


def test_reductions_over_a_broadcast_view_use_its_full_count():
    # Once the 2**64-element view counted 0 elements: sum gave 0 and std NaN. Now that
    # view cannot exist (see above); a view that can is reduced over all its elements.
    n = 1024 * 1025
    x = broadcast_one(1024, 1025, dtype=kiln.float64)
    assert kiln.sum(x).item() == n
    assert kiln.mean(x).item() == 1.0
    assert kiln.std(x).item() == 0.0
    assert math.isclose(kiln.norm(x).item(), math.sqrt(n), rel_tol=1e-12)


def test_reductions_over_empty_views_with_huge_dims():
    wide = kiln.ones(1, 1, 1).expand(0, 2**40, 2**40)
    assert kiln.sum(wide, dim=(1, 2)).shape == (0,)
    assert kiln.mean(wide, dim=(1, 2)).shape == (0,)
    assert kiln.sum(wide).item() == 0.0


def test_as_strided_bounds_check_cannot_wrap():
    base = kiln.arange(8).to(kiln.float32)
    # (5 - 1) * 2**62 wraps to 0 and used to pass the bounds check.
    with pytest.raises(RuntimeError, match="as_strided: .*past what int64 can address"):
        base.as_strided((5,), (2**62,))
    with pytest.raises(RuntimeError, match="as_strided"):
        base.as_strided((2, 2), (2**63 - 1, 2))
    with pytest.raises(RuntimeError, match="as_strided: numel: integer multiplication overflow"):
        base.as_strided((BIG, BIG), (0, 0))
    with pytest.raises(RuntimeError, match="past what int64 can address"):
        base.as_strided((0,), (1,), 2**63 - 1)
    with pytest.raises(RuntimeError, match=r"require elements \[0, 8\]"):
        base.as_strided((3,), (4,))
    assert base.as_strided((2, 2), (1, 4), 1).tolist() == [[1.0, 5.0], [2.0, 6.0]]


def test_narrow_and_slice_cannot_wrap():
    t = kiln.arange(4)
    with pytest.raises(RuntimeError, match="narrow: .*exceeds dimension size"):
        t.narrow(0, 1, 2**63 - 1)
    assert t[1::2**63 - 1].tolist() == [1]
    assert t[::2**62].tolist() == [0]
    assert t[::3].tolist() == [0, 3]


def test_views_of_empty_tensors_cannot_claim_huge_sizes():
    e = kiln.empty(0)
    # [2**32, 2**32] multiplies to 0 when wrapped: it used to view an empty tensor.
    with pytest.raises(RuntimeError, match=r"view: shape '\[4294967296, 4294967296\]' is invalid for input of size 0"):
        e.view(BIG, BIG)
    with pytest.raises(RuntimeError, match="is invalid for input of size 0"):
        e.reshape(-1, BIG, BIG)
    assert e.view(BIG, BIG, 0).numel() == 0
    wide = kiln.ones(1, 1, 1).expand(0, 2**40, 2**40)
    with pytest.raises(RuntimeError, match="flatten: numel: integer multiplication overflow"):
        wide.flatten(1, 2)


def test_matmul_batch_too_large_raises_before_its_offset_tables():
    a = broadcast_one(2**24, 1, 1, 1)
    b = broadcast_one(1, 2**24, 1, 1)
    with pytest.raises(RuntimeError, match="not enough memory: you tried to allocate"):
        kiln.matmul(a, b)


def test_splits_of_huge_dims_raise_instead_of_bad_alloc():
    b = broadcast_one(2**46)  # 2**46 views: 2**50 bytes for the list alone
    with pytest.raises(RuntimeError, match="split: not enough memory for a list of 70368744177664 pieces"):
        kiln.split(b, 1)
    with pytest.raises(RuntimeError, match="not enough memory for a list"):
        kiln.chunk(b, 2**46)
    with pytest.raises(RuntimeError, match="unbind: not enough memory for a list"):
        kiln.unbind(b)
    t = kiln.arange(5)
    assert len(kiln.split(t, 2**63 - 1)) == 1
    assert len(kiln.chunk(t, 2**63 - 1)) == 5
    with pytest.raises(ValueError, match="to sum exactly to 5"):
        kiln.split(t, [2**63 - 1, 2**63 - 1, 7])


def test_cat_length_beyond_int64_raises():
    half = broadcast_one(2**62)
    with pytest.raises(RuntimeError, match="cat: the concatenated size along dimension 0 does not fit in int64"):
        kiln.cat([half, half])


def test_empty_tensors_are_contiguous_whatever_their_strides():
    wide = kiln.ones(1, 1, 1).expand(0, 2**40, 2**40)
    assert wide.is_contiguous()
    assert wide.contiguous().shape == (0, 2**40, 2**40)
    assert kiln.empty(0, 3).t().is_contiguous()
    assert not kiln.empty(2, 3).t().is_contiguous()


def test_conv_and_interpolate_sizes_that_leave_int64_are_refused():
    import kiln.nn.functional as F
    with pytest.raises(RuntimeError, match="conv2d: integer overflow"):
        F.conv2d(kiln.zeros(1, 1, 5, 5), kiln.zeros(1, 1, 3, 3), dilation=2**62)
    with pytest.raises(RuntimeError, match="interpolate: scale_factor .* past int64"):
        F.interpolate(kiln.zeros(1, 1, 4), scale_factor=1e300)
