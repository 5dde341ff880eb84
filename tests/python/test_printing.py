"""repr() and str() in PyTorch's layout. The expected strings are PyTorch's own output for
the same values (torch 1.13, with "torch." written "kiln.")."""

import re

import numpy as np
import pytest

import kiln

nan, inf = float("nan"), float("inf")

CASES = [
    (lambda: kiln.tensor([1.5, 2.0, -3.25]), "tensor([ 1.5000,  2.0000, -3.2500])"),
    (lambda: kiln.tensor([[1.0, 2.0], [3.0, 4.0]]), "tensor([[1., 2.],\n        [3., 4.]])"),
    (lambda: kiln.arange(6).view(2, 3), "tensor([[0, 1, 2],\n        [3, 4, 5]])"),
    (lambda: kiln.arange(6, dtype=kiln.int32).view(2, 3),
     "tensor([[0, 1, 2],\n        [3, 4, 5]], dtype=kiln.int32)"),
    (lambda: kiln.tensor([True, False, True]), "tensor([ True, False,  True])"),
    (lambda: kiln.zeros(0), "tensor([])"),
    (lambda: kiln.zeros(0, 3), "tensor([], size=(0, 3))"),
    (lambda: kiln.zeros(2, 0, dtype=kiln.int64), "tensor([], size=(2, 0), dtype=kiln.int64)"),
    (lambda: kiln.tensor([1e-5, 1.0, 1e5]), "tensor([1.0000e-05, 1.0000e+00, 1.0000e+05])"),
    (lambda: kiln.tensor([1e9, 2.0]), "tensor([1.0000e+09, 2.0000e+00])"),
    (lambda: kiln.tensor([nan, inf, -inf, 1.0]), "tensor([nan, inf, -inf, 1.])"),
    (lambda: kiln.tensor([nan, 0.5, -inf]), "tensor([   nan, 0.5000,   -inf])"),
    (lambda: kiln.tensor(3.5), "tensor(3.5000)"),
    (lambda: kiln.tensor(7), "tensor(7)"),
    (lambda: kiln.tensor([0.1, 0.2], dtype=kiln.float64), "tensor([0.1000, 0.2000], dtype=kiln.float64)"),
    (lambda: kiln.tensor([0.1, 0.2], dtype=kiln.float16), "tensor([0.1000, 0.2000], dtype=kiln.float16)"),
    (lambda: kiln.tensor([1.0, 2.5], dtype=kiln.bfloat16), "tensor([1.0000, 2.5000], dtype=kiln.bfloat16)"),
    (lambda: kiln.tensor([1 + 2j, -3.5 - 0.5j]), "tensor([ 1.0000+2.0000j, -3.5000-0.5000j])"),
    (lambda: kiln.tensor([0j, 1 - 1j], dtype=kiln.complex128), "tensor([0.+0.j, 1.-1.j], dtype=kiln.complex128)"),
    (lambda: kiln.arange(2000), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"),
    (lambda: kiln.arange(40000, dtype=kiln.float32).view(200, 200),
     "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9700e+02, 1.9800e+02,\n         1.9900e+02],\n"
     "        [2.0000e+02, 2.0100e+02, 2.0200e+02,  ..., 3.9700e+02, 3.9800e+02,\n         3.9900e+02],\n"
     "        [4.0000e+02, 4.0100e+02, 4.0200e+02,  ..., 5.9700e+02, 5.9800e+02,\n         5.9900e+02],\n"
     "        ...,\n"
     "        [3.9400e+04, 3.9401e+04, 3.9402e+04,  ..., 3.9597e+04, 3.9598e+04,\n         3.9599e+04],\n"
     "        [3.9600e+04, 3.9601e+04, 3.9602e+04,  ..., 3.9797e+04, 3.9798e+04,\n         3.9799e+04],\n"
     "        [3.9800e+04, 3.9801e+04, 3.9802e+04,  ..., 3.9997e+04, 3.9998e+04,\n         3.9999e+04]])"),
    (lambda: kiln.tensor(np.arange(30, dtype=np.float32) * 1.5),
     "tensor([ 0.0000,  1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000,\n"
     "        12.0000, 13.5000, 15.0000, 16.5000, 18.0000, 19.5000, 21.0000, 22.5000,\n"
     "        24.0000, 25.5000, 27.0000, 28.5000, 30.0000, 31.5000, 33.0000, 34.5000,\n"
     "        36.0000, 37.5000, 39.0000, 40.5000, 42.0000, 43.5000])"),
    (lambda: kiln.tensor([1, 200], dtype=kiln.uint8), "tensor([  1, 200], dtype=kiln.uint8)"),
    (lambda: kiln.tensor([[-1, 10], [100, -1000]]), "tensor([[   -1,    10],\n        [  100, -1000]])"),
    (lambda: kiln.zeros(2, 2), "tensor([[0., 0.],\n        [0., 0.]])"),
    (lambda: kiln.arange(8).view(2, 2, 2), "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])"),
    (lambda: kiln.arange(20, dtype=kiln.int16),
     "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
     "        18, 19], dtype=kiln.int16)"),
    (lambda: kiln.tensor([-0.0, 0.0, 1.25]), "tensor([-0.0000, 0.0000, 1.2500])"),
]


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_repr_matches_pytorch(case):
    make, want = case
    t = make()
    assert repr(t) == want
    assert str(t) == want


def test_fp8_prints_its_values():
    t = kiln.tensor([0.5, -2.0, 448.0]).to(kiln.float8_e4m3fn)
    assert repr(t) == "tensor([  0.5000,  -2.0000, 448.0000], dtype=kiln.float8_e4m3fn)"


def test_non_contiguous_and_printoptions():
    t = kiln.arange(6).view(2, 3).t()
    assert repr(t) == "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])"
    try:
        kiln.set_printoptions(precision=2)
        assert repr(kiln.tensor([1.2345])) == "tensor([1.23])"
        kiln.set_printoptions(threshold=5, edgeitems=1)
        assert repr(kiln.arange(10)) == "tensor([0,  ..., 9])"
    finally:
        kiln.set_printoptions(profile="default")
    assert repr(kiln.tensor([1.2345])) == "tensor([1.2345])"
    assert f"{kiln.tensor(2.5):.2f}" == "2.50"


def test_against_torch_when_installed():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for arr in [rng.standard_normal((7, 9)).astype(np.float32), rng.integers(-9, 9, (3, 400)),
                (rng.standard_normal(1500) * 1e6).astype(np.float64), rng.standard_normal((2, 3, 2)) > 0]:
        assert repr(kiln.tensor(arr)) == repr(torch.from_numpy(arr)).replace("torch.", "kiln.")


def test_repr_shows_requires_grad_and_grad_fn_as_pytorch():
    leaf = kiln.tensor([1.0, 2.0], requires_grad=True)
    assert repr(leaf) == "tensor([1., 2.], requires_grad=True)"
    out = leaf * 2
    assert re.fullmatch(r"tensor\(\[2\., 4\.\], grad_fn=<MulBackward\d>\)", repr(out)), repr(out)
    assert repr(leaf.detach()) == "tensor([1., 2.])"


def test_summarised_repr_copies_only_the_edges():
    # A 32 MB bfloat16 tensor: widening it all to float32 would allocate 64 MB.
    x = kiln.arange(0, 16_000_000, dtype=kiln.float32).reshape(4000, 4000).to(kiln.bfloat16)
    kiln.reset_peak_memory_stats()
    before = kiln.memory_allocated()
    text = repr(x)
    assert kiln.max_memory_allocated() - before < (1 << 20)
    # The same text as the widened tensor's (which holds the same values) but the dtype.
    widened = repr(x.to(kiln.float32))
    assert text == widened[:-1] + ", dtype=kiln.bfloat16)"
    assert "..." in text
