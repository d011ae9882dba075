"""An analytic per-grid-step TPU performance model of a compiled kernel, read off its Pallas plan.

Why a model: there is no TPU here, and a search needs thousands of evaluations per second; the model costs
a fraction of a millisecond once the plan exists. It is an estimate for a named chip, calibrated on v7x
against the seed's measurements (see constants.py), and is reported as such everywhere.

Per `pallas_call` (calls run one after another):
- Grid steps run in lexicographic order. Between consecutive steps the outermost grid axis that moved
  decides which blocks change: an operand whose block index depends on that axis or an inner one is
  copied (inputs fetched for the next step, outputs written back), the others are not. Steps are grouped
  by that axis, so the cost is a sum over grid axes, not over steps.
- A step costs max(compute + τ_step, DMA of the double-buffered copies it hides) plus the copies of
  single-buffered operands, which cannot overlap the compute that still reads the old block.
- Compute: MXU time (padded FLOPs / (η·peak)) and VPU+EUP time overlap: max + (1−ω)·min, with ω for
  straight-line code (outer step body, unrolled inner loops) or for one iteration of a looped inner loop.
- emit_pipeline inner loops stream their HBM operands: each iteration is max(compute + τ_inner, its DMA)
  and every outer step pays the first fetch (the nested pipeline starts cold) and the last write-back.
  Loop-carried values live in VMEM scratch, loaded and stored once per iteration.
- fori_loop iterations pay τ_fori and the loop-boundary overlap; unrolled iterations pay neither.
- Prologue: the first step's input blocks with nothing to hide behind; epilogue: the last output blocks.
May import: compiler.plan, compiler.chips, compiler.codegen.work (padding rules), this package's constants.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from ..chips import Chip
from ..codegen.work import padded_elems
from ..plan import CallPlan, InnerLoop, KernelPlan, Operand, Work
from .constants import ModelConstants, constants_for

_TORCH_DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
}
# vector work per 32-bit-lane element of a VMEM load or store, as codegen/work.py counts it
_LOAD_STORE_COST = 0.5


@dataclass(frozen=True)
class Estimate:
    """The model's estimate of one kernel run on one chip. Every figure is an estimate for `chip`.

    seconds:          estimated wall time of the whole kernel (all pallas_calls).
    flops, hbm_bytes: algorithmic FLOPs and compulsory HBM traffic (from the plan).
    dma_bytes:        bytes the generated code actually moves (re-fetches included).
    roofline_seconds: max(flops / peak, hbm_bytes / bandwidth): no kernel can be faster.
    breakdown:        seconds by cause (mxu, vector, exposed_dma, step_overhead, inner_overhead,
                      pipeline_bubbles, prologue, epilogue); compute terms are before overlap.
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
    c = constants or constants_for(chip.name, chip.bf16_flops)
    totals: dict[str, float] = {}
    seconds = dma_bytes = 0.0
    bounds: list[tuple[float, str]] = []
    for call in plan.calls:
        model = _CallModel(call, chip, c, (compiled_vector or {}).get(call.name))
        seconds += model.seconds
        dma_bytes += model.dma_bytes
        bounds.append((model.seconds, model.bound))
        for k, v in model.breakdown.items():
            totals[k] = totals.get(k, 0.0) + v
    bound = max(bounds)[1] if bounds else "overhead"
    return Estimate(
        chip.name,
        seconds,
        plan.flops,
        plan.hbm_bytes,
        dma_bytes,
        roofline_seconds(plan.flops, plan.hbm_bytes, chip),
        bound,
        c.calibrated,
        totals,
    )


def _block_bytes(op: Operand) -> int:
    """Bytes one copy of the operand's block moves (as laid out: padded to (sublane, 128) tiles)."""
    dims = op.block_dims
    return (
        padded_elems(dims, _TORCH_DTYPES.get(op.dtype, torch.float32)) * op.itemsize if dims else op.itemsize
    )


class _CallModel:
    """The estimate of one pallas_call; attributes seconds, dma_bytes, bound and breakdown."""

    def __init__(self, call: CallPlan, chip: Chip, c: ModelConstants, vector_override: float | None):
        self.call, self.chip, self.c = call, chip, c
        self.vector_override = vector_override
        self.breakdown: dict[str, float] = {}
        grid = call.grid or (1,)
        steps = math.prod(grid)
        self.dma_bytes = 0.0

        compute, mxu, vector = self._step_compute()
        step = compute + c.step_overhead

        # Transitions between consecutive steps, grouped by the outermost grid axis that moves.
        outer = [op for op in call.operands if op.memory != "hbm"]
        run = prologue_bytes = epilogue_bytes = 0.0
        exposed = 0.0
        for axis in range(len(grid)):
            n = math.prod(grid[: axis + 1]) - math.prod(grid[:axis])
            if n <= 0:
                continue
            changed = [op for op in outer if op.grid_axes and max(op.grid_axes) >= axis]
            double, single = self._copy_bytes(changed)
            t_double = self._dma_seconds(double)
            t_single = self._dma_seconds(single)
            run += n * (max(step, t_double) + t_single)
            exposed += n * (max(0.0, t_double - step) + t_single)
            self.dma_bytes += n * (double + single)
        run += step  # the last step prefetches nothing

        for op in outer:
            b = _block_bytes(op)
            if op.kind in ("input", "inout"):
                prologue_bytes += b
            if op.kind in ("output", "inout"):
                epilogue_bytes += b
        prologue = self._dma_seconds(prologue_bytes)
        epilogue = self._dma_seconds(epilogue_bytes)
        self.dma_bytes += prologue_bytes + epilogue_bytes + steps * self.inner_dma_bytes
        self.seconds = prologue + run + epilogue

        self.breakdown = {
            "mxu": steps * mxu,
            "vector": steps * vector,
            "exposed_dma": exposed,
            "step_overhead": steps * c.step_overhead,
            "inner_overhead": steps * self.inner_overhead,
            "pipeline_bubbles": steps * self.bubbles,
            "prologue": prologue,
            "epilogue": epilogue,
        }
        steady = {
            "mxu": steps * mxu,
            "vector": steps * vector,
            "hbm": exposed + steps * self.inner_exposed,
            "overhead": steps * (c.step_overhead + self.inner_overhead + self.bubbles),
        }
        if steady["hbm"] > 0.25 * self.seconds:
            self.bound = "hbm"
        else:
            self.bound = max(steady, key=steady.get)

    # -- compute of one outer step ------------------------------------------------------------------------

    def _overlap(self, w: Work, omega: float, vector: float | None = None) -> tuple[float, float, float]:
        """(time, mxu seconds, vector seconds) of straight-line work with overlap ω."""
        mxu = w.mxu_padded / (self.c.mxu_efficiency * self.chip.bf16_flops)
        if vector is None:
            vector = w.vpu_elems / self.c.vpu_rate + w.eup_elems / self.c.eup_rate
        return max(mxu, vector) + (1.0 - omega) * min(mxu, vector), mxu, vector

    def _step_compute(self) -> tuple[float, float, float]:
        """Compute seconds of one grid step, and its MXU and vector parts before overlap."""
        c = self.c
        straight = self.call.outer_work
        looped = 0.0
        mxu_total = vector_total = 0.0
        self.inner_overhead = self.bubbles = self.inner_dma_bytes = self.inner_exposed = 0.0
        for lp in self.call.inner_loops:
            if lp.strategy == "unroll":
                straight = straight + lp.work.scaled(lp.trips)
                continue
            work = lp.work + self._carried_traffic(lp)
            t, mxu, vector = self._overlap(work, c.overlap_loop)
            mxu_total += lp.trips * mxu
            vector_total += lp.trips * vector
            if lp.strategy == "fori_loop":
                looped += lp.trips * (t + c.fori_iteration_overhead)
                self.inner_overhead += lp.trips * c.fori_iteration_overhead
            else:
                looped += self._pipeline_time(lp, t)
        t, mxu, vector = self._overlap(straight, c.overlap_straight, self.vector_override)
        return t + looped, mxu + mxu_total, vector + vector_total

    def _carried_traffic(self, lp: InnerLoop) -> Work:
        """A looped body reloads and restores its loop-carried values (VMEM scratch) every iteration."""
        if lp.strategy != "emit_pipeline":
            return Work()
        elems = sum(
            padded_elems(s.shape, _TORCH_DTYPES.get(s.dtype, torch.float32)) * min(1.0, s.itemsize / 4)
            for s in self.call.scratch
            if s.role == "carried"
        )
        return Work(0.0, 0.0, 2 * _LOAD_STORE_COST * elems, 0.0)

    def _pipeline_time(self, lp: InnerLoop, iteration: float) -> float:
        """Seconds per outer step of a nested emit_pipeline: cold start, trips iterations, drain."""
        c = self.c
        streamed = [op for op in self.call.operands if op.memory == "hbm" and op.inner_loop == lp.index]
        double, single = self._copy_bytes(streamed)
        t_double, t_single = self._dma_seconds(double), self._dma_seconds(single)
        per_iteration = max(iteration + c.pipeline_iteration_overhead, t_double) + t_single
        first = self._dma_seconds(sum(_block_bytes(op) for op in streamed if op.kind in ("input", "inout")))
        last = self._dma_seconds(sum(_block_bytes(op) for op in streamed if op.kind in ("output", "inout")))
        self.inner_overhead += lp.trips * c.pipeline_iteration_overhead
        self.bubbles += first + last
        self.inner_exposed += lp.trips * (
            max(0.0, t_double - iteration - c.pipeline_iteration_overhead) + t_single
        )
        self.inner_dma_bytes += lp.trips * (double + single)
        return first + lp.trips * per_iteration + last

    # -- DMA ----------------------------------------------------------------------------------------------

    @staticmethod
    def _copy_bytes(ops: list[Operand]) -> tuple[float, float]:
        """Bytes copied when these operands' blocks change: (double-buffered, single-buffered).

        An input is fetched, an output written back, an in/out block both."""
        double = single = 0.0
        for op in ops:
            b = _block_bytes(op) * (2 if op.kind == "inout" else 1)
            if op.buffer_count >= 2:
                double += b
            else:
                single += b
        return double, single

    def _dma_seconds(self, nbytes: float) -> float:
        """One batch of copies issued together: one latency, then the bytes at HBM bandwidth."""
        if nbytes <= 0:
            return 0.0
        return self.c.dma_latency + nbytes / self.chip.hbm_bandwidth
