"""kiln.nn.Parameter: a Tensor that a Module registers as one of its parameters."""

from .. import _kiln
from .._kiln import Tensor


class Parameter(Tensor):
    """PyTorch's ``torch.nn.Parameter``: a leaf tensor that requires grad (by default)
    and shares its data with ``data``. Assigning one as a Module attribute registers it
    (``named_parameters``, ``state_dict``)."""

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = _kiln.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): data must be a Tensor, got {type(data).__name__}")
        # A new leaf over the same memory, as torch.nn.Parameter(t) is.
        super().__init__(data.detach())
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach().clone(), self.requires_grad))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.detach().clone(), self.requires_grad)
        memo[id(self)] = result
        return result


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)
