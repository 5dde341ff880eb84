"""Gradients of kiln.linalg, in-place ops under autograd, moe_route's routing weights and
the FP8 casts, from Python: gradcheck and gradgradcheck in float64 and complex128 on
well-conditioned, batched and non-contiguous inputs, PyTorch's errors, and finite
differences for moe_route (float32 only)."""

import numpy as np
import pytest

import kiln
import kiln.linalg as LA
from kiln.autograd import gradcheck, gradgradcheck

DTYPES = [np.float64, np.complex128]


def leaf(*shape, seed=0, dtype=np.float64, transposed=False):
    rng = np.random.default_rng(seed)
    if transposed:
        shape = shape[:-2] + (shape[-1], shape[-2])
    a = rng.standard_normal(shape)
    if dtype == np.complex128:
        a = a + 1j * rng.standard_normal(shape)
    t = kiln.from_numpy(np.ascontiguousarray(a)).clone()
    if transposed:
        t = t.transpose(-1, -2)
    return t.requires_grad_()


def mH(x):
    return kiln.autograd.conj(x).transpose(-2, -1)


def dominant(x):
    n = x.shape[-1]
    return x + kiln.eye(n, dtype=kiln.float64) * (n + 2.0)


# ---------------------------------------------------------------- linalg

@pytest.mark.parametrize("dtype", DTYPES)
def test_det_slogdet_inv_solve(dtype):
    a = leaf(2, 3, 3, seed=1, dtype=dtype, transposed=True)
    b = leaf(3, 2, seed=2, dtype=dtype)
    assert gradcheck(lambda x: LA.det(dominant(x)), (a,))
    assert gradcheck(lambda x: LA.slogdet(dominant(x)).logabsdet, (a,))
    assert gradcheck(lambda x: LA.inv(dominant(x)), (a,))
    assert gradcheck(lambda x, y: LA.solve(dominant(x), y), (a, b))
    assert gradcheck(lambda x, y: LA.solve(dominant(x), y, left=False), (a, leaf(2, 2, 3, seed=3, dtype=dtype)))
    assert gradgradcheck(lambda x: LA.det(dominant(x)), (leaf(3, 3, seed=4, dtype=dtype),), atol=1e-4)
    assert gradgradcheck(lambda x, y: LA.solve(dominant(x), y), (leaf(3, 3, seed=5, dtype=dtype), b), atol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_triangular_cholesky_lu(dtype):
    a = leaf(2, 4, 4, seed=10, dtype=dtype, transposed=True)
    b = leaf(2, 4, 3, seed=11, dtype=dtype)
    for upper in (True, False):
        assert gradcheck(lambda x, y: LA.solve_triangular(dominant(x), y, upper=upper), (a, b))
        assert gradcheck(lambda x, y: LA.solve_triangular(dominant(x), y, upper=upper, left=False,
                                                          unitriangular=True), (a, leaf(3, 4, seed=12, dtype=dtype)))
    hpd = lambda x: dominant(x @ mH(x))  # noqa: E731
    assert gradcheck(lambda x: LA.cholesky(hpd(x)), (a,))
    assert gradcheck(lambda x: LA.cholesky(hpd(x), upper=True), (a,))
    for shape in ((2, 4, 4), (3, 5), (5, 3)):
        x = leaf(*shape, seed=13, dtype=dtype)
        assert gradcheck(lambda t: LA.lu_factor(t)[0], (x,))
        assert gradcheck(lambda t: LA.lu(t)[1:], (x,))
    A = dominant(leaf(2, 4, 4, seed=14, dtype=dtype)).detach()
    LU, piv = LA.lu_factor(A)
    LU = LU.clone().requires_grad_()
    for left in (True, False):
        for adjoint in (True, False):
            rhs = leaf(*((2, 4, 3) if left else (2, 3, 4)), seed=15, dtype=dtype)
            assert gradcheck(lambda lu, y: LA.lu_solve(lu, piv, y, left=left, adjoint=adjoint), (LU, rhs))
    assert gradgradcheck(lambda x: LA.cholesky(hpd(x)), (leaf(3, 3, seed=16, dtype=dtype),), atol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 4, 4), (5, 3), (2, 3, 5)])
def test_qr_svd_pinv(dtype, shape):
    a = leaf(*shape, seed=20, dtype=dtype)
    assert gradcheck(lambda x: tuple(LA.qr(x)), (a,))

    def svd_invariants(x):  # independent of the singular vectors' signs/phases
        U, S, Vh = LA.svd(x, full_matrices=False)
        return S, U @ Vh
    assert gradcheck(svd_invariants, (a,))
    assert gradcheck(lambda x: LA.svdvals(x), (a,))
    assert gradcheck(lambda x: LA.pinv(x), (a,))


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_and_double_backward(dtype):
    a = leaf(2, 4, 4, seed=30, dtype=dtype, transposed=True)
    herm = lambda x: x + mH(x)  # noqa: E731

    def eigh_invariants(x):
        w, v = LA.eigh(herm(x))
        return w, v * kiln.autograd.conj(v)
    assert gradcheck(eigh_invariants, (a,))
    assert gradcheck(lambda x: LA.eigvalsh(herm(x)), (a,))
    small = leaf(3, 3, seed=31, dtype=dtype)
    assert gradgradcheck(lambda x: LA.eigvalsh(herm(x)), (small,), atol=1e-4)
    assert gradgradcheck(lambda x: LA.svdvals(x), (small,), atol=1e-4)
    assert gradgradcheck(lambda x: tuple(LA.qr(x)), (small,), atol=1e-4)


def test_lstsq():
    a, b = leaf(2, 5, 3, seed=40), leaf(2, 5, 2, seed=41)
    assert gradcheck(lambda x, y: LA.lstsq(x, y).solution, (a, b))


def test_complex_phase_dependent_losses_raise():
    c = leaf(3, 3, seed=50, dtype=np.complex128)
    U = LA.svd(c, full_matrices=False).U
    with pytest.raises(RuntimeError, match=r"svd_backward: The singular vectors in the complex case are specified up to "
                                           r"multiplication by e\^\{i phi\}"):
        U.backward(kiln.ones_like(U))
    v = LA.eigh(c + mH(c)).eigenvectors
    with pytest.raises(RuntimeError, match="linalg_eigh_backward: The eigenvectors in the complex case"):
        v.backward(kiln.ones_like(v))
    # A real loss of |out|^2 is phase-invariant: fine.
    U, S, Vh = LA.svd(c, full_matrices=False)
    ((U.abs() ** 2).sum() + S.sum()).backward()
    assert c.grad is not None


def test_qr_errors_match_pytorch():
    a = leaf(4, 3, seed=51)
    with pytest.raises(RuntimeError, match="The derivative of linalg.qr depends on Q, which is not computed when mode='r'"):
        LA.qr(a, mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and nrows > ncols"):
        LA.qr(a, mode="complete").R.sum().backward()


# ---------------------------------------------------------------- in place

def test_inplace_rules():
    x = leaf(3, seed=60)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation."):
        x.exp_()
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        x.clamp_(min=0)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an in-place "
                                           "operation."):
        x[:2].mul_(2)
    y = x * 2
    v0 = y._version
    y.sigmoid_()
    assert y._version == v0 + 1 and y.grad_fn.name() == "SigmoidBackward0" and not y.is_leaf
    y.sum().backward()
    s = 1 / (1 + np.exp(-2 * x.detach().numpy()))
    np.testing.assert_allclose(x.grad.numpy(), 2 * s * (1 - s), rtol=1e-12)


def test_inplace_gradcheck_and_views():
    def chain(a, w):
        y = a * 1.5
        y += w
        y.mul_(w)
        y[1:3] = y[1:3].tanh() * 2     # setitem: an in-place copy into a view of y
        y[0].zero_()
        y.relu_()
        return y
    a, w = leaf(4, seed=61), leaf(4, seed=62)
    assert gradcheck(chain, (a, w))
    buf_grad = leaf(3, seed=63)

    def into_buffer(t):
        b = kiln.zeros([2, 3], dtype=kiln.float64)
        b.copy_(t)
        b.masked_fill_(b > 0.5, 0.0)
        return b
    assert gradcheck(into_buffer, (buf_grad,))
    h = leaf(3, seed=64) * 1
    e = h.exp()
    e += 1
    with pytest.raises(RuntimeError, match="which is output 0 of ExpBackward0, is at version 1; expected version 0"):
        e.sum().backward()


# ---------------------------------------------------------------- moe_route, fp8

@pytest.mark.parametrize("scoring,renormalize", [("softmax", False), ("softmax", True), ("sigmoid", True)])
def test_moe_route_gradient_matches_finite_differences(scoring, renormalize):
    rng = np.random.default_rng(70)
    # Logits far apart, so a step of h never changes which experts are chosen.
    base = (rng.permutation(6 * 8).reshape(6, 8) * 0.25).astype(np.float32)
    g = rng.standard_normal((6, 2)).astype(np.float32)
    kw = dict(scoring=scoring, renormalize=renormalize, routed_scaling_factor=1.5,
              renorm_eps=1e-6 if renormalize else 0.0)
    logits = kiln.from_numpy(base).clone().requires_grad_()
    w, ids = kiln.moe_route(logits, 2, **kw)
    assert w.requires_grad and not ids.requires_grad
    w.backward(kiln.from_numpy(g).clone())

    def loss(arr):
        wk, _ = kiln.moe_route(kiln.from_numpy(arr.astype(np.float32)), 2, **kw)
        return float((wk.numpy().astype(np.float64) * g).sum())
    h = 1e-2
    numeric = np.zeros_like(base, dtype=np.float64)
    for i in np.ndindex(base.shape):
        up, down = base.copy(), base.copy()
        up[i] += h
        down[i] -= h
        numeric[i] = (loss(up) - loss(down)) / (2 * h)
    # Central differences: O(h^2) truncation and float32 rounding / h, both < 1e-3 here.
    np.testing.assert_allclose(logits.grad.numpy(), numeric, atol=2e-3, rtol=2e-3)
    # The values are the kernel's within float32 rounding.
    with kiln.no_grad():
        w_plain, ids_plain = kiln.moe_route(logits, 2, **kw)
    np.testing.assert_array_equal(ids.numpy(), ids_plain.numpy())
    np.testing.assert_allclose(w.detach().numpy(), w_plain.numpy(), rtol=1e-6, atol=1e-7)


def test_fp8_cast_passes_the_gradient_and_scaled_mm_refuses():
    x = kiln.tensor([0.5, -1.25, 3.0], requires_grad=True)
    y = x.to(kiln.float8_e4m3fn)
    assert y.requires_grad
    z = y.to(kiln.float32) * kiln.tensor([1.0, 2.0, 3.0])
    z.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.array([1.0, 2.0, 3.0], dtype=np.float32))
    a = kiln.tensor([[1.0, 2.0]]).to(kiln.float8_e4m3fn)
    b = kiln.tensor([[1.0], [0.5]]).to(kiln.float8_e4m3fn).t().contiguous().t()
    scale = kiln.tensor(1.0, requires_grad=True)
    out = kiln._scaled_mm(a, b, scale, kiln.tensor(1.0), out_dtype=kiln.float32)
    assert out.requires_grad
    with pytest.raises(NotImplementedError, match="derivative for aten::_scaled_mm is not implemented"):
        out.sum().backward()


# ---------------------------------------------------------------- edges and narrow dtypes

def test_one_by_one_and_empty_matrices():
    one = leaf(2, 1, 1, seed=80)
    assert gradcheck(lambda x: LA.det(dominant(x)), (one,))
    assert gradcheck(lambda x: LA.inv(dominant(x)), (one,))
    assert gradcheck(lambda x, y: LA.solve(dominant(x), y), (one, leaf(2, 1, 3, seed=81)))
    assert gradcheck(lambda x: LA.cholesky(dominant(x * x)), (one,))
    assert gradcheck(lambda x: LA.svdvals(dominant(x)), (one,))
    assert gradcheck(lambda x: LA.eigvalsh(x), (one,))
    assert gradcheck(lambda x: tuple(LA.qr(dominant(x))), (one,))
    empty = kiln.zeros([3, 0, 0], dtype=kiln.float64).requires_grad_()
    LA.det(empty).sum().backward()
    assert tuple(empty.grad.shape) == (3, 0, 0)
    batch0 = kiln.zeros([0, 3, 3], dtype=kiln.float64).requires_grad_()
    LA.inv(batch0).sum().backward()
    assert tuple(batch0.grad.shape) == (0, 3, 3)


@pytest.mark.parametrize("narrow,wide,tol", [(kiln.float32, kiln.float64, 1e-4), (kiln.complex64, kiln.complex128, 1e-4)])
def test_float32_and_complex64_gradients_agree_with_double(narrow, wide, tol):
    # Same inputs, computed in the narrow dtype: the gradient keeps that dtype and
    # agrees with the double one to its precision (condition numbers here are ~3).
    base = leaf(2, 4, 4, seed=90, dtype=np.complex128 if wide == kiln.complex128 else np.float64).detach()
    rhs = leaf(2, 4, 2, seed=91, dtype=np.complex128 if wide == kiln.complex128 else np.float64).detach()
    grads = []
    for dt in (narrow, wide):
        a = base.to(dt).requires_grad_()
        b = rhs.to(dt).requires_grad_()
        eye = kiln.eye(4, dtype=kiln.float32 if dt in (kiln.float32, kiln.complex64) else kiln.float64)
        A = a + eye * 6.0
        out = LA.solve(A, b).abs().sum() + LA.slogdet(A).logabsdet.sum() + LA.svdvals(A).sum()
        out = out + (LA.inv(A).abs() ** 2).sum() + LA.eigvalsh(A + kiln.autograd.conj(A).transpose(-2, -1)).sum()
        out.backward()
        assert a.grad.dtype == dt and b.grad.dtype == dt
        grads.append((a.grad.to(wide).numpy(), b.grad.to(wide).numpy()))
    for narrow_g, wide_g in zip(*grads):
        np.testing.assert_allclose(narrow_g, wide_g, rtol=tol, atol=tol)


def test_more_double_backward():
    a = leaf(3, 3, seed=95)
    assert gradgradcheck(lambda x: LA.slogdet(dominant(x)).logabsdet, (a,), atol=1e-4)
    assert gradgradcheck(lambda x: LA.pinv(dominant(x)), (a,), atol=1e-4)
    A = dominant(leaf(3, 3, seed=96)).detach()
    LU, piv = LA.lu_factor(A)
    LU = LU.clone().requires_grad_()
    assert gradgradcheck(lambda lu, y: LA.lu_solve(lu, piv, y), (LU, leaf(3, 2, seed=97)), atol=1e-4)
    assert gradgradcheck(lambda x, y: LA.solve_triangular(dominant(x), y, upper=False, left=False),
                         (a, leaf(2, 3, seed=98)), atol=1e-4)


def test_moe_route_bfloat16_logits_and_selection_bias():
    rng = np.random.default_rng(75)
    base = (rng.permutation(4 * 6).reshape(4, 6) * 0.25).astype(np.float32)
    logits = kiln.from_numpy(base).clone().to(kiln.bfloat16).requires_grad_()
    bias = kiln.from_numpy(rng.standard_normal(6).astype(np.float32)).clone().requires_grad_()
    w, ids = kiln.moe_route(logits, 2, scoring="sigmoid", renormalize=True, selection_bias=bias, renorm_eps=1e-6)
    g = kiln.from_numpy(rng.standard_normal((4, 2)).astype(np.float32)).clone()
    w.backward(g)
    # The gradient reaches the bfloat16 logits (cast back, as PyTorch's `to`); the bias
    # only changes the choice and gets none.
    assert logits.grad is not None and logits.grad.dtype == kiln.bfloat16 and bias.grad is None
    # The same routing from float32 logits holding the same (bfloat16) values: the
    # gradient agrees to bfloat16's precision (8 bits: relative 2^-8).
    f32 = logits.detach().to(kiln.float32).requires_grad_()
    w32, ids32 = kiln.moe_route(f32, 2, scoring="sigmoid", renormalize=True, selection_bias=bias.detach(),
                                renorm_eps=1e-6)
    np.testing.assert_array_equal(ids.numpy(), ids32.numpy())
    w32.backward(g)
    np.testing.assert_allclose(logits.grad.to(kiln.float32).numpy(), f32.grad.numpy(), rtol=1e-2, atol=1e-3)
