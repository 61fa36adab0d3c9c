"""Mirror of `onnxruntime.capi`: the modules scripts import ONNX Runtime's
classes and exceptions from, with nee's classes under the same names."""
from . import _pybind_state, onnxruntime_inference_collection, onnxruntime_pybind11_state, onnxruntime_validation

__all__ = ["_pybind_state", "onnxruntime_pybind11_state", "onnxruntime_validation",
           "onnxruntime_inference_collection"]
