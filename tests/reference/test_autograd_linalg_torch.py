"""kiln.linalg's gradients against PyTorch (Debian's python3-torch, 1.13): the same
computation on the same float64 / complex128 inputs, with a real loss
L = sum(|out|^2 * weights) for complex outputs (so the conjugate convention is
compared), and sign/phase-invariant losses for the factors that are unique only up to
them. Run with `make test-torch-reference`; not part of `make test`."""

import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

_build = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "release", "python")
if os.path.isdir(_build) and _build not in sys.path:
    sys.path.insert(0, _build)
import kiln  # noqa: E402
import kiln.linalg as KLA  # noqa: E402

TLA = torch.linalg
DTYPES = [np.float64, np.complex128]


def array(shape, seed, dtype, transposed=False):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if dtype == np.complex128:
        a = a + 1j * rng.standard_normal(shape)
    return np.swapaxes(a, -1, -2) if transposed else a


def to_kiln(a):
    t = kiln.from_numpy(np.ascontiguousarray(np.swapaxes(a, -1, -2) if not a.flags.c_contiguous else a)).clone()
    if not a.flags.c_contiguous:  # keep the transposed layout
        t = t.transpose(-1, -2)
    return t.requires_grad_()


def real_loss(outs, lib):
    """sum_i sum(|out_i|^2 * w_i) with fixed weights: real, and sensitive to every entry."""
    total = 0
    for i, o in enumerate(outs):
        w = np.random.default_rng(100 + i).uniform(0.5, 1.5, tuple(o.shape))
        wt = kiln.from_numpy(w) if lib == "kiln" else torch.tensor(w)
        total = total + ((o.abs() ** 2) * wt).sum()
    return total


def compare(kiln_fn, torch_fn, *arrays, rtol=1e-8, atol=1e-10):
    ks = [to_kiln(a) for a in arrays]
    ts = [torch.tensor(np.ascontiguousarray(a), requires_grad=True) for a in arrays]
    k_out, t_out = kiln_fn(*ks), torch_fn(*ts)
    k_out = k_out if isinstance(k_out, tuple) else (k_out,)
    t_out = t_out if isinstance(t_out, tuple) else (t_out,)
    for k, t in zip(k_out, t_out):
        np.testing.assert_allclose(k.detach().numpy(), t.detach().resolve_conj().numpy(), rtol=1e-9, atol=1e-11)
    real_loss(k_out, "kiln").backward()
    real_loss(t_out, "torch").backward()
    for k, t in zip(ks, ts):
        np.testing.assert_allclose(k.grad.numpy(), t.grad.resolve_conj().numpy(), rtol=rtol, atol=atol)


def dominant(x, lib):
    n = x.shape[-1]
    eye = kiln.eye(n, dtype=kiln.float64) if lib == "kiln" else torch.eye(n, dtype=torch.float64)
    return x + eye * (n + 2.0)


def kconj_t(x):
    return kiln.autograd.conj(x).transpose(-2, -1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_det_slogdet_inv(dtype):
    a = array((2, 3, 3), 1, dtype, transposed=True)
    compare(lambda x: KLA.det(dominant(x, "kiln")), lambda x: TLA.det(dominant(x, "torch")), a)
    compare(lambda x: KLA.det(dominant(x, "kiln")), lambda x: TLA.det(dominant(x, "torch")), array((6, 6), 2, dtype))
    compare(lambda x: KLA.slogdet(dominant(x, "kiln")).logabsdet, lambda x: TLA.slogdet(dominant(x, "torch")).logabsdet, a)
    compare(lambda x: KLA.inv(dominant(x, "kiln")), lambda x: TLA.inv(dominant(x, "torch")), a)
    # A singular matrix: det's gradient is the adjugate (through the SVD).
    sing = np.arange(9.0).reshape(3, 3).astype(dtype)
    compare(lambda x: KLA.det(x), lambda x: TLA.det(x), sing, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("dtype", DTYPES)
def test_complex_slogdet_sign(dtype):
    if dtype != np.complex128:
        return
    a = array((2, 4, 4), 3, dtype)
    k, t = to_kiln(a), torch.tensor(a, requires_grad=True)
    ks = KLA.slogdet(dominant(k, "kiln")).sign
    ts = TLA.slogdet(dominant(t, "torch")).sign
    w = array((2,), 4, np.complex128)
    (ks * kiln.from_numpy(w)).sum().backward(kiln.tensor(1.0 + 0j, dtype=kiln.complex128))
    (ts * torch.tensor(w)).sum().backward(torch.tensor(1.0 + 0j, dtype=torch.complex128))
    np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_solvers(dtype):
    a = array((2, 4, 4), 10, dtype, transposed=True)
    b = array((4, 3), 11, dtype)
    compare(lambda x, y: KLA.solve(dominant(x, "kiln"), y), lambda x, y: TLA.solve(dominant(x, "torch"), y), a, b)
    compare(lambda x, y: KLA.solve(dominant(x, "kiln"), y, left=False),
            lambda x, y: TLA.solve(dominant(x, "torch"), y, left=False), a, array((2, 3, 4), 12, dtype))
    compare(lambda x, y: KLA.solve(dominant(x, "kiln"), y), lambda x, y: TLA.solve(dominant(x, "torch"), y),
            a, array((4,), 13, dtype))
    for upper in (True, False):
        for left in (True, False):
            rhs = b if left else array((3, 4), 14, dtype)
            compare(lambda x, y: KLA.solve_triangular(dominant(x, "kiln"), y, upper=upper, left=left),
                    lambda x, y: TLA.solve_triangular(dominant(x, "torch"), y, upper=upper, left=left), a, rhs)
    compare(lambda x, y: KLA.solve_triangular(dominant(x, "kiln"), y, upper=False, unitriangular=True),
            lambda x, y: TLA.solve_triangular(dominant(x, "torch"), y, upper=False, unitriangular=True), a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 4, 4), (3, 5), (5, 3)])
def test_lu_family(dtype, shape):
    a = array(shape, 20, dtype)
    compare(lambda x: KLA.lu_factor(x)[0], lambda x: TLA.lu_factor(x)[0], a)
    compare(lambda x: tuple(KLA.lu(x))[1:], lambda x: tuple(TLA.lu(x))[1:], a)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(1, 256, 256), (3, 96, 96), (200, 120), (120, 200), (2, 40, 17)])
def test_lu_factor_recursive_sizes(dtype, shape):
    """kiln's own recursive LU (and getrf where it does not pay) against PyTorch's getrf:
    the same pivots; factors equal to rounding (both backward stable; these Gaussian
    matrices have cond ~ n, so |dLU| <~ n * min(m, n) * eps * |A|)."""
    a = array(shape, 60, np.complex128 if np.dtype(dtype).kind == "c" else np.float64).astype(dtype)
    k_lu, k_piv = KLA.lu_factor(kiln.from_numpy(np.ascontiguousarray(a)))
    t_lu, t_piv = TLA.lu_factor(torch.tensor(a))
    np.testing.assert_array_equal(k_piv.numpy(), t_piv.numpy())
    eps = np.finfo(dtype).eps
    m, n = shape[-2:]
    tol = 10 * max(m, n) * min(m, n) * eps * np.abs(a).max()
    assert np.abs(k_lu.numpy() - t_lu.numpy()).max() <= tol


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_solve(dtype):
    A = array((2, 4, 4), 21, dtype) + 6 * np.eye(4)
    _, piv_t = TLA.lu_factor(torch.tensor(A))
    lu = TLA.lu_factor(torch.tensor(A))[0].numpy()
    _, piv_k = KLA.lu_factor(kiln.from_numpy(A))
    np.testing.assert_array_equal(piv_k.numpy(), piv_t.numpy())
    for left in (True, False):
        for adjoint in (True, False):
            rhs = array((2, 4, 3) if left else (2, 3, 4), 22, dtype)
            compare(lambda x, y: KLA.lu_solve(x, piv_k, y, left=left, adjoint=adjoint),
                    lambda x, y: TLA.lu_solve(x, piv_t, y, left=left, adjoint=adjoint), lu, rhs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_eigh(dtype):
    a = array((2, 4, 4), 30, dtype)
    kh = lambda x: dominant(x @ kconj_t(x), "kiln")  # noqa: E731
    th = lambda x: dominant(x @ x.mH, "torch")  # noqa: E731
    compare(lambda x: KLA.cholesky(kh(x)), lambda x: TLA.cholesky(th(x)), a)
    compare(lambda x: KLA.cholesky(kh(x), upper=True), lambda x: TLA.cholesky(th(x), upper=True), a)
    compare(lambda x: KLA.eigvalsh(x + kconj_t(x)), lambda x: TLA.eigvalsh(x + x.mH), a)
    # |V|^2 does not depend on the eigenvectors' phases.
    compare(lambda x: KLA.eigh(x + kconj_t(x))[1], lambda x: TLA.eigh(x + x.mH)[1], a)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 4, 4), (5, 3), (2, 3, 5)])
def test_qr_svd_pinv(dtype, shape):
    a = array(shape, 40, dtype)
    # |Q|^2 and |R|^2 are sign-invariant; S and |U|^2, |Vh|^2 too.
    compare(lambda x: tuple(KLA.qr(x)), lambda x: tuple(TLA.qr(x)), a)
    compare(lambda x: tuple(KLA.svd(x, full_matrices=False)), lambda x: tuple(TLA.svd(x, full_matrices=False)), a)
    compare(lambda x: KLA.svdvals(x), lambda x: TLA.svdvals(x), a)
    compare(lambda x: KLA.pinv(x), lambda x: TLA.pinv(x), a)


def test_lstsq():
    a, b = array((2, 5, 3), 50, np.float64), array((2, 5, 2), 51, np.float64)
    compare(lambda x, y: KLA.lstsq(x, y).solution, lambda x, y: TLA.lstsq(x, y).solution, a, b)


def test_moe_route_matches_softmax_topk_in_torch():
    rng = np.random.default_rng(60)
    logits = (rng.permutation(40).reshape(5, 8) * 0.3).astype(np.float32)
    k = kiln.from_numpy(logits).clone().requires_grad_()
    t = torch.tensor(logits, requires_grad=True)
    w, ids = kiln.moe_route(k, 3, scoring="softmax", renormalize=True)
    probs = torch.softmax(t, dim=1)
    tw, tids = torch.topk(probs, 3, dim=1)
    tw = tw / tw.sum(dim=1, keepdim=True)
    np.testing.assert_array_equal(ids.numpy().astype(np.int64), tids.numpy())
    g = rng.standard_normal((5, 3)).astype(np.float32)
    w.backward(kiln.from_numpy(g))
    tw.backward(torch.tensor(g))
    np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
