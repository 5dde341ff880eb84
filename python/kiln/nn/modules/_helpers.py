"""What several layer files share: new parameter storage of a given dtype and device."""

from ... import _kiln
from ..parameter import Parameter


def new_parameter(*shape, dtype=None, device=None, requires_grad=True):
    """An uninitialised Parameter (the layer's reset_parameters fills it)."""
    data = _kiln.empty(*shape, dtype=dtype if dtype is not None else _kiln.float32)
    if device is not None:
        data = data.to(device)
    return Parameter(data, requires_grad)


def ntuple(value, n, what):
    """An int repeated n times, or a sequence of n ints, as a tuple (PyTorch's _pair)."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{what} must be an int or a tuple of {n} ints, got {tuple(value)}")
        return tuple(value)
    return (value,) * n
