"""Mirror of `onnxruntime.capi.onnxruntime_inference_collection`: ONNX Runtime's
Python classes, here nee's (imported absolutely: see onnxruntime_pybind11_state)."""
from nee._iobinding import IOBinding  # noqa: F401
from nee._ortvalue import OrtDevice, OrtValue, SparseTensor  # noqa: F401
from nee._session import (InferenceSession, ModelMetadata, NodeArg,  # noqa: F401
                        check_and_normalize_provider_args)

Session = InferenceSession
