"""nee's exception classes, under ONNX Runtime's names.

Every class derives from NeeError, and ONNX Runtime's generic `Fail` is that
base, so `except Fail` catches what nee raises as it catches ONNX Runtime's
failures. The C extension raises the class registered for each status code."""
from __future__ import annotations

from . import _nee


class NeeError(RuntimeError):
    """Base class of every error nee raises; the message names the node, input or field."""


Fail = NeeError  # ONNX Runtime's generic failure


class InvalidGraph(NeeError):
    """The model is malformed or inconsistent (ONNX Runtime: InvalidGraph)."""


class InvalidArgument(NeeError, ValueError):
    """An input, option or path given by the caller is wrong."""


class NotImplemented(NeeError):  # noqa: A001 - ONNX Runtime's name
    """Valid, but not supported by nee yet."""


class UnsupportedOperator(NotImplemented, InvalidGraph):
    """A node whose operator nee does not have. ONNX Runtime raises InvalidGraph for an unknown op of a
    domain it knows and Fail for another domain; this is both (every class is a Fail) and NotImplemented."""


class OutOfMemory(NeeError, MemoryError):
    """An allocation failed or exceeded a limit."""


class RuntimeException(NeeError):
    """A failure while running."""


class NoSuchFile(NeeError, OSError):
    """A file could not be opened, mapped or written."""


class RunCancelled(NeeError):
    """A run stopped early: RunOptions.terminate was set, or it exceeded its time limit."""


class NoModel(NeeError):
    """No model was loaded (ONNX Runtime's NO_MODEL)."""


class EngineError(NeeError):
    """An internal engine failure (ONNX Runtime's ENGINE_ERROR)."""


class InvalidProtobuf(InvalidGraph):
    """The model bytes are not a valid ONNX protobuf (ONNX Runtime's INVALID_PROTOBUF)."""


class ModelLoaded(NeeError):
    """ONNX Runtime's MODEL_LOADED; nee never raises it (a session loads its model once)."""


class EPFail(NeeError):
    """An execution provider failed (ONNX Runtime's EP_FAIL)."""


InvalidModel = InvalidGraph

_nee.register_errors(InvalidGraph, InvalidArgument, NotImplemented, OutOfMemory, RuntimeException, NoSuchFile,
                     RunCancelled)

ORT_EXCEPTIONS = ("Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError", "RuntimeException",
                  "InvalidProtobuf", "ModelLoaded", "NotImplemented", "InvalidGraph", "EPFail")
__all__ = ["NeeError", "InvalidModel", "OutOfMemory", "RunCancelled", *ORT_EXCEPTIONS]
