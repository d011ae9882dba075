"""Compile and run each case for every config and loop strategy that applies, compare with its plain-torch
`reference`, and classify: pass, diagnosed (the compiler refused it with a diagnostic), runtime error
(compiled, then failed) or MISMATCH (compiled, ran and gave a wrong answer: a silent mismatch).
"""

from __future__ import annotations

import logging
import re
import time
import traceback
import zlib
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import torch

from compiler.check import max_error
from compiler.support.diagnostics import CompileError

from .case import Case, load_case

STRATEGIES = ("unroll", "fori_loop", "emit_pipeline")
SHORT = {"unroll": "u", "fori_loop": "f", "emit_pipeline": "e", None: "grid"}


@dataclass
class Run:
    """One compile + run: `outcome` is ok | diagnosed | runtime-error | mismatch | rejected | not-rejected;
    `code` the diagnostic's (a TPU compiler rejection: HPL302, HPL203, HPL401); `max_error` the largest
    |result - reference| over the floating-point values compared."""

    config: dict[str, Any]
    strategy: str | None
    outcome: str
    detail: str = ""
    seconds: float = 0.0
    code: str | None = None
    max_error: float | None = None
    interpreted: Run | None = None  # the TPU compiler rejected it: what interpret mode says all the same


@dataclass(frozen=True)
class Target:
    """Where a case runs: compiled for `chip`; on that TPU when this machine has it, else in interpret mode,
    first asking the deviceless libtpu compile when `tpu_compile` (a kernel the TPU compiler rejects is
    diagnosed, as on the chip). `interpret_rejected`: a run the TPU compiler rejects is run in interpret mode
    as well (`Run.interpreted`), so one pass answers both what the chip says and what interpret mode says."""

    chip: str = "v7x"
    tpu_compile: bool = False
    interpret_rejected: bool = False


@dataclass
class CaseResult:
    name: str
    summary: str
    runs: list[Run] = field(default_factory=list)
    error: str = ""  # the case itself is broken (no kernel, reference raised): a suite bug
    known: str = ""  # "known mismatch: why" / "known crash: why" from the case's markers

    @property
    def status(self) -> str:
        outcomes = {r.outcome for r in self.runs}
        if self.error:
            return "case-error"
        if "mismatch" in outcomes:
            return "MISMATCH"
        if "not-rejected" in outcomes:
            return "not-rejected"
        if "runtime-error" in outcomes:
            return "runtime-error"
        if "diagnosed" in outcomes:
            return "diagnosed"
        return "rejected" if outcomes == {"rejected"} else "pass"

    @property
    def passed(self) -> bool:
        return self.status in ("pass", "rejected")

    def interpreted(self) -> CaseResult:
        """The same case as interpret mode alone sees it: a run the TPU compiler rejected counts as what
        interpret mode made of it (when it was run: Target.interpret_rejected)."""
        runs = [r.interpreted or r for r in self.runs]
        return CaseResult(self.name, self.summary, runs, self.error, self.known)


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    if dtype in (torch.bfloat16, torch.float16):
        return {"atol": 2e-2, "rtol": 2e-2}
    if dtype.is_floating_point:
        return {"atol": 2e-4, "rtol": 2e-4}
    return {"atol": 0.0, "rtol": 0.0}


# What a TPU's f32 arithmetic may be off by where it differs from torch's (KernelPlan.chip_rounds_f32): a part
# of the result's largest magnitude, as `helion-pallas check` allows. Recorded on a v5e (tests/chip_truth):
# xlogy and log10 off by 6.3e-4 at magnitudes ~30, a tanh-gelu gradient by 3.3e-4, an f32 matmul (bf16x3)
# by 4.1e-4 at magnitudes ~100; interpret mode computes these exactly, so without this the CPU says ok where
# the chip says mismatch.
CHIP_F32_SCALE = 1e-4


def chip_tolerance(tol: dict[str, float], want: torch.Tensor) -> dict[str, float]:
    """`tol` widened for an f32 result of a kernel whose f32 values the chip rounds (see CHIP_F32_SCALE)."""
    finite = want[torch.isfinite(want)]
    scale = float(finite.abs().max()) if finite.numel() else 0.0
    return {"atol": max(tol["atol"], CHIP_F32_SCALE * scale), "rtol": max(tol["rtol"], CHIP_F32_SCALE)}


def compare(got: Any, want: Any, tol: dict[str, float] | None, what: str = "result", chip_rounds: bool = False
            ) -> str | None:
    """None when `got` equals `want` (tensors: same shape and dtype, values within tolerance), else why not.
    `chip_rounds`: the kernel's f32 values are rounded by the chip (chip_tolerance)."""
    if isinstance(want, tuple | list):
        if not isinstance(got, tuple | list) or len(got) != len(want):
            return f"{what}: {_describe(got)}, expected {len(want)} values"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            problem = compare(g, w, tol, f"{what}[{i}]", chip_rounds)
            if problem:
                return problem
        return None
    if not isinstance(want, torch.Tensor):
        return None if got == want else f"{what}: {got!r}, expected {want!r}"
    if not isinstance(got, torch.Tensor):
        return f"{what}: {_describe(got)}, expected a tensor"
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{what}: {_describe(got)}, expected {_describe(want)}"
    if want.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):  # assert_close has no tolerance for 8-bit floats
        got, want = got.float(), want.float()
    bounds = tol or tolerance(want.dtype)
    if chip_rounds and want.dtype == torch.float32:
        bounds = chip_tolerance(bounds, want)
    try:
        torch.testing.assert_close(got, want, equal_nan=True, **bounds)
    except AssertionError as exc:
        lines = [s.strip() for s in str(exc).splitlines() if s.strip()]
        return f"{what}: " + "; ".join(lines[1:3] or lines[:1])
    return None


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).replace('torch.', '')}{list(value.shape)}"
    if isinstance(value, tuple | list):
        return f"{len(value)} values"
    return type(value).__name__


def _clone(args: Sequence[Any]) -> list[Any]:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def pick(name: str, choices: Sequence[Any], fast: bool, salt: str = "") -> list[Any]:
    """All choices; in fast mode one, the same one every time for a case (it rotates across cases)."""
    if not fast or len(choices) <= 1:
        return list(choices)
    return [choices[zlib.crc32((name + salt).encode()) % len(choices)]]


def run_case(case: Case, fast: bool = False, every_strategy: bool = False, target: Target = Target()) -> CaseResult:
    """Every config x loop strategy (a config that pins `pallas_loop_type` keeps it); `fast`: one pair (with
    `every_strategy`: one config, every strategy), except for a case that records a known bug, which always
    runs in full so that it shows (or not) the bug."""
    known = (f"known mismatch: {case.known_mismatch}" if case.known_mismatch
             else f"known crash: {case.known_crash}" if case.known_crash else "")
    fast = fast and not known
    result = CaseResult(case.name, case.summary, known=known)
    kernel = case.kernel
    try:
        args = case.make_args()
        if len(args) > len(kernel.params):
            raise ValueError(f"{len(args)} inputs for {len(kernel.params)} parameters")
        specs = dict(zip(kernel.params, args, strict=False))  # fewer: the call leaves defaulted parameters out
        expected = None
        ref_args = _clone(args)
        if case.reference is not None:
            expected = case.reference(*ref_args)
    except Exception as exc:  # noqa: BLE001 - a broken case is reported, not raised
        result.error = f"{type(exc).__name__}: {exc}"
        return result
    for config in pick(case.name, case.configs, fast, "config"):
        try:
            loops = kernel.config_space(specs, target.chip).n_loops
        except CompileError as exc:
            # the space is traced at default block sizes, which a kernel pinned to its own may not accept
            try:
                loops = sum(lp.kind == "inner"
                            for lp in kernel.compile(args=specs, config=config, chip=target.chip).plan.loops)
            except CompileError:
                result.runs.append(_refused(case, config, None, exc, 0.0))
                continue
        pinned = config.get("pallas_loop_type")
        strategies = (pinned,) if pinned else pick(case.name, STRATEGIES, fast and not every_strategy)
        for strategy in strategies if loops else (None,):
            result.runs.append(_one_run(case, specs, args, expected, ref_args, config, strategy, target))
    return result


def _one_run(case: Case, specs: dict[str, Any], args: list[Any], expected: Any, ref_args: list[Any],
             config: dict[str, Any], strategy: str | None, target: Target) -> Run:
    from compiler.ir.chips import get_chip
    from compiler.tpu.runtime import runs_on_chip

    cfg = dict(config)
    if strategy:
        cfg["pallas_loop_type"] = strategy
    start = time.perf_counter()
    try:
        compiled = case.kernel.compile(args=specs, config=cfg, chip=target.chip)
    except CompileError as exc:
        return _refused(case, config, strategy, exc, time.perf_counter() - start)
    errors = [d for d in compiled.diagnostics if d.is_error]
    if errors:  # e.g. out of VMEM: reported on a compiled kernel, which the editor then does not run
        return _refused(case, config, strategy, CompileError(errors), time.perf_counter() - start)
    if target.tpu_compile and not runs_on_chip(get_chip(target.chip)):
        rejected = [d for d in compiled.check_tpu_compile() if d.is_error]
        if rejected:
            run = _refused(case, config, strategy, CompileError(rejected), time.perf_counter() - start)
            if target.interpret_rejected:
                run.interpreted = _execute(case, compiled, args, expected, ref_args, config, strategy,
                                           time.perf_counter())
            return run
    return _execute(case, compiled, args, expected, ref_args, config, strategy, start)


def _execute(case: Case, compiled: Any, args: list[Any], expected: Any, ref_args: list[Any],
             config: dict[str, Any], strategy: str | None, start: float) -> Run:
    """Run a compiled kernel and compare it with the reference."""
    from compiler.tpu.runtime import ChipRejected
    from compiler.tpu.truth import compile_code

    if case.reject is not None:
        return Run(config, strategy, "not-rejected", f"compiled; expected a diagnostic matching {case.reject!r}",
                   time.perf_counter() - start)
    run_args = _clone(args)
    try:
        got = compiled(*run_args)
    except ChipRejected as exc:  # the chip's own compile: diagnosed, as libtpu's verdict is on a CPU
        code = compile_code(exc.kind)
        return Run(config, strategy, "diagnosed", f"{code} (on the chip): {exc.key_line[:200]}",
                   time.perf_counter() - start, code)
    except Exception as exc:  # noqa: BLE001 - a crash of compiled code is a result row
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" ({tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
        return Run(config, strategy, "runtime-error", f"{type(exc).__name__}: {first}{where}",
                   time.perf_counter() - start)
    if case.check is not None:
        try:
            problem = case.check(got, *_clone(args))
        except Exception as exc:  # noqa: BLE001 - a result the check cannot even inspect is wrong
            problem = f"check failed on the result: {type(exc).__name__}: {exc}"

    else:
        rounds = compiled.plan.chip_rounds_f32
        problem = compare(got, expected, case.tolerance, chip_rounds=rounds)
        for name, g, w in zip(case.kernel.params, run_args, ref_args, strict=False):
            if problem is None and isinstance(w, torch.Tensor):
                problem = compare(g, w, case.tolerance, f"argument `{name}` afterwards", rounds)
    seconds = time.perf_counter() - start
    worst = None if case.check is not None else max_error(got, expected)
    if problem:
        return Run(config, strategy, "mismatch", problem, seconds, max_error=worst)
    return Run(config, strategy, "ok", "", seconds, max_error=worst)


def _refused(case: Case, config: dict[str, Any], strategy: str | None, exc: CompileError, seconds: float) -> Run:
    errors = [d for d in exc.diagnostics if d.is_error] or list(exc.diagnostics)
    texts = [f"{d.code} line {d.range.start.line + 1}: {d.message}" for d in errors]
    detail = "; ".join(texts)
    code = errors[0].code if errors else None
    if case.reject is not None:
        if any(re.search(case.reject, f"{d.code} {d.message}") for d in errors):
            return Run(config, strategy, "rejected", detail, seconds, code)
        return Run(config, strategy, "diagnosed", f"expected {case.reject!r}; got {detail}", seconds, code)
    return Run(config, strategy, "diagnosed", detail, seconds, code)


def run_path(path: Path, fast: bool = False, every_strategy: bool = False, target: Target = Target()) -> CaseResult:
    """Load and run one case file; a file that cannot be loaded is a case error, not an exception."""
    # interpret mode logs a full traceback for every failing kernel callback; the table already says it
    logging.getLogger("jax._src.callback").setLevel(logging.CRITICAL)
    try:
        case = load_case(path)
    except Exception as exc:  # noqa: BLE001 - a broken case file is reported, the rest still run
        return CaseResult(path.stem, "", error=f"{type(exc).__name__}: {exc}")
    return run_case(case, fast, every_strategy, target)


def run_all(paths: Sequence[Path], fast: bool = False, progress: Any = None, workers: int = 1,
            every_strategy: bool = False) -> list[CaseResult]:
    """Results in the order of `paths`; `workers` > 1 runs cases in that many fresh processes (jax state is
    not fork-safe, so they are spawned)."""
    if workers <= 1:
        results = []
        for path in paths:
            results.append(run_path(path, fast, every_strategy))
            if progress:
                progress(results[-1])
        return results
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(run_path, path, fast, every_strategy) for path in paths]
        results = []
        for future in futures:
            results.append(future.result())
            if progress:
                progress(results[-1])
        return results


# -- report ---------------------------------------------------------------------------------------------

def _config_text(config: dict[str, Any]) -> str:
    blocks = config.get("block_sizes")
    return "x".join(map(str, blocks)) if blocks else "default"


def row(res: CaseResult) -> tuple[str, str, str, str]:
    several = len({_config_text(r.config) for r in res.runs}) > 1
    cells = []
    for r in res.runs:
        label = SHORT.get(r.strategy, str(r.strategy)) + (f"@{_config_text(r.config)}" if several else "")
        mark = {"ok": "ok", "rejected": "rejected", "mismatch": "MISMATCH", "not-rejected": "ACCEPTED",
                "runtime-error": "crash"}.get(r.outcome) or r.detail.split(" ", 1)[0]
        cells.append(f"{label}:{mark}")
    bad = next((r for r in res.runs if r.outcome == "mismatch"), None) or next(
        (r for r in res.runs if r.outcome not in ("ok", "rejected")), None)
    note = res.error or (bad.detail if bad else "")
    if res.known and res.passed:
        note = f"[{res.known.split(':')[0]} marked, but it passes: remove the marker] {note}"
    elif res.known:
        note = f"[{res.known}] {note}"
    status = res.status
    return res.name, status, " ".join(cells), note


def summary_line(results: Sequence[CaseResult]) -> str:
    passed = sum(r.passed for r in results)
    diagnosed = sum(r.status == "diagnosed" for r in results)
    mismatches = sum(r.status == "MISMATCH" for r in results)
    return f"{passed}/{len(results)} kernels pass; {diagnosed} diagnosed; {mismatches} silent mismatches"


def report(results: Sequence[CaseResult], width: int = 100) -> str:
    rows = [("kernel", "result", "runs", "first problem")] + [row(r) for r in results]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    w2 = min(max(len(r[2]) for r in rows), 40)
    lines = [f"{a.ljust(w0)}  {b.ljust(w1)}  {c.ljust(w2)}  {d[:width]}".rstrip() for a, b, c, d in rows]
    others = [r for r in results if r.status in ("runtime-error", "not-rejected", "case-error")]
    if others:
        lines.append("")
        lines.append("not a pass and not a diagnostic: " + ", ".join(f"{r.name} ({r.status})" for r in others))
    lines.append(summary_line(results))
    return "\n".join(lines)


def exit_code(results: Sequence[CaseResult]) -> int:
    """Non-zero when any kernel compiled and then gave a wrong answer, crashed or was wrongly accepted."""
    return 1 if any(r.status in ("MISMATCH", "runtime-error", "not-rejected", "case-error") for r in results) else 0
