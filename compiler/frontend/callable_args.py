"""Function arguments of a kernel (flex attention's `score_mod`) in the trace: a `CallableSpec` becomes a
`Closure` whose body is traced inline where the kernel calls it, like a same-file helper.

A function from the kernel's own file keeps its positions (a problem in its body is shown there); one from
elsewhere (torch's `_identity`, a lambda in a test) is traced at the position of the call that invokes it,
since its own lines are not in the file. The names its body reads come resolved with the spec.
"""

from __future__ import annotations

import ast
import copy
import functools
from typing import Any

import torch

from ..ir.specs import CallableSpec
from ..support.diagnostics import Range, UserError
from ..support.syntax import parse
from .upstream_names import UPSTREAM_NAMES
from .values import Closure, Module, NamedConst, lambda_def


def closure_of(spec: CallableSpec, rng: Range | None = None) -> Closure:
    """The closure a kernel parameter is bound to; a source that does not parse is HPL103 at `rng`."""
    fn = _function(spec.source, spec.origin)
    if fn is None:
        raise UserError("HPL103", f"the function passed as an argument does not parse: {spec.source[:80]!r}",
                        rng or Range.lines(0))
    env: dict[str, Any] = {}
    for name, kind, value in spec.names:
        if kind == "module":
            env[name] = UPSTREAM_NAMES.get(value, Module(value))
        elif kind == "dtype":
            env[name] = getattr(torch, value)
        else:
            env[name] = NamedConst(name, value) if isinstance(value, float) else value
    return Closure(fn, env, foreign=spec.origin is None)


@functools.lru_cache(maxsize=64)
def _function(source: str, origin: tuple[int, int] | None) -> ast.FunctionDef | None:
    """`source` (one `def`, or a `lambda` as a helper) parsed, at `origin` in its file when given."""
    try:
        if source.lstrip().startswith("lambda"):
            node: ast.AST = parse(f"({source.strip()})", mode="eval").body
            shift = -1
        else:
            node = parse(source.strip()).body[0]
            shift = 0
    except (SyntaxError, ValueError, IndexError, RecursionError):
        return None
    if origin is not None:
        line, col = origin
        for n in ast.walk(node):
            if hasattr(n, "lineno"):
                if n.lineno == 1:
                    n.col_offset += col + shift
                if getattr(n, "end_lineno", None) == 1 and n.end_col_offset is not None:
                    n.end_col_offset += col + shift
        ast.increment_lineno(node, line)
    if isinstance(node, ast.Lambda):
        return lambda_def(node)
    if isinstance(node, ast.FunctionDef):
        node.decorator_list = []
        return node
    return None


def at_call(fn: ast.FunctionDef, call: ast.expr) -> ast.FunctionDef:
    """A copy of `fn` with every position set to `call`'s: what its body generates maps to the call."""
    out = copy.deepcopy(fn)
    for n in ast.walk(out):
        if hasattr(n, "lineno"):
            n.lineno, n.col_offset = call.lineno, call.col_offset
            n.end_lineno, n.end_col_offset = call.end_lineno, call.end_col_offset
    return out
