"""A remembered analysis is exactly what a fresh one says (issue 41): real kernel files (the examples and the
conformance kernels) mutated one line at a time where their analysis reads them — imports, module constants,
helper bodies (combine functions given as values too), shape lines, decorator settings — and each mutant
analysed as the language server and `helion-pallas compile` do: its units' front-stage records looked up in
an analysis cache (a temporary file) that holds the original's and the earlier mutants' results, and held to
a compile of the same text with no cache. Inert mutants (a comment, a function no kernel names) must find the
original's answer and agree with it.

Each file's mutants share one cache with the original under the same file name, as two versions of a file
(or two files of one name in two folders) do."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, REPO
from results_mutants import mutants

import compiler
from compiler.results import AnalysisCache, StageRecord, compile_unit, front_record, kernel_units
from compiler.support.diagnostics import CompileError

CONFORMANCE = REPO / "tests" / "conformance" / "kernels"
CHIP = "v5e"


def _files() -> list[Path]:
    """Every example, and every conformance kernel with a shape line (shapes from a file's calls need its
    calls run: slower, and the shape key covers what they give)."""
    found = sorted(EXAMPLES.glob("*.py"))
    found += [p for p in sorted(CONFORMANCE.glob("*.py")) if "# helion: args(" in p.read_text()]
    return found


def _answer(record: StageRecord) -> tuple[Any, ...]:
    """What a front record says: its diagnostics (codes, messages, ranges, fixes), and the generated module,
    config and VMEM report of a unit that compiles."""
    compiled = record.compiled
    made = None if compiled is None else (compiled.source, repr(compiled.config), compiled.vmem)
    return record.diagnostics, record.basis, record.basis_line, made


def _fresh(text: str, name: str) -> dict[tuple[str, int], tuple[Any, StageRecord]]:
    """Each unit's (key, front record) of this text, compiled now."""
    module = compiler.load(text, name)
    out = {}
    for kernel in module.kernels.values():
        if not kernel.shape_sets:
            continue
        for unit in kernel_units(kernel, CHIP, name):
            try:
                ck = compile_unit(kernel, unit)
                record = front_record(kernel, unit, ck.diagnostics, ck)
            except CompileError as exc:
                record = front_record(kernel, unit, exc.diagnostics, None)
            out[(kernel.name, unit.index)] = (unit.key, record)
    return out


def _check_file(path: Path, cache: AnalysisCache, counts: Counter, wrong: list[str]) -> None:
    name = path.name
    original = path.read_text()
    base = _fresh(original, name)
    cache.put_many(record for _, record in base.values())
    for kind, text in mutants(original):
        counts[kind] += 1
        fresh = _fresh(text, name)
        found = cache.get_many(("front", key) for key, _ in fresh.values())
        for unit, (key, record) in fresh.items():
            remembered = found.get(("front", key))
            if unit in base and _answer(base[unit][1]) != _answer(record):
                counts[f"{kind} changed"] += 1
            if remembered is None:
                continue
            counts[f"{kind} remembered"] += 1
            if _answer(remembered) != _answer(record):
                first = next((d.message for d in record.diagnostics), "compiles")
                wrong.append(f"{name} {kind} mutant, {unit}: remembered answer differs from a fresh one ({first})")
        cache.put_many(record for _, record in fresh.values())


def test_every_remembered_answer_is_a_fresh_one(tmp_path):
    counts: Counter = Counter()
    wrong: list[str] = []
    files = _files()
    for path in files:
        _check_file(path, AnalysisCache(tmp_path / f"{path.stem}.sqlite"), counts, wrong)
    mutated = sum(counts[k] for k in ("import", "constant", "helper", "shape", "setting"))
    assert not wrong, f"{len(wrong)} stale answers ({dict(counts)}):\n" + "\n".join(wrong[:40])
    # the mutants exercise what they are meant to: at least 200 of them, most changing what the analysis says
    # (else agreeing would prove nothing), every kind present, and inert ones found remembered and equal
    assert mutated >= 200, dict(counts)
    for kind in ("import", "constant", "helper", "shape", "setting"):
        assert counts[kind] and counts[f"{kind} changed"], (kind, dict(counts))
    assert sum(counts[f"{k} changed"] for k in ("import", "constant", "helper", "shape", "setting")) >= 150
    assert counts["inert remembered"] >= counts["inert"] // 2, dict(counts)


CDIV = """import torch
import helion
import helion.language as hl
from {module} import cdiv


# helion: args(x=f32[64, 256])
@helion.kernel(static_shapes=True)
def halves(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([cdiv(x.size(0), 2), x.size(1)], dtype=x.dtype, device=x.device)
    for t in hl.tile(out.size(0)):
        out[t, :] = x[t, :]
    return out
"""


@pytest.mark.parametrize("first,then", [("helion._private", "helion"), ("helion", "helion._private")])
def test_an_import_is_part_of_the_key(tmp_path, first, then):
    """The issue's case: a `cdiv` imported from a module the compiler does not know (HPL102; the issue's was
    `helion._utils`, supported since) and `from helion import cdiv`, saved one after the other, each get their
    own answer (the second used to get the first's from the cache)."""
    cache = AnalysisCache(tmp_path / "a.sqlite")
    before = _fresh(CDIV.format(module=first), "halves.py")
    cache.put_many(r for _, r in before.values())
    after = _fresh(CDIV.format(module=then), "halves.py")
    assert [_answer(r) for _, r in before.values()] != [_answer(r) for _, r in after.values()]
    assert not cache.get_many(("front", key) for key, _ in after.values())
