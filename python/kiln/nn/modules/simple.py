"""kiln.nn.Tanh, Sigmoid, Softmax, Flatten, MSELoss and CrossEntropyLoss: modules that
hold their options and call the functional op (PyTorch's constructor arguments)."""

from .. import functional as F
from .module import Module

__all__ = ["CrossEntropyLoss", "Flatten", "MSELoss", "Sigmoid", "Softmax", "Tanh"]


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Softmax(Module):
    """softmax along ``dim`` (PyTorch's implicit dim choice is deprecated; give one)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        if self.dim is None:
            raise ValueError("Softmax: pass dim= (PyTorch's implicit dim choice is deprecated and not supported)")
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Flatten(Module):
    """input.flatten(start_dim, end_dim), keeping the batch dim by default."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class MSELoss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(Module):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__()
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.reduction = reduction
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)
