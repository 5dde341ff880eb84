"""What a result should be: numpy references for the ops numpy also has (computed in the
dtype PyTorch computes in), and the comparison that decides a mismatch.

A reference takes the case's evaluated names (kiln tensors and Python values), kiln's
result and the case's parameters, and returns an Expect, or None where it has nothing
to say (numpy and PyTorch differ there, or the case is outside what it models)."""

import math

import numpy as np

import kiln

from .values import BITS, COMPLEX, FLOATS, INTS, NARROW, NUMPY_NATIVE, SIGNED

EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float64": 2.0**-52,
       "float8_e4m3fn": 2.0**-3, "float8_e5m2": 2.0**-2, "complex64": 2.0**-23, "complex128": 2.0**-52}


class Expect:
    """An expected array; floating results match within atol + rtol * |want| (NaN where
    want is NaN, infinities exactly); `dtype` (a kiln dtype name) is checked when given."""

    def __init__(self, want, rtol=0.0, atol=0.0, dtype=None, mask=None):
        self.want, self.rtol, self.atol, self.dtype, self.mask = want, rtol, atol, dtype, mask


def dname(dtype):
    return str(dtype).replace("kiln.", "")


def np_compute(name):
    """The numpy dtype PyTorch computes `name` in: narrow floats widen to float32."""
    return "float32" if name in NARROW else name


def to_np(t):
    """A kiln tensor's values as numpy (narrow floats as float32, exactly)."""
    if isinstance(t, np.ndarray):
        return t
    name = dname(t.dtype)
    if name not in NUMPY_NATIVE:
        t = t.to(kiln.float32)
    return np.array(t.contiguous().numpy(), copy=True)


def round_to(values, name):
    """float32 (or wider) values rounded to dtype `name` as kiln stores them, back as
    numpy (the narrow cast itself is pinned by kiln's cast tests)."""
    if name in NARROW:
        arr = np.array(values, dtype=np.float32, order="C")
        return to_np(kiln.from_numpy(arr.reshape(-1)).to(getattr(kiln, name))).reshape(arr.shape)
    return np.asarray(values).astype(name)


def compare(got, exp):
    """None when kiln's result `got` matches, else a short description."""
    if exp.dtype is not None and dname(got.dtype) != exp.dtype:
        return f"dtype {dname(got.dtype)}, expected {exp.dtype}"
    g = to_np(got)
    w = np.asarray(exp.want)
    if g.shape != w.shape:
        return f"shape {g.shape}, expected {w.shape}"
    if g.size == 0:
        return None
    mask = np.ones(g.shape, bool) if exp.mask is None else np.broadcast_to(exp.mask, g.shape)
    if w.dtype.kind in "biu" or g.dtype.kind in "biu":
        bad = mask & (g.astype(object) != w.astype(object)) if w.dtype.kind in "biu" else mask & (g != w)
        return _first_bad(bad, g, w)
    if w.dtype.kind == "c" or g.dtype.kind == "c":
        g, w = g.astype(np.complex128), w.astype(np.complex128)
        return _float_mismatch(g.real, w.real, exp, mask) or _float_mismatch(g.imag, w.imag, exp, mask)
    return _float_mismatch(g.astype(np.float64), w.astype(np.float64), exp, mask)


def _float_mismatch(g, w, exp, mask):
    with np.errstate(all="ignore"):
        nan_w, nan_g = np.isnan(w), np.isnan(g)
        inf_w = np.isinf(w)
        # Equal values always match: a tolerance derived from NaN inputs is NaN itself.
        close = (g == w) | (np.abs(g - w) <= exp.atol + exp.rtol * np.abs(w))
        ok = np.where(nan_w, nan_g, np.where(inf_w, g == w, close & ~nan_g))
    return _first_bad(mask & ~ok, g, w)


def _first_bad(bad, g, w):
    if not bad.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{int(bad.sum())} of {bad.size} elements differ, first at {list(idx)}: got {g[idx]!r}, expected {w[idx]!r}"


# ---------------------------------------------------------------- unary


def _gelu_erf(x):
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return (0.5 * x.astype(np.float64) * (1 + erf(x.astype(np.float64) / math.sqrt(2)))).astype(x.dtype)


def _gelu_tanh(x):
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3)))).astype(x.dtype)


def _softplus(x):
    with np.errstate(all="ignore"):
        return np.where(x > 20, x, np.log1p(np.exp(x))).astype(x.dtype)


# name -> (numpy function, kind): "exact" ops are correctly rounded or exact; "float"
# ops turn integers into float32 and are transcendental (a few ulp); "bool" ops return bool.
UNARY = {
    "abs": (np.abs, "exact"), "neg": (np.negative, "exact"), "negative": (np.negative, "exact"),
    "sign": (np.sign, "exact"), "relu": (lambda x: np.maximum(x, np.zeros((), x.dtype)), "exact"),
    "floor": (np.floor, "exact"), "ceil": (np.ceil, "exact"), "round": (np.round, "exact"),
    "trunc": (np.trunc, "exact"), "square": (lambda x: x * x, "exact"),
    "exp": (np.exp, "float"), "exp2": (np.exp2, "float"), "expm1": (np.expm1, "float"),
    "log": (np.log, "float"), "log2": (np.log2, "float"), "log1p": (np.log1p, "float"),
    "sqrt": (np.sqrt, "float"), "rsqrt": (lambda x: 1 / np.sqrt(x), "float"),
    "reciprocal": (lambda x: 1 / x, "float"), "sin": (np.sin, "float"), "cos": (np.cos, "float"),
    "tanh": (np.tanh, "float"), "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), "float"),
    "silu": (lambda x: x / (1 + np.exp(-x)), "float"), "gelu": (_gelu_erf, "float"),
    "softplus": (_softplus, "float"),
    "isnan": (np.isnan, "bool"), "isinf": (np.isinf, "bool"), "isfinite": (np.isfinite, "bool"),
    "logical_not": (np.logical_not, "bool"), "bitwise_not": (np.invert, "exact"),
}
TRANSCENDENTAL_RTOL = {"float32": 2e-5, "float64": 1e-12, "complex64": 2e-5, "complex128": 1e-12}


def float_result(name):
    """The dtype a float-producing op returns for input dtype `name` (PyTorch's rule)."""
    return "float32" if name in INTS or name == "bool" else name


def ref_unary(ns, out, p):
    fn, kind = UNARY[p["op"]]
    x = ns["x"]
    name = dname(x.dtype)
    if p["op"] == "sign" and name == "bool":
        return None  # numpy has no sign for bool
    if p["op"] == "gelu" and p.get("approximate") == "tanh":
        fn = _gelu_tanh
    if name in COMPLEX and p.get("flavour") == "special" and kind != "bool" and p["op"] not in ("neg", "negative"):
        return None  # branch cuts and inf/NaN parts: numpy's complex math is not PyTorch's
    result = {"float": float_result(name), "bool": "bool"}.get(kind, name)
    if p["op"] == "square" and name == "bool":
        result = "int64"  # square is pow(x, 2): bool promotes to int64
    if p["op"] == "abs" and name in COMPLEX:
        result = "float32" if name == "complex64" else "float64"
    compute = np_compute(result if kind == "float" or p["op"] == "square" else name)
    with np.errstate(all="ignore"):
        want = np.asarray(fn(to_np(x).astype(compute)))
    mask = None
    if p["op"] == "sign":
        mask = ~np.isnan(want)  # PyTorch's sign(NaN) is 0, numpy's NaN
    if result in NARROW:
        want = round_to(want, result)
    rtol = atol = 0.0
    if kind == "float":
        rtol = atol = TRANSCENDENTAL_RTOL.get(np_compute(result), 0.0)
        if p["op"] in ("sin", "cos"):
            # Range reduction of |x| > 2^16: PyTorch (Sleef u10) is exact there too, but
            # a large argument is an accuracy matter, not a silent wrong value.
            mask = np.abs(to_np(x).astype(np.float64)) < 65536
    if result in NARROW:
        rtol, atol = EPS[result], EPS[result] * 1e-3
    return Expect(want, rtol, atol, dtype=result, mask=mask)


# ---------------------------------------------------------------- binary

def _trunc_div(a, b):
    if a.dtype.kind in "iu":
        q = np.floor_divide(a, b)
        r = np.remainder(a, b)
        return q + ((r != 0) & ((a < 0) != (b < 0))).astype(q.dtype)
    return np.trunc(a / b)


BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "true_divide": np.true_divide,
    "div_trunc": _trunc_div, "div_floor": np.floor_divide, "floor_divide": np.floor_divide,
    "remainder": np.remainder, "pow": np.power, "maximum": np.maximum, "minimum": np.minimum,
    "atan2": np.arctan2, "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "logical_and": np.logical_and, "logical_or": np.logical_or,
    "logical_xor": np.logical_xor, "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor, "bitwise_left_shift": np.left_shift, "bitwise_right_shift": np.right_shift,
}
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
LOGICAL = ("logical_and", "logical_or", "logical_xor")


def _promote(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return dname(kiln.promote_types(getattr(kiln, a), getattr(kiln, b)))


def _combine(higher, lower):
    """c10's combine_categories: the higher-priority group's dtype unless the lower
    group has a higher category."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher in COMPLEX:
        return higher
    if lower in COMPLEX:
        return ("complex128" if higher == "float64" else "complex64") if higher in FLOATS else lower
    if higher in FLOATS:
        return higher
    if higher == "bool" or lower in FLOATS:
        return _promote(higher, lower)
    return higher


def result_type(*operands):
    """PyTorch's result_type: dimensioned tensors, then zero-dim tensors, then Python
    scalars (int64, float32, complex64 or bool), each group promoted within itself."""
    dim = zero = wrapped = None
    for v in operands:
        if isinstance(v, kiln.Tensor):
            if v.dim() > 0:
                dim = _promote(dim, dname(v.dtype))
            else:
                zero = _promote(zero, dname(v.dtype))
        else:
            kind = "bool" if isinstance(v, bool) else "int64" if isinstance(v, int) else \
                "float32" if isinstance(v, float) else "complex64"
            wrapped = _promote(wrapped, kind)
    return _combine(dim, _combine(zero, wrapped))


def _operand(v, compute):
    if isinstance(v, kiln.Tensor):
        return to_np(v).astype(compute)
    if isinstance(v, int) and not isinstance(v, bool) and compute in INTS + ("bool",):
        lo, hi = (-(2**63), 2**64 - 1)
        if not lo <= v <= hi:
            raise OverflowError
        return np.array(v % 2**64 if v < 0 and compute[0] == "u" else v).astype(compute)
    return np.array(v).astype(compute)


def ref_binary(ns, out, p):
    op = p["op"]
    a, b = ns["a"], ns["b"]
    try:
        promoted = result_type(a, b)
    except (TypeError, RuntimeError, ValueError):
        return None  # PyTorch refuses this promotion; kiln's answer is checked by other cases
    result = dname(out.dtype)
    if op in COMPARISONS or op in LOGICAL or p.get("inplace"):
        compute = np_compute(promoted)  # in place: computed in the promoted dtype, then stored
    else:
        compute = np_compute(result)
    try:
        x, y = _operand(a, compute), _operand(b, compute)
    except (OverflowError, ValueError):
        return None
    if compute in COMPLEX and (op in ("pow", "div", "true_divide") or not (
            np.isfinite(x).all() and np.isfinite(y).all())):
        return None  # complex inf/NaN arithmetic: numpy and PyTorch differ in the corners
    if op in COMPARISONS and promoted in NARROW and not isinstance(a, kiln.Tensor):
        return None  # kiln.lt(number, tensor) has no PyTorch counterpart to follow here
    if (op in COMPARISONS or op in LOGICAL) and promoted in NARROW:
        # A comparison's number operand is first converted to the narrow dtype (so 2^31
        # is inf in float16), as in PyTorch's CPU comparison kernels.
        x, y = (round_to(v, promoted) if not isinstance(o, kiln.Tensor) else v for v, o in ((x, a), (y, b)))
    alpha = p.get("alpha")
    if alpha is not None:
        alpha = eval(alpha, {"nan": math.nan, "inf": math.inf, "complex": complex})  # noqa: S307
    fn = BINARY[op]
    mask = None
    with np.errstate(all="ignore"):
        if op == "pow" and not isinstance(b, kiln.Tensor) and not isinstance(b, complex):
            # PyTorch evaluates these exponents without pow (so sqrt(-inf) is NaN).
            shortcuts = {0.5: np.sqrt, -0.5: lambda v: 1 / np.sqrt(v), 2: lambda v: v * v,
                         3: lambda v: v * v * v, -1: lambda v: 1 / v, -2: lambda v: 1 / (v * v)}
            if b in shortcuts and compute not in INTS:
                fn = lambda v, _e, f=shortcuts[b]: f(v)  # noqa: E731
        if op == "pow" and compute in INTS:
            if (np.asarray(y) < 0).any():
                return None  # PyTorch truncates integer ** negative integer; numpy refuses
        if op in ("bitwise_left_shift", "bitwise_right_shift"):
            bits = BITS.get(compute, 8)
            yb = np.broadcast_to(np.asarray(y), np.broadcast(np.asarray(x), np.asarray(y)).shape)
            mask = (yb >= 0) & (yb < bits)
            y = np.where(mask, yb, 0).astype(compute)
        if op in ("div_trunc", "div_floor", "floor_divide", "remainder") and compute in INTS:
            if (np.asarray(y) == 0).any():
                return None  # kiln raises for an integer division by zero
        if alpha is not None and op in ("add", "sub"):
            if compute in FLOATS:  # a + alpha * b is one fused multiply-add (no overflow in between)
                x, y = x.astype(np.float64), y.astype(np.float64) * np.float64(alpha)
            else:
                y = y * np.array(alpha).astype(compute)
        want = np.asarray(fn(x, y))
        if want.dtype != np.dtype(compute) and compute not in INTS and want.dtype.kind in "fc":
            want = want.astype(compute)  # one rounding, as a fused multiply-add
    if op in COMPARISONS or op in LOGICAL:
        return Expect(want, dtype="bool", mask=mask)
    expected_dtype = None
    if not p.get("inplace"):
        expected_dtype = float_result(promoted) if op in ("div", "true_divide", "atan2") else promoted
    if result in NARROW:
        want = round_to(want, result)
    elif p.get("inplace") and result != compute:
        want = want.astype(np_compute(result))
    rtol = atol = 0.0
    if op in ("atan2", "pow") or alpha is not None or op in ("div", "true_divide", "div_trunc", "div_floor",
                                                             "floor_divide", "remainder"):
        rtol = atol = TRANSCENDENTAL_RTOL.get(compute, 0.0)
    if result in NARROW:
        rtol, atol = EPS[result], EPS[result] * 1e-3
    if op in ("div_floor", "floor_divide", "remainder", "div_trunc") and compute in FLOATS:
        # floor(a / b) flips by one near integers; compare where the quotient is moderate.
        with np.errstate(all="ignore"):
            q = np.abs(np.asarray(x, np.float64) / np.asarray(y, np.float64))
        mask = np.broadcast_to((q < 2**20) | ~np.isfinite(q), want.shape)
    return Expect(want, rtol, atol, dtype=expected_dtype, mask=mask)


# ---------------------------------------------------------------- reductions


def _axis(dim, nd):
    if dim is None:
        return None
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    if nd == 0 or any(not -nd <= d < nd for d in dims):
        raise ValueError
    norm = [d % nd for d in dims]
    if len(set(norm)) != len(norm):
        raise ValueError
    return tuple(norm) if isinstance(dim, (list, tuple)) else norm[0]


def ref_reduce(ns, out, p):
    op, x = p["op"], ns["x"]
    name = dname(x.dtype)
    xv = to_np(x)
    try:
        axis = _axis(p.get("dim"), xv.ndim)
    except ValueError:
        return None
    if isinstance(axis, tuple) and len(axis) == 0:
        axis = None  # dim=() reduces over every dim, as PyTorch's dim=[]
    keep = bool(p.get("keepdim", False))
    if op in ("max", "min") and p.get("dim") is None and keep:
        return None  # no such call in PyTorch (max(x, dim=None, keepdim=True))
    n = xv.size if axis is None else int(np.prod([xv.shape[a] for a in np.atleast_1d(axis)]))
    with np.errstate(all="ignore"):
        if op == "sum":
            result = dname(out.dtype)
            compute = "int64" if result in INTS or result == "bool" else np_compute(result)
            want = np.sum(xv.astype(compute), axis=axis, keepdims=keep)
            if result in NARROW:
                want = round_to(want, result)
            bound = np.sum(np.abs(xv.astype(np.complex128 if compute in COMPLEX else np.float64)), axis=axis,
                           keepdims=keep) if compute not in INTS else 0
            tol = EPS.get(result, 0) * (1 + n)
            return Expect(want, tol, np.abs(bound) * tol if compute not in INTS else 0, dtype=result)
        if op in ("amax", "amin") or (op in ("max", "min") and p.get("dim") is None):
            if xv.size == 0 or name in COMPLEX:
                return None
            fn = np.max if op in ("amax", "max") else np.min
            return Expect(fn(xv, axis=axis, keepdims=keep), dtype=name)
        if op in ("argmax", "argmin"):
            if xv.size == 0 or name in COMPLEX or isinstance(axis, tuple):
                return None
            fn = np.argmax if op == "argmax" else np.argmin
            want = fn(xv, axis=axis)
            if keep:
                want = np.expand_dims(want, axis) if axis is not None else want.reshape([1] * xv.ndim)
            return Expect(want, dtype="int64")
        if op == "prod":
            result = dname(out.dtype)
            compute = "int64" if result in INTS or result == "bool" else np_compute(result)
            if compute in COMPLEX:
                return None
            if compute not in INTS:
                mags = np.abs(xv.astype(np.float64))
                logs = np.log2(np.where((mags > 0) & np.isfinite(mags), mags, 1.0))
                if np.sum(np.maximum(logs, 0), axis=axis).max(initial=0) > 100:
                    return None  # partial products may overflow before a zero: inf * 0 depends on the order
            want = np.prod(xv.astype(compute), axis=axis, keepdims=keep)
            if result in NARROW:
                want = round_to(want, result)
            return Expect(want, EPS.get(result, 0) * (2 + n), 0.0, dtype=result)
        if op == "mean":
            result = dname(out.dtype)
            if result not in FLOATS or xv.size == 0:
                return None
            want = np.mean(xv.astype(np.float64), axis=axis, keepdims=keep)
            bound = np.mean(np.abs(xv.astype(np.float64)), axis=axis, keepdims=keep)
            tol = EPS[result] * (2 + n)
            return Expect(round_to(want, result) if result in NARROW else want, tol, bound * tol, dtype=result)
        if op in ("var", "std"):
            result = dname(out.dtype)
            if name not in FLOATS or xv.size == 0:
                return None
            correction = p.get("correction", 1)
            x64 = xv.astype(np.float64)
            finite = np.abs(x64[np.isfinite(x64)])
            if finite.size and finite.max() > 1e150:
                return None  # squares overflow: inf or NaN depends on the algorithm (Welford or two-pass)
            mean = np.mean(x64, axis=axis, keepdims=True)
            count = n - correction
            var = np.sum((x64 - mean) ** 2, axis=axis, keepdims=keep) / max(count, 0) if count > 0 else (
                np.sum((x64 - mean) ** 2, axis=axis, keepdims=keep) / 0.0)
            want = np.sqrt(var) if op == "std" else var
            tol = EPS[result] * (8 + 4 * n)
            return Expect(round_to(want, result) if result in NARROW else want, tol, tol * 1e-30, dtype=result)
        if op == "cumsum":
            result = dname(out.dtype)
            if xv.ndim == 0 or axis is None:
                return None
            compute = "int64" if result in INTS or result == "bool" else (
                "complex128" if result in COMPLEX else "float64")
            want = np.cumsum(xv.astype(compute), axis=axis)
            if result in NARROW:
                want = round_to(want, result)
            elif result in FLOATS:
                want = want.astype(result)
            tol = EPS.get(result, 0) * 2
            return Expect(want, tol, tol * 1e-30, dtype=result)
    return None


def ref_softmax(ns, out, p):
    x = ns["x"]
    xv = to_np(x).astype(np.float64)
    try:
        axis = _axis(p["dim"], xv.ndim) if xv.ndim else None
    except ValueError:
        return None
    result = dname(out.dtype)
    with np.errstate(all="ignore"):
        m = np.max(xv, axis=axis, keepdims=True) if xv.size else xv
        e = np.exp(xv - m)
        s = np.sum(e, axis=axis, keepdims=True)
        want = (xv - m - np.log(s)) if p["op"] == "log_softmax" else e / s
    tol = max(EPS.get(result, 2.0**-23) * 8, 1e-6)
    return Expect(round_to(want, result) if result in NARROW else want.astype(np_compute(result)), tol, tol,
                  dtype=result)


def ref_sort(ns, out, p):
    x = ns["x"]
    if dname(x.dtype) in COMPLEX:
        return None
    xv = to_np(x)
    if xv.ndim == 0:
        return None
    try:
        axis = _axis(p.get("dim", -1), xv.ndim)
    except ValueError:
        return None
    want = np.sort(xv, axis=axis, kind="stable")
    if p.get("descending") or p.get("largest", False):
        want = np.flip(want, axis=axis)
    if p["op"] == "topk":
        k = p["k"]
        if not 0 <= k <= xv.shape[axis]:
            return None
        want = np.take(want if p.get("largest", True) else np.sort(xv, axis=axis), range(k), axis=axis)
    if p["op"] == "argsort":
        if p.get("descending") or not p.get("stable"):
            return None
        return Expect(np.argsort(xv, axis=axis, kind="stable"), dtype="int64")
    return Expect(want, dtype=dname(x.dtype))


# ---------------------------------------------------------------- matmul


def ref_matmul(ns, out, p):
    a, b = ns["a"], ns["b"]
    result = dname(out.dtype)
    an, bn = to_np(a), to_np(b)
    if p["op"] == "linear":
        bn = np.swapaxes(bn, -1, -2) if bn.ndim == 2 else bn
    if result in INTS:
        want = np.matmul(an.astype(result), bn.astype(result))
        if p["op"] == "linear" and ns.get("c") is not None:
            want = want + to_np(ns["c"]).astype(result)
        return Expect(want, dtype=result)
    if result not in ("float32", "float64", "float16", "bfloat16", "complex64", "complex128"):
        return None
    wide = np.complex128 if result in COMPLEX else np.float64
    if (not np.isfinite(an).all()) or (not np.isfinite(bn).all()):
        return None  # BLAS may reorder inf * 0 and inf - inf; the value class is checked elsewhere
    want = np.matmul(an.astype(wide), bn.astype(wide))
    bound = np.matmul(np.abs(an).astype(np.float64), np.abs(bn).astype(np.float64))
    if p["op"] == "linear" and ns.get("c") is not None:
        want = want + to_np(ns["c"]).astype(wide)
        bound = bound + np.abs(to_np(ns["c"])).astype(np.float64)
    k = an.shape[-1] if an.ndim else 1
    tol = (k + 2) * (EPS["float32"] if result in NARROW else EPS[result])
    if result in NARROW:
        want = round_to(want.real if not np.iscomplexobj(want) else want, result)
        return Expect(want, EPS[result], bound * tol + 1e-30, dtype=result)
    return Expect(want, 0.0, bound * tol + 1e-300, dtype=result)


# ---------------------------------------------------------------- shape, index, creation


def _gather(x, d, idx):
    out = np.empty(idx.shape, x.dtype)
    for pos in np.ndindex(*idx.shape):
        src = list(pos)
        src[d] = idx[pos]
        out[pos] = x[tuple(src)]
    return out


def _scaled(v, alpha, dtype):
    # Python int * numpy uint64 would go through float64; alpha 1 needs no multiply.
    return v.astype(dtype) if alpha == 1 else (v * alpha).astype(dtype)


def _scatter_add(x, d, idx, src, alpha=1):
    out = x.copy()
    for pos in np.ndindex(*idx.shape):
        dst = list(pos)
        dst[d] = idx[pos]
        out[tuple(dst)] += _scaled(src[pos], alpha, out.dtype)
    return out


def _index_add(x, d, idx, src, alpha=1):
    out = x.copy()
    for i, j in enumerate(idx):
        sel = [slice(None)] * x.ndim
        sel[d] = j
        ssel = [slice(None)] * src.ndim
        ssel[d] = i
        out[tuple(sel)] = out[tuple(sel)] + _scaled(src[tuple(ssel)], alpha, out.dtype)
    return out


def _flatten(x, start=0, end=-1):
    if x.ndim == 0:
        return x.reshape(1)
    s, e = start % x.ndim, end % x.ndim
    return x.reshape(x.shape[:s] + (-1,) + x.shape[e + 1:]) if s <= e else None


def _split(x, size, d=0):
    n = x.shape[d]
    if isinstance(size, int):
        bounds = list(range(size, n, size)) if size > 0 else None
        return np.split(x, bounds, axis=d) if bounds is not None else None
    return np.split(x, np.cumsum(size)[:-1], axis=d) if sum(size) == n else None


def _chunk(x, chunks, d=0):
    # PyTorch's chunk of an empty dim gives `chunks` empty pieces (split_with_sizes of
    # zeros), not the one piece split(0) would.
    n = x.shape[d]
    if n == 0:
        return [x] * chunks
    return _split(x, -(-n // chunks), d)


def _setitem(x, idx, v):
    out = x.copy()
    out[idx] = v
    return out


def _linspace(start, end, steps):
    if steps == 1:
        return np.array([start], np.float64)
    step = (end - start) / (steps - 1)
    i = np.arange(steps, dtype=np.float64)
    return np.where(i < steps // 2, start + i * step, end - (steps - 1 - i) * step)


HELPERS = {"gather": _gather, "scatter_add": _scatter_add, "index_add": _index_add, "flatten": _flatten,
           "split": _split, "chunk": _chunk, "setitem": _setitem, "linspace": _linspace, "np": np,
           "nan": math.nan, "inf": math.inf}


def ref_numpy_expr(ns, out, p):
    """A numpy expression over the inputs' numpy values (names as in the case), for ops
    that move or select values without arithmetic: the result must match exactly."""
    env = {k: (to_np(v) if isinstance(v, kiln.Tensor) else v) for k, v in ns.items() if not k.startswith("__")}
    env.update(HELPERS)
    try:
        with np.errstate(all="ignore"):
            want = eval(p["expr"], env)  # noqa: S307 (the sweep's own generated source)
    except Exception:  # noqa: BLE001 (numpy refusing is not kiln's finding)
        return None
    if isinstance(want, (list, tuple)):
        return [Expect(np.asarray(w), p.get("rtol", 0.0), p.get("atol", 0.0)) for w in want]
    if want is None:
        return None
    want = np.asarray(want)
    if p.get("cast"):  # compare in kiln's result dtype (values the op only moves)
        result = dname(out.dtype)
        want = round_to(want, result) if result in NARROW else want.astype(np_compute(result))
    return Expect(want, p.get("rtol", 0.0), p.get("atol", 0.0), dtype=p.get("dtype"))


def ref_property(ns, out, p):
    """A property of kiln's result (`out`, as numpy) that must hold, e.g. rand in [0, 1)."""
    env = dict(HELPERS)
    env["out"] = to_np(out)
    env.update({k: (to_np(v) if isinstance(v, kiln.Tensor) else v) for k, v in ns.items() if not k.startswith("__")})
    with np.errstate(all="ignore"):
        ok = bool(eval(p["expr"], env))  # noqa: S307
    return None if ok else Violation(f"property does not hold: {p['expr']}")


class Violation:
    """A result that is wrong whatever its values (a property fails, or PyTorch raises)."""

    def __init__(self, why):
        self.why = why


# ---------------------------------------------------------------- attention, grouped_mm


def _repeat_heads(x, heads):
    return x if x.shape[-3] == heads else np.repeat(x, heads // x.shape[-3], axis=-3)


def ref_attention_decode(ns, out, p):
    """attention_decode(q [B, Hq, E], caches [B, Hkv, S, E], valid) is SDPA of one query
    per head against the first `valid` keys of its KV head (GQA, repeat_interleave)."""
    q, kc, vc = (to_np(ns[n]).astype(np.float64) for n in ("q", "kc", "vc"))
    valid = p["valid"]
    if not (q.ndim == 3 and kc.ndim == 4 and 0 <= valid <= kc.shape[2] and kc.shape[1] and
            q.shape[1] % kc.shape[1] == 0):
        return None
    k, v = _repeat_heads(kc[:, :, :valid], q.shape[1]), _repeat_heads(vc[:, :, :valid], q.shape[1])
    env = {"q": q[:, :, None, :], "k": k, "v": v}
    exp = ref_sdpa({n: kiln.from_numpy(np.ascontiguousarray(a)) for n, a in env.items()}, out, p)
    if exp is None:
        return None
    exp.want = exp.want[:, :, 0, :]
    exp.atol = np.asarray(exp.atol)[..., 0, :] if np.ndim(exp.atol) == 4 else exp.atol
    exp.dtype = dname(out.dtype)
    return exp


def ref_sdpa(ns, out, p):
    """PyTorch's _scaled_dot_product_attention_math (see the Python hostile tests)."""
    q, k, v = (to_np(ns[n]).astype(np.float64) for n in ("q", "k", "v"))
    if p.get("enable_gqa") and q.ndim >= 3 and k.ndim >= 3 and k.shape[-3] and v.shape[-3] and \
            q.shape[-3] % k.shape[-3] == 0 and q.shape[-3] % v.shape[-3] == 0:
        k, v = _repeat_heads(k, q.shape[-3]), _repeat_heads(v, q.shape[-3])
    if q.ndim < 2 or k.ndim < 2 or q.ndim != k.ndim or q.shape[:-2] != k.shape[:-2] or k.shape[:-2] != v.shape[:-2]:
        return None
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = p.get("scale")
    if scale is None:
        scale = 1 / math.sqrt(E) if E else math.inf
    if S == 0:
        return None
    sf = math.sqrt(abs(scale)) if not math.isnan(scale) else math.nan
    cdt = np.float64 if dname(out.dtype) == "float64" else np.float32
    with np.errstate(all="ignore"):
        qc, kc = q.astype(cdt), k.astype(cdt)
        attn = ((qc * cdt(-sf if scale < 0 else sf))[..., :, None, :] * (kc * cdt(sf))[..., None, :, :]).sum(-1)
        folded = ((qc * cdt(scale))[..., :, None, :] * kc[..., None, :, :]).sum(-1)
        if not np.array_equal(np.isfinite(attn), np.isfinite(folded)):
            return None  # near overflow kiln's (q * scale) . k and PyTorch's split sqrt(scale) differ
        attn = attn.astype(np.float64)
        mask = ns.get("mask")
        if p.get("is_causal"):
            attn = attn + np.where(np.tril(np.ones((L, S), bool)), 0.0, -math.inf)
        if mask is not None:
            m = to_np(mask)
            attn = attn + (np.where(m, 0.0, -math.inf) if m.dtype == bool else m.astype(np.float64))
        mx = attn.max(-1, keepdims=True)
        e = np.exp(attn - mx)
        w = e / e.sum(-1, keepdims=True)
        hidden = (attn == -math.inf).all(-1, keepdims=True)
        if p.get("is_causal") and not np.isfinite(v).all():
            return None  # kiln never reads the keys is_causal hides (docs/ops.md)
        # Rows with every key hidden are zeros (kiln decision 5), whatever v holds.
        w = np.where(hidden, 0.0, w)
        want = np.where(hidden, 0.0, w @ v)
        scale_of_terms = np.where(hidden, 0.0, np.abs(w) @ np.where(np.isfinite(v), np.abs(v), 0.0))
    result = dname(out.dtype)
    tol = 1e-4 if result == "float32" else 1e-10 if result == "float64" else 2 * EPS[result]
    # Terms of opposite sign cancel: the error scales with sum |w| |v|, not with the result.
    return Expect(round_to(want, result) if result in NARROW else want, tol, tol * (1 + scale_of_terms),
                  dtype=result)


def ref_grouped_mm(ns, out, p):
    a, b, offs = to_np(ns["a"]).astype(np.float64), to_np(ns["b"]).astype(np.float64), ns.get("offs")
    o = [] if offs is None else [int(v) for v in to_np(offs)]
    result = dname(out.dtype)
    if a.ndim == 2 and b.ndim == 3:
        want = np.zeros((a.shape[0], b.shape[-1]))
        s = 0
        for g, e in enumerate(o):
            want[s:e] = a[s:e] @ b[g]
            s = e
        bound_k = a.shape[1]
    elif a.ndim == 3 and b.ndim == 2:
        want = np.zeros((a.shape[1], b.shape[1]))
        s = 0
        for g, e in enumerate(o):
            want[:, s:e] = a[g] @ b[:, s:e]
            s = e
        bound_k = a.shape[2]
    elif a.ndim == 2 and b.ndim == 2:
        want = np.zeros((len(o), a.shape[0], b.shape[1]))
        s = 0
        for g, e in enumerate(o):
            want[g] = a[:, s:e] @ b[s:e]
            s = e
        bound_k = a.shape[1]
    else:
        want = a @ b
        bound_k = a.shape[2]
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return None
    tol = (bound_k + 2) * EPS["float32"] * max(1.0, float(np.abs(a).max(initial=0) * np.abs(b).max(initial=0)) * bound_k)
    if result in NARROW:
        return Expect(round_to(want, result), EPS[result], tol, dtype=result)
    return Expect(want, 0.0, tol, dtype=result)


def ref_error(ns, out, p):
    return Violation(f"expected an error ({p['why']}), got a result")


REFS = {
    "error": ref_error, "property": ref_property,
    "unary": ref_unary, "binary": ref_binary, "reduce": ref_reduce, "softmax": ref_softmax, "sort": ref_sort,
    "matmul": ref_matmul, "numpy": ref_numpy_expr, "sdpa": ref_sdpa, "grouped_mm": ref_grouped_mm,
    "attention_decode": ref_attention_decode,
}
