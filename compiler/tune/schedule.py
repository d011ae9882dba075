"""The TPU compiler's own estimate of a kernel's time — labelled "TPU compiler estimate" wherever it appears.

The generated module is compiled by libtpu (deviceless) in a schedule worker (compiler.tpu: LLO dumps on,
an address-space limit, an abort ends only the worker) and what the compiler scheduled is read back
(compiler.tpu.llo_dump):

- v5e, v5p, v6e ("simulated"): libtpu's static LLO profile simulates each kernel with a DMA latency model;
  cycles ÷ the chip's clock (compiler.ir.chips) is the time, but never less than the chip's roofline (the bytes
  the generated code's block copies move at the data-sheet bandwidth, its FLOPs at the bf16 peak: `roofline`):
  the simulator lets
  concurrent copies each stream at ~1 TB/s on v5e (measured: a 2048² f32 add copies 50 MB in 49 µs one copy
  at a time, and an 8192² one moves 805 MB in 311 µs with copies overlapped, 2.6 TB/s against the chip's
  0.82), so memory-bound kernels would otherwise come out faster than the chip can run them. The raw
  simulated time is kept beside it (`simulated_seconds`). The simulation costs memory and time in proportion
  to the cycles it simulates, so the grid is shrunk first: the module's `grid=` is rewritten to fewer steps
  (grid axes only, innermost kept whole as long as they fit; arrays, blocks and inner loops unchanged, so
  every step is the step of the full kernel) and simulated at two sizes, and the cycles are extrapolated
  linearly, fixed + steps × per step, to the full grid.
- v7x, v4 ("issue"), and kernels the simulator skips (it does not model v6e's `dma.general`, which a nested
  emit_pipeline uses): bundles executed ÷ clock, or the MXU floor (FLOPs ÷ peak) when larger — a
  compute-issue lower bound that does not see DMA waits.
Either way the estimate carries the bundles per grid step, the bundles executed in all and each unit's slot
utilisation (MXU, VPU, EUP, XLU, load/store) of the executed bundles.

Simulations run one at a time on the machine (an advisory lock on a file in the temp directory): each can
take GBs. Model figures are never mixed in: a ScheduleEstimate is the compiler's alone.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import math
import os
import re
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..codegen.exprs import literal
from ..ir.chips import SIMULATED_CHIPS

if TYPE_CHECKING:
    from ..compiled import CompiledKernel
    from ..ir.plan import KernelPlan
    from ..tpu.libtpu_compile import ScheduleMode, TpuCompiler, TpuCompileResult

LABEL = "TPU compiler estimate"
# The worker's address space (not its resident memory, about half of it): libtpu maps ~2.4 GB before it compiles
# anything, and a large unrolled kernel needs GBs more to compile (attention with 32 unrolled 256-key steps on
# v5e did not compile in 4 GiB).
MEMORY_LIMIT = int(float(os.environ.get("HELION_SCHEDULE_MEMORY_GB", "6")) * 2**30)
# Cycles one simulation may cover (the larger of the two runs): libtpu needs ~2.4 GB of address space before
# it simulates anything and ~1.5 KB more per simulated cycle (measured: 550k cycles peaked at 3.2 GB).
CYCLE_BUDGET = int(os.environ.get("HELION_SCHEDULE_CYCLES", "400000"))
TIMEOUT = 600.0
_GRID = re.compile(r"(= pl\.pallas_call\([^\n]*\n[^\n]*\n\s*grid=)(\([^)\n]*\)),")


class ScheduleUnavailable(RuntimeError):
    """The TPU compiler's schedule cannot be had here (no libtpu)."""


@dataclass(frozen=True)
class ScheduleEstimate:
    """What the TPU compiler says of one compiled kernel on one chip (a TPU compiler estimate, not the model's).

    seconds:          estimated time of one call; None when the compiler rejected it or could not simulate it.
    method:           "simulated" (cycles from libtpu's simulator ÷ clock) or "issue" (bundles executed ÷
                      clock, or the MXU floor: a compute-issue lower bound).
    cycles:           simulated cycles scaled to the full grid ("simulated" only).
    simulated:        cycles ÷ clock, before the roofline floor ("simulated" only).
    roofline:         the chip's roofline for the generated code (see `roofline`).
    per_step:         kernel name -> bundles executed per grid step.
    executed:         bundles executed for the full grid, all kernels.
    utilisation:      unit group -> share of its slots the executed bundles use (compiler.tpu.llo_dump).
    simulated_steps:  per kernel, (grid steps simulated, ..., full grid steps): the runs behind the scaling.
    """

    chip: str
    seconds: float | None
    method: str
    clock_hz: float
    cycles: float | None = None
    simulated: float | None = None
    roofline: float = 0.0
    per_step: dict[str, float] = field(default_factory=dict)
    executed: float = 0.0
    utilisation: dict[str, float] = field(default_factory=dict)
    simulated_steps: dict[str, list[int]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    error: str | None = None
    compile_seconds: float = 0.0

    def to_metrics(self) -> dict[str, Any]:
        """The evaluator's metrics (stored with each trial)."""
        return {
            "label": LABEL,
            "method": self.method,
            "clock_hz": self.clock_hz,
            "cycles": self.cycles,
            "simulated_seconds": self.simulated,
            "roofline_seconds": self.roofline,
            "bundles_per_step": dict(self.per_step),
            "bundles_executed": self.executed,
            "utilisation": dict(self.utilisation),
            "simulated_steps": dict(self.simulated_steps),
            "notes": list(self.notes),
            "compile_seconds": self.compile_seconds,
        }


# ---- the workers ---------------------------------------------------------------------------------------------

_workers: dict[str, TpuCompiler] = {}
_workers_lock = threading.Lock()


def _worker(mode: ScheduleMode) -> TpuCompiler:
    from ..tpu.libtpu_compile import TpuCompiler, libtpu_available

    if not libtpu_available():
        raise ScheduleUnavailable("libtpu is not installed (pip install libtpu==0.0.42.1)")
    with _workers_lock:
        if mode not in _workers:
            _workers[mode] = TpuCompiler(TIMEOUT, schedule=mode, memory_limit=MEMORY_LIMIT)
            atexit.register(_workers[mode].close)
        return _workers[mode]


@contextlib.contextmanager
def one_at_a_time() -> Iterator[None]:
    """Hold the machine-wide schedule lock: one simulation at a time, whoever runs it."""
    path = os.path.join(tempfile.gettempdir(), "helion-ls-schedule.lock")
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _compile(ck: CompiledKernel, source: str, mode: ScheduleMode) -> TpuCompileResult:
    with one_at_a_time():
        return _worker(mode).compile(source, ck.entry, ck.compile_args(), ck.chip, dump_mosaic=False)


# ---- shrinking the grid ---------------------------------------------------------------------------------------


def with_grids(source: str, grids: Sequence[tuple[int, ...]], full: Sequence[tuple[int, ...]]) -> str:
    """`source` with the grid of its i-th pallas_call set to grids[i]; raises ValueError when the module's
    grids are not `full` (then the text is not what this compiler generated)."""
    found = list(_GRID.finditer(source))
    if len(found) != len(full) or any(m.group(2) != literal(tuple(g)) for m, g in zip(found, full, strict=False)):
        raise ValueError("the generated module's pallas_call grids are not the plan's")
    out, pos = [], 0
    for m, g in zip(found, grids, strict=True):
        out += [source[pos : m.start(2)], literal(tuple(g))]
        pos = m.end(2)
    return "".join(out) + source[pos:]


def reduced_grid(grid: tuple[int, ...], steps: int) -> tuple[int, ...]:
    """At most `steps` steps of `grid`, inner axes kept whole while they fit (an inner axis decides which
    blocks a step reuses; the outer ones only repeat that pattern)."""
    out = [1] * len(grid)
    prod = 1
    for axis in reversed(range(len(grid))):
        take = max(1, min(grid[axis], steps // prod))
        out[axis] = take
        prod *= take
    return tuple(out)


def _halved(grid: tuple[int, ...]) -> tuple[int, ...]:
    """The grid with its outermost axis of more than one step halved."""
    out = list(grid)
    for axis, n in enumerate(out):
        if n > 1:
            out[axis] = n // 2
            break
    return tuple(out)


def _steps(grid: Sequence[int]) -> int:
    return math.prod(grid) if grid else 1


def plan_runs(plan: KernelPlan, cycles_per_step: float, budget: int) -> list[list[tuple[int, ...]]]:
    """The grids to simulate: one run (the full grids) when they fit the budget, else two runs of shrunken
    grids (the larger within the budget, the smaller with its outermost shrunk axis halved)."""
    full = [tuple(call.grid or (1,)) for call in plan.calls]
    most = max(2, int(budget // max(cycles_per_step, 1.0)))
    big = [reduced_grid(g, most) for g in full]
    if big == full:
        return [full]
    small = [g if g == f else _halved(g) for g, f in zip(big, full, strict=True)]
    return [small, big]


# ---- the estimate ---------------------------------------------------------------------------------------------


def _by_call(result: TpuCompileResult, plan: KernelPlan) -> tuple[list[str], list[str]]:
    """(the Mosaic kernels of the compiled module in the order of the plan's calls, every other compiled op:
    XLA's own ops around them, whose time does not depend on the grid)."""
    names = list(result.custom_calls)
    if len(names) != len(plan.calls):
        raise ValueError(f"{len(names)} compiled Mosaic kernels for {len(plan.calls)} pallas_calls")
    others = sorted(({s.name for s in result.schedules} | set(result.cycles)) - set(names))
    return names, others


def _failed(chip: str, clock: float, method: str, result: TpuCompileResult) -> ScheduleEstimate:
    why = f"libtpu rejects it ({result.kind}): {result.key_line or result.error[:300]}"
    return ScheduleEstimate(chip, None, method, clock, error=why, compile_seconds=result.seconds)


def _utilisation(result: TpuCompileResult, weights: dict[str, float]) -> dict[str, float]:
    """Slot utilisation of the whole module: each kernel's, weighted by its bundles executed."""
    total = sum(weights.values()) or 1.0
    out: dict[str, float] = {}
    for s in result.schedules:
        for unit, share in s.utilisation.items():
            out[unit] = out.get(unit, 0.0) + share * weights.get(s.name, 0.0) / total
    return out


def _issue(ck: CompiledKernel, result: TpuCompileResult, notes: list[str], compile_seconds: float) -> ScheduleEstimate:
    """The compute-issue bound from a compile's bundles, for the full grid."""
    chip, plan = ck.chip, ck.plan
    names, others = _by_call(result, plan)
    schedules = {s.name: s for s in result.schedules}
    executed = {n: schedules[n].executed_for(call.grid_steps) for n, call in zip(names, plan.calls, strict=True)}
    executed |= {n: schedules[n].executed for n in others if n in schedules}
    total = sum(executed.values())
    seconds = total / chip.clock_hz
    mxu_floor = plan.flops / chip.bf16_flops
    if mxu_floor > seconds:
        notes.append("the MXU peak, not the bundles issued, bounds it")
        seconds = mxu_floor
    unknown = sum(schedules[n].unknown_trips for n in names)
    if unknown:
        notes.append(f"{unknown} loop(s) with a trip count computed on the device counted once")
    return ScheduleEstimate(
        chip.name,
        seconds,
        "issue",
        chip.clock_hz,
        per_step={n: schedules[n].per_step for n in names},
        executed=total,
        utilisation=_utilisation(result, executed),
        notes=tuple(notes),
        compile_seconds=compile_seconds,
    )


def schedule_estimate(ck: CompiledKernel, budget: int | None = None) -> ScheduleEstimate:
    """The TPU compiler's estimate of `ck`'s time (raises ScheduleUnavailable without libtpu)."""
    chip = ck.chip
    method = "simulated" if chip.name in SIMULATED_CHIPS else "issue"
    try:
        return _estimate(ck, budget)
    except ValueError as exc:  # a compiled module this reading does not understand: said, not raised
        return ScheduleEstimate(chip.name, None, method, chip.clock_hz, error=f"cannot read the schedule: {exc}")


def _estimate(ck: CompiledKernel, budget: int | None) -> ScheduleEstimate:
    chip = ck.chip
    if chip.name not in SIMULATED_CHIPS:
        result = _compile(ck, ck.source, "bundles")
        if not result.ok:
            return _failed(chip.name, chip.clock_hz, "issue", result)
        return _issue(ck, result, [f"{chip.name} has no simulator in libtpu: compute-issue bound"], result.seconds)
    return _simulated(ck, budget or CYCLE_BUDGET)


def _unsimulated(ck: CompiledKernel, why: str, spent: float) -> ScheduleEstimate:
    """The compute-issue bound, from a compile without the simulator, when the simulator cannot run."""
    result = _compile(ck, ck.source, "bundles")
    if not result.ok:
        return _failed(ck.chip.name, ck.chip.clock_hz, "issue", result)
    return _issue(ck, result, [f"{why}: compute-issue bound"], spent + result.seconds)


def roofline(plan: KernelPlan, bandwidth: float, peak: float) -> float:
    """The least time the chip can run the generated code in: the bytes its block copies move (re-fetches
    included, read off the plan) at the data-sheet HBM bandwidth, or its FLOPs at the bf16 peak."""
    from .model import copied_bytes

    moved = max(plan.hbm_bytes, sum(copied_bytes(call) for call in plan.calls))
    return max(moved / bandwidth, plan.flops / peak)


def _simulated(ck: CompiledKernel, budget: int) -> ScheduleEstimate:
    from .model import estimate

    chip, plan = ck.chip, ck.plan
    model = estimate(plan, chip)  # only to size the shrunken grid; its figures are not used
    device = model.seconds - model.breakdown.get("launch", 0.0)
    per_step = 2.0 * device * chip.clock_hz / max(1, sum(c.grid_steps for c in plan.calls))
    full = [tuple(call.grid or (1,)) for call in plan.calls]
    runs = plan_runs(plan, per_step, budget)
    results: list[TpuCompileResult] = []
    spent = 0.0
    for grids in runs:
        try:
            source = ck.source if grids == full else with_grids(ck.source, grids, full)
        except ValueError:
            source, runs = ck.source, [full]
        result = _compile(ck, source, "cycles")
        spent += result.seconds
        if not result.ok and result.kind == "crash":
            if "Check failed" not in result.key_line and budget > 50_000:
                return _simulated(ck, budget // 4)  # over the memory limit: a smaller grid
            return _unsimulated(ck, f"libtpu's simulator aborted ({result.key_line[:200]})", spent)
        if not result.ok:
            return _failed(chip.name, chip.clock_hz, "simulated", result)
        results.append(result)
        if source is ck.source or not all(result.cycles.get(n) for n in result.custom_calls):
            break  # the whole grid, or the simulator skipped a kernel: another size would not help
    names, others = _by_call(results[-1], plan)
    skipped = [n for n in names if not results[-1].cycles.get(n)]
    if skipped:
        note = f"libtpu's simulator skipped {', '.join(skipped)} (a DMA kind it does not model): compute-issue bound"
        return _issue(ck, results[-1], [note], spent)
    cycles = 0.0
    steps: dict[str, list[int]] = {}
    for i, (name, call) in enumerate(zip(names, plan.calls, strict=True)):
        counts = [_steps(grids[i]) for grids in runs[: len(results)]]
        values = [r.cycles[name] for r in results]
        steps[name] = [*counts, call.grid_steps]
        slope = (values[1] - values[0]) / (counts[1] - counts[0]) if len(values) == 2 and counts[1] > counts[0] else 0
        if slope > 0:
            cycles += values[1] + slope * (call.grid_steps - counts[1])
        else:
            cycles += values[-1] * call.grid_steps / counts[-1]
    schedules = {s.name: s for s in results[-1].schedules}
    for n in others:  # XLA's ops around the kernels: not on the grid (their bundles where not simulated)
        cycles += results[-1].cycles.get(n) or (schedules[n].executed if n in schedules else 0.0)
    executed = {n: schedules[n].executed_for(call.grid_steps) for n, call in zip(names, plan.calls, strict=True)}
    executed |= {n: schedules[n].executed for n in others if n in schedules}
    notes = [] if len(results) == 1 else ["simulated on a shrunken grid and scaled linearly to the full grid"]
    simulated = cycles / chip.clock_hz
    floor = roofline(plan, chip.hbm_bandwidth, chip.bf16_flops)
    if floor > simulated:
        notes.append(f"the simulated {simulated * 1e6:.1f} µs is below the chip's roofline: floored at it")
    return ScheduleEstimate(
        chip.name,
        max(simulated, floor),
        "simulated",
        chip.clock_hz,
        cycles=cycles,
        simulated=simulated,
        roofline=floor,
        per_step={n: schedules[n].per_step for n in names},
        executed=sum(executed.values()),
        utilisation=_utilisation(results[-1], executed),
        simulated_steps=steps,
        notes=tuple(notes),
        compile_seconds=spent,
    )
