"""`helion-pallas check`: run each kernel on small random inputs in TPU interpret mode, for each loop
strategy, and compare it with the eager reference run of the original source and with the file's own
plain-torch `reference` function when it has one; a disagreement between those two is reported as well.

This executes the user's code (the eager reference, `reference`), so it is only ever run on request, like
their tests: both run in a separate process with memory and time limits (compiler.reference.isolated), and
only what each needs (its imports, helpers and the constants they use), never the whole file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch

from .api import load
from .frontend.baselines import baseline_of
from .ir.chips import get_chip
from .ir.specs import SpecError, format_args, parse_spec
from .ir.tables import IndexTable
from .reference.errors import ReferenceRunError
from .results import AnalysisCache
from .support.diagnostics import CompileError
from .tpu.check_compile import CompilerVerdicts
from .tpu.interpret_cost import elements as _elements
from .tpu.interpret_cost import hlo_interpretable as _hlo_interpretable
from .tpu.interpret_cost import too_large as _too_large
from .tpu.interpret_cost import vmem_too_large as _vmem_too_large
from .tpu.runtime import ChipRejected, hlo_interpreter, runs_on_chip
from .tpu.truth import compile_code

# Shape sets with more tensor elements than this are checked at reduced shapes (see _reduced).
REDUCE_ABOVE = 1 << 22

# Part of an output's largest magnitude an element may be off by, whatever its own size: both sides compute
# in the same dtype but sum in different orders, so an element that is a difference of large terms (a
# softmax gradient's `s * (g - sum)`) carries the rounding of those terms (one bf16 ulp is 2**-8 of them).
SCALE_TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 1e-2}
DEFAULT_SCALE_TOLERANCE = 1e-4


def tolerance(dtype: torch.dtype, scale: float = 0.0) -> dict[str, float]:
    """assert_close's bounds for an output of `dtype` whose largest finite magnitude is `scale`. An fp8
    output may differ by one of its ulps (e4m3: 2**-3 of the value, e5m2: 2**-2) after sums in another order."""
    if dtype.itemsize == 1 and dtype.is_floating_point:
        ulp = 2.0 ** -(2 if "e5m2" in str(dtype) else 3)
        return {"atol": max(ulp * 0.5, ulp * 0.5 * scale), "rtol": ulp * 1.05}
    atol, rtol = (3e-2, 3e-2) if dtype in (torch.bfloat16, torch.float16) else (2e-4, 2e-4)
    return {"atol": max(atol, SCALE_TOLERANCE.get(dtype, DEFAULT_SCALE_TOLERANCE) * scale), "rtol": rtol}


def _scale(t: torch.Tensor) -> float:
    """The largest finite magnitude of a floating-point tensor (0 for others and empty ones)."""
    if not t.dtype.is_floating_point or t.numel() == 0:
        return 0.0
    finite = t[torch.isfinite(t)]
    return float(finite.abs().max()) if finite.numel() else 0.0


def compare(out: Any, expected: Any, same_program: bool = False, slack: tuple[float, ...] = ()) -> str | None:
    """None when `out` matches `expected` (tensors or tuples of tensors), else why not: element by element,
    within a relative bound and an absolute one that grows with the expected output's largest magnitude
    (`tolerance`). NaN where the other side has NaN too matches (`equal_nan`): both sides run the same
    program, and NaN is what torch computes there (a softmax over no keys is 0/0); `nan_note` says when that
    happened, and a run whose outputs are NaN everywhere compared nothing and is no pass. With `same_program`
    (the eager run of the kernel) the dtypes must agree too: the compiler refuses 64-bit outputs rather than
    narrowing them, so another dtype means the two read the program differently (a bfloat16 kernel against a
    float16 eager run was ok), which the cast to `out`'s dtype would hide. `slack`: more absolute error allowed
    per output (`summation_slack`)."""
    outs = out if isinstance(out, tuple) else (out,)
    exps = expected if isinstance(expected, tuple | list) else (expected,)
    if len(outs) != len(exps):
        return f"{len(outs)} outputs, expected {len(exps)}"
    for i, (o, e) in enumerate(zip(outs, exps, strict=True)):
        if not isinstance(o, torch.Tensor) or not isinstance(e, torch.Tensor):
            if o != e:
                return f"output {i}: {o!r} != {e!r}"
            continue
        if same_program and o.dtype != e.dtype:
            return f"output {i}: {o.dtype}, the eager run's is {e.dtype}"
        e = e.to(o.dtype)
        held = _held_in(e)
        if o.dtype.itemsize == 1 and o.dtype.is_floating_point:  # torch has no isfinite/abs for fp8
            o, e = o.float(), e.float()
        bounds = tolerance(held, _scale(e))
        if i < len(slack):
            bounds["atol"] += slack[i]
        try:
            torch.testing.assert_close(o, e, equal_nan=True, **bounds)
        except AssertionError as exc:
            return f"output {i}: {_summary(exc)} (allowed {bounds['atol']:.3g} + {bounds['rtol']:g}·|expected|)"
    return None


def summation_slack(expected: Any, exact: Any) -> tuple[float, ...]:
    """Per output, twice the largest difference between the eager run and the same program with every float
    product summed exactly (f64). A value rounded to bf16 and multiplied again (squeeze_and_excitation_net's
    `relu(x @ a)` stored as bf16, then `@ b` and a sigmoid) lands one bf16 step either side of a rounding
    boundary depending on summation order alone, and the chip sums in another order than torch: its answer
    was 0.074 from torch's where the bound allowed 0.06. The kernel and the eager run are each one such order
    away from the exact sums, so they may be twice that apart."""
    exps = expected if isinstance(expected, tuple | list) else (expected,)
    exacts = exact if isinstance(exact, tuple | list) else (exact,)
    out: list[float] = []
    for e, x in zip(exps, exacts, strict=False):
        if not (isinstance(e, torch.Tensor) and isinstance(x, torch.Tensor) and e.dtype.is_floating_point
                and e.shape == x.shape) or e.dtype.itemsize == 1:
            out.append(0.0)
            continue
        gap = (e.double() - x.double()).abs()
        gap = gap[torch.isfinite(gap)]
        out.append(2.0 * float(gap.max()) if gap.numel() else 0.0)
    return tuple(out)


def _held_in(t: torch.Tensor) -> torch.dtype:
    """The precision an output's values actually have: an f32 output every finite value of which a half
    dtype holds exactly was rounded to it on the way (`grad_x[...] = acc.to(x.dtype)` into an f32 tensor), so
    it is judged with that dtype's bounds — one f16 ulp of 258 is 0.25, 1e-3 of it. Not for integer-valued or
    tiny outputs, which a half dtype may hold by chance."""
    if t.dtype not in (torch.float32, torch.float64) or t.numel() < 64:
        return t.dtype
    finite = t[torch.isfinite(t)]
    if not bool((finite != finite.round()).any()):  # integer values (counts, masks): exact in any dtype
        return t.dtype
    for half in (torch.bfloat16, torch.float16):
        if torch.equal(finite.to(half).to(t.dtype), finite):
            return half
    return t.dtype


def _summary(exc: AssertionError) -> str:
    """assert_close's findings (how many elements, the worst differences) on one line, without its header."""
    lines = [line.strip().rstrip(".") for line in str(exc).strip().splitlines()[1:] if line.strip()]
    return "; ".join(line.split(" (up to")[0] for line in lines) or str(exc).strip().splitlines()[0]


def nan_note(out: Any) -> tuple[int, int]:
    """(NaN elements, elements) over the floating-point tensors of an output that matched its reference."""
    outs = [o for o in (out if isinstance(out, tuple) else (out,))
            if isinstance(o, torch.Tensor) and o.dtype.is_floating_point]
    return sum(int(o.isnan().sum()) for o in outs), sum(o.numel() for o in outs)


def _scan_note(plan: Any) -> str:
    """A kernel scanning or reducing with a combine function combines in a tree (log2(n) steps), the eager reading
    one position after another, so a combine function that is not associative on the drawn inputs (upstream's
    segment_reduction on unsorted ids) gives two answers without either being a compiler fault."""
    if not plan.tree_scans:
        return ""
    return (" (hl.associative_scan and hl.reduce combine in a tree, the eager reading one position after another: "
            "they agree only where the combine function is associative on these inputs)")


def _drawn(tables: tuple[IndexTable, ...], ranges: dict[str, tuple[int, int]] | None = None) -> str:
    """How the integer tables a kernel reads as offsets, positions or counts were drawn, for a verdict."""
    ranges = ranges or {}
    by_generator = [f"{n} in [{lo}, {hi}]" for n, (lo, hi) in ranges.items()]
    by_reading = [t.describe() for t in tables if t.name not in ranges or t.kind == "offsets"]
    parts = ([f"as its input generator makes them: {', '.join(by_generator)}"] if by_generator else []) + \
        ([f"from how the kernel reads them: {'; '.join(by_reading)}"] if by_reading else [])
    if not parts:
        return ""
    return f" (integer inputs drawn {'; '.join(parts)}; give real ones in a test)"


def _generator_ranges(k: Any, index: int | None) -> dict[str, tuple[int, int]]:
    """What the kernel's input generator puts in the integer tensors of the shape set checked (its case), as far as
    the static evaluation followed them; empty for a shape set of another origin."""
    origins = k.shape_set_origins
    origin = origins[index or 0] if origins and (index or 0) < len(origins) else None
    if origin is None or origin.case_label is None:
        return {}
    return {name: (lo, hi) for name, lo, hi in origin.int_bounds}


@dataclass
class Row:
    """One kernel x loop strategy of a check. `verdict` is what a machine compares (recorded chip truth):
    ok | mismatch | rejected HPLnnn (the TPU compiler refused it) | failed (compile error or crash) |
    not run | unchecked | unverified (right in interpret mode, but the TPU compiler never answered)."""

    kernel: str
    loop_type: str
    config: str
    eager: str
    mine: str
    seconds: str
    verdict: str
    max_error: float | None = None  # worst |kernel - expected| over the outputs compared (eager, else own)


@dataclass
class CheckReport:
    rows: list[Row]
    notes: list[str]  # failures that are not one run, and shapes run that are not the kernel's own
    where: str  # where the kernels ran, and whether the TPU compiler was asked

    @property
    def failures(self) -> int:
        return sum(r.verdict != "ok" for r in self.rows) + sum(n.startswith(_FAILED) for n in self.notes)


_FAILED = "FAILED: "  # prefix of a note that counts as a failure


def check_file(path: str, kernel_name: str | None, chip: str, loop_types: list[str], cases: str | None = None,
               as_json: bool = False) -> int:
    """Print the check table of `path` (or, `as_json`, one JSON object: {verdict, where, chip, on_chip, rows,
    notes, failures}: what an editor reads); 0 when every row passed, 1 otherwise, 2 for a missing kernel.
    `cases`: which cases of an input generator to check (api.select_cases); None: each kernel's first shape set."""
    module = load(Path(path))
    module.cases = cases
    if kernel_name and kernel_name not in module.kernels:
        print(f"helion-pallas: no kernel {kernel_name} in {path}")
        return 2
    for k in ([module.kernels[kernel_name]] if kernel_name else module.kernels.values()) if not as_json else ():
        if k.declaration_text is not None:  # declared through a wrapper, or shaped by an input generator
            print(kernel_summary(k, checked=None if cases else 1))
    report = check_rows(path, kernel_name, chip, loop_types, module, cases)
    if as_json:
        import json

        print(json.dumps({
            "verdict": "ok" if not report.failures else "failed", "where": report.where, "chip": chip,
            "on_chip": runs_on_chip(get_chip(chip)), "failures": report.failures,
            "notes": [n.removeprefix(_FAILED) for n in report.notes],
            "rows": [dataclasses.asdict(r) for r in report.rows],
        }))
        return 1 if report.failures else 0
    rows = [("kernel", "loop type", "config", "vs eager", "vs reference()", "seconds")]
    rows += [(r.kernel, r.loop_type, r.config, r.eager, r.mine, r.seconds) for r in report.rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    print(f"(ran {report.where})")
    for note in report.notes:
        print(note.removeprefix(_FAILED))
    failed = report.failures
    print(f"{len(report.rows) - sum(r.verdict != 'ok' for r in report.rows)} passed, {failed} failed")
    return 1 if failed else 0


def kernel_summary(k: Any, checked: int | None = None) -> str:
    """A kernel as the CLI lists it: how it is declared, and its shape sets with what each is (a generator's
    case, a call, a shape line); `checked`: how many of them the check runs (None: all)."""
    lines = [f"{k.name}: " + (k.declaration_text or "@helion.kernel")]
    for i, specs in enumerate(k.shape_sets):
        origin = k.shape_set_origins[i] if i < len(k.shape_set_origins) else None
        where = origin.label.replace("`", "") if origin is not None else "shape line"
        run = "" if checked is None or i < checked else " (not checked: --cases selects)"
        lines.append(f"  shape set {i}: {where}: {format_args(specs)}{run}")
    if not k.shape_sets:
        lines.append("  no shape set")
    return "\n".join(lines)


def check_rows(path: str, kernel_name: str | None, chip: str, loop_types: list[str], module: Any = None,
               cases: str | None = None) -> CheckReport:
    """Run the check of `path` (every kernel, or `kernel_name`) and return its rows: on this machine's TPU
    when it is `chip`, else in interpret mode with the deviceless libtpu compile's verdict first. `cases`:
    check these cases of input generators (all of a kernel's shape sets); None: each kernel's first."""
    from .reference import ReferenceProcess
    from .reference.workspace import CHIP_VARIABLE

    if module is None:
        module = load(Path(path))
        module.cases = cases
    small = module.info.constants.get("SMALL")  # read statically: the module itself is never run whole
    kernels = [module.kernels[kernel_name]] if kernel_name else list(module.kernels.values())
    on_chip = runs_on_chip(get_chip(chip))
    os.environ[CHIP_VARIABLE] = get_chip(chip).name  # vLLM's platform in the reference is this TPU
    verdicts = None if on_chip else CompilerVerdicts(AnalysisCache())
    try:
        with ReferenceProcess() as reference:
            report = _check_kernels(module, kernels, path, small, chip, loop_types, reference, verdicts,
                                    cases is not None)
    finally:
        if verdicts is not None:
            verdicts.close()
    if on_chip:
        report.where = f"on the chip: {get_chip(chip).device_kind} ({chip})"
    else:
        from .tpu.libtpu_compile import libtpu_available

        asked = ("the TPU compiler's verdict from the deviceless libtpu compile" if libtpu_available() else
                 "libtpu is not installed, so the TPU compiler was not asked (pip install 'helion-ls[tpu]')")
        report.where = f"interpret mode on this CPU for {chip}; {asked}"
    return report


def _check_kernels(module: Any, kernels: list[Any], path: str, small: Any, chip: str, loop_types: list[str],
                   reference: Any, verdicts: CompilerVerdicts | None, every_set: bool = False) -> CheckReport:
    """Rows of each kernel at its first shape set (every one with `every_set`, each row's kernel then named
    with its case). `verdicts`: where the TPU compiler is asked, beside each interpret-mode run (None on the
    chip itself)."""
    if not every_set:
        return _check_sets(module, [(k, None) for k in kernels], path, small, chip, loop_types, reference, verdicts)
    pairs = [(k, i) for k in kernels for i in range(max(1, len(k.shape_sets)))]
    return _check_sets(module, pairs, path, small, chip, loop_types, reference, verdicts)


def _check_sets(module: Any, pairs: list[tuple[Any, int | None]], path: str, small: Any, chip: str,
                loop_types: list[str], reference: Any, verdicts: CompilerVerdicts | None) -> CheckReport:
    from .reference import make_inputs

    source = module.source
    kernels = [k for k, _ in pairs]

    def call(name: str, args: list[Any]) -> Any:
        result, after = reference.call(source, name, args, path)
        args[:] = after
        return result

    notes: list[str] = []  # failures that are not one run: the file's reference raised or disagrees
    ran_at: dict[str, str] = {}  # shapes run that are not the kernel's own shape set: what and why
    rows: list[Row] = []
    for k, index in pairs:
        specs_text = small if isinstance(small, dict) and len(set(map(id, kernels))) == 1 else None
        name = k.name if index is None else f"{k.name} [{_case_name(k, index)}]"
        try:
            specs = k.with_defaults({n: parse_spec(v) for n, v in specs_text.items()} if specs_text else
                                    k.resolve_args(shape_set=index))
        except (SpecError, CompileError) as exc:
            rows.append(Row(name, "-", "-", f"bad inputs: {exc}", "-", "-", "failed"))
            continue
        ranges = {} if specs_text else _generator_ranges(k, index)
        drawn: dict[str, tuple[list[Any], OwnReference | None]] = {}  # per shapes run: inputs, own reference
        disagreement_checked = False
        types = loop_types if _has_inner_loop(k, specs, chip) else ["-"]
        for lt in types:
            start = time.perf_counter()
            try:
                ck = k.compile(args=specs, config={"pallas_loop_type": lt} if lt != "-" else None, chip=chip)
                ranges = {n: r for n, r in ranges.items() if n not in ck.mutated}  # what it writes needs no values
                # values the generator ties to these shapes (page numbers of these pages) keep them
                if specs_text is None and not ranges and (_elements(specs) > REDUCE_ABOVE or _vmem_too_large(ck)
                                                          or _jagged(ck)):
                    ck = _reduced(k, ck, chip)
            except CompileError as exc:
                rows.append(Row(name, lt, "-", f"compile error: {exc}", "-", "-", "failed"))
                continue
            pending = verdicts.ask(ck) if verdicts is not None else None  # answered while interpret mode runs
            too_large = None if pending is None else _too_large(ck)  # what takes minutes to interpret runs on a chip
            hlo = too_large if too_large and _hlo_interpretable(ck) else None
            if too_large and not hlo:
                refused, _ = _compiler_row(pending, notes, name, lt, ck, start)
                if refused is not None:
                    rows.append(refused)
                    continue
                rows.append(Row(name, lt, ck.config.short(), f"NOT RUN ({too_large}; a SMALL = {{...}} dict in the "
                                                               f"file chooses smaller inputs)", "-", "-", "not run"))
                continue
            shapes = format_args(ck.args)
            if ck.args != specs and shapes not in ran_at:
                ran_at[shapes] = f"{k.name}: run at {shapes}, reduced from {format_args(specs)} (the same tiles, fewer " \
                                 f"of them; where that breaks a relation between arguments, a SMALL = {{...}} dict " \
                                 f"in the file chooses the inputs)"
            if shapes not in drawn:  # drawn once the compile says which are index tables
                inputs = make_inputs(dict(ck.args), tables=ck.tables, ranges=ranges)
                baseline, cuda_only = baseline_of(module.info, k.definition)
                if cuda_only and cuda_only not in notes:
                    notes.append(cuda_only)
                own = OwnReference.find(module.info.functions, k.name, len(module.kernels), inputs, call, baseline)
                if own is not None and own.error:
                    if own.name == baseline and "No module named" in own.error:  # vLLM's baseline, vLLM not here
                        notes.append(f"{k.name}: its autotune_baseline_fn `{baseline}` cannot run here "
                                     f"({own.error}); checked against the eager reference")
                    else:
                        notes.append(f"{_FAILED}{k.name}: {own.name}() failed: {own.error}")
                    own = None
                drawn[shapes] = (inputs, own)
            inputs, own = drawn[shapes]
            args = _clone(inputs)
            own_problem = problem = unchecked = None
            spread_note = ""
            verdict = None
            worst = None
            nans = (0, 0)
            try:
                with hlo_interpreter() if hlo else contextlib.nullcontext():
                    out = ck(*args)
                in_place = out is None
                if in_place:
                    out = _mutated(k, ck, args)
                try:
                    expected, ref_args = reference.run(source, k.name, _clone(inputs), list(ck.config["block_sizes"]),
                                                       path, tunables=dict(ck.config))
                except ReferenceRunError as exc:  # nothing to compare with: said so, not a mismatch
                    expected, unchecked = None, exc.message.splitlines()[0][:160]
                else:
                    if in_place:
                        expected = _mutated(k, ck, ref_args)
                    problem = compare(out, expected, same_program=True)
                    if problem is not None:
                        problem, spread_note = _within_summation_spread(
                            out, expected, problem, partial(_exact_run, reference, source, k, ck, inputs, path, in_place))
                    worst = max_error(out, expected)
                    if problem is None:
                        nans = nan_note(out)
                        if nans[1] and nans[0] == nans[1]:
                            problem = "NO SIGNAL: every output is NaN in both runs, nothing was compared"
                    if problem is not None:
                        problem += _drawn(ck.tables, ranges) + _scan_note(ck.plan)
                if own is not None:
                    wanted = own.expected(k, ck, in_place)
                    own_problem = compare(out, wanted)
                    worst = max_error(out, wanted) if worst is None else worst
                    if expected is not None and not disagreement_checked:
                        disagreement_checked = True
                        differ = compare(expected, wanted)
                        if differ:
                            notes.append(f"{_FAILED}{k.name}: the eager reference and {own.name}() disagree: {differ}")
            except ChipRejected as exc:  # the chip's own compile: the same verdict as libtpu's on a CPU
                code = compile_code(exc.kind)
                problem, verdict = f"{code} (on the chip): {exc.key_line[:300]}", f"rejected {code}"
            except Exception as exc:  # noqa: BLE001 - a failing run is a table row, not a crash
                problem = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
                problem += _drawn(ck.tables, ranges)
                verdict = "failed"
            refused, unanswered = _compiler_row(pending, notes, name, lt, ck, start)
            if refused is not None:
                rows.append(refused)
                continue
            seconds = f"{time.perf_counter() - start:.2f}"
            if verdict is not None and verdict.startswith("rejected"):
                eager = f"REJECTED BY THE TPU COMPILER {problem}"
            elif unchecked is not None and problem is None:
                eager = f"NOT CHECKED (the eager reference cannot run it: {unchecked})"
            else:
                eager = ("ok" + spread_note if not nans[0] else f"ok (NaN in both at {nans[0]} of {nans[1]})") \
                    if problem is None \
                    else problem if problem.startswith("NO SIGNAL") else f"MISMATCH {problem}"
            if hlo:
                eager += f" (run in Pallas's HLO interpreter, not TPU interpret mode, which would take minutes: {hlo}; " \
                         "races between grid steps and uninitialised reads were not looked for)"
            mine = "-" if own is None else "ok" if own_problem is None else f"MISMATCH {own_problem}"
            if verdict is None:
                # nothing compared at all (no eager reference, no reference() of the file's own) is no pass either
                verdict = ("mismatch" if problem is not None or own_problem is not None
                           else "unchecked" if unchecked is not None and own is None else "ok")
            if verdict == "ok" and unanswered is not None:
                verdict, eager = "unverified", f"UNVERIFIED: {eager} in interpret mode, but {unanswered}"
            rows.append(Row(name, lt, ck.config.short(), eager, mine, seconds, verdict, worst))
    return CheckReport(rows, [*ran_at.values(), *notes], "")


def _exact_run(reference: Any, source: str, k: Any, ck: Any, inputs: list[Any], path: str | None,
               in_place: bool) -> Any:
    """The eager run again with every float product summed in f64: its outputs (or arguments written)."""
    result, after = reference.run(source, k.name, _clone(inputs), list(ck.config["block_sizes"]), path,
                                  tunables=dict(ck.config), exact_dots=True)
    return _mutated(k, ck, after) if in_place else result


def _within_summation_spread(out: Any, expected: Any, problem: str,
                             exact: Callable[[], Any]) -> tuple[str | None, str]:
    """A mismatch judged again with `summation_slack` allowed: (None, why it is ok) when the kernel is within
    what summation order alone moves the outputs, else (the mismatch, saying what was allowed). The exact run
    happens only here, after a mismatch, so a kernel that matches pays nothing for it."""
    try:
        slack = summation_slack(expected, exact())
    except ReferenceRunError:
        return problem, ""
    if not any(slack):
        return problem, ""
    widened = compare(out, expected, same_program=True, slack=slack)
    moved = ", ".join(f"output {i} by {s / 2:.3g}" for i, s in enumerate(slack) if s)
    if widened is None:
        return None, f" (within twice what summing its dots exactly moves the eager run: {moved})"
    return f"{widened}, with twice what summing its dots exactly moves the eager run allowed ({moved})", ""


def _compiler_row(pending: Any, notes: list[str], name: str, lt: str, ck: Any, start: float
                  ) -> tuple[Row | None, str | None]:
    """The TPU compiler's answer to `pending` (a CompilerVerdicts question; None: not asked): its rejection as
    the row (None when it did not reject), and why it gave no verdict (None when it gave one). Waits for it."""
    if pending is None:
        return None, None
    said = pending.result()
    notes.extend(n for n in said.notes if n not in notes)
    if said.rejected is None:
        return None, said.unanswered
    code, text = said.rejected
    return Row(name, lt, ck.config.short(), f"REJECTED BY THE TPU COMPILER {text}", "-",
               f"{time.perf_counter() - start:.2f}", f"rejected {code}"), None


def max_error(out: Any, expected: Any) -> float | None:
    """The largest |out - expected| over the floating-point tensors compared (None when there are none)."""
    pairs = [(o, e) for o, e in zip(out if isinstance(out, tuple | list) else (out,),
                                    expected if isinstance(expected, tuple | list) else (expected,), strict=False)
             if isinstance(o, torch.Tensor) and isinstance(e, torch.Tensor) and o.dtype.is_floating_point
             and o.shape == e.shape and o.numel()]
    if not pairs:
        return None
    diffs = [(o.double() - e.double()).abs() for o, e in pairs]
    finite = [d[torch.isfinite(d)] for d in diffs]
    return max((float(d.max()) for d in finite if d.numel()), default=0.0)


class OwnReference:
    """The file's own plain-torch `reference` (or `reference_<kernel>` in a file with several kernels), run
    once on the same inputs. It returns what the kernel returns; for an in-place kernel it may instead
    update its arguments the same way."""

    def __init__(self, name: str, result: Any = None, args: list[Any] | None = None, error: str = ""):
        self.name = name
        self.result = result
        self.args = args or []
        self.error = error

    @classmethod
    def find(cls, functions: Collection[str], kernel: str, n_kernels: int, inputs: list[Any],
             call: Callable[[str, list[Any]], Any], baseline: str | None = None) -> OwnReference | None:
        """The file's reference for `kernel` (found statically in `functions`): its `autotune_baseline_fn`
        (`baseline`), else `reference_<kernel>`, else `reference` in a file of one kernel; run on a copy of
        `inputs` through `call(name, args)`, which leaves `args` updated the way the function updated them;
        None when the file has none."""
        name = f"reference_{kernel}" if f"reference_{kernel}" in functions else "reference"
        if baseline is not None and baseline in functions:
            name = baseline
        elif name not in functions or (name == "reference" and n_kernels != 1):
            return None
        args = _clone(inputs)
        try:
            return cls(name, call(name, args), args)
        except ReferenceRunError as exc:  # the reference process's message already names the user's error
            return cls(name, error=exc.message.splitlines()[0][:160])
        except Exception as exc:  # noqa: BLE001 - the user's function failing is reported, not raised
            return cls(name, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")

    def expected(self, kernel: Any, compiled: Any, in_place: bool) -> Any:
        if in_place and self.result is None:
            return _mutated(kernel, compiled, self.args)
        return self.result


def _case_name(k: Any, index: int) -> str:
    origin = k.shape_set_origins[index] if index < len(k.shape_set_origins) else None
    if origin is not None and origin.case_label is not None:
        return origin.case_label
    return f"shape set {index}"


def _jagged(ck: Any) -> bool:
    """Does the kernel read a jagged layout? Its loops then run as long as the drawn rows, which no step count
    sees: upstream jagged_sum's 512 rows took 52 s a strategy to interpret, its reduced 128 rows a few."""
    return any(t.kind == "offsets" for t in ck.tables)


def _reduced(kernel: Any, ck: Any, chip: str) -> Any:
    """`ck` (compiled for a large shape set) compiled again, same config, for the tuner gate's reduced shapes:
    every tiled dimension keeps its block sizes and ragged edges with two tiles (shrink.py), so the check
    runs the same generated structure in seconds instead of interpreting the full arrays for minutes. Sizes
    the kernel's asserts tie together stay together; a relation nothing asserts (int4 packing: K and K/2) may
    not, which the file's own reference() then reports — the note under the table says to give SMALL."""
    from .tune.shrink import reduced_args

    if any(t.keeps_shapes for t in ck.tables):  # counts in [1, 8] may be block numbers only these sizes have
        return ck
    config = dict(ck.config)
    small = reduced_args(kernel, dict(ck.args), config, ck.chip)
    return ck if small == dict(ck.args) else kernel.compile(args=small, config=config, chip=chip)


def _clone(values: list[Any]) -> list[Any]:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in values]


def _mutated(kernel: Any, compiled: Any, args: list[Any]) -> tuple[Any, ...]:
    return tuple(args[kernel.params.index(m)] for m in compiled.mutated)


def _has_inner_loop(kernel: Any, specs: dict, chip: str) -> bool:
    try:
        return bool(kernel.config_space(specs, chip).n_loops)
    except CompileError:
        return False
