"""Tensor methods PyTorch users reach for that are spelled with other kiln methods:
``view_as``, ``reshape_as``, ``type_as``, ``to(other)``, ``is_floating_point``,
``is_complex``, ``clip``, and ``kiln.numel`` / ``kiln.is_floating_point`` /
``kiln.is_complex``."""

from . import _kiln

_Tensor = _kiln.Tensor
_to = _Tensor.to


def _view_as(self, other):
    """Tensor.view_as: ``self.view(other.shape)``."""
    return self.view(other.shape)


def _reshape_as(self, other):
    """Tensor.reshape_as: ``self.reshape(other.shape)``."""
    return self.reshape(other.shape)


def _type_as(self, other):
    """Tensor.type_as: ``self`` converted to ``other``'s dtype."""
    return _to(self, other.dtype)


def _to_like(self, *args, **kwargs):
    """Tensor.to(dtype), to(device[, dtype]), to(memory_format=...) and PyTorch's
    to(other): ``other``'s dtype and device."""
    if args and isinstance(args[0], _Tensor):
        other = args[0]
        out = _to(self, other.dtype, *args[1:], **kwargs)
        return out if str(other.device) == str(out.device) else _to(out, other.device)
    return _to(self, *args, **kwargs)


def _is_floating_point(self):
    return self.dtype.is_floating_point


def _is_complex(self):
    return self.dtype.is_complex


def install(namespace):
    _Tensor.view_as = _view_as
    _Tensor.reshape_as = _reshape_as
    _Tensor.type_as = _type_as
    _Tensor.to = _to_like
    _Tensor.is_floating_point = _is_floating_point
    _Tensor.is_complex = _is_complex
    _Tensor.clip = _Tensor.clamp
    namespace["numel"] = lambda input: input.numel()  # noqa: A002 (PyTorch's name)
    namespace["is_floating_point"] = _is_floating_point
    namespace["is_complex"] = _is_complex
