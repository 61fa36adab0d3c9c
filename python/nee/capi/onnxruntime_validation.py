"""Mirror of `onnxruntime.capi.onnxruntime_validation`: the platform and
package checks ONNX Runtime runs at import. nee has nothing to warn about."""
from __future__ import annotations

from typing import Tuple

has_ortmodule = False
package_name = "nee"
cuda_version = ""


def check_distro_info() -> None:
    """ONNX Runtime warns on untested platforms; nee builds from source wherever it runs."""
    return None


def get_package_name_and_version_info() -> Tuple[str, str, str]:
    """(package_name, version, cuda_version), as ONNX Runtime returns them."""
    from nee import __version__
    return package_name, __version__, cuda_version


def check_training_module() -> Tuple[bool, str, str, str]:
    """(has_ortmodule, package_name, version, cuda_version); nee has no training module."""
    name, version, cuda = get_package_name_and_version_info()
    return has_ortmodule, name, version, cuda
