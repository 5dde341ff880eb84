"""kiln.nn: PyTorch's ``torch.nn`` for kiln: ``Module``, ``Parameter``, the layers the
models kiln runs use, ``kiln.nn.init`` and the functional namespace
(``kiln.nn.functional``) under PyTorch's names."""

from . import functional  # noqa: F401
from . import init  # noqa: F401
from .modules import (  # noqa: F401
    GELU, Conv1d, Conv2d, Conv3d, CrossEntropyLoss, Dropout, Embedding, Flatten, Identity, LayerNorm, Linear,
    Module, ModuleDict, ModuleList, MSELoss, ReLU, RMSNorm, Sequential, Sigmoid, SiLU, Softmax, Tanh,
)
from .parameter import Parameter  # noqa: F401
