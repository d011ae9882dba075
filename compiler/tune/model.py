"""An analytic per-grid-step TPU performance model of a compiled kernel, read off its Pallas plan.

Why a model: there is no TPU here, and a search needs thousands of evaluations per second; the model costs
a fraction of a millisecond once the plan exists. It is an estimate for a named chip, calibrated against
published measurements and the seed's (constants.py says which constant comes from where), and is
reported as such everywhere.

Per kernel: one fixed call overhead (what a wall-clock benchmark of one call sees beyond the kernel's own
steps), then per `pallas_call` (calls run one after another):
- Grid steps run in lexicographic order. Between consecutive steps the outermost grid axis that moved
  decides which blocks change: an operand whose block index depends on that axis or an inner one is
  copied (inputs fetched for the next step, outputs written back), the others are not. Steps are grouped
  by that axis, so the cost is a sum over grid axes, not over steps.
- A step costs max(compute + τ_step, DMA of the double-buffered copies it hides) plus the copies of
  single-buffered operands, which cannot overlap the compute that still reads the old block. The copies
  of a step's nested pipelines use the same HBM: the outer copies hide only behind what of the step those
  leave (a step moving both cannot beat their bytes at the HBM bandwidth).
- Compute: MXU time (padded FLOPs / (η · the rate of the operands' dtype); a dot whose LHS block has fewer
  rows than the chip's MXU needs per weight load costs that many rows) and VPU+EUP time overlap:
  max + (1−ω)·min, with ω for straight-line code (outer step body, unrolled inner loops) or for one
  iteration of a looped inner loop.
- A reduction across a vreg's lanes returns its result a fixed latency later and the ops that use it wait (a
  softmax is two in a row: its max, then the sum of the exponentials that waited for it), so a region takes at least
  its chain of them (Work.lane_reductions × `reduction_latency`); unrolled iterations run their chains side by side.
  On the v5e, softmax bf16[65536, 2560] in blocks of 8 rows: 0.39 µs a step where its copies take 0.32 and add's steps
  of the same few KiB ~0.2 (fitted: ~0.12 µs a reduction; without it, the DMA latency was fitted to softmax's small
  steps against add's, and add at blocks of 8-16 rows went 20-24 % slow held out by shape).
- emit_pipeline inner loops stream their HBM operands through a nested pipeline, which jax starts cold on
  every outer step: its first fetch is exposed and its last write-back is waited for (a restart). Each
  iteration but the last prefetches the next blocks: max(compute + τ_inner, that DMA); the last one only
  computes. Loop-carried values live in VMEM scratch, loaded and stored once per iteration.
- fori_loop iterations pay τ_fori where their body does not cover it (the loop's scalar control — counter, dynamic
  slice addresses, branch — issues in the same VLIW bundles as the body's MXU and vector work, so an iteration
  takes max(body, τ_fori); fitted so on the v5e: 8.2 % geometric-mean error over 282 points against 8.7 % when
  τ_fori was added to every body), the loop-boundary overlap and, per 32-bit element of what the iteration
  hands the next (a matmul's accumulator), the time to read and write it back: on the v5e a [1024, 1024] f32
  accumulator costs ~1.35 µs an iteration whatever the dot's K, and [512, 512] a quarter of that. Unrolled
  iterations pay none of these.
- Code that does not fit the instruction memory: a call's code is about its issue cycles, one VLIW bundle a
  cycle — each straight-line region's MXU passes at the peak rate or its vector work, whichever is more, plus
  one iteration of each looped inner loop. Past the chip's instruction memory (v5e: 65,536 bundles) every grid
  step pays to load its instructions again. On the v5e, libtpu compiled matmul 8192^3 in [1024, 512, 512]
  blocks to 58,557 bundles and it ran at 98 % of the peak; [1024, 1024, 512], twice the code, ran 11 % slower,
  ~10 µs a step; attention [1, 1024, 512] (63,482 bundles) ran at the model's time and [1, 1024, 256] (65,922)
  20 % slower.
- Prologue: the first step's input blocks with nothing to hide behind; epilogue: the last output blocks.
- A batch of copies of b bytes takes L + b / (HBM bandwidth · DMA efficiency), b counting a block's rows as
  they are and its lanes padded to 128. (A cost per contiguous run of a copy, tried on the v5e, fitted to zero
  once its sweep was measured: a [2048, 128] bf16 block, 128 runs a copy, streamed at ~96 % of the rate of
  full-width blocks.)
- Calls issued back to back (a loop of calls with one wait at the end): each takes the kernel's own time
  without the launch term, but no less than the interval at which the host issues calls (`issue_interval`:
  on the v5e ~0.11 ms; every kernel under it measured 0.11-0.13 ms a call whatever its bytes, FLOPs or grid
  steps): `Estimate.pipelined_seconds`. A single call waited for costs the launch term on top (`seconds`).
`Estimate.breakdown` splits the total exactly into its causes (the terms add up to `seconds`).
May import: compiler.ir.plan, compiler.ir.chips, compiler.codegen.work (padding rules), this package's constants.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..codegen.padding import lanes_padded, padded_count
from ..ir.chips import Chip
from ..ir.plan import CallPlan, InnerLoop, KernelPlan, Operand, Work
from .constants import ModelConstants, constants_for

# Element sizes that decide the sublane tiling of a named dtype (an unknown name is laid out as 32-bit).
_TILING_ITEMSIZE = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}
# vector work per 32-bit-lane element of a VMEM load or store, as codegen/work.py counts it
_LOAD_STORE_COST = 0.5

BREAKDOWN = (
    "compute",  # MXU and vector work after their overlap, every outer step and inner iteration
    "step_overhead",  # τ_step per grid step
    "inner_overhead",  # τ_inner per emit_pipeline / fori_loop iteration, and a fori_loop's carried values
    "code_reload",  # per grid step, when the call's code does not fit the instruction memory
    "exposed_dma",  # outer (BlockSpec) copies not hidden behind a step's compute
    "inner_exposed_dma",  # emit_pipeline copies not hidden behind an iteration's compute
    "pipeline_restarts",  # the cold first fetch and last write-back of every nested pipeline run
    "prologue",  # the first step's inputs
    "epilogue",  # the last step's outputs
    "launch",  # the per-call overhead
)


@dataclass(frozen=True)
class Estimate:
    """The model's estimate of one kernel run on one chip. Every figure is an estimate for `chip`.

    seconds:          estimated wall time of one call of the kernel (all pallas_calls).
    flops, hbm_bytes: algorithmic FLOPs and compulsory HBM traffic (from the plan).
    dma_bytes:        bytes the generated code actually moves (re-fetches included).
    roofline_seconds: max(flops / peak, hbm_bytes / bandwidth): no kernel can be faster.
    breakdown:        seconds by cause (keys: BREAKDOWN); the terms add up to `seconds`.
    work:             MXU and vector seconds before they overlap ("mxu", "vector").
    bound:            what limits the steady state: "mxu", "vector", "hbm" or "overhead".
    """

    chip: str
    seconds: float
    flops: float
    hbm_bytes: float
    dma_bytes: float
    roofline_seconds: float
    bound: str
    calibrated: bool
    breakdown: dict[str, float] = field(default_factory=dict)
    work: dict[str, float] = field(default_factory=dict)
    issue_interval: float = 0.0

    @property
    def pipelined_seconds(self) -> float:
        """Seconds a call takes in a loop of calls issued back to back with one wait at the end (how the tpu
        evaluator times): the kernel's own time without the launch term, but never less than the interval at which
        calls can be issued (ModelConstants.issue_interval), since a call cannot start before it is issued."""
        return max(self.seconds - self.breakdown.get("launch", 0.0), self.issue_interval)

    @property
    def tflops(self) -> float:
        return self.flops / self.seconds / 1e12 if self.seconds > 0 else 0.0

    @property
    def gbps(self) -> float:
        """Effective bandwidth: compulsory bytes over time (GB/s, 1e9 bytes)."""
        return self.hbm_bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def roofline_fraction(self) -> float:
        """Roofline bound over estimated time: 1.0 means the kernel runs at the chip's limit."""
        return self.roofline_seconds / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict:
        return {
            "estimate": True,
            "chip": self.chip,
            "calibrated": self.calibrated,
            "seconds": self.seconds,
            "tflops": self.tflops,
            "gbps": self.gbps,
            "roofline_fraction": self.roofline_fraction,
            "roofline_seconds": self.roofline_seconds,
            "bound": self.bound,
            "dma_bytes": self.dma_bytes,
            "breakdown": dict(self.breakdown),
            "work": dict(self.work),
        }


def roofline_seconds(flops: float, hbm_bytes: float, chip: Chip) -> float:
    return max(flops / chip.bf16_flops, hbm_bytes / chip.hbm_bandwidth)


def estimate(
    plan: KernelPlan,
    chip: Chip,
    constants: ModelConstants | None = None,
    compiled_vector: Mapping[str, float] | None = None,
) -> Estimate:
    """Estimated run time of the kernel `plan` describes, on `chip`.

    compiled_vector: per pallas_call name, vector seconds of one grid step measured from the compiled
    kernel's op counts; it replaces the plan's count for that call's straight-line code.
    """
    c = constants or constants_for(chip.name)
    totals = dict.fromkeys(BREAKDOWN, 0.0)
    work = {"mxu": 0.0, "vector": 0.0}
    dma_bytes = 0.0
    bounds: list[tuple[float, str]] = []
    for call in plan.calls:
        model = _CallModel(call, chip, c, (compiled_vector or {}).get(call.name))
        dma_bytes += model.dma_bytes
        bounds.append((model.seconds, model.bound))
        for k, v in model.breakdown.items():
            totals[k] += v
        for k, v in model.work.items():
            work[k] += v
    totals["launch"] = c.call_overhead
    bound = max(bounds)[1] if bounds else "overhead"
    return Estimate(
        chip.name,
        sum(totals.values()),
        plan.flops,
        plan.hbm_bytes,
        dma_bytes,
        roofline_seconds(plan.flops, plan.hbm_bytes, chip),
        bound,
        c.calibrated,
        totals,
        work,
        c.issue_interval,
    )


def _copies_of(ops: list[Operand]) -> float:
    """Bytes of one copy of each operand's block."""
    return float(sum(_block_bytes(op) for op in ops))


def copied_bytes(call: CallPlan) -> float:
    """Bytes the generated code's block copies move in one call (re-fetches included): a count read off the
    plan, no constant in it (the schedule evaluator floors the TPU compiler's simulated time with it)."""
    grid = call.grid or (1,)
    outer = _outer_operands(call)
    total = 0.0
    for axis in range(len(grid)):
        n = math.prod(grid[: axis + 1]) - math.prod(grid[:axis])
        changed = [op for op in outer if op.grid_axes and max(op.grid_axes) >= axis]
        total += max(0, n) * sum(_CallModel._copy_bytes(changed))
    total += _copies_of([op for op in outer if op.kind == "input" or op.reads_old])
    total += _copies_of([op for op in outer if op.kind in ("output", "inout")])
    for lp in call.inner_loops:
        copied = [op for op in call.operands if op.inner_loop == lp.index
                  and (op.memory == "dma" or (op.memory == "hbm" and lp.strategy == "emit_pipeline"))]
        total += math.prod(grid) * lp.trips * sum(_CallModel._copy_bytes(copied))
    return total


def _outer_operands(call: CallPlan) -> list[Operand]:
    """Operands whose blocks change with the grid steps (rows an inner loop copies by DMA count with that loop)."""
    return [op for op in call.operands if op.memory != "hbm" and not (op.memory == "dma" and op.inner_loop is not None)]


def _block_bytes(op: Operand) -> int:
    """Bytes one copy of the operand's block moves: its rows as they are, each padded to whole 128-lane tiles.
    A block of fewer rows than a sublane tile costs only its rows: on the v5e, batch_softmax bf16[64, 2048, 4096]
    in blocks of 8 rows (half a bf16 tile) ran at the bandwidth of 16-row blocks (3.16 against 3.21 ms)."""
    dims = op.block_dims
    if not dims:
        return op.itemsize
    return math.prod(dims[:-1]) * lanes_padded(dims[-1]) * op.itemsize


@dataclass
class _StepParts:
    """One outer grid step, by cause (seconds)."""

    compute: float = 0.0
    inner_overhead: float = 0.0
    inner_exposed: float = 0.0
    restarts: float = 0.0
    mxu: float = 0.0
    vector: float = 0.0
    inner_hbm: float = 0.0  # HBM time of every copy the step's inner loops make (hidden or not)
    code_bundles: float = 0.0  # the call's code: issue cycles of its straight-line code and of each looped body

    @property
    def total(self) -> float:
        return self.compute + self.inner_overhead + self.inner_exposed + self.restarts


class _CallModel:
    """The estimate of one pallas_call; attributes seconds, dma_bytes, bound, breakdown and work."""

    def __init__(self, call: CallPlan, chip: Chip, c: ModelConstants, vector_override: float | None):
        self.call, self.chip, self.c = call, chip, c
        self.vector_override = vector_override
        grid = call.grid or (1,)
        steps = math.prod(grid)

        parts = self._step()
        reload = c.code_reload if c.imem_bundles and round(parts.code_bundles) > c.imem_bundles else 0.0
        step = parts.total + c.step_overhead + reload

        # Transitions between consecutive steps, grouped by the outermost grid axis that moves.
        outer = _outer_operands(call)
        exposed = 0.0
        for axis in range(len(grid)):
            n = math.prod(grid[: axis + 1]) - math.prod(grid[:axis])
            if n <= 0:
                continue
            changed = [op for op in outer if op.grid_axes and max(op.grid_axes) >= axis]
            double, single = self._copy_bytes(changed)
            # The next step's blocks stream while this step runs, but on the same HBM as the step's own inner
            # copies: they hide behind the step only for what the inner copies leave of it.
            hidden = max(0.0, step - parts.inner_hbm)
            exposed += n * (max(0.0, self._dma_seconds(double) - hidden) + self._dma_seconds(single))

        prologue = _copies_of([op for op in outer if op.kind == "input" or op.reads_old])
        epilogue = _copies_of([op for op in outer if op.kind in ("output", "inout")])
        self.dma_bytes = copied_bytes(call)
        self.breakdown = {
            "compute": steps * parts.compute,
            "step_overhead": steps * c.step_overhead,
            "inner_overhead": steps * parts.inner_overhead,
            "code_reload": steps * reload,
            "exposed_dma": exposed,
            "inner_exposed_dma": steps * parts.inner_exposed,
            "pipeline_restarts": steps * parts.restarts,
            "prologue": self._dma_seconds(prologue),
            "epilogue": self._dma_seconds(epilogue),
        }
        self.seconds = sum(self.breakdown.values())
        self.work = {"mxu": steps * parts.mxu, "vector": steps * parts.vector}
        steady = {
            "mxu": self.work["mxu"],
            "vector": self.work["vector"],
            "hbm": exposed + steps * (parts.inner_exposed + parts.restarts),
            "overhead": steps * (c.step_overhead + parts.inner_overhead + reload),
        }
        if steady["hbm"] > 0.25 * self.seconds:
            self.bound = "hbm"
        else:
            self.bound = max(steady, key=steady.get)

    # -- compute of one outer step ------------------------------------------------------------------------

    def _mxu_seconds(self, w: Work) -> float:
        """MXU time of the work: each operand class at its own rate (constants.ModelConstants.mxu_rate)."""
        c, chip = self.c, self.chip
        bf16 = w.mxu_padded - w.mxu_int8 - w.mxu_fp8
        seconds = bf16 / c.mxu_rate("bf16", chip)
        for kind, flops in (("int8", w.mxu_int8), ("fp8", w.mxu_fp8)):
            if flops:
                seconds += flops / c.mxu_rate(kind, chip)
        # a dot with fewer LHS rows than the MXU needs per weight load costs those rows (at the bf16 rate)
        short = max(0.0, c.mxu_min_rows * w.mxu_short_weights - w.mxu_short)
        return seconds + short / c.mxu_rate("bf16", chip)

    def _overlap(self, w: Work, omega: float, vector: float | None = None) -> tuple[float, float, float]:
        """(time, mxu seconds, vector seconds) of straight-line work with overlap ω."""
        mxu = self._mxu_seconds(w)
        if vector is None:
            vector = self._vector_seconds(w)
        t = max(mxu, vector) + (1.0 - omega) * min(mxu, vector)
        return max(t, w.lane_reductions * self.c.reduction_latency), mxu, vector

    def _vector_seconds(self, w: Work) -> float:
        return w.vpu_elems / self.c.vpu_rate + w.eup_elems / self.c.eup_rate

    def _issue_cycles(self, w: Work) -> float:
        """Bundles a region's code takes: its MXU passes at the peak rate or its vector work, whichever is more."""
        mxu = self._mxu_seconds(w) * self.c.mxu_efficiency
        return max(mxu, self._vector_seconds(w)) * self.chip.clock_hz

    def _step(self) -> _StepParts:
        """One grid step: its straight-line compute, then each looped inner loop; the call's code size on the way."""
        c = self.c
        parts = _StepParts()
        straight = self.call.outer_work
        for lp in self.call.inner_loops:
            if lp.strategy == "unroll":
                straight = straight + lp.work.scaled(lp.trips)
                self._copies(lp, 0.0, parts)
                continue
            parts.code_bundles += self._issue_cycles(lp.work)
            t, mxu, vector = self._overlap(lp.work + self._carried_traffic(lp), c.overlap_loop)
            self._copies(lp, t, parts)
            parts.compute += lp.trips * t
            parts.mxu += lp.trips * mxu
            parts.vector += lp.trips * vector
            if lp.strategy == "fori_loop":
                # the loop control co-issues with the body: only what the body does not cover is added
                exposed_control = max(0.0, c.fori_iteration_overhead - t)
                parts.inner_overhead += lp.trips * (exposed_control + lp.carried_elems * c.fori_carried_element)
            else:
                self._pipeline(lp, t, parts)
        parts.code_bundles += self._issue_cycles(straight)
        t, mxu, vector = self._overlap(straight, c.overlap_straight, self.vector_override)
        parts.compute += t
        parts.mxu += mxu
        parts.vector += vector
        return parts

    def _carried_traffic(self, lp: InnerLoop) -> Work:
        """A looped body reloads and restores its loop-carried values (VMEM scratch) every iteration."""
        if lp.strategy != "emit_pipeline":
            return Work()
        elems = sum(
            padded_count(s.shape, _TILING_ITEMSIZE.get(s.dtype, 4)) * min(1.0, s.itemsize / 4)
            for s in self.call.scratch
            if s.role == "carried"
        )
        return Work(0.0, 0.0, 2 * _LOAD_STORE_COST * elems, 0.0)

    def _copies(self, lp: InnerLoop, iteration: float, parts: _StepParts) -> None:
        """Rows or windows a loop copies by DMA each iteration; double-buffered ones wait only for what the
        iteration's compute does not hide."""
        ops = [op for op in self.call.operands if op.memory == "dma" and op.inner_loop == lp.index]
        if not ops:
            return
        double, single = self._copy_bytes(ops)
        parts.inner_exposed += lp.trips * (max(0.0, self._dma_seconds(double) - iteration) + self._dma_seconds(single))
        parts.inner_hbm += self._dma_seconds((double + single) * lp.trips)

    def _pipeline(self, lp: InnerLoop, iteration: float, parts: _StepParts) -> None:
        """A nested emit_pipeline run (one per outer step): cold first fetch, iterations that prefetch the
        next blocks behind their compute (the last has nothing left to fetch), last write-back."""
        c = self.c
        streamed = [op for op in self.call.operands if op.memory == "hbm" and op.inner_loop == lp.index]
        double, single = self._copy_bytes(streamed)
        t_double, t_single = self._dma_seconds(double), self._dma_seconds(single)
        busy = iteration + c.pipeline_iteration_overhead
        first = self._dma_seconds(_copies_of([op for op in streamed if op.kind == "input" or op.reads_old]))
        last = self._dma_seconds(_copies_of([op for op in streamed if op.kind in ("output", "inout")]))
        parts.inner_overhead += lp.trips * c.pipeline_iteration_overhead
        # the cold first fetch and the last write-back are the restart; each iteration between them waits for
        # what its compute does not hide of the double-buffered copies and for every single-buffered one (the
        # first iteration's fetch is the cold one: on the v5e, matmul 8192^3 in [512, 128, 8192] blocks, one
        # single-buffered trip per step, took 20.9 ms, and counting that fetch twice made it 39 ms)
        parts.inner_exposed += (lp.trips - 1) * (max(0.0, t_double - busy) + t_single)
        parts.restarts += first + last
        parts.inner_hbm += self._dma_seconds((double + single) * lp.trips)

    # -- DMA ----------------------------------------------------------------------------------------------

    @staticmethod
    def _copy_bytes(ops: list[Operand]) -> tuple[float, float]:
        """Bytes copied when these operands' blocks change: (double-buffered, single-buffered).

        An input is fetched, an output written back, an in/out block both."""
        double = single = 0.0
        for op in ops:
            copy = _block_bytes(op) * (2 if op.kind == "inout" and op.reads_old else 1)
            if op.buffer_count >= 2:
                double += copy
            else:
                single += copy
        return double, single

    def _dma_seconds(self, nbytes: float) -> float:
        """One batch of copies issued together: one latency, then the bytes at the sustained bandwidth."""
        if nbytes <= 0:
            return 0.0
        return self.c.dma_latency + nbytes / (self.chip.hbm_bandwidth * self.c.dma_efficiency)
