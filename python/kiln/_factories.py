"""PyTorch's keyword arguments common to every factory function, on kiln's factories.

The compiled factories (``kiln._kiln.zeros`` etc.) take sizes, values and ``dtype``;
PyTorch users also pass ``device=`` and ``requires_grad=`` (``torch.zeros(3,
requires_grad=True)``, ``torch.ones_like(x, device=x.device)``). The wrappers here add
them, plus the ``rand_like`` family and the ``Tensor.new_*`` methods, which create
tensors with ``self``'s dtype and device unless told otherwise.
"""

import functools as _functools

from . import _kiln

# The factories that create a tensor from sizes or values (device defaults to the CPU)
# and the *_like ones (device defaults to the input's).
_PLAIN = ("empty", "zeros", "ones", "full", "rand", "randn", "randint", "arange", "linspace", "logspace", "eye",
          "scalar_tensor")
_LIKE = ("empty_like", "zeros_like", "ones_like", "full_like")


def _finish(out, device, requires_grad):
    if device is not None and _kiln.device(str(device)) != _kiln.device(str(out.device)):
        out = out.to(device)
    if requires_grad:
        out.requires_grad_()
    return out


def _plain(fn):
    @_functools.wraps(fn)
    def factory(*args, device=None, requires_grad=False, pin_memory=False, **kwargs):
        return _finish(fn(*args, **kwargs), device, requires_grad)

    return factory


def _like(fn):
    @_functools.wraps(fn)
    def factory(input, *args, device=None, requires_grad=False, **kwargs):  # noqa: A002 (PyTorch's name)
        return _finish(fn(input, *args, **kwargs), input.device if device is None else device, requires_grad)

    return factory


def _random_like(name, fn):
    def factory(input, *args, dtype=None, device=None, requires_grad=False, generator=None):  # noqa: A002
        out = fn(*args, tuple(input.shape), dtype=input.dtype if dtype is None else dtype, generator=generator)
        return _finish(out, input.device if device is None else device, requires_grad)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"torch.{name}: {name[:-5]} with the shape (and, unless given, dtype and device) of input."
    return factory


def _size_of(size):
    # new_zeros(2, 3) and new_zeros((2, 3)) both mean (2, 3), as in PyTorch.
    return tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) and hasattr(size[0], "__iter__") else size


def install(namespace, tensor_fn):
    """Replaces the factories in ``namespace`` (the kiln package's globals) by the
    wrappers and adds the Tensor.new_* methods; ``tensor_fn`` is kiln.tensor."""
    for name in _PLAIN:
        namespace[name] = _plain(getattr(_kiln, name))
    for name in _LIKE:
        namespace[name] = _like(getattr(_kiln, name))
    namespace["rand_like"] = _random_like("rand_like", lambda size, **kw: _kiln.rand(size, **kw))
    namespace["randn_like"] = _random_like("randn_like", lambda size, **kw: _kiln.randn(size, **kw))
    namespace["randint_like"] = _random_like(
        "randint_like", lambda *a, **kw: _kiln.randint(*a, **kw))

    zeros, ones, empty, full = (namespace[n] for n in ("zeros", "ones", "empty", "full"))

    def defaults(self, dtype, device):
        return (self.dtype if dtype is None else dtype), (self.device if device is None else device)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        dtype, device = defaults(self, dtype, device)
        return zeros(_size_of(size), dtype=dtype, device=device, requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        dtype, device = defaults(self, dtype, device)
        return ones(_size_of(size), dtype=dtype, device=device, requires_grad=requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        dtype, device = defaults(self, dtype, device)
        return empty(_size_of(size), dtype=dtype, device=device, requires_grad=requires_grad)

    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
        dtype, device = defaults(self, dtype, device)
        return full(size, fill_value, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        dtype, device = defaults(self, dtype, device)
        return _finish(tensor_fn(data, dtype=dtype), device, requires_grad)

    for fn in (new_zeros, new_ones, new_empty, new_full, new_tensor):
        fn.__doc__ = f"Tensor.{fn.__name__}: a new tensor with self's dtype and device unless given."
        setattr(_kiln.Tensor, fn.__name__, fn)
