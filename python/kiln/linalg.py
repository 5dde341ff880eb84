"""kiln.linalg: torch.linalg's functions for float32/float64/complex64/complex128.

The functions are the compiled ``kiln._kiln.linalg`` ones; this module makes
``import kiln.linalg`` work as ``import torch.linalg`` does.
"""

from ._kiln import linalg as _compiled

globals().update({name: getattr(_compiled, name) for name in dir(_compiled) if not name.startswith("__")})
