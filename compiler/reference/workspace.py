"""Names the kernel file imports from other files of the workspace, for the eager reference.

A vLLM kernel file imports small helpers of its own package (`from vllm.kernels.helion.utils import
get_fp8_dtype`, `from ..utils import get_int8_min_max`) whose package cannot be imported here (vLLM is not
installed, and importing it would run far more than the helper). Where the module is a file of the
workspace (`compiler.support.workspace_files.locate`), only the statements the imported names need are
executed, in a module of their own whose imports go through the same hook; names never found stay an
ImportError. vLLM's `has_helion()` is true (the reference has its Helion) and its `current_platform` is a TPU (`TpuPlatform`): its 8-bit float type is float8_e5m2 on a
v6e and float8_e4m3fn on every other TPU, as vLLM's TPU platform answers (the front end's model,
compiler/frontend/vllm_platform.py, says the same; this copy exists because the reference shares no code
with the compiler it checks).
"""

from __future__ import annotations

import ast
import os
from types import ModuleType
from typing import Any

import torch

from compiler.support import workspace_files

CHIP_VARIABLE = "HELION_LS_REFERENCE_CHIP"  # the TPU the reference stands for (the check's chip), if set


class TpuPlatform:
    """vLLM's `current_platform` on a TPU."""

    device_type = device_name = "tpu"

    def __init__(self, chip: str | None):
        self.chip = chip

    def fp8_dtype(self) -> torch.dtype:
        return torch.float8_e5m2 if self.chip == "v6e" else torch.float8_e4m3fn

    def is_tpu(self) -> bool:
        return True

    def is_fp8_fnuz(self) -> bool:
        return False

    def get_device_name(self, device_id: int = 0) -> str:
        return f"TPU {self.chip or 'v5e'}"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("is_"):
            return lambda *a, **k: False
        raise AttributeError(f"vLLM's current_platform.{name} is not modelled for a TPU in the eager reference")


def _has_helion() -> bool:
    """vLLM's `vllm.utils.import_utils.has_helion()`: the reference always has its Helion."""
    return True


class WorkspaceImports:
    """Modules built from workspace files, by path, for one exec'd kernel source."""

    def __init__(self) -> None:
        self.modules: dict[str, ModuleType] = {}

    def find(self, name: str, globals_: Any, fromlist: Any, level: int, builtins_: dict[str, Any]) -> Any:
        """The module for `from name import ...` when it is a workspace file or vLLM's platform; else None."""
        if not fromlist:
            return None
        origin = globals_.get("__file__") if isinstance(globals_, dict) else None
        path = workspace_files.locate(origin, name, level)
        if path is None:
            if level == 0 and name.startswith("vllm.") and "current_platform" in fromlist:
                module = ModuleType(name)
                module.current_platform = TpuPlatform(os.environ.get(CHIP_VARIABLE) or None)
                return module
            if level == 0 and name.startswith("vllm.") and "has_helion" in fromlist:
                module = ModuleType(name)  # `if has_helion():` guards a kernel: the reference runs one
                module.has_helion = _has_helion
                return module
            return None
        parsed = workspace_files.read(path)
        if parsed is None:
            return None
        module = self.modules.get(path)
        if module is None:
            module = self.modules[path] = ModuleType(name or os.path.basename(path))
            module.__file__ = path
            module.__builtins__ = builtins_
        missing = {n for n in fromlist if n != "*" and n not in module.__dict__}
        if missing:
            code = compile(ast.Module(workspace_files.needed(parsed, missing), []), path, "exec")
            exec(code, module.__dict__)  # noqa: S102 - the reference runs the user's own code, isolated
        return module
