"""kiln.autograd: reverse-mode automatic differentiation (PyTorch's torch.autograd).

The engine is C++ (``kiln._kiln._autograd``); this module gives it PyTorch's Python
API: ``grad``, ``backward``, the grad-mode context managers (also usable as decorators)
and ``gradcheck`` / ``gradgradcheck``. Grad mode is per thread, as in PyTorch.
"""

import functools as _functools

from ._kiln import _autograd as _engine

Node = _engine.Node
# Complex conjugate, recorded like any op (the identity for real tensors).
conj = _engine.conj


def is_grad_enabled():
    return _engine.is_grad_enabled()


class _GradMode:
    """Base of the grad-mode scopes: a context manager and a function decorator."""

    _enabled = True

    def __enter__(self):
        self._previous = _engine.is_grad_enabled()
        _engine.set_grad_enabled(self._enabled)
        return self

    def __exit__(self, *exc):
        _engine.set_grad_enabled(self._previous)
        return False

    def __call__(self, func):
        @_functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._init_args()):
                return func(*args, **kwargs)

        return wrapper

    def _init_args(self):
        return ()


class no_grad(_GradMode):  # noqa: N801  (PyTorch's name)
    """Nothing computed inside is recorded: results do not require grad."""

    _enabled = False


class enable_grad(_GradMode):  # noqa: N801
    """Recording on again, e.g. inside a ``no_grad`` block."""

    _enabled = True


class set_grad_enabled(_GradMode):  # noqa: N801
    """``set_grad_enabled(mode)``: sets grad mode now (like PyTorch) and, used as a
    context manager, restores the previous mode when the block ends."""

    def __init__(self, mode):
        self._enabled = bool(mode)
        self._previous = _engine.is_grad_enabled()
        _engine.set_grad_enabled(self._enabled)

    def __enter__(self):
        return self

    def _init_args(self):
        return (self._enabled,)


def _zero_grad(params, set_to_none):
    """Module.zero_grad and Optimizer.zero_grad: drops (``set_to_none``) or zeroes the
    gradient of each of ``params``; a zeroed gradient leaves any graph first."""
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            g = p.grad
            if g.grad_fn is not None:
                g.detach_()
            else:
                g.requires_grad_(False)
            g.zero_()


def _tensors(obj):
    if obj is None:
        return None
    if isinstance(obj, (list, tuple)):
        return list(obj)
    return [obj]


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """torch.autograd.backward: accumulate gradients of ``tensors`` into the leaves."""
    _engine.backward(_tensors(tensors), _tensors(grad_tensors), retain_graph, create_graph, _tensors(inputs))


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """torch.autograd.grad: the gradients of ``outputs`` with respect to ``inputs`` (a tuple)."""
    return _engine.grad(_tensors(outputs), _tensors(inputs), _tensors(grad_outputs), retain_graph, create_graph,
                        allow_unused)


class GradcheckError(RuntimeError):
    """Raised by gradcheck when the analytical and numerical Jacobians differ."""


def _check(message, raise_exception):
    if message:
        if raise_exception:
            raise GradcheckError(message)
        return False
    return True


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """torch.autograd.gradcheck: compare backward's Jacobian with central finite
    differences for every input that requires grad (use float64 / complex128 inputs).
    Complex inputs and outputs are checked in their real and imaginary parts."""
    return _check(_engine.gradcheck(func, _tensors(inputs), eps, atol, rtol), raise_exception)


def gradgradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, seed=0):
    """torch.autograd.gradgradcheck: gradcheck of the first derivative (double backward)
    with random grad_outputs."""
    return _check(_engine.gradgradcheck(func, _tensors(inputs), eps, atol, rtol, seed), raise_exception)
