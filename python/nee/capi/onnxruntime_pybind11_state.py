"""Mirror of `onnxruntime.capi.onnxruntime_pybind11_state`: ONNX Runtime's C-level
names (the exception classes above all), bound to nee's.

The capi modules import nee's absolutely: a script that aliases the package
(`sys.modules["onnxruntime"] = nee`) and then imports `onnxruntime.capi.X` runs
this file again under the alias's name, and relative imports would then load
second copies of nee's modules, whose exception classes nee never raises."""
from nee import _errors, _iobinding, _options, _ortvalue, _runtime, _session
from nee._errors import *  # noqa: F401,F403 - Fail, InvalidArgument, NoSuchFile, ...
from nee._options import *  # noqa: F401,F403
from nee._ortvalue import *  # noqa: F401,F403
from nee._runtime import *  # noqa: F401,F403
from nee._session import ModelMetadata, NodeArg, OrtValueVector

SessionIOBinding = _iobinding.IOBinding
InferenceSession = _session.InferenceSession  # the C class takes the same arguments here


def get_default_session_options() -> _options.SessionOptions:
    return _options.SessionOptions()


def is_dlpack_uint8_tensor(capsule: object) -> bool:
    """Whether a DLPack capsule holds uint8 elements (ONNX Runtime uses it to tell bool from uint8)."""
    import numpy as np
    return np.from_dlpack(_ortvalue._Capsule(capsule)).dtype == np.uint8


__all__ = (list(_errors.__all__) + list(_options.__all__) + list(_ortvalue.__all__) + list(_runtime.__all__)
           + ["SessionIOBinding", "InferenceSession", "ModelMetadata", "NodeArg", "OrtValueVector",
              "get_default_session_options", "is_dlpack_uint8_tensor"])
