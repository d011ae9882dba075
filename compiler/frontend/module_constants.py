"""Module-level constants that are not literals, read statically by kernel bodies.

A kernel file often names its constants with expressions: `_FP8_DTYPE = torch.float8_e4m3fn`,
`_FP8_MAX = float(torch.finfo(_FP8_DTYPE).max)`, `BLOCK = 2 ** 7`, `EPS = 1e-6 * 2`, tuples of those.
`ast.literal_eval` (module.py, torch-free) cannot read them; this module evaluates the file's top-level
definitions — assignments, imports, functions and classes, in order, nothing else (no `if`, loop or
expression statement runs) — with the bounded module evaluator of host_eval.py (nothing is imported or
run) and keeps the names whose final value is plain data: None, bool, int, float, str, a torch dtype, and
tuples/lists of those. A name bound to anything else (a tensor, a function, something unknown) is not a
constant, and a kernel reading it still gets "unknown name".

It runs once per parsed module and chip, on the first kernel lookup that needs it (the trace imports torch
anyway), and is kept on the `ModuleInfo`. Names imported from other files of the workspace (vLLM's
`_, _FP8_MAX = get_fp8_min_max()`) are read through workspace_imports.py (`links`). Results stay correct
when such a constant is edited because the kernel's
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
from .workspace_imports import Links, is_plain

MAX_STEPS = 20_000  # evaluation steps for a module's definitions (a few per constant; classes and calls more)
_DEFINITIONS = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Import, ast.ImportFrom, ast.FunctionDef,
                ast.AsyncFunctionDef, ast.ClassDef)


def evaluated_constants(info: ModuleInfo, chip: str | None = None) -> dict[str, Any]:
    """Name -> value of every top-level name bound to plain data after the file's definitions run (see the
    module docstring), on `chip` (what vLLM's platform answers depends on it: vllm_platform.py). Computed
    once per `info` and chip."""
    if chip not in info.evaluated_constants:
        info.evaluated_constants[chip] = _evaluate(info, chip)
    return info.evaluated_constants[chip]


def _evaluate(info: ModuleInfo, chip: str | None) -> dict[str, Any]:
    if info.tree is None:
        return {}
    ev = HostEvaluator(info, {k.name: k.node for k in info.kernels}, StepBudget(MAX_STEPS),
                       lambda *_: UNKNOWN, _ignore)
    ev.chip = chip
    ev.links = links(info, chip)
    try:
        for stmt in info.tree.body:
            if isinstance(stmt, _DEFINITIONS):
                ev.exec_stmt(stmt)
    except (Exhausted, RecursionError):
        pass  # the names bound so far are kept
    return {name: value for name, value in ev.globals.items() if name != "__name__" and is_plain(value)}


def dtypes_in(value: Any) -> list[torch.dtype]:
    """The dtypes in a constant (itself, or the items of a tuple/list of them)."""
    if isinstance(value, torch.dtype):
        return [value]
    if isinstance(value, tuple | list):
        return [d for v in value for d in dtypes_in(v)]
    return []


def links(info: ModuleInfo, chip: str | None) -> Links:
    """The names `info`'s file imports from other workspace files, for `chip` (kept on `info`)."""
    found = info.links.get(chip)
    if found is None:
        found = info.links[chip] = Links(info.path, info.tree, chip, _helper_evaluator)
    return found


def _helper_evaluator(info: ModuleInfo, chip: str | None, own: Links) -> HostEvaluator:
    """The evaluator of a followed workspace file (workspace_imports.py)."""
    ev = HostEvaluator(info, {}, StepBudget(MAX_STEPS), lambda *_: UNKNOWN, _ignore)
    ev.chip, ev.links = chip, own
    return ev


def _ignore(rng: Range, message: str) -> None:
    """Limits the evaluation hits are not the kernel's problem: the name just stays unknown."""
