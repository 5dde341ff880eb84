"""kiln.nn.SiLU, GELU, ReLU and Dropout."""

from .. import functional as F
from .module import Module

__all__ = ["Dropout", "GELU", "ReLU", "SiLU"]


class _Inplace(Module):
    _fn = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        out = type(self)._fn(input)
        if not self.inplace:
            return out
        input.copy_(out)
        return input

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class SiLU(_Inplace):
    """x * sigmoid(x)."""

    _fn = staticmethod(F.silu)


class ReLU(_Inplace):
    """max(x, 0)."""

    _fn = staticmethod(F.relu)


class GELU(Module):
    """x * Phi(x); approximate='tanh' uses the tanh formula."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate argument must be either none or tanh, got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Dropout(Module):
    """Zeroes each element with probability p and scales the rest by 1/(1-p) in training
    mode; the identity in eval mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
