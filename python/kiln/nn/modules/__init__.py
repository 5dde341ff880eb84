"""The layers of kiln.nn, one family per file."""

from .activation import GELU, Dropout, ReLU, SiLU  # noqa: F401
from .container import ModuleDict, ModuleList, Sequential  # noqa: F401
from .conv import Conv1d, Conv2d, Conv3d  # noqa: F401
from .linear import Identity, Linear  # noqa: F401
from .module import Module  # noqa: F401
from .normalization import LayerNorm, RMSNorm  # noqa: F401
from .simple import CrossEntropyLoss, Flatten, MSELoss, Sigmoid, Softmax, Tanh  # noqa: F401
from .sparse import Embedding  # noqa: F401
