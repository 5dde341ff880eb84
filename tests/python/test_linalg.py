"""kiln.linalg against numpy (and scipy where installed), every dtype, batched and broadcast.

Tolerances: the matrices are well conditioned (cond < ~10), so a backward-stable
algorithm is within ~cond * n * eps of the reference; we allow 100 * n * eps.
"""

import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(12)
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def k(a):
    return kiln.from_numpy(np.ascontiguousarray(a))


def rand(shape, dt):
    a = RNG.standard_normal(shape)
    if np.issubdtype(dt, np.complexfloating):
        a = a + 1j * RNG.standard_normal(shape)
    return a.astype(dt)


def well(shape, dt):
    n = shape[-1]
    return (rand(shape, dt) + (2 * np.sqrt(n) + 1) * np.eye(n)).astype(dt)


def tol(dt, n):
    return 100 * max(n, 1) * np.finfo(dt).eps


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [1, 3, 4, 5, 17, 64])
def test_solve_inv_det_slogdet_match_numpy(dt, n):
    a, b = well((3, n, n), dt), rand((3, n, 5), dt)
    t = tol(dt, n)
    np.testing.assert_allclose(kiln.linalg.solve(k(a), k(b)).numpy(), np.linalg.solve(a, b), rtol=t, atol=t)
    np.testing.assert_allclose(kiln.linalg.inv(k(a)).numpy(), np.linalg.inv(a), rtol=t, atol=t)
    if n <= 17:  # det of the n = 64 matrices overflows float32
        np.testing.assert_allclose(kiln.linalg.det(k(a)).numpy(), np.linalg.det(a), rtol=t)
    sign, logabs = kiln.linalg.slogdet(k(a))
    ref_sign, ref_log = np.linalg.slogdet(a)
    np.testing.assert_allclose(sign.numpy(), ref_sign, rtol=t, atol=t)
    np.testing.assert_allclose(logabs.numpy(), ref_log, rtol=t, atol=t)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("flags", range(8))
def test_solve_triangular_every_flag(dt, flags):
    upper, left, unit = bool(flags & 1), bool(flags & 2), bool(flags & 4)
    n = 32
    a = well((2, n, n), dt)
    if unit:
        a = a / n
    b = rand((2, n, 9) if left else (2, 9, n), dt)
    tri = np.triu(a) if upper else np.tril(a)
    if unit:
        tri = tri - np.diag(np.diagonal(tri, axis1=-2, axis2=-1)[0]) * 0  # keep shape
        idx = np.arange(n)
        tri[:, idx, idx] = 1
    want = np.linalg.solve(tri, b) if left else np.swapaxes(np.linalg.solve(np.swapaxes(tri, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    got = kiln.linalg.solve_triangular(k(a), k(b), upper=upper, left=left, unitriangular=unit).numpy()
    np.testing.assert_allclose(got, want, rtol=tol(dt, n), atol=tol(dt, n) * np.abs(want).max())


@pytest.mark.parametrize("dt", DTYPES)
def test_lu_factor_and_lu_match_scipy_style_reconstruction(dt):
    a = rand((2, 6, 4), dt)
    P, L, U = kiln.linalg.lu(k(a))
    np.testing.assert_allclose(P.numpy() @ L.numpy() @ U.numpy(), a, atol=tol(dt, 6) * np.abs(a).max())
    LU, piv = kiln.linalg.lu_factor(k(rand((5, 5), dt)))
    assert piv.dtype == kiln.int32 and LU.shape == (5, 5)


def test_lu_factor_pivots_match_scipy():
    scipy_linalg = pytest.importorskip("scipy.linalg")
    a = rand((7, 7), np.float64)
    LU, piv = kiln.linalg.lu_factor(k(a))
    lu_ref, piv_ref = scipy_linalg.lu_factor(a)
    np.testing.assert_array_equal(piv.numpy() - 1, piv_ref)  # scipy's pivots are 0-based
    np.testing.assert_allclose(LU.numpy(), lu_ref, atol=1e-12)


@pytest.mark.parametrize("dt", DTYPES)
def test_lu_solve_left_right_adjoint(dt):
    a, b = well((4, 4), dt), rand((4, 3), dt)
    LU, piv = kiln.linalg.lu_factor(k(a))
    t = tol(dt, 4)
    np.testing.assert_allclose(kiln.linalg.lu_solve(LU, piv, k(b)).numpy(), np.linalg.solve(a, b), atol=t)
    np.testing.assert_allclose(kiln.linalg.lu_solve(LU, piv, k(b), adjoint=True).numpy(),
                               np.linalg.solve(a.conj().T, b), atol=t)
    bt = b.T.copy()
    np.testing.assert_allclose(kiln.linalg.lu_solve(LU, piv, k(bt), left=False).numpy(),
                               np.linalg.solve(a.T, bt.T).T, atol=t)
    np.testing.assert_allclose(kiln.linalg.lu_solve(LU, piv, k(bt), left=False, adjoint=True).numpy(),
                               np.linalg.solve(a.conj(), bt.T).T, atol=t)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (7, 3), (3, 7)])
def test_svd_qr_eigh_cholesky_identities(dt, shape):
    a = rand((2,) + shape, dt)
    t = tol(dt, max(shape))
    U, S, Vh = kiln.linalg.svd(k(a), full_matrices=False)
    np.testing.assert_allclose((U.numpy() * S.numpy()[..., None, :]) @ Vh.numpy(), a, atol=t * np.abs(a).max())
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(a, compute_uv=False), rtol=t, atol=t)
    np.testing.assert_allclose(kiln.linalg.svdvals(k(a)).numpy(), S.numpy(), rtol=t, atol=t)
    Q, R = kiln.linalg.qr(k(a))
    np.testing.assert_allclose(Q.numpy() @ R.numpy(), a, atol=t * np.abs(a).max())
    h = a @ np.swapaxes(a.conj(), -1, -2) + shape[0] * np.eye(shape[0])
    w, V = kiln.linalg.eigh(k(h.astype(dt)))
    np.testing.assert_allclose(w.numpy(), np.linalg.eigvalsh(h), rtol=t, atol=t * np.abs(h).max())
    L = kiln.linalg.cholesky(k(h.astype(dt))).numpy()
    np.testing.assert_allclose(L, np.linalg.cholesky(h), rtol=t, atol=t * np.abs(h).max())


@pytest.mark.parametrize("dt", DTYPES)
def test_pinv_and_lstsq_match_numpy(dt):
    a, b = rand((8, 5), dt), rand((8, 2), dt)
    t = 10 * tol(dt, 8)
    np.testing.assert_allclose(kiln.linalg.pinv(k(a)).numpy(), np.linalg.pinv(a), atol=t)
    low = rand((6, 2), dt) @ rand((2, 5), dt)
    # numpy's default cutoff (1e-15 * largest) keeps float32's noise; PyTorch's default
    # rtol is max(m, n) * eps.
    np.testing.assert_allclose(kiln.linalg.pinv(k(low)).numpy(), np.linalg.pinv(low, rcond=6 * np.finfo(dt).eps),
                               atol=t * 10)
    for driver in ["gelsy", "gels", "gelsd", "gelss"]:
        sol, res, rank, sv = kiln.linalg.lstsq(k(a), k(b), driver=driver)
        ref, ref_res, ref_rank, ref_sv = np.linalg.lstsq(a, b, rcond=None)
        np.testing.assert_allclose(sol.numpy(), ref, atol=t)
        if driver != "gelsy":
            np.testing.assert_allclose(res.numpy(), ref_res, rtol=t, atol=t)
        if driver in ("gelsd", "gelss"):
            np.testing.assert_allclose(sv.numpy(), ref_sv, rtol=t, atol=t)
    sol = kiln.linalg.lstsq(k(low), k(rand((6, 2), dt)), driver="gelsd")
    assert int(sol.rank.item()) == 2


def test_errors_are_pytorchs():
    singular = np.ones((2, 3, 3))
    singular[0] = np.eye(3)
    with pytest.raises(kiln.linalg.LinAlgError, match=r"\(Batch element 1\): The diagonal element 2 is zero"):
        kiln.linalg.inv(k(singular))
    assert issubclass(kiln.linalg.LinAlgError, RuntimeError)
    inv, info = kiln.linalg.inv_ex(k(singular))
    assert info.numpy().tolist() == [0, 2]
    with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as input. Got Long"):
        kiln.linalg.det(kiln.from_numpy(np.ones((2, 2), np.int64)))
    with pytest.raises(RuntimeError, match="must be batches of square matrices"):
        kiln.linalg.inv(k(np.ones((2, 3))))
    with pytest.raises(RuntimeError, match="non-finite"):
        kiln.linalg.svd(k(np.full((2, 2), np.nan)))
    with pytest.raises(TypeError):
        kiln.linalg.solve_triangular(k(np.eye(2)), k(np.eye(2)))  # upper is required
    assert kiln.linalg.det(k(np.zeros((0, 3, 3)))).shape == (0,)


def test_vector_rhs_and_empty_matrices():
    a = well((2, 3, 3), np.float64)
    v = rand((3,), np.float64)
    np.testing.assert_allclose(kiln.linalg.solve(k(a), k(v)).numpy(), np.linalg.solve(a, v[None, :, None])[..., 0],
                               atol=1e-13)
    z = k(np.zeros((2, 0, 0)))
    assert kiln.linalg.cholesky(z).shape == (2, 0, 0)
    assert kiln.linalg.eigh(z).eigenvalues.shape == (2, 0)
    assert kiln.linalg.slogdet(z).sign.numpy().tolist() == [1.0, 1.0]
    q, r = kiln.linalg.qr(k(np.zeros((2, 3, 0))), mode="complete")
    np.testing.assert_array_equal(q.numpy(), np.broadcast_to(np.eye(3), (2, 3, 3)))
    assert r.shape == (2, 3, 0)
    sol = kiln.linalg.lstsq(k(np.zeros((0, 3))), k(np.zeros((0, 2))))
    np.testing.assert_array_equal(sol.solution.numpy(), np.zeros((3, 2)))


def test_pinv_tolerance_tensors_broadcast_per_matrix():
    a = np.stack([np.diag([4.0, 1.0, 0.1]), np.diag([4.0, 1.0, 0.1])])
    atol = k(np.array([0.5, 0.05]))
    got = kiln.linalg.pinv(k(a), atol=atol).numpy()
    np.testing.assert_allclose(got[0], np.diag([0.25, 1.0, 0.0]), atol=1e-15)
    np.testing.assert_allclose(got[1], np.diag([0.25, 1.0, 10.0]), atol=1e-13)
    # rtol relative to the largest singular value; hermitian reads eigenvalues' magnitudes.
    np.testing.assert_allclose(kiln.linalg.pinv(k(a[0]), rtol=0.2).numpy(), np.diag([0.25, 1.0, 0.0]), atol=1e-15)
    h = np.diag([-2.0, 0.5, 1e-20])
    np.testing.assert_allclose(kiln.linalg.pinv(k(h), hermitian=True).numpy(), np.diag([-0.5, 2.0, 0.0]),
                               atol=1e-15)


def test_importable_as_a_module():
    import kiln.linalg as la

    assert la is kiln.linalg and la.LinAlgError is kiln.linalg.LinAlgError
    with pytest.raises(la.LinAlgError):
        la.inv(k(np.zeros((2, 2))))


@pytest.mark.parametrize("dt", [np.float32, np.complex128])
def test_batch_broadcasting_like_pytorch(dt):
    a, b = well((2, 1, 5, 5), dt), rand((3, 5, 4), dt)
    want = np.linalg.solve(np.broadcast_to(a, (2, 3, 5, 5)), np.broadcast_to(b, (2, 3, 5, 4)))
    t = tol(dt, 5)
    np.testing.assert_allclose(kiln.linalg.solve(k(a), k(b)).numpy(), want, atol=t)
    LU, piv = kiln.linalg.lu_factor(k(a))
    np.testing.assert_allclose(kiln.linalg.lu_solve(LU, piv, k(b)).numpy(), want, atol=t)
    tri = np.tril(a)
    got = kiln.linalg.solve_triangular(k(a), k(b), upper=False).numpy()
    np.testing.assert_allclose(got, np.linalg.solve(np.broadcast_to(tri, (2, 3, 5, 5)), np.broadcast_to(b, (2, 3, 5, 4))),
                               atol=t)
    # lstsq reads a B with one dim fewer than A as a batch of vectors (PyTorch's rule), so
    # B keeps A's rank here.
    sol = kiln.linalg.lstsq(k(a), k(b[None])).solution.numpy()
    np.testing.assert_allclose(sol, want, atol=10 * t)


def test_results_do_not_depend_on_the_thread_count():
    a = well((300, 4, 4), np.float32)
    t = np.tril(rand((64, 32, 32), np.float64)) / 32 + np.eye(32)
    b = rand((64, 32, 20), np.float64)
    with kiln.threads(1):
        inv1 = kiln.linalg.inv(k(a)).numpy()
        x1 = kiln.linalg.solve_triangular(k(t), k(b), upper=False).numpy()
    with kiln.threads(3):
        inv3 = kiln.linalg.inv(k(a)).numpy()
        x3 = kiln.linalg.solve_triangular(k(t), k(b), upper=False).numpy()
    np.testing.assert_array_equal(inv1, inv3)
    np.testing.assert_array_equal(x1, x3)
