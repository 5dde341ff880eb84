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
