"""Case generators, one per family of the public API. A case is a dict:
  op      the op's name (for the report)
  setup   statements that build the inputs (kiln expressions)
  call    the call under test (an expression, or a statement with "stmt" and "result")
  ref     (oracle name, parameters) or None: see oracles.REFS
  invariant  whether making the inputs contiguous must leave the result unchanged
  mutates    the call writes into an input (the oracle sees the inputs from before)
Each generator draws cases at random from its family's space with the given rng."""

from .oracles import BINARY, UNARY
from .values import (ALL, BAD_DIMS, COMPLEX, FLOATS, HUGE_SHAPES, INTS, LAYOUTS, NARROW, SHAPES_LARGE, SHAPES_SMALL,
                     SIGNED, fmt, numel, tensor_expr)


def case(op, setup, call, ref=None, invariant=True, **extra):
    c = {"op": op, "setup": list(setup), "call": call, "ref": ref, "invariant": invariant}
    c.update(extra)
    return c


class Draw:
    """Random choices shared by the generators."""

    def __init__(self, rng, large):
        self.rng = rng
        self.shapes = SHAPES_SMALL + (SHAPES_LARGE if large else [])

    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def chance(self, p):
        return self.rng.random() < p

    def dtype(self, pool=ALL):
        return self.pick(pool)

    def shape(self):
        return self.pick(self.shapes)

    def flavour(self):
        return "special" if self.chance(0.4) else "plain"

    def layout(self):
        return "contig" if self.chance(0.4) else self.pick(LAYOUTS)

    def tensor(self, name, dtype=None, shape=None, flavour=None, layout=None):
        dtype = dtype or self.dtype()
        shape = self.shape() if shape is None else shape
        expr = tensor_expr(dtype, shape, flavour or self.flavour(), layout or self.layout())
        return f"{name} = {expr}"

    def scalar(self, kind=None):
        kind = kind or self.pick(["int", "float", "bool", "complex", "huge", "special"])
        return {
            "int": lambda: self.pick([0, 1, 2, 3, -1, -7, 100]),
            "float": lambda: self.pick([0.5, -1.5, 2.0, 0.0, -0.0, 1e-3, 3.75]),
            "bool": lambda: self.pick([True, False]),
            "complex": lambda: self.pick([complex(1, 2), complex(0, -1), complex(0.5, 0)]),
            "huge": lambda: self.pick([2**31, 2**63 - 1, 2**63, 2**64, -(2**63), -(2**63) - 1, 10**30, 1e300]),
            "special": lambda: self.pick([float("nan"), float("inf"), float("-inf"), 1e38, 65504.0, 448.0]),
        }[kind]()


# ---------------------------------------------------------------- elementwise

UNARY_CALLS = {"neg": ["-x"], "abs": ["abs(x)"], "bitwise_not": ["~x"]}
TENSOR_METHODS = {"abs", "neg", "negative", "sign", "relu", "floor", "ceil", "round", "trunc", "square", "exp", "exp2",
                  "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh", "sigmoid",
                  "silu", "gelu", "softplus", "isnan", "isinf", "isfinite", "logical_not", "bitwise_not"}


def gen_unary(d):
    op = d.pick(sorted(UNARY))
    dtype = d.dtype()
    flavour = d.flavour()
    setup = [d.tensor("x", dtype, flavour=flavour)]
    forms = [f"kiln.{op}(x)"] + ([f"x.{op}()"] if op in TENSOR_METHODS else []) + UNARY_CALLS.get(op, [])
    params = {"op": op, "flavour": flavour}
    call = d.pick(forms)
    if op == "gelu" and d.chance(0.3):
        approx = d.pick(["tanh", "none", "bogus", ""])
        call = f"kiln.gelu(x, approximate={approx!r})"
        params["approximate"] = approx
        if approx not in ("tanh", "none"):
            return case(op, setup, call)
    if op == "softplus" and d.chance(0.3):
        beta, threshold = d.pick([0, -1, 2, 1e-30, float("nan")]), d.pick([20, 0, -5, float("inf")])
        return case(op, setup, f"kiln.softplus(x, beta={fmt(beta)}, threshold={fmt(threshold)})")
    return case(op, setup, call, ("unary", params))


BINARY_OPERATORS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floor_divide": "//", "remainder": "%",
                    "pow": "**", "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^",
                    "bitwise_left_shift": "<<", "bitwise_right_shift": ">>", "eq": "==", "ne": "!=", "lt": "<",
                    "le": "<=", "gt": ">", "ge": ">="}
# The in-place forms the Python API has: methods for add and mul, operators for all four.
INPLACE = {"add": "a.add_(b{kw})", "mul": "a.mul_(b)", "sub": "a -= b", "div": "a /= b"}
TENSOR_ONLY = {"maximum", "minimum", "atan2", "logical_and", "logical_or", "logical_xor"}
BROADCAST_PAIRS = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((5,), ()), ((0, 3), (1, 3)), ((), ()),
                   ((2, 1, 3), (4, 1)), ((3,), (4,)), ((17,), (17,)), ((70,), (1,)), ((2, 0), (2, 1)),
                   ((33, 5), (33, 1))]


def _binary_op_name(op, rounding):
    if op == "div" and rounding in ("trunc", "floor"):
        return f"div_{rounding}"
    return op


def gen_binary(d):
    op = d.pick(sorted(set(BINARY) - {"div_trunc", "div_floor"}))
    flavour = d.flavour()
    same = d.chance(0.5)
    da = d.dtype()
    db = da if same else d.dtype()
    if op.startswith("bitwise") and d.chance(0.7):
        da = d.pick(INTS + ("bool",))
        db = da if same else d.pick(INTS + ("bool",))
    sa, sb = d.pick(BROADCAST_PAIRS)
    if d.chance(0.5):
        sa, sb = sb, sa
    if d.chance(0.1):
        sa, sb = d.pick(SHAPES_LARGE), ()
    params = {"op": op, "flavour": flavour}
    mode = d.pick(["tt", "tt", "ts", "st", "op", "inplace"])
    if op in TENSOR_ONLY and mode in ("ts", "st"):
        mode = "tt"
    setup = [d.tensor("a", da, sa, flavour)]
    rounding = None
    kwargs = ""
    if op == "div" and d.chance(0.5):
        rounding = d.pick(["trunc", "floor", "bogus", None])
        kwargs = f", rounding_mode={rounding!r}"
        params["op"] = _binary_op_name(op, rounding)
    if op in ("add", "sub") and d.chance(0.3):
        alpha = d.pick([2, -1, 0, 0.5, True, complex(1, 1), 2**63, float("nan")])
        kwargs = f", alpha={fmt(alpha)}"
        params["alpha"] = fmt(alpha)  # source text: JSON has no complex numbers
    if mode in ("tt", "op", "inplace"):
        setup.append(d.tensor("b", db, sb, flavour))
    else:
        setup.append(f"b = {fmt(d.scalar())}")
    if mode == "st":
        setup[0], setup[1] = setup[1].replace("b =", "a =", 1), setup[0].replace("a =", "b =", 1)
    if rounding == "bogus":
        return case(op, setup, f"kiln.div(a, b{kwargs})")
    if mode == "op" and op in BINARY_OPERATORS and "alpha" not in params and rounding is None:
        return case(op, setup, f"a {BINARY_OPERATORS[op]} b", ("binary", params))
    if mode == "inplace" and op in INPLACE and rounding is None and ("alpha" not in params or op == "add"):
        call = INPLACE[op].format(kw=kwargs)
        params["inplace"] = True
        stmt = "=" in call
        return case(f"{op} in place", setup, call, ("binary", params), mutates=True,
                    **({"stmt": True, "result": "a"} if stmt else {}))
    if mode == "st" and op in ("sub", "div", "pow", "remainder", "floor_divide", "add", "mul") and d.chance(0.5):
        sym = BINARY_OPERATORS[op]
        if "alpha" not in params and rounding is None:
            return case(op, setup, f"a {sym} b", ("binary", params))
    fn = op if op not in ("div_trunc", "div_floor") else "div"
    return case(op, setup, f"kiln.{fn}(a, b{kwargs})", ("binary", params))


def gen_clamp_where(d):
    dtype = d.dtype()
    shape = d.shape()
    setup = [d.tensor("x", dtype, shape)]
    if d.chance(0.5):
        lo, hi = d.pick([None, 0, -1.5, float("nan"), 2, 2**63]), d.pick([None, 1, 0.5, float("nan"), -3, float("inf")])
        nan_bound = any(v != v for v in (lo, hi) if isinstance(v, float))  # PyTorch's answer depends on the path
        if d.chance(0.3):
            setup.append(d.tensor("lo", d.dtype(), d.pick([shape, (), (1,)])))
            lo = "lo"
            ref = None
        else:
            exprs = "x"
            if lo is not None:
                exprs = f"np.maximum({exprs}, {fmt(lo)})"
            if hi is not None:
                exprs = f"np.minimum({exprs}, {fmt(hi)})"
            ref = ("numpy", {"expr": exprs, "cast": True}) if dtype not in COMPLEX and (lo, hi) != (None, None) and \
                all(isinstance(v, float) or v is None for v in (lo, hi)) and dtype in FLOATS and not nan_bound \
                else None
            lo = fmt(lo) if lo is not None else "None"
        return case("clamp", setup, f"kiln.clamp(x, {lo}, {fmt(hi) if hi is not None else 'None'})", ref)
    setup.append(d.tensor("c", d.pick(["bool", "bool", "bool", "int8", "float32"]), d.pick([shape, (), (1,)])))
    other = d.pick(["x", fmt(d.scalar()), "y"])
    if other == "y":
        setup.append(d.tensor("y", d.dtype(), d.pick([shape, ()])))
    ref = ("numpy", {"expr": f"np.where(c, x, {other})", "cast": True}) if dtype in FLOATS + INTS and \
        other in ("x", "y") else None
    return case("where", setup, f"kiln.where(c, x, {other})", ref)


# ---------------------------------------------------------------- reductions


REDUCTIONS = ["sum", "prod", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std", "norm",
              "cumsum", "softmax", "log_softmax", "sort", "argsort", "topk"]


def _dim_arg(d, nd):
    return d.pick([None, 0, -1, nd, -nd - 1, nd - 1, (0, 1), (0, 0), (), [0, -1], 2**31, -(2**63), 1])


def gen_reduce(d):
    c = _gen_reduce(d)
    # Reductions over enough elements to split across threads must not depend on the count.
    c["threads"] = any(s in c["setup"][0] for s in ("(1000,)", "(64, 130)", "(3, 257, 5)"))
    return c


def _gen_reduce(d):
    op = d.pick(REDUCTIONS)
    dtype = d.dtype()
    shape = d.shape()
    nd = len(shape)
    setup = [d.tensor("x", dtype, shape)]
    dim = _dim_arg(d, nd)
    keep = d.chance(0.3)
    params = {"op": op, "dim": dim, "keepdim": keep}
    if op in ("softmax", "log_softmax"):
        dim = dim if isinstance(dim, int) else -1
        params["dim"] = dim
        dt = d.pick([None, None, "float64", "int8", "bfloat16"])
        kw = f", dtype=kiln.{dt}" if dt else ""
        return case(op, setup, f"kiln.{op}(x, {dim}{kw})", None if dt else ("softmax", params))
    if op in ("sort", "argsort"):
        dim = dim if isinstance(dim, int) else -1
        desc, stable = d.chance(0.4), d.chance(0.5)
        params.update(dim=dim, descending=desc, stable=stable)
        call = f"kiln.{op}(x, {dim}, {desc}, stable={stable})"
        return case(op, setup, call + ("[0]" if op == "sort" else ""), ("sort", params))
    if op == "topk":
        dim = dim if isinstance(dim, int) else -1
        k = d.pick([0, 1, 2, 3, -1, 100, 2**40])
        largest = d.chance(0.7)
        params.update(dim=dim, k=k, largest=largest)
        return case(op, setup, f"kiln.topk(x, {k}, {dim}, {largest}, True)[0]", ("sort", params))
    if op == "cumsum":
        dim = dim if isinstance(dim, int) else 0
        params["dim"] = dim
        dt = d.pick([None, None, "float64", "int8", "bool"])
        return case(op, setup, f"kiln.cumsum(x, {dim}{f', dtype=kiln.{dt}' if dt else ''})",
                    None if dt else ("reduce", params))
    if op == "norm":
        p = d.pick([2, 1, 0, 3, -1, float("inf"), float("-inf"), "'fro'", "'nuc'", 0.5, float("nan")])
        pstr = p if isinstance(p, str) else fmt(p)
        ref = None
        if dtype in FLOATS and not isinstance(p, str) and p == p and dim is None and p != 0 and not keep:
            expr = f"np.linalg.norm(x.astype(np.float64).ravel(), {pstr})"
            ref = ("numpy", {"expr": expr, "rtol": 1e-2 if dtype in NARROW else 1e-5, "atol": 1e-30, "cast": True})
        return case(op, setup, f"kiln.norm(x, {pstr}, {dim!r}, {keep})", ref)
    if op in ("var", "std"):
        corr = d.pick([None, 0, 1, 2, -1, 1.5])
        params["correction"] = 1 if corr is None else corr
        kw = f", correction={corr}" if corr is not None else ""
        ref = ("reduce", params) if isinstance(params["correction"], int) and params["correction"] >= 0 else None
        return case(op, setup, f"kiln.{op}(x, {dim!r}{kw}, keepdim={keep})", ref)
    if op in ("argmax", "argmin"):
        dim = dim if (dim is None or isinstance(dim, int)) else 0
        params["dim"] = dim
        return case(op, setup, f"kiln.{op}(x, {dim!r}, {keep})", ("reduce", params))
    if op in ("max", "min") and dim is not None:
        dim = dim if isinstance(dim, int) else 0
        return case(op, setup, f"kiln.{op}(x, {dim!r}, {keep})")
    dt = d.pick([None, None, None, "float64", "int64", "bool", "float8_e4m3fn"]) if op in ("sum", "prod", "mean") \
        else None
    kw = f", dtype=kiln.{dt}" if dt else ""
    call = f"kiln.{op}(x)" if dim is None and not keep and d.chance(0.5) else f"kiln.{op}(x, {dim!r}, {keep}{kw})"
    return case(op, setup, call, None if dt else ("reduce", params))


def gen_huge_view(d):
    """Reductions and full-size outputs of broadcast views whose element count overflows
    int64: each must raise (issue 9 class 1: sum returned 0)."""
    shape = d.pick([(2**32, 2**32), (2**33, 2**31), (2**21, 2**21, 2**22), (2**62, 4)])
    setup = [f"x = kiln.ones(1, dtype=kiln.{d.pick(['float32', 'int64', 'bfloat16', 'bool'])}).expand{shape!r}"]
    op = d.pick(["sum", "mean", "std", "norm", "amax", "prod", "contiguous", "clone", "exp", "add", "mul", "softmax",
                 "argmax", "cumsum", "to", "eq", "masked_fill", "sort"])
    call = {
        "contiguous": "x.contiguous()", "clone": "x.clone()", "exp": "kiln.exp(x)", "add": "x + 1", "mul": "x * x",
        "softmax": "kiln.softmax(x, -1)", "argmax": "kiln.argmax(x)", "cumsum": "kiln.cumsum(x, 0)",
        "to": "x.to(kiln.float64)", "eq": "x == x", "masked_fill": "kiln.masked_fill(x, x > 0, 0)",
        "sort": "kiln.sort(x, 0)",
    }.get(op, f"kiln.{op}(x)")
    return case(op, setup, call, ("error", {"why": f"{shape} holds more elements than int64 counts"}))


# ---------------------------------------------------------------- creation


def _args(*parts):
    """Comma-joined non-empty argument strings."""
    return ", ".join(p for p in parts if p)


def gen_creation(d):
    op = d.pick(["zeros", "ones", "empty", "full", "arange", "linspace", "eye", "rand", "randn", "randint",
                 "scalar_tensor", "zeros_like", "full_like", "tensor"])
    dtype = d.dtype()
    hostile = d.chance(0.35)
    shape = d.pick(HUGE_SHAPES) if hostile else d.shape()
    kw = f"dtype=kiln.{dtype}" if d.chance(0.8) else ""
    np_dtype = dtype if dtype not in NARROW else "float32"
    if op in ("zeros", "ones", "empty"):
        form = d.pick(["args", "tuple", "list"])
        arg = {"args": ", ".join(map(str, shape)), "tuple": repr(tuple(shape)), "list": repr(list(shape))}[form]
        call = f"kiln.{op}({_args(arg, kw)})"
        ref = None
        if not hostile and op != "empty":
            ref = ("numpy", {"expr": f"np.{op}({tuple(shape)!r})", "cast": True})
        elif hostile and numel_overflows(shape):
            ref = ("error", {"why": f"{shape} overflows int64 sizes"})
        elif hostile and any(s < 0 for s in shape):
            ref = ("error", {"why": "negative dimension"})
        return case(op, [], call, ref, invariant=False)
    if op == "full":
        value = d.pick([0, 7, -1, 300, 2**63, 1.5, float("nan"), float("inf"), True, complex(1, 1)])
        call = f"kiln.full({_args(repr(tuple(shape)), fmt(value), kw)})"
        ref = None
        if not hostile and kw and dtype in FLOATS and isinstance(value, float):
            ref = ("numpy", {"expr": f"np.full({tuple(shape)!r}, {fmt(value)})", "cast": True})
        elif hostile and numel_overflows(shape):
            ref = ("error", {"why": f"{shape} overflows int64 sizes"})
        return case(op, [], call, ref, invariant=False)
    if op == "arange":
        args = d.pick([(10,), (0, 10, 3), (1.5, 7.25, 0.5), (5, 0, -1), (0, 1, 0), (0, float("nan")),
                       (0, float("inf")), (0, 2**62), (0, 1, 1e-300), (-2**63, 2**63 - 1, 2**62),
                       (10, 0), (0, 10, -1), (0.0, 1.0, 0.1), (2**53, 2**53 + 4)])
        call = f"kiln.arange({_args(*(fmt(a) for a in args), kw)})"
        ref = None
        start, end, step = (0, args[0], 1) if len(args) == 1 else (args + (1,))[:3]
        try:
            count = -(-(end - start) // step) if all(isinstance(a, int) for a in (start, end, step)) else \
                __import__("math").ceil((end - start) / step)
        except (ZeroDivisionError, ValueError, OverflowError):
            count = None
        if count is not None and 0 <= count <= 10**6 and (not kw or dtype in FLOATS + SIGNED) and \
                not (kw and dtype in NARROW):
            # PyTorch's values: start + i * step, in int64 when every argument is an int, else
            # in double (numpy's arange accumulates its own way); then cast.
            exact = all(isinstance(a, int) for a in (start, end, step))
            vals = f"[{fmt(start)} + i * {fmt(step)} for i in range({count})]"
            expr = f"np.array({vals}, dtype=np.int64 if {exact} else np.float64)"
            ref = ("numpy", {"expr": expr, "cast": True, "rtol": 1e-6 if kw and dtype == "float32" else 0.0})
        elif count is not None and count > 2**40:
            ref = ("error", {"why": f"arange of {count} elements cannot be allocated"})
        return case(op, [], call, ref, invariant=False)
    if op == "linspace":
        start, end = d.pick([(0, 1), (-5, 5), (1.5, 1.5), (0, float("inf")), (float("nan"), 1), (10, -10)])
        steps = d.pick([0, 1, 2, 5, 17, 100, -1, 2**62, 2**31])
        call = f"kiln.linspace({_args(fmt(start), fmt(end), str(steps), kw)})"
        ref = None
        if 0 <= steps <= 1000 and (not kw or dtype in ("float32", "float64")):
            ref = ("numpy", {"expr": f"linspace({fmt(start)}, {fmt(end)}, {steps})", "cast": True,
                             "rtol": 1e-6, "atol": 1e-6})
        elif steps > 2**40:
            ref = ("error", {"why": "linspace of 2^62 steps cannot be allocated"})
        return case(op, [], call, ref, invariant=False)
    if op == "eye":
        n, m = d.pick([(3, None), (2, 4), (0, 3), (-1, None), (2**32, 2**32), (4, -2), (1, 2**62)])
        call = f"kiln.eye({_args(str(n), '' if m is None else str(m), kw)})"
        ref = ("numpy", {"expr": f"np.eye({n}, {m})", "cast": True}) if n >= 0 and (m is None or 0 <= m) and \
            n * (m or n) < 10**6 else None
        if n * (m or n) >= 2**63:
            ref = ("error", {"why": "eye's size overflows int64"})
        return case(op, [], call, ref, invariant=False)
    if op in ("rand", "randn"):
        call = f"kiln.{op}({_args(', '.join(map(str, shape)), kw)})"
        ref = ("property", {"expr": "((out >= 0) & (out < 1)).all()" if op == "rand" else "np.isfinite(out).all()"})
        return case(op, [], call, ref if not hostile else None, invariant=False)
    if op == "randint":
        low, high = d.pick([(0, 10), (-5, 5), (5, 5), (10, 0), (0, 2**63 - 1), (-(2**63), 2**63 - 1), (0, 2**64),
                            (0, 1)])
        call = f"kiln.randint({_args(str(low), str(high), repr(tuple(shape)), kw)})"
        ref = None
        if not hostile and low < high and (not kw or dtype in INTS):
            ref = ("property", {"expr": f"((out >= {low}) & (out < {high})).all()"})
        return case(op, [], call, ref, invariant=False)
    if op == "scalar_tensor":
        v = d.scalar()
        return case(op, [], f"kiln.scalar_tensor({_args(fmt(v), kw)})", invariant=False)
    if op in ("zeros_like", "full_like"):
        setup = [d.tensor("x", d.dtype(), d.shape())]
        fill = "" if op == "zeros_like" else f", {fmt(d.scalar())}"
        return case(op, setup, f"kiln.{op}({_args('x' + fill, kw)})", invariant=False)
    data = d.pick(["[[1, 2], [3]]", "[]", "[[]]", "[1, 2.5, True]", "[2**63]", "[2**64]", "[-2**63 - 1]",
                   "[[1, 2], [3, 4]]", "[complex(1, 2), 3]", "'abc'", "[None]", "[[[[1]]]] * 3", "[nan, inf]",
                   "[[1], [2, 3]]", "{1: 2}", "[1e400]"])
    return case("tensor", [], f"kiln.tensor({_args(data, kw)})", invariant=False)


def numel_overflows(shape):
    n = 1
    for s in shape:
        if s < 0:
            return False
        n *= s
    return n >= 2**63 and 0 not in shape


# ---------------------------------------------------------------- shape and view


def gen_shape(d):
    dtype = d.dtype()
    shape = d.pick([(3, 4), (2, 3, 4), (5,), (), (0, 3), (1, 4), (2, 1, 3, 2)])
    nd = len(shape)
    setup = [d.tensor("x", dtype, shape)]
    bad = d.chance(0.35)
    dim = d.pick(BAD_DIMS) if bad else (d.rng.randrange(-nd, nd) if nd else 0)
    op = d.pick(["view", "reshape", "permute", "transpose", "t", "expand", "narrow", "select", "squeeze",
                 "unsqueeze", "flatten", "unflatten", "movedim", "flip", "getitem", "split", "chunk",
                 "tensor_split", "unbind", "as_strided", "to", "clone", "contiguous", "setitem", "T"])
    n = numel(shape)
    if op in ("view", "reshape"):
        target = d.pick([(n,), (-1,), (-1, -1), (n, 1), (2, -1), (0, -1), (2**32, 2**32), (-2, n), (n, 0),
                         (2**63 - 1,), (1, 1, n)] if n else [(0,), (-1,), (0, -1), (3, 0), (2**40, 0)])
        ref = ("numpy", {"expr": f"np.reshape(x, {target!r})"})
        if op == "view" and dtype in COMPLEX + ("float32",) and d.chance(0.2):
            return case(op, setup, f"x.view(kiln.{d.dtype()})")
        return case(op, setup, f"x.{op}{target!r}" if len(target) > 1 else f"x.{op}({target[0]})", ref,
                    invariant=op == "reshape")
    if op == "permute":
        perm = list(range(nd))
        d.rng.shuffle(perm)
        if bad:
            perm = d.pick([perm[:-1], perm + [0], [0] * nd, [nd] + perm[1:]])
        return case(op, setup, f"x.permute({', '.join(map(str, perm))})" if perm else "x.permute()",
                    ("numpy", {"expr": f"np.transpose(x, {tuple(perm)!r})"}))
    if op == "transpose":
        other = d.pick(BAD_DIMS) if bad and d.chance(0.5) else (d.rng.randrange(-nd, nd) if nd else 0)
        return case(op, setup, f"x.transpose({dim}, {other})", ("numpy", {"expr": f"np.swapaxes(x, {dim}, {other})"}))
    if op in ("t", "T"):
        return case(op, setup, f"x.{op}()" if op == "t" else "x.T", ("numpy", {"expr": "x.T"}) if nd <= 2 else None)
    if op == "expand":
        target = d.pick([shape, (4,) + shape, tuple(-1 for _ in shape), (2**62,) + shape, (2**32, 2**32) + shape,
                         tuple(s + 1 for s in shape), (-2,) + shape, ()])
        ref = ("numpy", {"expr": f"np.broadcast_to(x, {target!r})"}) if all(t >= 0 for t in target) and \
            numel(target) < 10**6 else None
        call = f"x.expand({', '.join(map(str, target))})" if target else "x.expand()"
        return case(op, setup, call, ref, invariant=False)
    if op == "narrow":
        start, length = d.pick([(0, 1), (1, 2), (-1, 1), (2**63 - 1, 2), (0, -1), (-(2**63), 1), (1, 2**63 - 1)])
        ref = None
        if nd and 0 <= start and 0 <= length and start + length <= shape[dim % nd] and not bad:
            sl = "".join([":, "] * (dim % nd))
            ref = ("numpy", {"expr": f"x[{sl}{start}:{start + length}]"})
        return case(op, setup, f"x.narrow({dim}, {start}, {length})", ref)
    if op == "select":
        index = d.pick([0, -1, 1, 2**31, -(2**63), 2**63 - 1, 3])
        return case(op, setup, f"x.select({dim}, {index})", ("numpy", {"expr": f"np.take(x, {index}, axis={dim})"}))
    if op == "squeeze":
        if d.chance(0.3):
            return case(op, setup, "x.squeeze()", ("numpy", {"expr": "np.squeeze(x)"}))
        return case(op, setup, f"x.squeeze({dim})",
                    ("numpy", {"expr": f"np.squeeze(x, {dim}) if x.shape[{dim}] == 1 else x"}))
    if op == "unsqueeze":
        dim = d.pick(BAD_DIMS + [nd, -nd - 1, 0, -1]) if bad else d.rng.randrange(-nd - 1, nd + 1)
        return case(op, setup, f"x.unsqueeze({dim})", ("numpy", {"expr": f"np.expand_dims(x, {dim})"}))
    if op == "flatten":
        s, e = (dim, d.pick(BAD_DIMS)) if bad else (0, -1) if d.chance(0.5) else (dim, -1)
        return case(op, setup, f"x.flatten({s}, {e})", ("numpy", {"expr": f"flatten(x, {s}, {e})"}))
    if op == "unflatten":
        sizes = d.pick([(1, -1), (-1, 1), (2, -1), (2**32, 2**32), (-1, -1), (0, -1), ()])
        return case(op, setup, f"x.unflatten({dim}, {sizes!r})")
    if op == "movedim":
        other = d.rng.randrange(-nd, nd) if nd else 0
        return case(op, setup, f"x.movedim({dim}, {other})", ("numpy", {"expr": f"np.moveaxis(x, {dim}, {other})"}))
    if op == "flip":
        dims = d.pick([[dim], [0, 0], [], [0, -1], [2**31]])
        return case(op, setup, f"kiln.flip(x, {dims!r})",
                    ("numpy", {"expr": f"np.flip(x, {tuple(dims)!r})"}) if len(set(dims)) == len(dims) else None)
    if op in ("getitem", "setitem"):
        idx = d.pick(["0", "-1", "1:", "::2", ":, 1", "..., 0", "None", "None, ..., None", "2**63", "-(2**63)",
                      "::-1", "::0", "1:0", "5:2**62", "True", "False", "[0, 0, -1]", "[2**40]", "(..., ...)",
                      "kiln.tensor([0, -1])", "kiln.tensor([True, False, True])", "x > 0", "1.5", "'a'",
                      ":, None, ::3", "-2**63:2**63 - 1"])
        ref = ("numpy", {"expr": f"x[{idx}]"}) if "kiln" not in idx and "::-1" not in idx and "x >" not in idx \
            else None
        if op == "getitem":
            return case(op, setup, f"x[{idx}]", ref)
        value = d.pick(["0", "nan", "2**70", "kiln.tensor([1.0, 2.0])", "x", "True", "-1"])
        ref = ("numpy", {"expr": f"setitem(x, ({idx}), {value})", "cast": True}) if ref and value in ("0", "-1") \
            else None
        return case(op, setup, f"x[{idx}] = {value}", ref, stmt=True, result="x", mutates=True)
    if op in ("split", "chunk", "tensor_split"):
        arg = d.pick([1, 2, 3, 0, -1, [1, 2], [0, 0], [2**62], 2**63 - 1])
        dd = 0 if not bad else dim
        helper = {"split": "split", "chunk": "chunk", "tensor_split": "np.array_split"}[op]
        ref = ("numpy", {"expr": f"{helper}(x, {arg!r}, {dd})" if op != "tensor_split" else
                         f"np.array_split(x, {arg!r}, axis={dd})"}) if nd and (not isinstance(arg, int) or arg > 0) \
            and arg != 2**63 - 1 and arg != [2**62] else None
        return case(op, setup, f"list(kiln.{op}(x, {arg!r}, {dd}))", ref)
    if op == "unbind":
        return case(op, setup, f"list(kiln.unbind(x, {dim}))",
                    ("numpy", {"expr": f"list(np.moveaxis(x, {dim}, 0))"}) if nd else None)
    if op == "as_strided":
        size, stride, offset = d.pick([((2, 2), (1, 2), 0), ((n,), (1,), 0), ((2, 2), (2**62, 1), 0),
                                       ((2**32, 2**32), (1, 1), 0), ((1,), (1,), n), ((1,), (1,), n - 1),
                                       ((2,), (-1,), 1), ((3,), (0,), 0), ((2, 2), (1, 1), 2**63 - 1),
                                       ((0,), (2**62,), 5), ((n + 1,), (1,), 0), ((2,), (n,), 0)])
        setup = [d.tensor("x", dtype, shape, layout="contig")]
        last = offset + sum((s - 1) * st for s, st in zip(size, stride)) if all(s > 0 for s in size) else -1
        ref = None
        if all(st >= 0 for st in stride) and 0 not in size and 0 <= offset and last >= n:
            ref = ("error", {"why": f"as_strided reads element {last} of a storage of {n}"})
        elif all(st >= 0 for st in stride) and offset >= 0 and 0 <= last < n and numel(size) < 10**5:
            ref = ("numpy", {"expr": f"np.lib.stride_tricks.as_strided(x.ravel()[{offset}:], {size!r}, "
                                     f"tuple(s * x.itemsize for s in {stride!r})).copy()"})
        return case(op, setup, f"x.as_strided({size!r}, {stride!r}, {offset})", ref, invariant=False)
    if op == "to":
        target = d.dtype()
        ref = None
        if dtype not in NARROW and target not in NARROW and dtype not in COMPLEX and target not in COMPLEX and \
                "special" not in setup[0] and (dtype not in FLOATS or target in FLOATS + ("bool",)):
            ref = ("numpy", {"expr": f"x.astype('{target}')"})
        return case(op, setup, f"x.to(kiln.{target})", ref)
    return case(op, setup, f"x.{op}()", ("numpy", {"expr": "x"}))


# ---------------------------------------------------------------- index


def gen_index(d):
    dtype = d.dtype()
    shape = d.pick([(5,), (3, 4), (2, 3, 4), (0, 3), (4, 0), ()])
    nd = len(shape)
    setup = [d.tensor("x", dtype, shape)]
    op = d.pick(["index_select", "gather", "scatter_add", "index_add", "embedding", "masked_fill", "masked_select",
                 "cat", "stack", "index_add_", "scatter_add_", "masked_fill_"])
    dim = d.rng.randrange(-nd, nd) if nd and d.chance(0.85) else d.pick(BAD_DIMS)
    size = shape[dim % nd] if nd and -nd <= dim < nd else 0
    idx_vals = d.pick([[0], [0, 1], [-1], [size], [2**40], [0, 0, 0], [], [size - 1, 0], [-(2**63)]])
    idx_dtype = d.pick(["int64", "int64", "int32", "int16", "float32", "uint8", "bool"])
    if idx_dtype == "int32":  # the values the index tensor holds after the conversion
        idx_vals = [(v + 2**31) % 2**32 - 2**31 for v in idx_vals]
    idx_ok = all(0 <= i < size for i in idx_vals) and idx_dtype in ("int64", "int32")
    bad_idx = any(not 0 <= i < size for i in idx_vals) and idx_dtype in ("int64", "int32") and nd and \
        -nd <= dim < nd
    setup.append(f"i = kiln.tensor({idx_vals!r}, dtype=kiln.{idx_dtype})")
    err = ("error", {"why": f"index {idx_vals} out of range for size {size}"}) if bad_idx else None
    if op == "index_select":
        ref = ("numpy", {"expr": f"np.take(x, i, axis={dim})"}) if idx_ok else err
        return case(op, setup, f"kiln.index_select(x, {dim}, i)", ref)
    if op in ("gather", "scatter_add", "scatter_add_"):
        ishape = tuple(min(s, 2) for s in shape)
        if numel(ishape) == 0 or not idx_vals:
            err = None  # no index element: nothing is out of range
        setup[1] = f"i = kiln.tensor(np.resize(np.array({idx_vals or [0]!r}), {ishape!r}), dtype=kiln.{idx_dtype})"
        if op == "gather":
            ref = ("numpy", {"expr": f"gather(x, {dim}, i)"}) if idx_ok and nd else err
            return case(op, setup, f"kiln.gather(x, {dim}, i)", ref)
        setup.append(d.tensor("s", d.pick([dtype, dtype, d.dtype()]), ishape))
        ref = ("numpy", {"expr": f"scatter_add(x, {dim}, i, s.astype(x.dtype))", "cast": True,
                         "rtol": 1e-2 if dtype in NARROW else 1e-6}) if idx_ok and nd and dtype not in COMPLEX and \
            "special" not in setup[0] else err
        if op == "scatter_add_":
            return case(op, setup, f"x.scatter_add_({dim}, i, s)", ref, mutates=True)
        return case(op, setup, f"kiln.scatter_add(x, {dim}, i, s)", ref)
    if op in ("index_add", "index_add_"):
        src_shape = list(shape)
        if nd and -nd <= dim < nd:
            src_shape[dim % nd] = len(idx_vals)
        setup.append(d.tensor("s", d.pick([dtype, dtype, d.dtype()]), tuple(src_shape)))
        alpha = d.pick([1, 2, -1, 0.5, True])
        ref = ("numpy", {"expr": f"index_add(x, {dim}, i, s.astype(x.dtype), {alpha})", "cast": True,
                         "rtol": 1e-2 if dtype in NARROW else 1e-6}) if idx_ok and nd and dtype in FLOATS and \
            "special" not in setup[0] else err
        if op == "index_add_":
            return case(op, setup, f"x.index_add_({dim}, i, s, alpha={fmt(alpha)})", ref, mutates=True)
        return case(op, setup, f"kiln.index_add(x, {dim}, i, s, alpha={fmt(alpha)})", ref)
    if op == "embedding":
        wshape = d.pick([(5, 3), (1, 4), (0, 2), (3,)])
        setup[0] = d.tensor("x", dtype, wshape)
        size = wshape[0] if len(wshape) == 2 else 0
        ok = all(0 <= v < size for v in idx_vals) and idx_dtype in ("int64", "int32") and len(wshape) == 2
        bad = not ok and idx_dtype in ("int64", "int32") and len(wshape) == 2 and idx_vals
        ref = ("numpy", {"expr": "x[i]"}) if ok else ("error", {"why": "embedding id out of range"}) if bad else None
        pad = d.pick(["", "", ", padding_idx=0", ", padding_idx=-1", ", padding_idx=100"])
        return case(op, setup, f"kiln.embedding(i, x{pad})", ref if not pad else None)
    if op in ("masked_fill", "masked_fill_", "masked_select"):
        mshape = d.pick([shape, (), shape[-1:] if shape else (), (7,), (1,) + shape])
        setup[1] = d.tensor("m", d.pick(["bool", "bool", "bool", "uint8", "float32"]), mshape)
        if op == "masked_select":
            ref = ("numpy", {"expr": "np.broadcast_arrays(x, m)[0][np.broadcast_arrays(x, m)[1]]"}) \
                if "bool" in setup[1] else None
            return case(op, setup, "kiln.masked_select(x, m)", ref)
        value = d.pick(["0", "-1", "nan", "2**63", "1.5", "True", "kiln.tensor(2.0)", "kiln.ones(2)"])
        ref = ("numpy", {"expr": f"np.where(m, np.array({value}).astype(x.dtype), x)"}) \
            if "bool" in setup[1] and value in ("0", "-1") and dtype not in NARROW else None
        if op == "masked_fill_":
            return case(op, setup, f"x.masked_fill_(m, {value})", ref, mutates=True)
        return case(op, setup, f"kiln.masked_fill(x, m, {value})", ref)
    k = d.pick([1, 2, 3])
    setup = [d.tensor(f"t{j}", d.pick([dtype, dtype, d.dtype()]), d.pick([shape, shape, (0,), shape[:-1]]))
             for j in range(k)]
    names = ", ".join(f"t{j}" for j in range(k))
    cat_dim = d.pick([0, -1, 1, nd, -nd - 1, 2**31])
    npf = "np.concatenate" if op == "cat" else "np.stack"
    ref = ("numpy", {"expr": f"{npf}([{names}], {cat_dim})", "cast": True}) if all(
        "np.array([True" not in s and "(0,)" not in s for s in setup) and dtype not in NARROW else None
    if op == "cat" and d.chance(0.1):
        return case(op, [], "kiln.cat([], 0)")
    return case(op, setup, f"kiln.{op}([{names}], {cat_dim})", ref)


# ---------------------------------------------------------------- matmul

MATMUL_PAIRS = [((3, 4), (4, 5)), ((4,), (4,)), ((4,), (4, 3)), ((3, 4), (4,)), ((2, 3, 4), (4, 5)),
                ((2, 1, 3, 4), (5, 4, 2)), ((0, 4), (4, 3)), ((3, 0), (0, 5)), ((3, 4), (5, 6)), ((), (4,)),
                ((2, 3, 4), (3, 4, 5)), ((70, 33), (33, 17)), ((1, 64), (64, 130)), ((4,), (5,)),
                ((2, 5, 7), (2, 7, 3)), ((3, 4), (4, 0))]


def gen_matmul(d):
    op = d.pick(["matmul", "matmul", "mm", "bmm", "mv", "dot", "linear", "@"])
    dtype = d.dtype()
    db = dtype if d.chance(0.85) else d.dtype()
    sa, sb = d.pick(MATMUL_PAIRS)
    flavour = "plain" if d.chance(0.7) else "special"
    setup = [d.tensor("a", dtype, sa, flavour), d.tensor("b", db, sb, flavour)]
    ref = ("matmul", {"op": op})
    if op == "@":
        return case("matmul", setup, "a @ b", ref)
    if op == "linear":
        setup[1] = d.tensor("b", db, tuple(reversed(sb)) if len(sb) == 2 else sb, flavour)
        bias = d.pick([None, "c"])
        if bias:
            setup.append(d.tensor("c", dtype, d.pick([(sb[-1],) if sb else (), (1,), (7,), ()]), flavour))
        return case(op, setup, f"kiln.linear(a, b{', c' if bias else ''})", ref if not bias or
                    "np.array" in setup[-1] else None)
    return case(op, setup, f"kiln.{op}(a, b)", ref)


# ---------------------------------------------------------------- nn


def gen_nn(d):
    op = d.pick(["layer_norm", "rms_norm", "rms_norm_llama", "rms_norm_one_plus", "rms_norm_gated", "silu_and_mul",
                 "rope_inv_freq", "rope_cos_sin", "apply_rotary_emb", "apply_rotary_emb_cos_sin", "sdpa", "sdpa",
                 "attention_decode", "grouped_mm", "grouped_mm", "scaled_mm", "linear_fp8", "quantize_fp8_rowwise",
                 "dequantize_fp8", "moe_route", "moe_permute", "moe_experts", "grouped_mm_fp8"])
    dtype = d.pick(["float32", "float32", "bfloat16", "float16", "float64", d.dtype()])
    flavour = d.flavour()
    T = d.tensor
    if op in ("layer_norm", "rms_norm"):
        shape = d.pick([(3, 8), (2, 3, 5), (4,), (0, 8), ()])
        ns = d.pick([shape[-1:], shape[-2:], (7,), (), (-1,), (2**62,), shape])
        setup = [T("x", dtype, shape, flavour)]
        eps = d.pick([None, 1e-5, 0.0, -1.0, float("nan")])
        w = d.chance(0.5)
        if w:
            wshape = ns if all(0 <= v < 64 for v in ns) else shape[-1:]
            setup.append(T("w", dtype, d.pick([wshape, wshape, (9,)]), "plain"))
        kw = (", w" if w else ", None") + (f", eps={fmt(eps)}" if eps is not None else "")
        ref = None
        if dtype in ("float32", "float64") and tuple(ns) == tuple(shape[-len(ns):]) and ns and eps is None and \
                not w and all(s > 0 for s in ns) and op == "rms_norm":
            axes = tuple(range(-len(ns), 0))
            e = "np.finfo(x.dtype).eps"
            ref = ("numpy", {"expr": f"x / np.sqrt(np.mean(x.astype(np.float64)**2, axis={axes}, keepdims=True) + "
                                     f"{e})", "rtol": 1e-5, "atol": 1e-6, "cast": True})
        if op == "layer_norm":
            kw = (", w" if w else ", None") + ", None" + (f", {fmt(eps)}" if eps is not None else "")
        return case(op, setup, f"kiln.{op}(x, {ns!r}{kw})", ref)
    if op in ("rms_norm_llama", "rms_norm_one_plus", "rms_norm_gated"):
        shape = d.pick([(3, 8), (2, 3, 5), (4,), (0, 8)])
        setup = [T("x", dtype, shape, flavour), T("w", dtype, d.pick([shape[-1:], (3,), ()]), "plain")]
        eps = fmt(d.pick([1e-6, 0.0, -1.0, float("nan")]))
        if op == "rms_norm_gated":
            setup.append(T("g", dtype, d.pick([shape, shape[-1:]]), flavour))
            return case(op, setup, f"kiln.rms_norm_gated(x, g, w, {eps})")
        return case(op, setup, f"kiln.{op}(x, w, {eps})")
    if op == "silu_and_mul":
        shape = d.pick([(3, 8), (4,), (3, 7), (0, 4), (2, 0), ()])
        setup = [T("x", dtype, shape, flavour)]
        ref = None
        if dtype in ("float32", "float64") and shape and shape[-1] % 2 == 0:
            h = shape[-1] // 2
            ref = ("numpy", {"expr": f"x[..., :{h}] / (1 + np.exp(-x[..., :{h}])) * x[..., {h}:]", "rtol": 2e-5,
                             "atol": 1e-6, "cast": True})
        return case(op, setup, "kiln.silu_and_mul(x)", ref)
    if op == "rope_inv_freq":
        return case(op, [], f"kiln.rope_inv_freq({d.pick([64, 0, -2, 3, 2**40])}, "
                            f"{fmt(d.pick([10000.0, 0.0, -1.0, float('nan'), 1.0]))})", invariant=False)
    if op in ("rope_cos_sin", "apply_rotary_emb", "apply_rotary_emb_cos_sin"):
        setup = [f"pos = kiln.tensor({d.pick([[0, 1, 2], [-1], [2**40], [], [0, 2**31]])!r}, "
                 f"dtype=kiln.{d.pick(['int64', 'int32', 'float32'])})"]
        rd = d.pick([8, 0, 3, -2, 16, 2**31])
        theta = fmt(d.pick([10000.0, 0.0, -1.0, float("nan")]))
        if op == "rope_cos_sin":
            return case(op, setup, f"kiln.rope_cos_sin(pos, {rd}, {theta})")
        setup.append(T("x", dtype, d.pick([(3, 2, 8), (1, 8), (3, 2, 7), (0, 2, 8)]), flavour))
        if op == "apply_rotary_emb":
            return case(op, setup, f"kiln.apply_rotary_emb(x, pos, {theta}, {rd}, {d.chance(0.5)})")
        setup += [T("c", "float32", d.pick([(3, 4), (3, 8), (1, 4)]), flavour),
                  T("s", "float32", d.pick([(3, 4), (3, 8)]), flavour)]
        return case(op, setup, f"kiln.apply_rotary_emb_cos_sin(x, c, s, {d.chance(0.5)})")
    if op == "sdpa" and d.chance(0.3):
        hq, hk = d.pick([(4, 2), (4, 1), (3, 2), (6, 3), (2, 4)])
        L, S, E = d.pick([1, 3]), d.pick([5, 600]), 8
        setup = [T("q", dtype, (1, hq, L, E), flavour), T("k", dtype, (1, hk, S, E), flavour),
                 T("v", dtype, (1, hk, S, E), flavour)]
        causal = d.chance(0.3)
        ref = ("sdpa", {"enable_gqa": True, "is_causal": causal}) if dtype in ("float32", "float64", "bfloat16") \
            else None
        return case("scaled_dot_product_attention", setup,
                    f"F.scaled_dot_product_attention(q, k, v, is_causal={causal}, enable_gqa=True)", ref)
    if op == "sdpa":
        b = d.pick([(2,), (1, 2), ()])
        L, S, E = d.pick([1, 3, 5, 0]), d.pick([1, 4, 70, 0, 600]), d.pick([8, 4, 1, 0])
        Ev = d.pick([E, E, 3])
        setup = [T("q", dtype, b + (L, E), flavour), T("k", dtype, b + (S, E), flavour),
                 T("v", dtype, b + (S, Ev), flavour)]
        mask = d.pick([None, None, "bool", "float"])
        causal = d.chance(0.3) and mask is None
        scale = d.pick([None, None, None, 0.5, float("nan"), float("inf"), -float("inf"), 0.0, -1.0])
        kw = ""
        if mask:
            setup.append(T("mask", "bool" if mask == "bool" else ("float32" if dtype != "float64" else "float64"),
                           d.pick([(L, S), (S,), b + (L, S), (1, S)]), flavour))
            kw += ", attn_mask=mask"
        if causal:
            kw += ", is_causal=True"
        if scale is not None:
            kw += f", scale={fmt(scale)}"
        if d.chance(0.1):
            kw += f", dropout_p={fmt(d.pick([1.0, -0.5, float('nan'), 2.0]))}"
            return case(op, setup, f"F.scaled_dot_product_attention(q, k, v{kw})", invariant=False)
        ref = ("sdpa", {"scale": scale, "is_causal": causal}) if dtype in ("float32", "float64", "bfloat16") else None
        return case("scaled_dot_product_attention", setup, f"F.scaled_dot_product_attention(q, k, v{kw})", ref)
    if op == "attention_decode":
        B, Hq, Hkv, S, E = 1, d.pick([4, 3]), d.pick([2, 4, 0]), d.pick([8, 600, 0]), d.pick([8, 4])
        setup = [T("q", dtype, (B, Hq, E), flavour), T("kc", dtype, (B, Hkv, S, E), flavour),
                 T("vc", dtype, (B, Hkv, S, E), flavour)]
        valid = d.pick([S, 1, 0, S + 1, -1, 2**62])
        scale = d.pick([None, float("nan"), float("inf"), 0.25])
        kw = f", scale={fmt(scale)}" if scale is not None else ""
        ref = ("attention_decode", {"valid": valid, "scale": scale}) if dtype in ("float32", "float64", "bfloat16") \
            else None
        return case(op, setup, f"kiln.attention_decode(q, kc, vc, {valid}{kw})", ref)
    if op in ("grouped_mm", "grouped_mm_fp8"):
        kind = d.pick(["2d3d", "3d2d", "2d2d", "3d3d"]) if op == "grouped_mm" else "2d3d"
        G, M, K, N = d.pick([2, 1, 0, 3]), d.pick([8, 5, 0]), d.pick([8, 4, 16]), d.pick([8, 4])
        dt = d.pick(["float32", "bfloat16", "float16", d.dtype()])
        shapes = {"2d3d": ((M, K), (G, K, N)), "3d2d": ((G, M, K), (K, N)), "2d2d": ((M, K), (K, N)),
                  "3d3d": ((G, M, K), (G, K, N))}[kind]
        sa, sb = shapes
        if d.chance(0.15):
            sb = sb[:-2] + (sb[-2] + 4, sb[-1])  # mismatched K
        setup = [T("a", dt, sa, "plain", "contig"), T("b", dt, sb, "plain", d.pick(["contig", "t"]))]
        extent = {"2d3d": M, "3d2d": N, "2d2d": K}.get(kind, 0)
        offs = sorted(d.rng.randrange(0, extent + 1) for _ in range(G)) if G else []
        if d.chance(0.3):
            offs = d.pick([[extent + 1] * G, list(reversed(offs)), [-1] * G, [2**31 - 1] * G, offs[:-1]])
        if op == "grouped_mm_fp8":
            setup[1] = f"b = kiln.ones({G}, {N}, {K}).to(kiln.float8_e4m3fn)"
            setup.append(T("sc", "float32", d.pick([(G, N), (N,), (G, 1)]), "plain"))
            setup.append(f"offs = kiln.tensor({offs!r}, dtype=kiln.int32)")
            return case(op, setup, "kiln.grouped_mm_fp8(a, b, sc, offs)")
        odt = d.pick(["int32", "int32", "int32", "int64"])
        if kind != "3d3d":
            setup.append(f"offs = kiln.tensor({offs!r}, dtype=kiln.{odt})")
        call = "kiln.grouped_mm(a, b" + (", offs=offs)" if kind != "3d3d" else ")")
        return case(op, setup, call, ("grouped_mm", {}) if dt in ("float32",) else None)
    if op in ("scaled_mm", "linear_fp8", "quantize_fp8_rowwise", "dequantize_fp8"):
        M, K, N = d.pick([(4, 16, 8), (1, 32, 4), (0, 16, 8), (4, 0, 8), (3, 5, 7)])
        f8 = d.pick(["float8_e4m3fn", "float8_e5m2", "float32"])
        if op == "quantize_fp8_rowwise":
            return case(op, [T("w", dtype, d.pick([(N, K), (K,), (0, K), (N, 0)]), flavour)],
                        "kiln.quantize_fp8_rowwise(w)")
        if op == "dequantize_fp8":
            setup = [f"w = kiln.ones({N}, {K}).to(kiln.{f8})", T("s", "float32", d.pick([(N,), (N, 1), (1,), (2, 2)]))]
            return case(op, setup, "kiln.dequantize_fp8(w, s)")
        if op == "linear_fp8":
            setup = [T("x", dtype, (M, K), flavour), f"w = kiln.ones({N}, {K}).to(kiln.{f8})",
                     T("s", "float32", d.pick([(N,), (1,), (-(-N // 128), -(-K // 128)), (N, K)]), "plain")]
            return case(op, setup, "kiln.linear_fp8(x, w, s)")
        setup = [f"a = kiln.ones({M}, {K}).to(kiln.{f8})", f"b = kiln.ones({N}, {K}).to(kiln.{f8}).t()",
                 T("sa", "float32", d.pick([(), (1,), (M, 1), (M,)]), "plain"),
                 T("sb", "float32", d.pick([(), (1,), (1, N), (N,)]), "plain")]
        rec = d.pick(["TensorWise", "RowWise", "BlockWise1x128"])
        return case(op, setup, f"F.scaled_mm(a, b, sa, kiln.ScalingType.{rec}, sb, kiln.ScalingType.{rec})")
    if op == "moe_route":
        T_, E = d.pick([(3, 8), (1, 4), (0, 8), (2, 1)])
        setup = [T("l", dtype, (T_, E), flavour)]
        k = d.pick([2, 1, 0, -1, E, E + 1, 2**31])
        scoring = d.pick(["'softmax'", "'sigmoid'", "'bogus'"])
        return case(op, setup, f"kiln.moe_route(l, {k}, scoring={scoring}, renormalize={d.chance(0.5)}, "
                               f"renorm_eps={fmt(d.pick([0.0, -1.0, float('nan')]))})")
    if op == "moe_permute":
        ids = d.pick([[[0, 1], [1, 2]], [[-1, 0]], [[5, 0]], [], [[2**31 - 1, 0]], [[0, 0]]])
        ne = d.pick([3, 0, -1, 2**31, 1])
        return case(op, [f"ids = kiln.tensor({ids!r}, dtype=kiln.{d.pick(['int32', 'int64', 'float32'])})"],
                    f"kiln.moe_permute(ids, {ne})")
    T_, H, I, E, k = 3, 8, 4, d.pick([4, 1]), d.pick([2, 1])
    ids = d.pick([[[0, 1], [1, 2], [3, 0]], [[-1, 0]] * 3, [[E, 0]] * 3, [[0, 0]] * 3, [[2**31 - 1, 0]] * 3])
    ids = [row[:k] for row in ids]
    setup = [T("x", dtype, (T_, H), flavour), T("w", "float32", (T_, k), flavour),
             f"ids = kiln.tensor({ids!r}, dtype=kiln.{d.pick(['int32', 'int64'])})",
             T("gu", dtype, d.pick([(E, 2 * I, H), (E, 2 * I + 1, H), (E, H, 2 * I)]), "plain"),
             T("dn", dtype, d.pick([(E, H, I), (E, I, H)]), "plain")]
    return case("moe_experts", setup, "kiln.moe_experts(x, w, ids, gu, dn)")


# ---------------------------------------------------------------- tensor methods, in place, runtime


def gen_misc(d):
    op = d.pick(["item", "tolist", "numpy", "bool", "int", "float", "index", "len", "repr", "copy_", "copy_overlap",
                 "fill_", "zero_", "inplace_expanded", "set_num_threads", "threads", "generator", "manual_seed",
                 "dtype_from_name", "promote_types", "from_numpy", "size", "stride", "element_size", "array",
                 "iadd", "itruediv"])
    dtype = d.dtype()
    shape = d.pick([(), (1,), (3,), (2, 3), (0,)])
    setup = [d.tensor("x", dtype, shape)]
    simple = {
        "item": "x.item()", "tolist": "x.tolist()", "numpy": "x.numpy()", "bool": "bool(x)", "int": "int(x)",
        "float": "float(x)", "index": "[0, 1, 2, 3][x]", "len": "len(x)", "repr": "repr(x) + str(x)",
        "element_size": "x.element_size()", "array": "np.asarray(x)",
        "size": f"x.size({d.pick([0, -1, 5, -6, 2**63])})", "stride": f"x.stride({d.pick([0, -1, 5, 2**63])})",
    }
    if op in simple:
        return case(op, setup, simple[op], invariant=False)
    if op in ("copy_", "fill_", "zero_"):
        if op == "copy_":
            setup.append(d.tensor("y", d.dtype(), d.pick([shape, (), (1,), (4,)])))
            ref = ("numpy", {"expr": "np.broadcast_to(y, x.shape).astype(x.dtype)"}) if dtype not in NARROW + COMPLEX \
                and "special" not in setup[1] and "float" not in setup[1].split("'")[1] and "complex" not in setup[1] \
                and "bfloat16" not in setup[1] and "float8" not in setup[1] else None
            return case(op, setup, "x.copy_(y)", ref, mutates=True)
        value = d.pick(["0", "nan", "2**64", "-1", "1.5", "complex(1, 1)", "True", "kiln.tensor([1.0, 2.0])"])
        return case(op, setup, f"x.fill_({value})" if op == "fill_" else "x.zero_()", mutates=True)
    if op == "copy_overlap":
        setup = [d.tensor("x", dtype, (6,), layout="contig")]
        call = d.pick(["x[1:].copy_(x[:-1])", "x[:-1].copy_(x[1:])", "x[::2].copy_(x[1::2])"])
        ref = ("error", {"why": "PyTorch refuses a copy between partially overlapping views"}) \
            if "::2" not in call else None
        return case(op, setup, call, ref, mutates=True, invariant=False)
    if op == "inplace_expanded":
        setup = [f"x = {tensor_expr(dtype, (1, 3), 'plain', 'contig')}.expand(4, 3)"]
        call = d.pick(["x.add_(1)", "x.mul_(2)", "x.copy_(kiln.ones(4, 3))", "x.sub_(x)", "x.div_(3)"])
        return case(op, setup, call, ("error", {"why": "PyTorch refuses in-place writes to a tensor whose elements "
                                                       "share memory (expand)"}), mutates=True, invariant=False)
    if op in ("iadd", "itruediv"):
        setup.append(d.tensor("y", d.dtype(), d.pick([shape, ()])))
        sym = "+=" if op == "iadd" else "/="
        return case(op, setup, f"x {sym} y", stmt=True, result="x", mutates=True, invariant=False)
    if op == "set_num_threads":
        n = d.pick([0, -1, 2**31, 10**6, 1, 2**63])
        return case(op, [], f"kiln.set_num_threads({n}) or kiln.set_num_threads(2)", invariant=False)
    if op == "threads":
        n = d.pick([0, -1, 2**31, 1, 2**63])
        return case(op, [], f"exec('with kiln.threads({n}):\\n kiln.ones(3).sum()')", invariant=False)
    if op == "generator":
        s = d.pick([0, -1, 2**64, 2**63, 1.5])
        return case(op, [], f"kiln.randn(3, generator=kiln.Generator({s}))", invariant=False)
    if op == "manual_seed":
        return case(op, [], f"kiln.manual_seed({d.pick([-1, 2**64, 2**63, 0, 'x'])!r})", invariant=False)
    if op == "dtype_from_name":
        return case(op, [], f"kiln.dtype_from_name({d.pick(['float', 'bogus', '', 'torch.float32', 'x' * 10000])!r})",
                    invariant=False)
    if op == "promote_types":
        return case(op, [], f"kiln.promote_types(kiln.{d.dtype()}, kiln.{d.dtype()})", invariant=False)
    arr = d.pick(["np.arange(6.0)[::-2]", "np.arange(12).reshape(3, 4).T", "np.zeros(3, '>f4')",
                  "np.array([1, 'a'], object)", "np.zeros(3, [('a', 'f4')])", "np.broadcast_to(np.arange(3.0), (4, 3))",
                  "np.zeros(3, np.longdouble)", "np.frombuffer(b'\\x00' * 17, np.uint8)[1:].view(np.float32)",
                  "np.array(np.datetime64('2020-01-01'))", "np.zeros((2**31, 0))", "np.zeros(3, np.float16)[1:]",
                  "np.ones((1,) * 40)", "np.array('abc')"])
    ref = ("numpy", {"expr": f"np.array({arr})"}) if "object" not in arr and "'a'" not in arr and "datetime" not in \
        arr and "longdouble" not in arr and "abc" not in arr and "'>f4'" not in arr else None
    return case("from_numpy", ["import numpy as np"], f"kiln.from_numpy({arr})", ref, invariant=False)


# ---------------------------------------------------------------- kiln.llm

# The folder goes when the case's names do (TemporaryDirectory's finaliser).
LLM_SETUP = ["import tempfile", "t = tempfile.TemporaryDirectory()", "d = t.name",
             "kiln.llm.make_model(d, 'qwen3_moe', 'tiny', layers=1)", "m = kiln.llm.load(d, 'f32')"]
PROMPTS = ["''", "'hi'", "'\\x00\\x01'", "'\\ud800'", "'a' * 20000", "'\\U0001F642' * 50", "'\\u180e \\u3000'",
           "b'bytes'", "None", "123"]


def gen_llm(d):
    """A tiny synthetic checkpoint (made in the case's own setup) driven with hostile
    arguments; logits must stay finite."""
    op = d.pick(["generate", "generate", "forward", "encode", "decode", "load", "chat_prompt"])
    if op == "generate":
        kw = {
            "max_new_tokens": d.pick([0, 1, 3, -1, 2**31, 2**63]),
            "temperature": d.pick([0.0, 1.0, float("nan"), -1.0, float("inf"), 1e-30]),
            "top_k": d.pick([0, 1, -1, 2**40]), "top_p": d.pick([1.0, 0.5, 0.0, -0.1, 1.5, float("nan")]),
            "min_p": d.pick([0.0, 0.5, 2.0, float("nan")]),
            "repetition_penalty": d.pick([1.0, 0.0, -1.0, float("nan"), float("inf")]),
            "seed": d.pick([0, 7, -1, 2**64]),
        }
        keys = [k for k in kw if d.chance(0.4)]
        args = ", ".join(f"{k}={fmt(kw[k])}" for k in keys)
        return case(op, LLM_SETUP, f"m.generate({d.pick(PROMPTS)}{', ' + args if args else ''})", invariant=False)
    if op == "forward":
        ids = d.pick(["[1, 2, 3]", "[]", "[-1]", "[512]", "[2**31]", "[2**63]", "[0] * 5000", "[1.5]", "'abc'",
                      "np.array([1, 2], np.int64)"])
        ref = ("property", {"expr": "np.isfinite(out).all()"}) if ids == "[1, 2, 3]" else None
        return case(op, LLM_SETUP, f"m.forward({ids}, last_only={d.chance(0.5)})", ref, invariant=False)
    if op == "encode":
        return case(op, LLM_SETUP, f"m.tokenizer.encode({d.pick(PROMPTS)})", invariant=False)
    if op == "decode":
        ids = d.pick(["[1, 2]", "[-1]", "[512]", "[2**40]", "[2**64]", "[]", "[None]"])
        return case(op, LLM_SETUP, f"m.tokenizer.decode({ids})", invariant=False)
    if op == "chat_prompt":
        return case(op, LLM_SETUP, f"m.tokenizer.chat_prompt({d.pick(PROMPTS)}, {d.pick(PROMPTS)})", invariant=False)
    kw = d.pick(["dtype='bogus'", "max_context=-1", "max_context=2**58", "max_context=2**63", "cache_dtype=kiln.int8",
                 "cache_dtype=kiln.float64", "dtype='fp8'", "max_context=1"])
    path = d.pick(["d", "d + '/config.json'", "'/nonexistent'"])
    return case(op, LLM_SETUP[:4], f"kiln.llm.load({path}, {kw}).forward([1, 2])", invariant=False)


FAMILIES = {
    # name: (generator, share of the cases)
    "unary": (gen_unary, 16),
    "binary": (gen_binary, 26),
    "clamp_where": (gen_clamp_where, 4),
    "reduce": (gen_reduce, 14),
    "huge_view": (gen_huge_view, 1),
    "creation": (gen_creation, 7),
    "shape": (gen_shape, 10),
    "index": (gen_index, 8),
    "matmul": (gen_matmul, 6),
    "nn": (gen_nn, 6),
    "misc": (gen_misc, 3),
    "llm": (gen_llm, 1),
}


def generate(rng, count, large, only=None):
    """`count` distinct cases, each family's share drawn at random."""
    d = Draw(rng, large)
    families = [(name, fn, w) for name, (fn, w) in FAMILIES.items() if only is None or name in only]
    total = sum(w for _, _, w in families)
    cases, seen = [], set()
    for name, fn, w in families:
        want = max(1, count * w // total)
        attempts = 0
        got = 0
        while got < want and attempts < want * 4:
            attempts += 1
            c = fn(d)
            key = (tuple(c["setup"]), c["call"])
            if key in seen:
                continue
            seen.add(key)
            c["family"] = name
            cases.append(c)
            got += 1
    rng.shuffle(cases)
    for i, c in enumerate(cases):
        c["id"] = i
    return cases

