"""Every constant of the analytic TPU performance model (compiler/tune/model.py), per chip, with its source.

Chip facts (HBM bandwidth, bf16 / int8 / fp8 peaks, VMEM) are not here: they come from `compiler.ir.chips`
(jax's tpu_info, i.e. the Cloud TPU data sheets). What is here is how fast a TensorCore gets through the
work the plan counts, and what each pipeline step, copy and call costs beyond it. Each chip's constants
carry a `sources` entry per constant; `describe()` prints them.

Sources named below:
  [guide]   the JAX Pallas TPU matmul guide's measured table (jax-ml/jax docs/pallas/tpu/matmul.ipynb, TPU
            v5e, bf16 matmuls 1024-8192, blocks 128^3 and (512, 1024, 1024)); bench/published.py copies it
            with its source, bench/model_vs_published.py checks the model against it and two more public
            v5e tables (bench/calibrate.py --chip v5e re-derives the [guide] fits).
  [chip]    this project's own kernels measured on one TPU v5e chip (2026-12-05: softmax and add across their
            block sizes, the model-only tuner's picks of bmm, matmul, batch_softmax, rms_norm_bwd and
            attention); bench/published.py keeps every point with its config, and bench/calibrate.py --chip v5e
            fits the [guide] and [chip] points together.
  [seed]    the seed's measurements on TPU v7x (shared/notes/tpu-chips-and-performance.md): flash attention
            [8, 32, S, 256] bf16, non-causal: `unroll` 892 TF/s at S=8k, `emit_pipeline` 653 TF/s at 8k and
            695 TF/s at 32k. `SEED_POINTS` names the configs the seed ran. bench/seed_table.py --fit
            re-derives the [seed] fits.
  [libtpu]  the libtpu 0.0.42.1 deviceless compile of the same 256x512x256 dot with bf16, f32 and int8
            operands (bench/calibrate.py --mxu-dtypes): f32 issues twice the MXU pushes (vmatmul) of bf16 on
            every chip from v4 to v7x; int8 half of them on v5e/v5p/v6e, the same number on v7x (no int8
            MXU mode: matches tpu_info's zero int8 rate), and v4 rejects int8 matmuls.
  [pallas]  how Pallas TPU pipelining works (jax 0.10.2 `pallas_call` / `pltpu.emit_pipeline` source).
  [schedule] libtpu 0.0.42.1's own schedules (compiler/tune/schedule.py): the per-bundle utilisation dumps
            list the same vector unit on v5e, v5p, v6e and v7x (4 VALU slots and 1 EUP slot per bundle, one
            bundle per cycle), so vector rates scale with the clock, not the MXU peak; bench/model_vs_schedule.py
            compares the model with the compiler's simulated cycles on v5e and v6e.
  [assumed] a round engineering figure that no measurement here pins down; stated so it can be replaced.
  [from X]  no measurement on this chip pins it: chip X's value, carried over as stated.
A JSON written by bench/tpu_measure.py on a real TPU feeds bench/calibrate.py, which refits the fitted
constants of that chip from it (docs/tpu-vm.md: "Calibrating on a TPU").

Model figures are estimates for a named chip; `calibrated` says whether any constant of that chip was fitted
to measurements on it (v5e: [guide] and [chip], v7x: [seed]; v4, v5p and v6e carry other chips' values).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..ir.chips import Chip


@dataclass(frozen=True)
class ModelConstants:
    """Rates and overheads of one TensorCore of `chip`.

    mxu_efficiency:  η_mxu, the fraction of a dtype's MXU peak a large padded matmul sustains.
    mxu_min_rows:    LHS rows a dot costs at least per weight tile: the MXU loads each tile of the RHS however
                     few rows pass through it (at most compiler.ir.plan.SHORT_LHS_ROWS).
    vpu_rate:        elementwise vector work per second, in 32-bit-lane elements (Work.vpu_elems units).
    eup_rate:        transcendental elements per second (Work.eup_elems units).
    overlap_straight: ω for straight-line code (one grid step, an unrolled inner loop): the share of the
                     smaller of MXU and VPU+EUP time hidden under the larger.
    overlap_loop:    ω inside one iteration of an emit_pipeline / fori_loop body: the scheduler cannot move
                     work across the iteration boundary, so the head and tail of each iteration are exposed.
    step_overhead:   τ_step, seconds per grid step of a pallas_call (pipeline bookkeeping, DMA issue/wait).
    pipeline_iteration_overhead: τ_inner for an emit_pipeline iteration (it is a grid step of its own).
    fori_iteration_overhead:     τ_inner for a fori_loop iteration (scalar loop control, dynamic slicing).
    fori_carried_element: seconds a fori_loop iteration takes per 32-bit element of the values it hands the next
                     (InnerLoop.carried_elems): read and written back around the loop's boundary, not overlapped.
    reduction_latency: seconds from a reduction across a vreg's lanes to the op that waits for its result: a region
                     whose work is shorter takes its chain of them (Work.lane_reductions) instead.
    imem_bundles:    VLIW bundles of code the instruction memory holds (0: not known, no code term).
    code_reload:     seconds a grid step takes to load its instructions again when a call's code is longer.
    resolution:      the least relative gap between two estimates that the chip orders as the model does much
                     better than chance (tuning's objective.py acts on no smaller gain; 0: not measured).
    dma_latency:     L, seconds from issuing a batch of DMAs to its completion, beyond the bytes' own time.
    dma_efficiency:  the fraction of the HBM bandwidth a stream of block copies sustains.
    call_overhead:   seconds one call of a kernel costs beyond its grid steps, as a wall-clock benchmark of
                     the jitted function sees it (dispatch, launch, the round trip of block_until_ready).
    issue_interval:  the least seconds between the starts of two calls issued back to back without waiting
                     (the host dispatches each jitted call; the chip cannot start a call before it is issued):
                     a loop of pipelined calls takes max(the kernel's own time, this) a call, not their sum.
    llo_vector_op_seconds: seconds per vector instruction (one vreg) of libtpu's compiled kernel, used to
                     refine the estimate from a compiled kernel's op counts (a transcendental counts as
                     vpu_rate / eup_rate of them).
    calibrated:      whether any constant was fitted to measurements on this chip.
    sources:         constant name -> where its value comes from.
    """

    chip: str
    mxu_efficiency: float
    mxu_min_rows: float
    vpu_rate: float
    eup_rate: float
    overlap_straight: float
    overlap_loop: float
    step_overhead: float
    pipeline_iteration_overhead: float
    fori_iteration_overhead: float
    fori_carried_element: float
    reduction_latency: float
    imem_bundles: float
    code_reload: float
    resolution: float
    dma_latency: float
    dma_efficiency: float
    call_overhead: float
    issue_interval: float
    llo_vector_op_seconds: float
    calibrated: bool
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    def mxu_rate(self, kind: str, chip: Chip) -> float:
        """Sustained MXU FLOP/s for operands of class `kind` ("bf16", "int8", "fp8") on `chip` (an f32 dot is
        bf16 passes: frontend/dot_precision.py).

        int8 / fp8 run at the chip's own peak for them; where tpu_info lists none, Mosaic computes them
        at the bf16 rate ([libtpu]: same MXU pushes as bf16 on v7x)."""
        if kind == "int8":
            peak = chip.int8_flops or chip.bf16_flops
        elif kind == "fp8":
            peak = chip.fp8_flops or chip.bf16_flops
        else:
            peak = chip.bf16_flops
        return self.mxu_efficiency * peak

    def describe(self) -> str:
        """Every constant with its value and source, one per line."""
        lines = [f"model constants for {self.chip} ({'calibrated' if self.calibrated else 'uncalibrated'}):"]
        for name in CONSTANT_NAMES:
            lines.append(f"  {name:<28} {getattr(self, name):<12.4g} {self.sources.get(name, '(no source)')}")
        return "\n".join(lines)


CONSTANT_NAMES = tuple(f.name for f in fields(ModelConstants) if f.name not in ("chip", "calibrated", "sources"))


def _constants(chip: str, calibrated: bool, **figures: tuple[float, str]) -> ModelConstants:
    """ModelConstants from name=(value, source) pairs: a constant cannot be given without its source."""
    missing = set(CONSTANT_NAMES) - set(figures)
    if missing:
        raise TypeError(f"{chip}: no value for {sorted(missing)}")
    values = {name: value for name, (value, _) in figures.items()}
    sources = {name: source for name, (_, source) in figures.items()}
    return ModelConstants(chip=chip, calibrated=calibrated, sources=sources, **values)


def _carried(base: ModelConstants, chip: str, calibrated: bool = False,
             **own: tuple[float, str]) -> ModelConstants:
    """`base`'s constants on another chip: vector rates scaled by the clock ratio, the rest as they are,
    each source saying so; `own` replaces any of them."""
    scale = _CLOCKS[chip] / _CLOCKS[base.chip]
    figures: dict[str, tuple[float, str]] = {}
    for name in CONSTANT_NAMES:
        value, source = getattr(base, name), base.sources[name]
        if name in ("vpu_rate", "eup_rate"):
            figures[name] = (value * scale, f"[from {base.chip}, scaled by the clock ratio {scale:.3f}: "
                                            f"schedule] {source}")
        elif name == "llo_vector_op_seconds":
            figures[name] = (value / scale, f"[from {base.chip}, scaled like vpu_rate] {source}")
        else:
            figures[name] = (value, f"[from {base.chip}] {source}")
    figures.update(own)
    return _constants(chip, calibrated, **figures)


# Clocks per TensorCore, as compiler.ir.chips has them (a test checks they match): vector rates carried from one
# chip to another scale with the clock ([schedule]: the same vector unit on every chip).
_CLOCKS = {"v4": 1.049e9, "v5e": 1.503e9, "v5p": 1.751e9, "v6e": 1.755e9, "v7x": 2.47e9}

# [seed] fits of v7x's vector rate and loop overlap (bench/seed_table.py --fit); v5e's are derived from them.
_SEED_VPU_RATE = 9.824e12
_SEED_OVERLAP_LOOP = 0.6726
_V5E_SCALE = _CLOCKS["v5e"] / _CLOCKS["v7x"]
_BY_CLOCK = (
    f"[from v7x, scaled by the clock ratio {_V5E_SCALE:.3f}: schedule; it was the bf16 peak ratio 0.171 until "
    "the TPU compiler's simulated vector-bound kernels on v5e came out ~1.4x faster than the model] [seed] fit"
)

# [schedule] libtpu schedules one step of examples/bmm.py (bf16, blocks [4, m, 2048, 1024], unroll) in about the
# same bundles whatever the LHS rows m below a chip's threshold: the MXU loads each weight tile however few rows
# pass through it.
_MIN_ROWS_V6E = ("[schedule] v6e: 8,369 / 8,439 / 9,228 bundles per step for m = 32 / 64 / 128 (the MXU peak "
                 "needs 2,048 / 4,097 / 8,193): 32- and 64-row blocks cost what 128 rows do")
_MIN_ROWS_V5E = ("[schedule] v5e: 13,710 / 13,928 / 16,506 bundles per step for m = 16 / 32 / 64 (the MXU peak "
                 "needs 4,096 / 8,192 / 16,384): 16- and 32-row blocks cost what 54 rows do")

# v5e's fits to the [guide]'s plain table alone, before our own v5e measurements ([chip]) moved them; v7x keeps
# them (no v7x measurement separates these constants).
_GUIDE_STEP = (0.3164e-6, "[guide] fit on v5e, one value for grid steps and emit_pipeline iterations (the guide's K "
                          "steps are grid steps, ours emit_pipeline iterations; [assumed] they cost the same)")
_GUIDE_LATENCY = (0.0, "[guide] fit on v5e (to 0): its 128^3 steps cost the same whatever their DMA")
_GUIDE_CALL = (102.9e-6, "[guide] fit on v5e: mostly its 1024 points (the guide's timeit includes Python dispatch)")
_GUIDE_MXU = (1.0, "[guide] fit on v5e, at its bound: once the restarts of our nested K pipeline are charged no "
                   "MXU inefficiency is left to fit")

# [chip] fit: `python bench/calibrate.py --chip v5e` (its default parameters) to the [guide]'s
# plain table and our own v5e tables together (282 points, 8.0 % geometric-mean error since 2026-12-07 ~17:10 UTC, when a
# step was made to take at least its chain of lane reductions; 8.2 % since 14:45 UTC, when a fori_loop's control was
# made to issue beside its body (docs/model-accuracy.md); 8.7 % before; 245 points and 8.9 % before the
# 37 at new shapes and the issue interval; 9.3 % without the code term; the grid step keeps the fit to the first 169:
# freed it went to zero). The tables: 14 points measured
# 2026-12-05 and issue 29's sweep of 2026-12-06 (174 configs of seven kernels, then 24 more at 23:10: the model's
# picks, matmul in fori_loops over K blocks of 128-2048, attention's unrolled q x kv blocks) and of 2026-12-07
# (27 more at 02:00-02:30: attention's blocks of 64-4096 queries, add around its pick, matmul and bmm with twice
# the code of their best) and the 37 of 2026-12-07 08:38-08:40 at shapes no sweep has (0.11-48 ms a call,
# bench/chip/v5e_new_shapes.json). The MXU efficiency is the earlier fit to the first 20.
_CHIP_FIT = "[guide+chip] fit (bench/calibrate.py --chip v5e)"
# The host of the lent v5e issued a jitted call every ~0.11 ms at best: on 2026-12-07 (bench/chip/v5e_new_shapes.json)
# every example whose kernel the model puts under ~0.1 ms ran at 0.110-0.133 ms a pipelined call whatever its bytes
# (add 25 MB, softmax 42 and 64 MB, batch_softmax 67 MB), its grid steps (4 to 64) or its FLOPs.
_V5E_ISSUE = (0.1230e-3, "[chip] fit (bench/calibrate.py --chip v5e): the 2026-12-07 points at new shapes under "
                          "~0.13 ms a call (softmax, add, batch_softmax, bmm, matmul and attention: 0.110-0.133 ms)")
_V5E_RELOAD = 9.836e-6
# A reduction across a vreg's 128 lanes returns its result a fixed time later, and what uses it (a softmax's
# exponentials, then its division) waits: a step whose vector work is shorter than its chain of such reductions takes
# the chain. On the v5e, softmax bf16[65536, 2560] in blocks of 8 rows took 0.39 µs a step where its copies (and add's
# steps of the same few bytes, ~0.2 µs) take 0.32; with the chain modelled, the fit's DMA latency is no longer set by
# softmax against add (docs/model-accuracy.md, 2026-12-07 ~17:10 UTC).
_V5E_REDUCTION = (0.1186e-6, f"{_CHIP_FIT}: softmax and batch_softmax in blocks of 8 rows (a softmax is a max, then "
                             "a sum, across the lanes: ~180 cycles each)")
# The instruction memory of chips none of whose kernels past it was measured: unknown, so no code term.
_NO_IMEM = (0.0, "[assumed] not known: no kernel with more code than v5e's instruction memory was measured here")
_NO_RELOAD = (0.0, "[assumed] none (see imem_bundles)")
_NO_RESOLUTION = (0.0, "[assumed] not measured on this chip: tuning picks the model's best however close")

# TPU v5e, one TensorCore. The per-step, latency, DMA, call and MXU constants are fitted to the [guide]'s plain
# table and to [chip], our kernels measured on a TPU v5e (bench/published.py: chip-v5e, chip-v5e-picks,
# chip-v5e-sweep); the guide's transposed-RHS and fused-ReLU tables and a second public v5e table are predictions.
V5E = _constants(
    "v5e",
    calibrated=True,
    mxu_efficiency=(0.9606, f"{_CHIP_FIT}: bmm, matmul and attention on the chip run at 89-94 % of the peak"),
    mxu_min_rows=(41.56, f"{_CHIP_FIT}: bmm and matmul in blocks of 8-64 rows on the chip; " + _MIN_ROWS_V5E),
    vpu_rate=(_SEED_VPU_RATE * _V5E_SCALE, _BY_CLOCK + "; [chip] does not pin it (the fit runs to its bound)"),
    eup_rate=(_SEED_VPU_RATE * _V5E_SCALE / 4, "[assumed] a quarter of vpu_rate (one EUP slot against four "
                                               "VALU slots)"),
    overlap_straight=(1.0, "[pallas] straight-line code is one basic block the LLO scheduler interleaves"),
    overlap_loop=(_SEED_OVERLAP_LOOP, "[from v7x] [seed] fit; [chip] does not pin it"),
    step_overhead=(0.1676e-6, f"{_CHIP_FIT}: add 16384^2 in [8, 128] blocks, 262,144 grid steps of next to no "
                              "work, and softmax in blocks of 8-32 rows"),
    pipeline_iteration_overhead=(0.3259e-6, f"{_CHIP_FIT}: the guide's 128^3 points at 4096 and 8192, where each "
                                            "K step's ~0.35 µs is all overhead (compute ~40 ns, DMA ~80 ns)"),
    fori_iteration_overhead=(0.2760e-6, f"{_CHIP_FIT}: attention in fori_loops of 16-64 kv rows, ~0.3 µs an iteration "
                                         "whatever its ~0.1 µs of compute (the loop's control issues beside the body: "
                                         "an iteration takes max(body, this))"),
    fori_carried_element=(1.348e-12, f"{_CHIP_FIT}: matmul 8192^3 in fori_loops over K blocks of 128-2048 with "
                               "[512, 512] and [1024, 1024] accumulators"),
    reduction_latency=_V5E_REDUCTION,
    imem_bundles=(65536.0, "[chip] threshold: libtpu's code for attention [1, 1024, 512] (63,482 bundles) and "
                           "[1, 1024, 1024] (62,935) ran at the model's time, [1, 1024, 256] (65,922) 20 % slower; "
                           "matmul [1024, 512, 512] (58,557) at 98 % of the peak, bmm [4, 1024, 1024, 2048] "
                           "(121,588) 13 % slower; 2^16"),
    code_reload=(_V5E_RELOAD, f"{_CHIP_FIT}: matmul, bmm and attention whose code is past the instruction memory, "
                              "~10 µs a grid step"),
    resolution=(0.03, "[chip] bench/tune_vs_chip.py over the v5e sweeps: configs the model puts under 3 % apart the "
                      "chip ordered its way in 403 of 674 pairs (60 %), 3-5 % apart in 162 of 198 (82 %)"),
    dma_latency=(0.1984e-6, f"{_CHIP_FIT}: add in blocks of 8-64 rows, ~0.2 µs a step beyond their bytes, and "
                            "softmax's 32- and 64-row blocks"),
    dma_efficiency=(0.8593, f"{_CHIP_FIT}: add and softmax in large blocks stream ~700 GB/s of the data sheet's "
                            "819"),
    call_overhead=(100.0e-6, f"{_CHIP_FIT} (the [guide]'s timeit includes Python dispatch; [chip]'s pipelined "
                             "calls overlap it and are compared without it, floored by issue_interval))"),
    issue_interval=_V5E_ISSUE,
    llo_vector_op_seconds=(1.0e-10 / _V5E_SCALE, "[from v7x, scaled like vpu_rate (the clock ratio)] [seed] fit"),
)

# TPU v7x (TPU7x), one TensorCore: the vector rate and the loop overlap are fitted to the [seed] table; the
# per-step, latency, call and MXU constants are v5e's fits to the [guide] alone (no v7x measurement separates them,
# and [chip] measured a v5e: it moves v5e's, not these).
V7X = _constants(
    "v7x",
    calibrated=True,
    mxu_efficiency=_GUIDE_MXU,
    mxu_min_rows=(128.0, "[from v6e, assumed: the same 256-wide MXU; libtpu's v7x compile of these blocks ran out "
                         "of VMEM] " + _MIN_ROWS_V6E),
    # [seed] fit from `unroll` 892 TF/s at 8k ([2, 512, 2048]): ~1.1 ps of vector work per attention score
    vpu_rate=(_SEED_VPU_RATE, "[seed] fit: `unroll` at 8k, blocks [2, 512, 2048] (892 TF/s)"),
    eup_rate=(_SEED_VPU_RATE / 4, "[assumed] a quarter of vpu_rate (one EUP slot against four VALU slots)"),
    overlap_straight=(1.0, "[pallas] straight-line code is one basic block the LLO scheduler interleaves"),
    overlap_loop=(_SEED_OVERLAP_LOOP, "[seed] fit: `emit_pipeline` at 32k (695 TF/s); 653 TF/s at 8k is then predicted"),
    step_overhead=_GUIDE_STEP,
    pipeline_iteration_overhead=_GUIDE_STEP,
    fori_iteration_overhead=(0.2317e-6, "[from v5e, as fitted before its carried-value term] a scalar loop plus "
                                        "address arithmetic"),
    fori_carried_element=(0.0, "[assumed] none: no fori_loop of this chip was measured (v5e's is fitted)"),
    reduction_latency=(_V5E_REDUCTION[0], "[from v5e] " + _V5E_REDUCTION[1]),
    imem_bundles=_NO_IMEM,
    code_reload=_NO_RELOAD,
    resolution=_NO_RESOLUTION,
    dma_latency=_GUIDE_LATENCY,
    dma_efficiency=(1.0, "[assumed] the data-sheet bandwidth: no memory-bound measurement on this chip pins it"),
    call_overhead=_GUIDE_CALL,
    issue_interval=(_V5E_ISSUE[0], "[from v5e] " + _V5E_ISSUE[1]),
    # libtpu 0.0.42.1 compiles one grid step of the seed's 8k `unroll` config to 57 472 VPU and 8 832 EUP
    # instructions (92 800 VPU-equivalents), which must take the vector time the vpu_rate fit gives it.
    llo_vector_op_seconds=(1.0e-10, "[seed] fit: the 8k `unroll` step's libtpu op counts against the "
                                    "vpu_rate fit (bench/seed_table.py --fit-llo)"),
)

V6E = _carried(V7X, "v6e", mxu_min_rows=(128.0, _MIN_ROWS_V6E))
V5P = _carried(V5E, "v5p", imem_bundles=_NO_IMEM, code_reload=_NO_RELOAD, resolution=_NO_RESOLUTION)
V4 = _carried(V5E, "v4", imem_bundles=_NO_IMEM, code_reload=_NO_RELOAD, resolution=_NO_RESOLUTION)

CHIP_CONSTANTS = {c.chip: c for c in (V4, V5E, V5P, V6E, V7X)}


def constants_for(chip_name: str) -> ModelConstants:
    """The model constants of a chip (compiler.ir.chips names)."""
    try:
        return CHIP_CONSTANTS[chip_name]
    except KeyError:
        raise ValueError(f"no model constants for chip {chip_name!r}") from None


def with_values(base: ModelConstants, source: str, **values: float) -> ModelConstants:
    """`base` with some constants replaced (a fit's result), each source naming `source`."""
    sources = dict(base.sources) | {name: source for name in values}
    return replace(base, sources=sources, **values)


@dataclass(frozen=True)
class SeedPoint:
    """One measurement of the seed: kernel file (examples/), shape set, config, measured TF/s (None = OOM)."""

    example: str
    kernel: str
    shape_set: int
    config: dict
    tflops: float | None
    label: str


# [seed] The seed's emit_pipeline runs used blocks [2, 1024, 2048] (2 heads, 1024 queries, 2048 keys; the notes
# name its K/V pipeline blocks [2, 2048, 256]). Its unroll run at 8k cannot have used 1024-query blocks: with
# K and V of two heads resident that is 71 MiB by the VMEM report, over v7x's 64 MiB. We take [2, 512, 2048]
# for it, the same blocks with half the queries.
SEED_PIPELINE = {"block_sizes": [2, 1024, 2048], "pallas_loop_type": "emit_pipeline"}
SEED_UNROLL = {"block_sizes": [2, 512, 2048], "pallas_loop_type": "unroll"}
SEED_POINTS = (
    SeedPoint("attention.py", "attention", 0, SEED_UNROLL, 892.0, "attention 8k unroll"),
    SeedPoint("attention.py", "attention", 0, SEED_PIPELINE, 653.0, "attention 8k emit_pipeline"),
    SeedPoint("attention.py", "attention", 1, SEED_PIPELINE, 695.0, "attention 32k emit_pipeline"),
    SeedPoint("attention.py", "attention", 1, SEED_UNROLL, None, "attention 32k unroll"),
)

# [seed] speed-ups of the seed's Pallas kernels over PyTorch eager / torch.compile (XLA) on v7x; absolute
# times were not recorded, so these are reported beside the model, not fitted.
SEED_SPEEDUPS = {
    "softmax": (1.49, 1.56),
    "batch_softmax": (1.92, 1.40),
    "bmm": (2.10, 1.22),
    "rms_norm_bwd": (2.71, 1.19),
}
