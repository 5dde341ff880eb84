"""kiln.nn: the functional namespace (``kiln.nn.functional``) under PyTorch's names."""

from . import functional  # noqa: F401
