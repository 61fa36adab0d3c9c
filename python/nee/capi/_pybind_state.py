"""Mirror of `onnxruntime.capi._pybind_state` (which re-exports the C module)."""
from .onnxruntime_pybind11_state import *  # noqa: F401,F403
from .onnxruntime_pybind11_state import __all__  # noqa: F401
