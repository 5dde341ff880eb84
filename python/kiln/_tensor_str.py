"""repr() and str() of kiln tensors in PyTorch's layout (torch/_tensor_str.py).

Large tensors are summarised past ``threshold`` elements with ``edgeitems`` rows at each
end, columns are aligned to the widest value, floats switch between fixed, integer-valued
("1.") and scientific notation by PyTorch's rules, and the dtype is shown unless it is
float32, complex64, int64 or bool. bfloat16, float16 and the fp8 types print their values
as float32 does (they are widened first, as PyTorch does). The numbers are formatted from
a numpy copy of at most the summarised elements.
"""

import math
from dataclasses import dataclass

import numpy as _np

from . import _kiln


@dataclass
class _PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: object = None


PRINT_OPTS = _PrintOptions()

_PROFILES = {
    "default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
    "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
    "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80),
}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None):
    """torch.set_printoptions: profile is "default", "short" or "full"; None keeps a setting."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: unknown profile {profile!r} (expected one of {sorted(_PROFILES)})")
        for key, value in _PROFILES[profile].items():
            setattr(PRINT_OPTS, key, value)
    for key, value in dict(precision=precision, threshold=threshold, edgeitems=edgeitems,
                           linewidth=linewidth).items():
        if value is not None:
            setattr(PRINT_OPTS, key, value)
    PRINT_OPTS.sci_mode = sci_mode


_WIDENED = {_kiln.float16, _kiln.bfloat16, _kiln.float8_e4m3fn, _kiln.float8_e5m2}
_DEFAULT_DTYPES = {_kiln.float32, _kiln.complex64, _kiln.int64, _kiln.bool}


class _Formatter:
    """Chooses one notation and width for all the values it is built from (numpy array)."""

    def __init__(self, values):
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        if not self.floating:
            for value in flat.tolist():
                self.max_width = max(self.max_width, len(f"{value}"))
        else:
            finite = flat[_np.isfinite(flat) & (flat != 0)].astype(_np.float64)
            if finite.size:
                magnitudes = _np.abs(finite)
                smallest, largest = magnitudes.min(), magnitudes.max()
                numbers = finite.tolist()
                self.int_mode = all(v == math.ceil(v) for v in numbers)
                precision = PRINT_OPTS.precision
                if self.int_mode:
                    # Integer-valued floats print as "3."; the point counts in the width.
                    if largest / smallest > 1000.0 or largest > 1.0e8:
                        self.sci_mode = True
                        self.max_width = max(len(f"{v:.{precision}e}") for v in numbers)
                    else:
                        self.max_width = max(len(f"{v:.0f}") + 1 for v in numbers)
                elif largest / smallest > 1000.0 or largest > 1.0e8 or smallest < 1.0e-4:
                    self.sci_mode = True
                    self.max_width = max(len(f"{v:.{precision}e}") for v in numbers)
                else:
                    self.max_width = max(len(f"{v:.{precision}f}") for v in numbers)
        if PRINT_OPTS.sci_mode is not None:
            self.sci_mode = PRINT_OPTS.sci_mode

    def width(self):
        return self.max_width

    def format(self, value):
        if self.floating:
            precision = PRINT_OPTS.precision
            if self.sci_mode:
                text = f"{value:{self.max_width}.{precision}e}"
            elif self.int_mode:
                text = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    text += "."
            else:
                text = f"{value:.{precision}f}"
        else:
            text = f"{value}"
        return (self.max_width - len(text)) * " " + text


def _complex_text(value, real_fmt, imag_fmt):
    real = real_fmt.format(value.real)
    imag = (imag_fmt.format(value.imag) + "j").lstrip()
    # A sign of its own (negative numbers, -0.0) needs no "+".
    return real + imag if imag[0] in "+-" else real + "+" + imag


def _value_text(value, formatter, imag_formatter):
    if imag_formatter is not None:
        return _complex_text(value, formatter, imag_formatter)
    return formatter.format(value)


def _vector_str(values, indent, summarize, formatter, imag_formatter):
    element_length = formatter.width() + 2
    if imag_formatter is not None:
        element_length += imag_formatter.width() + 1
    per_line = max(1, int(math.floor((PRINT_OPTS.linewidth - indent) / element_length)))
    edge = PRINT_OPTS.edgeitems
    if summarize and not edge:
        data = ["..."]
    elif summarize and values.shape[0] > 2 * edge:
        data = ([_value_text(v, formatter, imag_formatter) for v in values[:edge].tolist()] + [" ..."] +
                [_value_text(v, formatter, imag_formatter) for v in values[-edge:].tolist()])
    else:
        data = [_value_text(v, formatter, imag_formatter) for v in values.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested_str(values, indent, summarize, formatter, imag_formatter):
    dim = values.ndim
    if dim == 0:
        return _value_text(values.item(), formatter, imag_formatter)
    if dim == 1:
        return _vector_str(values, indent, summarize, formatter, imag_formatter)
    edge = PRINT_OPTS.edgeitems
    rows = values.shape[0]

    def row(i):
        return _nested_str(values[i], indent + 1, summarize, formatter, imag_formatter)

    if summarize and rows > 2 * edge:
        parts = [row(i) for i in range(edge)] + ["..."] + [row(i) for i in range(rows - edge, rows)]
    else:
        parts = [row(i) for i in range(rows)]
    return "[" + ("," + "\n" * (dim - 1) + " " * (indent + 1)).join(parts) + "]"


def _summarized(values):
    """The elements a summarised print shows: edgeitems at each end of every dim."""
    edge = PRINT_OPTS.edgeitems
    for axis in range(values.ndim):
        if values.shape[axis] > 2 * edge:
            keep = list(range(edge)) + list(range(values.shape[axis] - edge, values.shape[axis]))
            values = _np.take(values, keep, axis=axis)
    return values


def _edges_only(tensor):
    """Every dim longer than 2 * edgeitems cut to its edges plus one element between them.

    The printer shows only the edges of such a dim and never reads the middle element,
    which only keeps the dim longer than 2 * edgeitems so the "..." still appears. Done
    before the copy to the host and the widening of bfloat16/float16/fp8, so a large
    tensor's repr copies a few hundred elements, not all of them.
    """
    edge = PRINT_OPTS.edgeitems
    for axis in range(tensor.dim()):
        size = tensor.shape[axis]
        if size > 2 * edge + 1:
            tensor = _kiln.cat([tensor.narrow(axis, 0, edge + 1), tensor.narrow(axis, size - edge, edge)], axis)
    return tensor


def _host_values(tensor, summarize):
    """A numpy view (or a widened copy) of the values the print shows."""
    if summarize:
        tensor = _edges_only(tensor)
    tensor = tensor.cpu()
    if tensor.dtype in _WIDENED:
        tensor = tensor.to(_kiln.float32)
    return tensor.numpy()


def _tensor_str(tensor, indent):
    if tensor.numel() == 0:
        return "[]"
    summarize = tensor.numel() > PRINT_OPTS.threshold
    values = _host_values(tensor, summarize)
    shown = _summarized(values) if summarize else values
    if values.dtype.kind == "c":
        return _nested_str(values, indent, summarize, _Formatter(shown.real), _Formatter(shown.imag))
    return _nested_str(values, indent, summarize, _Formatter(shown), None)


def _add_suffixes(text, suffixes, indent):
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(tensor):
    """PyTorch's Tensor.__repr__ layout: "tensor([[1., 2.],\\n        [3., 4.]])"."""
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    # PyTorch shows a device other than the CPU first.
    device = str(tensor.device)
    if device != "cpu":
        suffixes.append("device='" + device + "'")
    # PyTorch names the graph after the dtype: grad_fn=<...> for a result of recorded ops,
    # requires_grad=True for a leaf; the values come from a detached view.
    grad_fn = getattr(tensor, "grad_fn", None)
    grad_suffix = None
    if grad_fn is not None:
        grad_suffix = "grad_fn=<" + grad_fn.name() + ">"
    elif getattr(tensor, "requires_grad", False):
        grad_suffix = "requires_grad=True"
    if grad_suffix is not None:
        tensor = tensor.detach()
    if tensor.numel() == 0:
        # numpy's convention: the shape is shown unless it is (0,); no element implies the
        # dtype, so it is shown unless it is the default float32.
        if tensor.dim() != 1:
            suffixes.append("size=" + str(tuple(tensor.shape)))
        if tensor.dtype != _kiln.float32:
            suffixes.append("dtype=" + str(tensor.dtype))
        body = "[]"
    else:
        if tensor.dtype not in _DEFAULT_DTYPES:
            suffixes.append("dtype=" + str(tensor.dtype))
        body = _tensor_str(tensor, indent)
    if grad_suffix is not None:
        suffixes.append(grad_suffix)
    return _add_suffixes(prefix + body, suffixes, indent)


def tensor_format(tensor, spec):
    """format(t, spec): a 0-dim tensor formats as its value (f"{t:.3f}"), others as repr."""
    if tensor.dim() == 0:
        return tensor.item().__format__(spec)
    return object.__format__(tensor_repr(tensor), spec)
