import os
import sys

# The package built in the tree (scripts/build.sh) unless an installed one is requested;
# NEE_PYTHON_DIR names another build's (scripts/sanitize.sh: build-asan/python).
_build_python = os.environ.get("NEE_PYTHON_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "build", "python")
if os.path.isdir(_build_python) and "nee" not in sys.modules:
    sys.path.insert(0, os.path.abspath(_build_python))
