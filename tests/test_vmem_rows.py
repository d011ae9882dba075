"""The VMEM table has one row per buffer, and a tensor read by several distinct accesses has one row per
access, each named after its own line; the hover on an access shows its own row's bytes. A block used only
for its shape and dtype (`torch.zeros_like(x[tile_m, 0])`) is never loaded.

Run over every example, test and conformance kernel, with each loop strategy where a tensor has several
accesses (the strategies give their buffers different sizes, so a hover showing another row's figure shows).
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from conftest import MORE_KERNELS, kernel_files

import compiler
from compiler.results import CompiledSnapshot
from compiler.support.diagnostics import CompileError
from helion_ls.features.hover import access_markdown, fmt_bytes
from helion_ls.session.documents import load_document
from tests.conformance.case import discover

FILES = [p for p in kernel_files() if p.parent.name != "kernels" or p.parent == MORE_KERNELS] + discover()
LOOP_TYPES = ("unroll", "emit_pipeline", "fori_loop")


def _compiles(kernel, config):
    try:
        return kernel.compile(shape_set=0, config=config, chip="v7x")
    except CompileError:
        return None


def _check(path, view, ck) -> None:
    rows = [r for r in ck.vmem.rows if r.operand and r.range is not None]
    names = Counter(r.name for r in rows)
    for name, count in names.items():
        if count < 2:
            continue
        mine = [r for r in rows if r.name == name]
        assert len({r.shown for r in mine}) == count, (path.stem, [r.shown for r in mine])
        assert all(f" at {r.range.start.line + 1}" in r.shown or f" at line {r.range.start.line + 1}" in r.shown
                   for r in mine), (path.stem, [r.shown for r in mine])
        assert ck.vmem.table().count(f"{name} at ") >= count
    by_operand = {(r.call, r.operand): r for r in rows}
    for access in ck.plan.accesses:
        row = by_operand.get((access.call, access.operand))
        if row is None:  # an SMEM table or an operand left in HBM: no VMEM row
            continue
        text = access_markdown(view, [(0, CompiledSnapshot.of(ck), access)])
        shown = re.findall(r"\| ([0-9.]+ (?:MiB|KiB|B)) \|", text)
        assert shown == [fmt_bytes(row.bytes)], (path.stem, access.range, row.shown, shown, text)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_access_has_its_own_vmem_row_and_hover_figure(path):
    text = path.read_text()
    loaded = load_document(path.as_uri(), 1, text, "v7x")
    for name, kernel in compiler.load(text, path.name).kernels.items():
        if not kernel.shape_sets or name not in loaded.kernels:
            continue
        ck = _compiles(kernel, None)
        if ck is None:
            continue
        _check(path, loaded.kernels[name], ck)
        loads = Counter(a.tensor for a in ck.plan.accesses if not a.is_store)
        if max(loads.values(), default=0) > 1 and ck.plan.calls and any(c.inner_loops for c in ck.plan.calls):
            for loop_type in LOOP_TYPES:
                other = _compiles(kernel, {**ck.config, "pallas_loop_type": loop_type})
                if other is not None:
                    _check(path, loaded.kernels[name], other)


def test_a_block_used_for_its_shape_is_not_loaded():
    """Welford's accumulators are `torch.zeros_like(x[tile_m, 0])`: whole rows of x must not sit in VMEM
    for that (16 of 22.45 MiB before), and the two real reads of x are told apart by their lines."""
    path = MORE_KERNELS / "welford_layer_norm.py"
    kernel = compiler.load(path).kernels["welford_layer_norm"]
    ck = kernel.compile(shape_set=0, config={"pallas_loop_type": "emit_pipeline"}, chip="v7x")
    xs = [r for r in ck.vmem.rows if r.name == "x"]
    lines = path.read_text().splitlines()
    assert [lines[r.range.start.line].strip().startswith("part = x[tile_m, tile_n]") for r in xs] == [True, True]
    assert [r.shown for r in xs] == [f"x at line {r.range.start.line + 1}" for r in xs]
    assert [r.block_shape for r in xs] != [(256, 8192)] and all(r.role == "inner-pipeline buffer" for r in xs)
    assert not any("zeros_like" in lines[a.range.start.line] for a in ck.plan.accesses)
