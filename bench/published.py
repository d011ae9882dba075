"""TPU measurements the performance model is calibrated or checked against, with their sources: published
ones, and this project's own on a TPU v5e.

Each table names where its numbers come from (repository, file, commit, cell), the chip, how it was measured,
and whether the model's constants were fitted to it ("fit") or it is a prediction ("check"). Every point is
a kernel of this repository (bench/kernels/, examples/) at the shape and config of the measured kernel, so
the model estimates the code our compiler generates for it (bench/model_vs_published.py).

Numbers are copied as published (seconds per call, the mean of `timeit` over 100 calls after a compile call,
which includes Python dispatch); the seed's are TF/s, converted with the kernel's FLOPs. Our own v5e runs
pipelined their calls (one sync per loop of calls), so their times hold no per-call dispatch
(`Table.dispatch` is False: the model's launch term is left out when they are compared).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MATMUL = "bench/kernels/matmul.py"
ATTENTION = "examples/attention.py"


@dataclass(frozen=True)
class Table:
    key: str
    chip: str
    role: str  # "fit": constants were fitted to it; "check": a prediction
    title: str
    source: str
    notes: str = ""
    dispatch: bool = True  # each measured time includes one call's dispatch (the model's launch term)


@dataclass(frozen=True)
class Point:
    table: str
    file: str  # kernel file, relative to the repository
    kernel: str
    args: str  # argument specs as in '# helion: args(...)'
    config: dict
    size: int  # what the rank order is grouped by (matrix size, sequence length)
    label: str
    seconds: float | None = None  # measured seconds per call (None: measured as TF/s)
    tflops: float | None = None
    extra: dict = field(default_factory=dict)


_GUIDE = (
    "jax-ml/jax docs/pallas/tpu/matmul.ipynb (https://docs.jax.dev/en/latest/pallas/tpu/matmul.html), "
    "unchanged from its first commit 39ec5dacb4 (2024-07-16) to cec06d116c (2026-08-08)"
)
_GUIDE_HOW = (
    "TPU v5e (v5 lite), jnp.ones inputs, mean of timeit over 100 calls of the jitted kernel after one call; "
    "the guide's kernel has a (M/bm, N/bn, K/bk) grid with an f32 VMEM accumulator"
)
_CHIP = (
    "this project's run on one TPU v5e chip (TPU v5 lite, jax 0.10.2 with the machine's libtpu, torch 2.13 CPU "
    "build), 2026-12-05, main at 1d2b010: shared/notes/real-tpu.md (speed table, small-block figures) and "
    "issue 29's table (the tuner's picks, measured)"
)
_CHIP_HOW = (
    "best of 5 loops of k pipelined calls with one block_until_ready per loop, k so that a loop takes >= 50 ms; "
    "the picks are what `helion-pallas tune FILE --chip v5e` (the model) ranked first at 1d2b010, which this "
    "file's configs reproduce when that commit's tuner is run again (attention: its third, the first that "
    "compiled); softmax's pick (32 rows) was measured at 1.39 ms, as its 32-row block in the sweep"
)
_SQTIAN = (
    "sqtian/PALLAS_TPU_KERNEL_MATMUL plots/benchmark_results_20250430_161137.json at commit 5535ed5680; "
    "kernels src/kernels/matmul_v4_bf16.py (128^3) and matmul_v5_large_block.py (512, 1024, 1024)"
)
_SQTIAN_HOW = (
    "TPU v5e (create_tpu_then_ssh.sh: v5litepod-1), jax.random.normal inputs, mean of timeit over 100 calls; "
    "the same kernel as the guide's. The file does not record the dtype: bf16, because its XLA reference "
    "times match the guide's bf16 XLA times within 2% (0.827 vs 0.827 ms at 4096, 6.01 vs 6.05 ms at 8192)"
)

_SWEEP = (
    "this project's run on one TPU v5e chip (TPU v5 lite, 13 CPU cores, jax 0.10.2 with the machine's libtpu, "
    "torch 2.13 CPU build), 2026-12-06, main at d39fded: bench/chip/v5e_sweep_a.json and v5e_sweep_b.json, "
    "written by bench/tpu_measure.py --plan bench/chip/v5e_plan_{a,b}.json"
)
_SWEEP_HOW = (
    "the tpu evaluator: best of 5 loops of k pipelined calls with one block_until_ready per loop, k so that the "
    "loops take ~0.5 s, after each config passed the CPU gate and before it was checked on the chip; the picks "
    "are what the model-only tuner of d39fded ranked first (attention: the sweep ran out of time after 6 configs)"
)

_NEW = (
    "this project's run on one TPU v5e chip (TPU v5 lite, jax 0.10.2 with the machine's libtpu), 2026-12-07 "
    "08:38-08:40 UTC: bench/chip/v5e_new_shapes.json, written by bench/chip_new_shapes.py (every example at 2-4 shapes "
    "none of the sweeps has: its default config, the model-only search's best)"
)
_NEW_HOW = _SWEEP_HOW.split("; the picks")[0]

TABLES = {
    t.key: t
    for t in (
        Table("guide", "v5e", "fit", "JAX Pallas TPU matmul guide, bf16 matmul (cell RjU3sSTUWzIk)",
              _GUIDE, _GUIDE_HOW),
        Table("guide-rhs-t", "v5e", "check", "same guide, fused right-hand-side transpose (cell AcBMHhKLhkDp)",
              _GUIDE, _GUIDE_HOW),
        Table("guide-relu", "v5e", "check", "same guide, fused ReLU activation (cell BOu7WBCBlHpN)",
              _GUIDE, _GUIDE_HOW),
        Table("sqtian", "v5e", "check", "a second public v5e run of the guide's kernel, with 2048",
              _SQTIAN, _SQTIAN_HOW),
        Table("chip-v5e", "v5e", "fit", "our kernels on a TPU v5e, memory-bound sweeps (softmax rows, add blocks)",
              _CHIP, _CHIP_HOW, dispatch=False),
        Table("chip-v5e-picks", "v5e", "fit", "our kernels on a TPU v5e, the model-only tuner's picks at 1d2b010",
              _CHIP, _CHIP_HOW, dispatch=False),
        Table("chip-v5e-sweep", "v5e", "fit", "our kernels on a TPU v5e, issue 29's sweep: the model's pick, the "
              "default and configs drawn across each space", _SWEEP, _SWEEP_HOW, dispatch=False),
        Table("chip-v5e-new", "v5e", "fit", "our kernels on a TPU v5e at shapes no sweep has, 0.11-48 ms a call",
              _NEW, _NEW_HOW, dispatch=False),
        Table("seed", "v7x", "fit", "the seed's flash attention [8, 32, S, 256] bf16 (TF/s)",
              "shared/notes/tpu-chips-and-performance.md (compiler/tune/constants.py SEED_POINTS)",
              "TPU v7x, one TensorCore; 32k unroll is out of VMEM"),
    )
}

SMALL_BLOCKS = (128, 128, 128)
LARGE_BLOCKS = (512, 1024, 1024)


def _matmul(table: str, kernel: str, size: int, blocks: tuple[int, int, int], seconds: float) -> Point:
    bm, bk, bn = blocks  # the guide's order; our config is [M block, N block, K block]
    config = {"block_sizes": [min(bm, size), min(bn, size), min(bk, size)], "pallas_loop_type": "emit_pipeline"}
    return Point(
        table,
        MATMUL,
        kernel,
        f"x=bf16[{size}, {size}], y=bf16[{size}, {size}]",
        config,
        size,
        f"{size}^3 bm,bk,bn={bm},{bk},{bn}",
        seconds=seconds,
    )


def _guide(table: str, kernel: str, small: tuple[float, ...], large: tuple[float, ...]) -> list[Point]:
    sizes = (1024, 4096, 8192)
    return [_matmul(table, kernel, s, SMALL_BLOCKS, t) for s, t in zip(sizes, small, strict=True)] + [
        _matmul(table, kernel, s, LARGE_BLOCKS, t) for s, t in zip(sizes, large, strict=True)
    ]


POINTS: list[Point] = [
    # "Matmul time:" lines of the guide's outputs, seconds, as printed
    *_guide(
        "guide",
        "matmul",
        (0.00029766598949208854, 0.011771515250438824, 0.09183577066054567),
        (0.00012708659982308746, 0.00088908776990138, 0.006099433819763363),
    ),
    *_guide(
        "guide-rhs-t",
        "matmul_rhs_t",
        (0.0003029372810851783, 0.012017967159627005, 0.09500920018996112),
        (0.00012131539988331496, 0.0008790623804088682, 0.006107717020204291),
    ),
    *_guide(
        "guide-relu",
        "matmul_relu",
        (0.00030103540048003196, 0.011807117109419778, 0.09181861146935262),
        (0.00012622540001757442, 0.000896632740041241, 0.006130605939542875),
    ),
    # "time_ms" of "V4: BFloat16" (128^3) and "V5: Large Block" (512, 1024, 1024), converted to seconds
    *[
        _matmul("sqtian", "matmul", s, SMALL_BLOCKS, ms / 1e3)
        for s, ms in ((1024, 0.27452846999949543), (2048, 1.5037150700027269), (4096, 11.583154940003624),
                      (8192, 90.3991762700025))
    ],
    *[
        _matmul("sqtian", "matmul", s, LARGE_BLOCKS, ms / 1e3)
        for s, ms in ((1024, 0.11148088000027201), (2048, 0.20492447999913566), (4096, 0.8680527300020913),
                      (8192, 6.040728699999818))
    ],
]


def _chip(table: str, file: str, kernel: str, args: str, size: int, runs: dict[str, tuple[dict, float]]) -> list[Point]:
    """Points of one kernel and shape measured on our v5e: label -> (config, milliseconds per call)."""
    return [Point(table, file, kernel, args, config, size, label, seconds=ms / 1e3) for label, (config, ms) in runs.items()]


_SOFTMAX = "x=bf16[65536, 2560]"
_ADD = "x=bf16[16384, 16384], y=bf16[16384, 16384]"
_ATTENTION_8K = "q=bf16[8, 32, 8192, 256], k=bf16[8, 32, 8192, 256], v=bf16[8, 32, 8192, 256]"
POINTS += [
    # real-tpu.md: "softmax 65536x2560: 8 rows 3.2 ms, 32 rows 1.39 ms, 64 rows 1.09 ms, >= 128 rows 1.04-1.05 ms"
    *_chip("chip-v5e", "examples/softmax.py", "softmax", _SOFTMAX, 65536, {
        "rows 8": ({"block_sizes": [8]}, 3.2),
        "rows 32": ({"block_sizes": [32]}, 1.39),
        "rows 64": ({"block_sizes": [64]}, 1.09),
        "rows 128 (1.04-1.05 ms for every block of 128 rows or more)": ({"block_sizes": [128]}, 1.045),
    }),
    # real-tpu.md: "add 16384^2: [8, 128] 53.8 ms, [128, 512] 3.14 ms, [1024, 8192] 2.39 ms"; issue 29: the pick 2.66 ms
    *_chip("chip-v5e", "examples/add.py", "add", _ADD, 16384, {
        "[8, 128]": ({"block_sizes": [8, 128]}, 53.8),
        "[128, 512]": ({"block_sizes": [128, 512]}, 3.14),
        "[16, 4096] (the tuner's pick)": ({"block_sizes": [16, 4096]}, 2.66),
        "[1024, 8192]": ({"block_sizes": [1024, 8192]}, 2.39),
    }),
    # issue 29's "tuner's pick" column, and real-tpu.md's attention at its default blocks
    *_chip("chip-v5e-picks", "examples/bmm.py", "bmm", "a=bf16[64, 2048, 2048], b=bf16[64, 2048, 2048]", 2048, {
        "[1, 512, 512, 512] unroll": ({"block_sizes": [1, 512, 512, 512], "pallas_loop_type": "unroll"}, 6.48),
    }),
    *_chip("chip-v5e-picks", MATMUL, "matmul", "x=bf16[8192, 8192], y=bf16[8192, 8192]", 8192, {
        "[1024, 1024, 512] unroll": ({"block_sizes": [1024, 1024, 512], "pallas_loop_type": "unroll"}, 6.43),
    }),
    *_chip("chip-v5e-picks", "examples/batch_softmax.py", "batch_softmax", "x=bf16[64, 2048, 4096]", 2048, {
        "[1, 32]": ({"block_sizes": [1, 32]}, 3.71),
    }),
    *_chip("chip-v5e-picks", "examples/rms_norm_bwd.py", "rms_norm_bwd",
           "grad_out=f32[8192, 8192], x=f32[8192, 8192], weight=f32[8192], rstd=f32[8192, 1]", 8192, {
        "[32]": ({"block_sizes": [32]}, 1.22),
    }),
    *_chip("chip-v5e-picks", ATTENTION, "attention", _ATTENTION_8K, 8192, {
        "8k [1, 256, 256] unroll (the default)": ({"block_sizes": [1, 256, 256], "pallas_loop_type": "unroll"}, 97.7),
        "8k [1, 4096, 512] unroll, loop order [1, 0] (the tuner's 3rd)": (
            {"block_sizes": [1, 4096, 512], "loop_orders": [[1, 0]], "pallas_loop_type": "unroll"}, 101.5),
    }),
]


def _sweep_points() -> list[Point]:
    """The configs issue 29's sweep measured on our v5e (bench/chip/v5e_sweep_*.json), each with its time."""
    out = []
    for path in sorted((REPO / "bench" / "chip").glob("v5e_sweep_*.json")):
        for m in json.loads(path.read_text())["points"]:
            if m.get("seconds") is not None:
                label = f"{m['label']} {json.dumps(m['config'], separators=(',', ':'))}"
                out.append(Point("chip-v5e-sweep", m["file"], m["kernel"], m["args"], m["config"], m["size"], label,
                                 seconds=m["seconds"]))  # fmt: skip
    return out


POINTS += _sweep_points()


def _new_shape_points() -> list[Point]:
    """The examples measured on our v5e at shapes no sweep has (bench/chip/v5e_new_shapes.json), each with its time."""
    path = REPO / "bench" / "chip" / "v5e_new_shapes.json"
    out = []
    for m in json.loads(path.read_text())["points"]:
        if m.get("seconds") is not None:
            label = f"{m['label']} {json.dumps(m['config'], separators=(',', ':'))}"
            out.append(Point("chip-v5e-new", m["file"], m["kernel"], m["args"], m["config"], m["size"], label,
                             seconds=m["seconds"]))  # fmt: skip
    return out


POINTS += _new_shape_points()


def _seed_points() -> list[Point]:
    from compiler.tune.constants import SEED_POINTS

    lengths = {0: 8192, 1: 32768}
    out = []
    for p in SEED_POINTS:
        if p.tflops is None:
            continue
        s = lengths[p.shape_set]
        args = ", ".join(f"{n}=bf16[8, 32, {s}, 256]" for n in ("q", "k", "v"))
        out.append(Point("seed", ATTENTION, p.kernel, args, dict(p.config), s, p.label, tflops=p.tflops))
    return out


POINTS += _seed_points()


def points(chip: str | None = None, role: str | None = None) -> list[Point]:
    """The published points, optionally of one chip and/or one role ("fit" / "check")."""
    return [
        p
        for p in POINTS
        if (chip is None or TABLES[p.table].chip == chip) and (role is None or TABLES[p.table].role == role)
    ]
