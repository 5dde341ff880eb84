"""Views of up to 64 dims (kiln's limit, PyTorch's for reductions) work in copies,
elementwise ops and reductions; a 65th dim raises a RuntimeError naming the op. Each view
has 17 dims of size 2 transposed end to end (no two merge), padded with size-1 dims;
numpy (which stops at 32 dims) computes the reference on the 17 real dims, since size-1
dims do not change the row-major order."""
import numpy as np
import pytest

import kiln

REAL = 17


def views(rank, shift=0):
    """The same data as a kiln view of `rank` dims and a numpy array of the 17 real ones."""
    flat = (np.arange(2**REAL, dtype=np.int64) + shift) % 1000
    ref = flat.reshape([2] * REAL).transpose(list(reversed(range(REAL))))
    v = kiln.tensor(flat.tolist(), dtype=kiln.int64).view([2] * REAL).permute(*reversed(range(REAL)))
    d = 0
    while v.dim() < rank:
        v = v.unsqueeze(d)
        d = (d + 2) % (v.dim() + 1)
    assert v.dim() == rank and not v.is_contiguous()
    return v, ref


def real_dims(v):
    return [d for d in range(v.dim()) if v.shape[d] == 2]


@pytest.mark.parametrize("rank", [17, 25, 64])
def test_copy_elementwise_and_reductions(rank):
    v, ref = views(rank)
    w, ref_w = views(rank, shift=7)
    assert v.contiguous().reshape(-1).tolist() == ref.ravel().tolist()
    assert v.clone().reshape(-1).tolist() == ref.ravel().tolist()
    assert (v + w).reshape(-1).tolist() == (ref + ref_w).ravel().tolist()
    assert (-v).to(kiln.float32).reshape(-1).tolist() == (-ref).astype(np.float32).ravel().tolist()
    assert v.sum().item() == int(ref.sum())
    dims = real_dims(v)
    for k, d in [(0, dims[0]), (len(dims) // 2, dims[len(dims) // 2]), (REAL - 1, dims[-1])]:
        got = kiln.sum(v, d)
        assert got.dim() == rank - 1
        assert got.reshape(-1).tolist() == ref.sum(axis=k).ravel().tolist()


def test_a_65th_dim_is_refused():
    t = kiln.zeros([1] * 64)
    with pytest.raises(RuntimeError, match=r"^zeros: tensors with more than 64 dims are not supported \(got 65 dims\)"):
        kiln.zeros([1] * 65)
    with pytest.raises(RuntimeError, match=r"^unsqueeze: tensors with more than 64 dims"):
        t.unsqueeze(0)
    with pytest.raises(RuntimeError, match=r"^view: tensors with more than 64 dims"):
        t.view([1] * 65)
    with pytest.raises(RuntimeError, match=r"^expand: tensors with more than 64 dims"):
        t.expand([1] * 65)
