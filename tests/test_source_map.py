"""The generated module's source map sends each source line to the statement generated from it: the one
holding each `hl.dot` (and matmul), each store and each reduction, on every example, test and conformance
kernel, with other loop strategies for kernels with inner loops (a loop's own statements map to the whole
loop and come first: the lookup must still land on the statement, not the loop)."""

from __future__ import annotations

import ast

import pytest
from conftest import MORE_KERNELS, kernel_files

import compiler
from compiler.codegen.source_map import generated_line, source_range
from compiler.support.diagnostics import CompileError
from tests.conformance.case import discover

FILES = [p for p in kernel_files() if p.parent.name != "kernels" or p.parent == MORE_KERNELS] + discover()
DOTS = {"dot", "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum"}
REDUCTIONS = {"sum": "sum", "mean": ("mean", "sum"), "amax": "max", "amin": "min", "max": "max", "min": "min",
              "prod": "prod", "argmax": "argmax", "argmin": "argmin", "logsumexp": "log", "any": "any", "all": "all"}


def _device_statements(fn: ast.FunctionDef) -> list[tuple[int, str, tuple[str, ...]]]:
    """(zero-based line, what, generated text that shows it) for each dot, store and reduction in a loop."""
    found = []
    for loop in (n for n in ast.walk(fn) if isinstance(n, ast.For)):
        for node in ast.walk(loop):
            if isinstance(node, ast.Assign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Subscript) for t in targets):
                    found.append((node.lineno - 1, "store", ("] = ", "] += ", ".at[", "store(")))
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                found.append((node.lineno - 1, "matmul", ("dot", "einsum")))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                if name in DOTS:
                    found.append((node.lineno - 1, name, ("dot", "einsum")))
                elif name in REDUCTIONS and (node.args or node.keywords or isinstance(node.func, ast.Attribute)):
                    words = REDUCTIONS[name]
                    found.append((node.lineno - 1, name, words if isinstance(words, tuple) else (words,)))
    return sorted(set(found))


def _statement(source: str, line: int) -> str:
    """The generated statement starting at `line` (with its continuation lines)."""
    lines = source.splitlines()
    text, depth = lines[line], 0
    for nxt in lines[line + 1:]:
        depth += text.count("(") - text.count(")") + text.count("[") - text.count("]")
        if depth <= 0:
            break
        text += "\n" + nxt
    return text


def _check(path, fn, ck) -> None:
    for line, what, shows in _device_statements(fn):
        gen = generated_line(ck.source_map, line)
        assert gen is not None, (path.stem, line + 1, what)
        own = [rng for g, rng in ck.source_map if g == gen]
        text = _statement(ck.source, gen).split("  # ")[0]
        where = f"{path.stem}: {what} on source line {line + 1} -> generated line {gen + 1}: {text!r}"
        assert any(rng.start.line == line for rng in own), where  # not the loop around it
        assert any(s in text for s in shows), where
        assert source_range(ck.source_map, gen).start.line == own[0].start.line


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_dot_store_and_reduction_maps_to_its_statement(path):
    text = path.read_text()
    for kernel in compiler.load(text, path.name).kernels.values():
        if not kernel.shape_sets:
            continue
        try:
            ck = kernel.compile(shape_set=0, chip="v7x")
        except CompileError:
            continue
        _check(path, kernel.definition.node, ck)  # an alias kernel's is the function it wraps
        if any(c.inner_loops for c in ck.plan.calls):  # the conformance kernels: one other strategy (time)
            others = ("emit_pipeline", "fori_loop") if path.parent.name != "kernels" or path.parent == MORE_KERNELS \
                else ("emit_pipeline",)
            for loop_type in others:
                try:
                    other = kernel.compile(shape_set=0, config={**ck.config, "pallas_loop_type": loop_type})
                except CompileError:
                    continue
                _check(path, kernel.definition.node, other)
