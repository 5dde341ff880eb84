import os
import sys

# Tests run against the module in the build tree: `make test` sets PYTHONPATH, and
# this fallback finds the default release build when pytest runs on its own.
_here = os.path.dirname(os.path.abspath(__file__))
_build = os.path.join(_here, "..", "..", "build", "release", "python")
if os.path.isdir(_build) and _build not in sys.path:
    sys.path.insert(0, _build)
