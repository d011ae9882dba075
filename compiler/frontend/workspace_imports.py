"""Names a kernel file imports from other files of the workspace, evaluated statically for one chip.

`from vllm.kernels.helion.utils import get_fp8_dtype`, `from ..utils import get_int8_min_max`: where the
module is a file of the workspace (support/workspace_files.py finds it), the statements of that file that
the name needs are evaluated with the bounded module evaluator of host_eval.py (nothing is imported or
run), in an evaluator of their own: a function read this way is a `Foreign` value, called in its own
file's evaluator with the caller's (plain) arguments. Its file's own workspace imports are followed the
same way, and vLLM's `current_platform` is the TPU (vllm_platform.py).

`Links` are kept per module and chip on the `ModuleInfo` (module_constants.links makes them, with the
evaluator); module.followed_files lists the files such a read depends on.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..ir.tile_ir import Value
from ..support import workspace_files
from ..support.diagnostics import Range, UserError
from .host_values import UNKNOWN, Closure
from .module import ModuleInfo, collect_imports
from .static_args import unwrap
from .vllm_platform import TpuPlatform, is_platform

# (info of the followed file, chip, its own Links) -> an evaluator with exec_stmt, globals and call_value
EvaluatorFactory = Callable[[ModuleInfo, "str | None", "Links"], Any]


@dataclass(eq=False)
class Foreign:
    """A function of another workspace file, with the evaluator of that file."""

    ev: Any
    fn: Any
    name: str
    path: str

    def call(self, args: list, kwargs: dict, rng: Range) -> Any:
        return self.ev.call_value(self.fn, args, kwargs, rng, None)


class Links:
    """The workspace names of one file, for one chip: local name -> value (evaluated when first read)."""

    def __init__(self, origin: str | None, tree: ast.Module | None, chip: str | None, factory: EvaluatorFactory,
                 files: dict[str, Any] | None = None):
        self.chip = chip
        self.factory = factory
        self.names = workspace_files.imported_from(origin, tree) if tree is not None else {}
        self.files = files if files is not None else {}  # path -> its evaluator, shared transitively
        self.values: dict[str, Any] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def value(self, name: str) -> Any:
        if name not in self.values:
            self.values[name] = UNKNOWN  # a cycle of imports reads UNKNOWN
            path, remote = self.names[name]
            self.values[name] = self._evaluate(path, remote)
        return self.values[name]

    def _evaluate(self, path: str, remote: str) -> Any:
        parsed = workspace_files.read(path)
        if parsed is None:
            return UNKNOWN
        ev = self.files.get(path)
        if ev is None:
            info = ModuleInfo("", ast.Module([], []), path=path)
            for stmt in parsed.tree.body:
                collect_imports(stmt, info.imports)
            ev = self.files[path] = self.factory(info, self.chip, Links(path, parsed.tree, self.chip, self.factory,
                                                                         self.files))
        if remote not in ev.globals:
            try:
                for stmt in workspace_files.needed(parsed, {remote}):
                    ev.exec_stmt(stmt)
            except Exception:  # noqa: BLE001 - what the evaluation cannot follow (or its budget) leaves it unknown
                pass
        value = ev.globals.get(remote, UNKNOWN)
        return Foreign(ev, value, remote, path) if isinstance(value, Closure) else value


def platform_or(qualname: str | None, chip: str | None) -> Any:
    """vLLM's `current_platform` as the TPU `chip`, else None."""
    return TpuPlatform(chip) if is_platform(qualname) else None


def is_plain(value: Any, depth: int = 0) -> bool:
    """Plain data a kernel may read as a constant."""
    if value is None or isinstance(value, bool | int | float | str | torch.dtype):
        return True
    if isinstance(value, tuple | list) and depth < 4:
        return all(is_plain(v, depth + 1) for v in value)
    return False


def foreign_call(fn: Foreign, args: list, kwargs: dict, rng: Range) -> Any:
    """A kernel's call of a helper from another workspace file: its value, which must be plain data (a dtype,
    a number, a tuple of those) computed from plain arguments."""
    values = [unwrap(a) for a in args]
    named = {k: unwrap(v) for k, v in kwargs.items()}
    where = os.path.basename(fn.path)
    if any(isinstance(v, Value) for v in [*values, *named.values()]):
        raise UserError("HPL101", f"`{fn.name}()` (from {where}) is called with a tensor; helpers of other files "
                                  "are evaluated before the kernel runs, with constant arguments only", rng)
    result = fn.call(values, named, rng)
    if not is_plain(result):
        raise UserError("HPL102", f"`{fn.name}()` (from {where}) does not give a constant this analysis can "
                                  "follow (a dtype, a number, a tuple of those)", rng)
    return result
