"""Input literals: dtypes, value patterns (plain and special: NaN, inf, -0.0, integer
limits), shapes, and memory layouts, written as kiln expressions so a case's source is
its own reproducer."""

import math

# kiln dtype name -> numpy dtype the values are written in (narrow floats are written as
# float32 and converted by kiln).
DTYPES = {
    "bool": "bool", "uint8": "uint8", "int8": "int8", "int16": "int16", "int32": "int32",
    "int64": "int64", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "float16", "bfloat16": "float32", "float32": "float32", "float64": "float64",
    "complex64": "complex64", "complex128": "complex128",
    "float8_e4m3fn": "float32", "float8_e5m2": "float32",
}
NUMPY_NATIVE = {d for d in DTYPES if d not in ("bfloat16", "float8_e4m3fn", "float8_e5m2")}
NARROW = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
FLOATS = ("float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2")
COMPLEX = ("complex64", "complex128")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTS = SIGNED + UNSIGNED
ALL = tuple(DTYPES)

BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38,
             "float64": 1.7976931348623157e308, "float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}
FLOAT_TINY = {"float16": 6e-8, "bfloat16": 1e-39, "float32": 1e-45, "float64": 5e-324,
              "float8_e4m3fn": 0.001953125, "float8_e5m2": 1.52587890625e-05}


def int_limits(dtype):
    b = BITS[dtype]
    return (0, 2**b - 1) if dtype in UNSIGNED else (-(2 ** (b - 1)), 2 ** (b - 1) - 1)


def fmt(v):
    """Python source for a value: floats and complex numbers with nan / inf spelled so the
    source evaluates (repr(complex(1, inf)) would not)."""
    if isinstance(v, bool):
        return repr(v)
    if isinstance(v, complex):
        return f"complex({fmt(v.real)}, {fmt(v.imag)})"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    return repr(v)


def pattern(dtype, flavour):
    """A short list of values of `dtype`; `flavour` is "plain" (small, exactly
    representable) or "special" (limits, NaN, infinities, signed zero, subnormals)."""
    if dtype == "bool":
        return [True, False, False, True, True]
    if dtype in INTS:
        lo, hi = int_limits(dtype)
        if flavour == "plain":
            return [0, 1, 3, 2, 5, 7, 4] if dtype in UNSIGNED else [0, 1, -2, 3, -4, 5, 7, -1]
        return [lo, hi, 0, 1, hi - 1, lo + 1] + ([] if dtype in UNSIGNED else [-1])
    if dtype in COMPLEX:
        if flavour == "plain":
            return [complex(1, 2), complex(0, -0.5), complex(3, 0), complex(-1, -1), complex(0.25, 0.75)]
        return [complex(math.nan, 0), complex(math.inf, 1), complex(0, -math.inf), complex(0, 0),
                complex(1, 2), complex(-0.0, 0.0)]
    if flavour == "plain":
        return [0.5, -1.25, 2.0, 0.0, 3.75, -0.5, 1.0, -2.5]
    big = FLOAT_MAX[dtype]
    return [math.nan, math.inf, -math.inf, -0.0, 0.0, FLOAT_TINY[dtype], big, -big, 1.0, -1.5]


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def tensor_expr(dtype, shape, flavour="plain", layout="contig"):
    """A kiln expression for a tensor of `dtype` and logical `shape`, its values the
    pattern repeated, stored in `layout` (see LAYOUTS). Falls back to contig where the
    layout does not apply to the shape."""
    shape = tuple(shape)
    base, suffix = _layout(shape, layout)
    values = "[" + ", ".join(fmt(v) for v in pattern(dtype, flavour)) + "]"
    src = f"np.resize(np.array({values}, '{DTYPES[dtype]}'), {base!r})"
    if layout == "npneg" and len(shape) >= 1:
        src = f"{src}[::-1]"
    expr = f"kiln.from_numpy({src})"
    if dtype not in NUMPY_NATIVE:
        expr += f".to(kiln.{dtype})"
    return expr + suffix


LAYOUTS = ("contig", "t", "step", "expand", "offset", "npneg")


def _layout(shape, layout):
    nd = len(shape)
    if layout == "t" and nd >= 2:
        return shape[:-2] + (shape[-1], shape[-2]), ".transpose(-1, -2)"
    if layout == "step" and nd >= 1:
        return shape[:-1] + (2 * shape[-1],), "[..., ::2]"
    if layout == "expand" and nd >= 1 and any(s != 1 for s in shape):
        # The first non-1 dim is broadcast from size 1 (stride 0).
        i = next(i for i, s in enumerate(shape) if s != 1)
        return shape[:i] + (1,) + shape[i + 1:], f".expand{shape!r}" if nd > 1 else f".expand({shape[0]})"
    if layout == "offset" and nd >= 1:
        return (shape[0] + 1,) + shape[1:], "[1:]"
    return shape, ""


# Shapes every family draws from: scalars, empties, ones, SIMD tails, multi-dims, and a
# few large enough for the thread pool to split.
SHAPES_SMALL = [(), (0,), (1,), (5,), (3, 4), (1, 4), (4, 1), (0, 3), (2, 0, 3), (2, 3, 4), (2, 1, 3, 2), (17,),
                (33, 5), (70,)]
SHAPES_LARGE = [(1000,), (64, 130), (3, 257, 5)]

# Sizes that overflow int64 products, exceed any memory, or are negative.
HUGE_SIZES = [2**31, 2**32, 2**40, 2**62, 2**63 - 1, 2**63, 2**64, -1, -2**63]
HUGE_SHAPES = [(2**32, 2**32), (2**62,), (2**63 - 1,), (2**31, 2**31, 4), (-1,), (-5, 3), (3, -1), (2**40, 0),
               (0, 2**63 - 1), (2**21, 2**21, 2**21), (2**64,), (2**33, 2**31)]
BAD_DIMS = [5, -6, 2**31, -2**31, 2**63 - 1, 2**63]
