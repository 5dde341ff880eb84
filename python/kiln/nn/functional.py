"""kiln.nn.functional: PyTorch's ``torch.nn.functional`` names for kiln ops.

Each name is bound as the op lands in the compiled core; names not yet
available are simply absent, so ``hasattr`` tells what works.
"""

from .. import _kiln

_FUNCTIONAL_NAMES = (
    "silu", "gelu", "softplus", "sigmoid", "tanh", "relu", "embedding", "softmax",
    "log_softmax", "linear", "rms_norm", "layer_norm", "pad", "dropout",
    "scaled_dot_product_attention", "scaled_mm", "grouped_mm", "ScalingType",
    "cross_entropy", "mse_loss", "group_norm", "dropout2d", "interpolate", "conv1d", "conv2d",
    "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
)

for _name in _FUNCTIONAL_NAMES:
    if hasattr(_kiln, _name):
        globals()[_name] = getattr(_kiln, _name)
del _name


def one_hot(tensor, num_classes=-1):
    """torch.nn.functional.one_hot: int64 [*tensor.shape, num_classes], 1 at each index."""
    if tensor.dtype != _kiln.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if tensor.numel() == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(tensor.max().item()) + 1
    if tensor.numel() > 0:
        if tensor.min().item() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if tensor.max().item() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    return (tensor.unsqueeze(-1) == _kiln.arange(num_classes)).long()


def normalize(input, p=2.0, dim=1, eps=1e-12):  # noqa: A002 (PyTorch's name)
    """torch.nn.functional.normalize: input / max(||input||_p over dim, eps)."""
    return input / _kiln.clamp(_kiln.norm(input, p, dim, True), min=eps)
