"""A function the file's own code passes to a kernel (`test(..., lambda score, *_: torch.tanh(score))`), as
the `CallableSpec` of a shape set found in the file's calls (call_recorder.py).

A same-file lambda or `def` is its source text at its place in the file: the kernel's trace reads the file's
module-level names for it as for a helper, and the names it takes from enclosing functions must be numbers,
bools or dtypes, resolved here. One of torch's flex-attention callables reached through the library
(`score_mod = _identity`) is read from the installed torch (compiler/ir/callables.py). Nothing here runs the file.
"""

from __future__ import annotations

import ast
from typing import Any

import torch

from ..ir.callables import file_name, free_names, library_callable
from ..ir.specs import CallableSpec
from .host_values import Closure
from .module import ModuleInfo
from .values import Module


def callable_spec(value: Any, info: ModuleInfo) -> tuple[CallableSpec | None, str]:
    """(spec, "") for a function value a kernel can compile in, else (None, why not)."""
    if isinstance(value, Module):
        spec = library_callable(value.qualname)
        return (spec, "") if spec else (None, f"is `{value.qualname}`, a library function this tool cannot read")
    if not isinstance(value, Closure) or isinstance(value.node, ast.AsyncFunctionDef):
        return None, "is not a function"
    node = value.node
    text = ast.get_source_segment(info.source, node)
    if text is None:
        return None, "is a function whose source cannot be read"
    names, why = _captured(value, info)
    if why:
        return None, why
    return CallableSpec(text, getattr(node, "name", "<lambda>"), names, (node.lineno - 1, node.col_offset)), ""


def _captured(fn: Closure, info: ModuleInfo) -> tuple[tuple[tuple[str, str, Any], ...], str]:
    """The names the function reads from enclosing functions, resolved to constants, and the module's imports
    and literal constants it reads (so the spec can be run on its own: SpecFunction); other module-level
    names are left to the kernel's trace, which reads them as it reads any of the file's names."""
    out = []
    for name in free_names(fn.node):
        frame = fn.scope
        while frame is not None and name not in frame.vars:
            frame = frame.parent
        if frame is None:
            if resolved := file_name(name, info.imports, info.constants):
                out.append(resolved)
            continue
        value = frame.vars[name]
        if isinstance(value, bool | int | float):
            out.append((name, "value", value))
        elif isinstance(value, torch.dtype):
            out.append((name, "dtype", str(value).removeprefix("torch.")))
        else:
            return (), f"is a function reading `{name}` of the function around it, which is not a number or dtype"
    return tuple(out), ""
