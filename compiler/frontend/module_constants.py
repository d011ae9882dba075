"""Module-level constants that are not literals, read statically by kernel bodies.

A kernel file often names its constants with expressions: `_FP8_DTYPE = torch.float8_e4m3fn`,
`_FP8_MAX = float(torch.finfo(_FP8_DTYPE).max)`, `BLOCK = 2 ** 7`, `EPS = 1e-6 * 2`, tuples of those.
`ast.literal_eval` (module.py, torch-free) cannot read them; this module evaluates the file's top-level
definitions — assignments, imports, functions and classes, in order, nothing else (no `if`, loop or
expression statement runs) — with the bounded module evaluator of host_eval.py (nothing is imported or
run) and keeps the names whose final value is plain data: None, bool, int, float, str, a torch dtype, and
tuples/lists of those. A name bound to anything else (a tensor, a function, something unknown) is not a
constant, and a kernel reading it still gets "unknown name".

It runs once per parsed module, on the first kernel lookup that needs it (the trace imports torch anyway),
and is kept on the `ModuleInfo`. Results stay correct when such a constant is edited because the kernel's
source hash includes the definitions it reads (`module.normalized_hash`).
"""

from __future__ import annotations

import ast
from typing import Any

import torch

from ..support.diagnostics import Range
from .host_eval import HostEvaluator
from .host_statements import Exhausted, StepBudget
from .host_values import UNKNOWN
from .module import ModuleInfo

MAX_STEPS = 20_000  # evaluation steps for a module's definitions (a few per constant; classes and calls more)
_DEFINITIONS = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Import, ast.ImportFrom, ast.FunctionDef,
                ast.AsyncFunctionDef, ast.ClassDef)


def evaluated_constants(info: ModuleInfo) -> dict[str, Any]:
    """Name -> value of every top-level name bound to plain data after the file's definitions run (see the
    module docstring). Computed once per `info`."""
    if info.evaluated_constants is None:
        info.evaluated_constants = _evaluate(info)
    return info.evaluated_constants


def _evaluate(info: ModuleInfo) -> dict[str, Any]:
    if info.tree is None:
        return {}
    ev = HostEvaluator(info, {k.name: k.node for k in info.kernels}, StepBudget(MAX_STEPS),
                       lambda *_: UNKNOWN, _ignore)
    try:
        for stmt in info.tree.body:
            if isinstance(stmt, _DEFINITIONS):
                ev.exec_stmt(stmt)
    except (Exhausted, RecursionError):
        pass  # the names bound so far are kept
    return {name: value for name, value in ev.globals.items() if name != "__name__" and is_plain(value)}


def is_plain(value: Any, depth: int = 0) -> bool:
    """Plain data a kernel may read as a constant."""
    if value is None or isinstance(value, bool | int | float | str | torch.dtype):
        return True
    if isinstance(value, tuple | list) and depth < 4:
        return all(is_plain(v, depth + 1) for v in value)
    return False


def dtypes_in(value: Any) -> list[torch.dtype]:
    """The dtypes in a constant (itself, or the items of a tuple/list of them)."""
    if isinstance(value, torch.dtype):
        return [value]
    if isinstance(value, tuple | list):
        return [d for v in value for d in dtypes_in(v)]
    return []


def _ignore(rng: Range, message: str) -> None:
    """Limits the evaluation hits are not the kernel's problem: the name just stays unknown."""
