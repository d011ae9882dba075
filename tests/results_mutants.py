"""Line-for-line mutations of a kernel file, each of one thing a kernel's analysis reads: an import, a module
constant, a helper's body, a shape line, a decorator setting; and inert ones (a comment, a function no kernel
names), which must not change the answer. Every mutant keeps the file's line count and every other line, so
a remembered answer and a fresh one are comparable range for range (tests/test_results_key_mutations.py)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from compiler.frontend.module import KERNEL_DECORATORS, qualified_name

SHAPE_DIM = re.compile(r"(#\s*helion:\s*args\(.*?\[)(\d+)")
IMPORT_SWAPS = {"torch": "numpy", "helion.language": "helion", "math": "cmath", "helion": "helion.language"}


def mutants(text: str) -> Iterator[tuple[str, str]]:
    """(kind, mutated text) for each mutation of `text` that applies; kinds: import, constant, helper, shape,
    setting, inert."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return
    lines = text.splitlines(keepends=True)
    imports = _imports(tree)
    kernels = [s for s in tree.body if isinstance(s, ast.FunctionDef) and any(
        qualified_name(d.func if isinstance(d, ast.Call) else d, imports) in KERNEL_DECORATORS
        for d in s.decorator_list)]
    if not kernels:
        return
    for stmt in _top_imports(tree.body):
        if stmt.lineno == stmt.end_lineno and (line := _swap_import(stmt)) is not None:
            yield "import", _replace_line(lines, stmt.lineno, line)
    named = {n.id for k in kernels for n in ast.walk(k) if isinstance(n, ast.Name)}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None and stmt.lineno == stmt.end_lineno:
            changed = _change_literal(lines, stmt.value)
            if changed is not None:
                yield "constant", changed
    helpers = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s not in kernels]
    for fn in helpers:
        if fn.name in named:
            for changed in (_change_operator(lines, fn), _change_literal(lines, fn), _change_call(lines, fn)):
                if changed is not None:
                    yield "helper", changed
    for kernel in kernels:
        first = min([kernel.lineno, *(d.lineno for d in kernel.decorator_list)])
        line = first - 2
        while line >= 0 and lines[line].lstrip().startswith("#"):
            m = SHAPE_DIM.search(lines[line])
            if m:
                dim = int(m.group(2))
                new = lines[line][: m.start(2)] + str(dim * 2 if dim else 1) + lines[line][m.end(2):]
                yield "shape", _replace_line(lines, line + 1, new)
                break
            line -= 1
        if (changed := _change_setting(lines, kernel)) is not None:
            yield "setting", changed
    unnamed = [fn for fn in helpers if fn.name not in named and fn.name not in {k.name for k in kernels}]
    for fn in unnamed[:1]:
        if (changed := _change_operator(lines, fn) or _change_literal(lines, fn)) is not None:
            yield "inert", changed
    stmt = next(iter(_top_imports(tree.body)), None)
    if stmt is not None:
        end = lines[stmt.end_lineno - 1]
        yield "inert", _replace_line(lines, stmt.end_lineno, end.rstrip("\n") + "  # a note\n")


def _imports(tree: ast.Module) -> dict[str, str]:
    table: dict[str, str] = {}
    for stmt in _top_imports(tree.body):
        for alias in stmt.names:
            if isinstance(stmt, ast.Import):
                table[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
            elif stmt.module:
                table[alias.asname or alias.name] = f"{stmt.module}.{alias.name}"
    return table


def _top_imports(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    return [s for s in body if isinstance(s, ast.Import | ast.ImportFrom)]


def _swap_import(stmt: ast.Import | ast.ImportFrom) -> str | None:
    """The import with the module it names swapped for a plausible other (`from helion._utils import cdiv` <->
    `from helion import cdiv`; `import torch` -> `import numpy as torch`)."""
    indent = " " * stmt.col_offset
    if isinstance(stmt, ast.ImportFrom):
        if stmt.level or not stmt.module:
            return None
        other = "helion" if stmt.module == "helion._utils" else "helion._utils"
        names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in stmt.names)
        return f"{indent}from {other} import {names}\n"
    alias = stmt.names[0]
    if len(stmt.names) != 1:
        return None
    other = IMPORT_SWAPS.get(alias.name, "torch")
    bound = alias.asname or alias.name.split(".")[0]
    return f"{indent}import {other} as {bound}\n"


def _replace_line(lines: list[str], lineno: int, new: str) -> str:
    out = list(lines)
    out[lineno - 1] = new if new.endswith("\n") else new + "\n"
    return "".join(out)


def _change_literal(lines: list[str], node: ast.AST) -> str | None:
    """The first number (not a bool) written in `node` on one line, doubled (0 becomes 1); or a dtype
    attribute swapped (`torch.float32` <-> `torch.bfloat16`)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and type(n.value) in (int, float) and n.lineno == n.end_lineno:
            value = n.value * 2 if n.value else 1
            return _splice(lines, n, repr(value))
        if isinstance(n, ast.Attribute) and n.attr in ("float32", "bfloat16") and n.lineno == n.end_lineno:
            other = "bfloat16" if n.attr == "float32" else "float32"
            line = lines[n.end_lineno - 1]
            start = n.end_col_offset - len(n.attr)
            return _replace_line(lines, n.end_lineno, line[:start] + other + line[n.end_col_offset:])
    return None


def _change_operator(lines: list[str], fn: ast.FunctionDef) -> str | None:
    """The first `+`, `-` or `*` of the function's body turned into another."""
    for n in ast.walk(fn):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add | ast.Sub | ast.Mult) and n.left.end_lineno == n.right.lineno:
            line = lines[n.right.lineno - 1]
            between = line[n.left.end_col_offset : n.right.col_offset]
            at = between.find({ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}[type(n.op)])
            if at < 0:
                continue
            col = n.left.end_col_offset + at
            new = {ast.Add: "-", ast.Sub: "+", ast.Mult: "+"}[type(n.op)]
            return _replace_line(lines, n.right.lineno, line[:col] + new + line[col + 1:])
    return None


CALL_SWAPS = {"maximum": "minimum", "minimum": "maximum", "exp": "sigmoid", "sigmoid": "exp", "amax": "amin",
              "amin": "amax", "sum": "amax"}


def _change_call(lines: list[str], fn: ast.FunctionDef) -> str | None:
    """The first `torch.maximum`-like call of the function's body calling its counterpart."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in CALL_SWAPS:
            line = lines[n.func.end_lineno - 1]
            start = n.func.end_col_offset - len(n.func.attr)
            new = line[:start] + CALL_SWAPS[n.func.attr] + line[n.func.end_col_offset:]
            return _replace_line(lines, n.func.end_lineno, new)
    return None


def _change_setting(lines: list[str], kernel: ast.FunctionDef) -> str | None:
    """A decorator setting changed: `static_shapes=` toggled, else the config's first number doubled, else a
    bare `@helion.kernel` given `static_shapes=True`."""
    for deco in kernel.decorator_list:
        if isinstance(deco, ast.Call):
            for kw in deco.keywords:
                if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, bool) and kw.value.lineno == kw.value.end_lineno:
                    return _splice(lines, kw.value, str(not kw.value.value))
            for kw in deco.keywords:
                if kw.arg in ("config", "configs") and (changed := _change_literal(lines, kw.value)) is not None:
                    return changed
            if not deco.args and not deco.keywords and deco.lineno == deco.end_lineno:
                return _splice(lines, deco, ast.unparse(deco.func) + "(static_shapes=True)")
        elif deco.lineno == deco.end_lineno:
            return _splice(lines, deco, ast.unparse(deco) + "(static_shapes=True)")
    return None


def _splice(lines: list[str], node: ast.expr, text: str) -> str:
    """`node` (on one line) written as `text`."""
    line = lines[node.lineno - 1]
    return _replace_line(lines, node.lineno, line[: node.col_offset] + text + line[node.end_col_offset:])
