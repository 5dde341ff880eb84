"""kiln.optim: PyTorch's ``torch.optim`` for kiln tensors: the ``Optimizer`` base,
``SGD``, ``AdamW`` and ``kiln.optim.lr_scheduler``."""

from . import lr_scheduler  # noqa: F401
from .adamw import AdamW  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401
