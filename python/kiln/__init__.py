"""kiln: a C++ tensor runtime with PyTorch semantics.

The compiled core is ``kiln._kiln``; this package re-exports it under PyTorch's
names and adds the few helpers that are easier to write in Python.
"""

import numpy as _np

from . import _kiln
from ._kiln import *  # noqa: F401,F403  (dtypes, Tensor, ops)
from ._kiln import Tensor, dtype

__version__ = _kiln.__version__()
# `import *` skips underscore names; PyTorch spells these with one.
_scaled_mm = _kiln._scaled_mm
_grouped_mm = _kiln._grouped_mm

# PyTorch's dtype aliases.
float = _kiln.float32  # noqa: A001
double = _kiln.float64
half = _kiln.float16
cfloat = _kiln.complex64
cdouble = _kiln.complex128
long = _kiln.int64
int = _kiln.int32  # noqa: A001
short = _kiln.int16

_NUMPY_FRIENDLY = {
    _kiln.bool, _kiln.uint8, _kiln.uint16, _kiln.uint32, _kiln.uint64, _kiln.int8, _kiln.int16,
    _kiln.int32, _kiln.int64, _kiln.float16, _kiln.float32, _kiln.float64, _kiln.complex64,
    _kiln.complex128,
}


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (nested lists, numbers, numpy arrays or tensors).

    Without ``dtype`` the type is inferred as PyTorch does: bool, int64, float32 or
    complex64 for Python data; the array's own dtype for numpy input.
    """
    if device is not None or requires_grad:
        return _factories._finish(tensor(data, dtype=dtype), device, requires_grad)
    if isinstance(data, Tensor):
        out = data.detach().clone()
        return out if dtype is None else out.to(dtype)
    if isinstance(data, _np.ndarray):
        arr = _np.array(data, copy=True)
    else:
        arr = _np.array(data)
        if arr.dtype == _np.float64:
            arr = arr.astype(_np.float32)  # Python floats default to float32
        elif arr.dtype == _np.complex128:
            arr = arr.astype(_np.complex64)
        elif arr.dtype.kind in "iu" and arr.dtype != _np.int64:
            arr = arr.astype(_np.int64)
        elif arr.dtype.kind not in "biufc":
            raise TypeError(f"tensor(): could not infer a dtype for data of numpy kind {arr.dtype!r}")
    out = from_numpy(_np.array(arr, order="C", copy=False)).clone()
    if dtype is not None and dtype != out.dtype:
        out = out.to(dtype)
    return out


def as_tensor(data, dtype=None):
    """Like ``tensor`` but shares memory with a numpy array when the dtype allows."""
    if isinstance(data, _np.ndarray) and (dtype is None or dtype == from_numpy(data[:0]).dtype):
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def is_tensor(obj):
    return isinstance(obj, Tensor)


def threads(n):
    """A ``with`` block in which the ops this thread runs use a pool of ``n`` threads.

    ``with kiln.threads(4): logits = model.forward(ids)``. Other threads keep their own
    count, and this one gets its previous count back when the block ends
    (``kiln.get_num_threads()`` says which applies). Blocks nest; each must be exited on
    the thread that entered it.
    """
    return _kiln._ThreadsBlock(n)


from . import _factories  # noqa: E402

# device= and requires_grad= on every factory, rand_like & co., Tensor.new_*.
_factories.install(globals(), tensor)

from . import _tensor_aliases  # noqa: E402

# view_as, reshape_as, type_as, to(other), is_floating_point, clip, kiln.numel.
_tensor_aliases.install(globals())

from . import _tensor_str  # noqa: E402

# PyTorch's printed layout (python/kiln/_tensor_str.py).
Tensor.__repr__ = _tensor_str.tensor_repr
Tensor.__str__ = _tensor_str.tensor_repr
Tensor.__format__ = _tensor_str.tensor_format
set_printoptions = _tensor_str.set_printoptions

from . import llm, nn  # noqa: E402,F401
from . import linalg  # noqa: E402,F401
from . import autograd  # noqa: E402,F401
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: E402,F401
from . import optim  # noqa: E402,F401
