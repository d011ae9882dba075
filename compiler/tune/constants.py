"""Every constant of the analytic TPU performance model (compiler/tune/model.py), with its source.

Chip facts (HBM bandwidth, bf16 peak, VMEM) are not here: they come from `compiler.chips`. What is here is
how fast a TensorCore gets through the work the plan counts, and what each pipeline step costs beyond it.

Sources used below:
  [seed]   the seed's measurements on TPU v7x (shared/notes/tpu-chips-and-performance.md): flash attention
           [8, 32, S, 256] bf16, non-causal: `unroll` 892 TF/s at S=8k, `emit_pipeline` 653 TF/s at 8k and
           695 TF/s at 32k. `SEED_POINTS` names the configs the seed ran (block sizes as below).
  [fit]    solved from the three [seed] points with the other constants held fixed; `bench/seed_table.py
           --fit` repeats the derivation and prints the values.
  [pallas] how Pallas TPU pipelining works (jax 0.10.2 `pallas_call` / `pltpu.emit_pipeline` source): the
           next step's input blocks are fetched while the current step computes; an input whose block
           index does not change is not copied again; a nested pipeline starts cold on every outer step.
  [assumed] a round engineering figure that no measurement here pins down; stated so it can be replaced.

Model figures are estimates for a named chip. Only v7x is calibrated; other chips reuse v7x's per-clock
rates scaled by their bf16 peak and are labelled uncalibrated.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ModelConstants:
    """Rates and overheads of one TensorCore.

    mxu_efficiency:  η_mxu, the fraction of the bf16 peak a large padded matmul sustains.
    vpu_rate:        elementwise vector work per second, in 32-bit-lane elements (Work.vpu_elems units).
    eup_rate:        transcendental elements per second (Work.eup_elems units).
    overlap_straight: ω for straight-line code (one grid step, an unrolled inner loop): the share of the
                     smaller of MXU and VPU+EUP time hidden under the larger.
    overlap_loop:    ω inside one iteration of an emit_pipeline / fori_loop body: the scheduler cannot move
                     work across the iteration boundary, so the head and tail of each iteration are exposed.
    step_overhead:   τ_step, seconds per grid step of a pallas_call (pipeline bookkeeping, DMA issue/wait).
    pipeline_iteration_overhead: τ_inner for an emit_pipeline iteration (it is a grid step of its own).
    fori_iteration_overhead:     τ_inner for a fori_loop iteration (scalar loop control, dynamic slicing).
    dma_latency:     L, seconds from issuing a batch of DMAs to the first byte landing.
    llo_vector_op_seconds: seconds per vector instruction (one vreg) of libtpu's compiled kernel, used to
                     refine the estimate from a compiled kernel's op counts (a transcendental counts as
                     vpu_rate / eup_rate of them).
    calibrated:      whether the rates were fitted to measurements on this chip.
    """

    mxu_efficiency: float
    vpu_rate: float
    eup_rate: float
    overlap_straight: float
    overlap_loop: float
    step_overhead: float
    pipeline_iteration_overhead: float
    fori_iteration_overhead: float
    dma_latency: float
    llo_vector_op_seconds: float
    calibrated: bool


# v7x (TPU7x), one TensorCore.
V7X = ModelConstants(
    # [assumed] big bf16 matmuls on TPUs sustain ~90-95% of peak; the seed's attention points are VPU-bound
    # and do not pin this down (they only constrain overlap_loop·min(MXU, VPU) together).
    mxu_efficiency=0.93,
    # [fit] from `unroll` 892 TF/s at 8k ([2, 512, 2048]): ~1.11 ps of vector work per attention score.
    vpu_rate=9.807e12,
    # [assumed] the EUP accepts one vreg per cycle against four VALU slots: a quarter of the VPU rate.
    eup_rate=9.807e12 / 4,
    # [pallas] straight-line code is one basic block: the LLO scheduler interleaves MXU pushes with the
    # softmax of the previous tile freely.
    overlap_straight=1.0,
    # [fit] from `emit_pipeline` 695 TF/s at 32k; with it (and the assumed τ and L) 653 TF/s at 8k follows.
    overlap_loop=0.714,
    # [assumed] the commonly quoted Pallas TPU cost of one grid step, ~0.35 µs.
    step_overhead=0.35e-6,
    # [assumed] an emit_pipeline iteration does what a grid step does (DMA issue + wait, semaphores,
    # index maps), so it costs the same.
    pipeline_iteration_overhead=0.35e-6,
    # [assumed] a fori_loop iteration is a scalar loop plus address arithmetic: a small fraction of a step.
    fori_iteration_overhead=0.05e-6,
    # [assumed] ~0.5 µs from DMA issue to completion of a small copy on a TensorCore.
    dma_latency=0.5e-6,
    # [fit] libtpu 0.0.42.1 compiles one grid step of the seed's 8k `unroll` config to 57 472 VPU and 8 832 EUP
    # instructions (92 800 VPU-equivalents), which must take the 9.28 µs the vector_rate fit gives it.
    llo_vector_op_seconds=1.0e-10,
    calibrated=True,
)

_V7X_PEAK = 1155e12  # the bf16 peak V7X's rates were fitted against (compiler.chips v7x, jax tpu_info)


def constants_for(chip_name: str, bf16_flops: float) -> ModelConstants:
    """The constants of a chip: v7x's own, else v7x's scaled by the chip's bf16 peak (uncalibrated)."""
    if chip_name == "v7x":
        return V7X
    scale = bf16_flops / _V7X_PEAK
    return replace(
        V7X,
        vpu_rate=V7X.vpu_rate * scale,
        eup_rate=V7X.eup_rate * scale,
        llo_vector_op_seconds=V7X.llo_vector_op_seconds / scale,
        calibrated=False,
    )


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
