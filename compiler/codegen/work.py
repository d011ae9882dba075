"""Static work and live-memory estimates of device code, read by the VMEM report and the performance model."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace

import torch

from ..frontend.dot_precision import PASSES
from ..frontend.ops import ELEMENTWISE, REDUCTIONS, TRANSCENDENTAL
from ..ir.plan import SHORT_LHS_ROWS, Work
from ..ir.tile_ir import InnerLoop, Load, Node, Op, Store, Value
from .padding import padded_count, sublane_rows_of

_NO_VECTOR_WORK = {"reshape", "index", "full", "iota", "tile_begin", "tile_end", "tile_id", "broadcast_to", "alloc"}


# What a kernel's values of a dtype are carried as on a TPU: Mosaic loads no float16 vector on any chip ("Invalid
# vector type for load", libtpu 0.0.42 for v4 to v7x), so float16 tensors cross into the kernel as float32.
CARRIED = {torch.float16: torch.float32}


def carried_dtype(dtype: torch.dtype) -> torch.dtype:
    return CARRIED.get(dtype, dtype)


def sublane_rows(dtype: torch.dtype) -> int:
    """Rows per (sublanes x 128) vector tile: 8 for 32-bit, 16 for 16-bit, 32 for 8-bit."""
    return sublane_rows_of(carried_dtype(dtype).itemsize)


def padded_elems(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    """Elements of `shape` once laid out in (sublane, 128-lane) tiles, as the TPU stores it."""
    return padded_count(shape, carried_dtype(dtype).itemsize)


def padded_bytes(shape: tuple[int | None, ...], dtype: torch.dtype) -> int:
    dims = tuple(d for d in shape if d is not None)
    return padded_elems(dims, dtype) * carried_dtype(dtype).itemsize


def vreg_elems(v: Value) -> float:
    """Vector work in 32-bit-lane units: a packed bf16 vreg holds twice the elements of an f32 one."""
    itemsize = carried_dtype(v.meta.dtype).itemsize  # read off the meta tensor once: the model asks this for every value
    return padded_count(v.meta.shape, itemsize) * min(1.0, itemsize / 4)


_FP8 = {getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
        if hasattr(torch, n)}


def mxu_operand_class(a: torch.dtype, b: torch.dtype) -> str:
    """Which MXU rate a dot's passes run at: "int8" for two 8-bit integer operands, "fp8" for two 8-bit
    floats, else "bf16" (16-bit operands, and the bf16 passes of an f32 dot: frontend/dot_precision.py)."""
    if a.itemsize == b.itemsize == 1:
        if a in _FP8 and b in _FP8:
            return "fp8"
        if not a.is_floating_point and not b.is_floating_point:
            return "int8"
    return "bf16"


_NO_WORK = Work()  # shared: a Work is immutable


def op_work(op: Op) -> Work:
    if op.kind in _NO_VECTOR_WORK:
        return _NO_WORK
    outs = op.outputs()
    if op.kind == "dot":
        a, b = op.args[0], op.args[1]
        *batch, m, k = a.shape
        n = b.shape[-1]
        bsz = math.prod(batch) if batch else 1
        flops = 2.0 * bsz * m * n * k
        rows = sublane_rows(a.dtype)
        pm, pn, pk = -(-m // rows) * rows, -(-n // 128) * 128, -(-k // 128) * 128
        acc_work = vreg_elems(outs[0]) if len(op.args) > 2 else 0.0
        padded = 2.0 * bsz * pm * pn * pk
        kind = mxu_operand_class(a.dtype, b.dtype)
        passes = PASSES[op.kwargs["precision"]]
        if passes > 1:  # an f32 dot as bf16 passes (frontend/dot_precision.py): each costs a bf16 dot, and
            rows = sublane_rows(torch.bfloat16)  # splitting each operand in two bf16 halves is vector work
            pm = -(-m // rows) * rows
            padded = passes * 2.0 * bsz * pm * pn * pk
            acc_work += 3.0 * bsz * (pm * pk + pk * pn)
        short = {"mxu_short": padded, "mxu_short_weights": 2.0 * bsz * pn * pk} if pm < SHORT_LHS_ROWS else {}
        return Work(flops, padded, acc_work, 0.0, **({f"mxu_{kind}": padded} if kind != "bf16" else {}), **short)
    ins = [a for a in op.args if isinstance(a, Value)]
    size = max([vreg_elems(v) for v in ins + list(outs)] or [0.0])
    if op.kind in ("softmax", "log_softmax"):
        return Work(0, 0, 4 * size, size, lane_reductions=2.0 * _across_lanes(op))
    if op.kind in REDUCTIONS and _across_lanes(op):
        return Work(0, 0, size, 0, lane_reductions=1.0)
    if op.kind == "mask":  # iota, add, compare (and the & of several), select
        return Work(0, 0, (3 + len(op.kwargs["dims"]) - 1) * size, 0)
    if op.kind in TRANSCENDENTAL:
        return Work(0, 0, size, size)
    return Work(0, 0, size, 0)


def _across_lanes(op: Op) -> bool:
    """Whether a reduction (or softmax) runs along its input's last dimension, the 128 lanes of a vreg."""
    x = next((a for a in op.args if isinstance(a, Value)), None)
    if x is None or not x.shape:
        return False
    dim = op.kwargs.get("dim")
    rank = len(x.shape)
    dims = range(rank) if dim is None else dim if isinstance(dim, tuple | list) else (dim,)
    return any(isinstance(d, int) and d % rank == rank - 1 for d in dims)


def gather_sizes(n: Load | Store) -> tuple[int, int, int] | None:
    """(positions K, gathered dim R, elements per row) of a tensor-indexed access, else None."""
    for d, it in enumerate(it for it in n.index if it[0] != "newaxis"):
        if it[0] == "gather":
            k = max(1, it[1].meta.numel())
            v = n.out if isinstance(n, Load) else n.value
            return k, n.tensor.value.shape[d], max(1, v.meta.numel() // k)
    return None


def access_work(n: Load | Store, dma: frozenset[int] = frozenset()) -> Work:
    """Moving a block between VMEM and registers; a gather / scatter adds its one-hot matmul (f32 at HIGHEST
    precision, PASSES["highest"] bf16 passes; integers two f32 matmuls of 16-bit halves), unless its rows are
    copied by DMA (`dma`: those accesses' node ids)."""
    v = n.out if isinstance(n, Load) else n.value
    work = Work(0, 0, vreg_elems(v) * 0.5, 0)
    sizes = gather_sizes(n) if id(n) not in dma else None
    if sizes is None:
        return work
    k, r, rest = sizes
    dtype = n.tensor.value.dtype
    # integers are two f32 matmuls at HIGHEST; floats add one bf16 pass selecting the kind of their non-finite
    # entries (0 * inf would be NaN in the product)
    highest = PASSES["highest"]
    passes = 2 if dtype in (torch.bfloat16, torch.float16) else highest + 1 if dtype.is_floating_point else 2 * highest
    rows = sublane_rows(dtype)
    flops = 2.0 * k * r * rest
    padded = 2.0 * (-(-k // rows) * rows) * (-(-r // 128) * 128) * (-(-rest // 128) * 128) * passes
    compare = padded_elems((k, r), torch.int32) * (2 if isinstance(n, Store) else 1)
    return work + Work(flops, padded, compare, 0)


def region_work(nodes: list[Node], dma: frozenset[int] = frozenset()) -> Work:
    """Work of straight-line code, not descending into inner loops (they are counted per iteration). Its
    reductions across lanes are counted one after another (Work.lane_reductions)."""
    works = [op_work(n) if isinstance(n, Op) else access_work(n, dma) for n in nodes if isinstance(n, Op | Load | Store)]
    total = Work.total(works)
    chain = sum(w.lane_reductions for w in works)
    return replace(total, lane_reductions=chain) if chain else total


# Calibrated against the libtpu 0.0.42.1 deviceless compile on v5e and v7x (bench/vmem_calibration.py, every
# example and loop strategy; docs/vmem-calibration.md): straight-line code holds what `held_factor` says (nothing
# when it streams; 1.3x its largest value for a softmax and other ops), while a Python-unrolled loop keeps many
# iterations' temporaries live at once (`unrolled_bytes`).
FUSED_FACTOR = 1.3
# Code with a dot of its own (attention's body) holds its largest value whole and a working set of the next beside
# it that stops growing: 0.3x the largest up to DOT_WORKING_SET_CAP (libtpu 0.0.42.1 on v7x, attention's f32 scores
# of 16 and 32 MiB: 17.7 and 36.4 MiB of temporaries in emit_pipeline where 1.3x said 20.8 and 41.6; [1, 1024, 8192]
# unrolled once, 32 MiB of scores: 32.0 where 1.3x said 41.6; small blocks keep the 1.3x: [1, 256, 256] 0.6 MiB).
DOT_WORKING_SET_CAP = 8 * 1024 * 1024
# An emit_pipeline body loads its carried values from their VMEM scratch and stores the new ones: beside the
# scratch it holds ~half of them (as _carry_bytes lays them out) on top of its fused largest value. libtpu 0.0.42.1
# on v5e, attention 8k in nine emit_pipeline configs (bench/vmem_calibration.py): [256, 64, 128] needs 37.7 MiB of
# temporaries (spill slots) where the largest value alone gave 20.8 (the report said 117 MiB, the chip's compiler
# and libtpu 133.94: out of VMEM), [64, 128, 128] 18.6 against 10.4; with the carries, every one of the nine is
# within -0.9 / +3.7 MiB.
PIPELINE_CARRY_FACTOR = 0.5
# A one-hot gather (`_gather`: K positions from R rows of `rest` elements each) holds its selection matrix and a
# few arrays of one row per position beside it (the product, the kind of each non-finite entry, the choice). libtpu
# 0.0.42.1 for v5e, f32 (MiB needed against the one-hot's K x R and the K x rest columns, both padded to 128 lanes):
# K=16384, R=128, rest 1: 28.1 (8 + 8); R=256: 40.2 (16 + 8); R=512: 48.0 (32 + 8); K=8192, R=128: 14.1 (4 + 4);
# K=4096, R=1024: 20.5 (16 + 2); rest 128: 36.0 (8 + 8). The fused 1.3x of the one-hot alone said 10.5 for the
# first (upstream jagged_dense_add: HPL302, 27.18 MiB needed, 19 asked for). 1.3x the one-hot and the table plus
# 2.5x the columns is within -15 / +28 % of all six.
GATHER_COLUMNS_FACTOR = 2.5
# Before its matmul, a one-hot gather of floats classifies every entry of the whole block it selects from (the widened
# f32 copy, its finite / NaN / sign masks, the zeroed values, the kind code; an 8-bit block is widened to bf16 first),
# all table-sized. Negligible beside the one-hot for the tables above ([R, 1] columns), they decide a gather of long
# rows from a big block: vLLM's MLA decode (mla_decode_kv_split, batch=128, seqlen=2048, 16 heads) gathers 128 of
# 2048 fp8 rows of 512 and of 64 (lanes padded to 128) in one body, f32-padded tables of 4 + 1 MiB; libtpu 0.0.42.1 for
# v5e used 73.7 MiB where the report said 6.1 (HPL302 from libtpu at the 16 MiB it asked for, 2026-12-07), about
# 14x those tables beside 2.9 MiB of blocks.
GATHER_TABLE_FACTOR = 14.0


# libtpu for v5e keeps every unrolled iteration's largest value (attention's scores) live at once, and one more:
# attention 8k [1, 256, 256] in 32 trips needs 7.9 MiB of temporaries (0.25 MiB of scores each), [1, 1024, 1024] in 8
# trips 36.0 (4 MiB each), [1, 4096, 256] in 32 trips ~131 (the report said 102 MiB in all, libtpu 155), where the
# v7x rule below said 4.9, 32 and 78.4. Chips not named here use the v7x rule (v7x measured; others not).
UNROLLED_ALL_LIVE = frozenset({"v5e"})
UNROLLED_FIT_FROM = 4  # fewer trips: their body's value, and the next trip's beside it (unrolled_bytes)
# v7x, 2 unrolled trips of attention's body (libtpu 0.0.42.1, 2026-12-07; docs/vmem-calibration.md): from 512 LHS rows
# (batch x query rows) of its dot, the next trip's f32 scores are computed while this trip's weights (its scores cast to
# bf16: half their bytes) are still live, so the loop holds its scores and 0.44-0.50x them beside: 8k [1, 512, 4096]
# 11.6 MiB of temporaries for 8 MiB of scores, [1, 1024, 4096] 24.0 and [2, 512, 4096] 23.8 for 16, [1, 2048, 4096]
# 47.3 for 32 with any buffer counts (the tuner's 8k pick: the body's rule, scores + 0.3x up to 8 MiB, said 34.4, the
# total 19-20 % under libtpu where the verdict flips), [2, 1024, 4096] 46.2; 32k [1, 512, 16384] 46.4. With fewer rows
# little of the next trip's scores overlaps: 0.08-0.18x at 128-256 rows ([1, 128, 4096], [1, 256, 4096],
# [1, 128, 16384], [1, 256, 16384]), the body's rule; 512 rows as [2, 256] and [4, 128] 0.34x and 0.21x, where
# 0.47x is 1-3 % over their totals. One trip holds its scores alone ([1, 1024, 8192]: 32.0 for 32).
UNROLLED_OVERLAP = 0.47  # least squares over the six configs from 512 rows of one batch entry or two: 0.46
UNROLLED_OVERLAP_ROWS = 512
# v7x: ~0.94 * largest * trips**0.876 (fitted on 4..64 trips of flash attention; attention 8k [2, 1024, 256] in 32
# trips needs 39.1 MiB of temporaries, 19.5x its 2 MiB of scores, the fit says 19.6x), and at least the largest values
# of up to 8 iterations: [1, 2048, 1024] in 8 trips needs 56.3 (7x its 8 MiB of scores) where the fit said 5.8x (66.5
# MiB in all, "fits"; libtpu: 76.3, out of VMEM)
UNROLLED_FACTOR = 0.94
UNROLLED_EXPONENT = 0.876
UNROLLED_LIVE_AT_LEAST = 8


def unrolled_bytes(trips: int, largest: int, chip: str, dot_rows: int = 0) -> float:
    """What an unrolled loop of `trips` iterations whose body's largest value is `largest` bytes holds on `chip`;
    `dot_rows`: the most LHS rows of a dot of the body's own (0: none), which decide whether a short loop's trips
    overlap (UNROLLED_OVERLAP)."""
    if chip in UNROLLED_ALL_LIVE:
        return (trips + 1) * largest
    if trips < UNROLLED_FIT_FROM:  # a short loop holds what its body does (v7x, attention 32k [1, 256, 16384] in 2
        # trips: 17.3 MiB of temporaries for 16 MiB of scores; 0.94 * trips**0.876 said 27.6), and from
        # UNROLLED_OVERLAP_ROWS rows of a dot the next trip's value beside most of this one's bf16 half
        if trips > 1 and dot_rows >= UNROLLED_OVERLAP_ROWS:
            return (1 + UNROLLED_OVERLAP) * largest
        return 0.0
    return max(UNROLLED_FACTOR * trips**UNROLLED_EXPONENT, min(trips, UNROLLED_LIVE_AT_LEAST)) * largest


def temporaries_bytes(nodes: list[Node], strategy: Callable[[InnerLoop], str],
                      dma: frozenset[int] = frozenset(), reads: Mapping[int, int] | None = None,
                      chip: str = "") -> int:
    """Estimated VMEM the compiler needs for intermediate values of one grid step (an estimate, labelled so).

    A fori_loop's carried values are values, not VMEM scratch (an emit_pipeline's are, and the report counts
    them as such): each iteration holds the carry it was given and the one it returns (_carry_bytes). Without
    them the report fell short of libtpu by 1.65x for attention 8k's [1, 8192, 512] fori_loop on v5e (52.8 MiB
    estimated, 87.1 needed: the f32 accumulator and two row statistics of 8192 rows, twice, are 32 MiB).
    An emit_pipeline body holds about half as much again beside its scratch (PIPELINE_CARRY_FACTOR).
    `reads`: per load or store (id), the bytes of the block region it reads or merges when that is more than its
    value (one row picked out of its group: libtpu for v5e needed 1.0-1.8x the group read as temporaries, one head
    of [2, 2048, 32, 128] bf16 in 1024-row blocks 7.4 MiB beside a 4 MiB group)."""
    reads = reads or {}
    factor = held_factor(nodes)
    largest = _largest_value(nodes, dma, reads)
    if not factor:  # streamed: only the block region a picking access reads (1.0-1.8x of it: `reads` below)
        straight = FUSED_FACTOR * max(reads.values(), default=0)
    elif factor == 1.0 and _has_dot(nodes):
        straight = largest + (FUSED_FACTOR - 1) * min(largest, DOT_WORKING_SET_CAP)
    elif factor == 1.0:
        straight = max(largest, _live_across_reductions(nodes))
    else:
        straight = FUSED_FACTOR * largest
    peak = max(straight, _gather_temporaries(nodes, dma))
    for n in nodes:
        if isinstance(n, InnerLoop):
            inner = temporaries_bytes(n.body, strategy, dma, reads, chip)
            how = strategy(n)
            if how == "unroll":
                trips = math.prod(d.steps for d in n.dims)
                if holds_values(n.body):
                    inner = max(inner, unrolled_bytes(trips, _largest_value(n.body, dma, reads), chip,
                                                      _dot_rows(n.body)))
                else:  # a streamed body (bmm's) holds the accumulator it adds into as a value (libtpu 0.0.42.1 on
                    # v7x: 11.9 MiB beside bmm's [2048, 2048] f32 one in one trip, 5.6 beside [1024, 1024] in two)
                    # and its dot's left operand (`_unrolled_lhs_bytes`)
                    inner += sum(padded_bytes(c.phi.meta.shape, c.phi.meta.dtype) for c in n.carried)
                    inner += _unrolled_lhs_bytes(n.body) if chip in UNROLLED_LHS_HELD else 0
            elif how == "fori_loop":
                inner += 2 * _held_carry_bytes(n, accumulators=True)
            elif how == "emit_pipeline":
                inner += PIPELINE_CARRY_FACTOR * _pipeline_carry_bytes(n)
            peak = max(peak, inner)
    return int(peak)


# Chips whose compiler holds an unrolled streamed body's dot operand (`_unrolled_lhs_bytes`): measured on v5e. v7x
# differs (libtpu 0.0.42.1: bmm [1, 1024, 512, 512] used 14.0 MiB, under the report's 16 without it; [1, 2048, 1024,
# 512] 41.9 against 40), so it keeps the rule without it.
UNROLLED_LHS_HELD = frozenset({"v5e"})


def _unrolled_lhs_bytes(body: list[Node]) -> int:
    """What an unrolled streamed body holds of its accumulating dots' left operands: one batch element of the largest
    (the slice of the resident block the MXU is fed from). libtpu 0.0.42.1 for v5e, bf16 (MiB beyond the report's
    buffers and accumulator against the [rows, k] slice): matmul 8192² [512, 1024, 4096] 4.0 (4), bmm [1, 1024, 512,
    k] for k = 256 .. 2048: 0.32, 0.88, 1.94, 2.83 (0.5 .. 4), [1, 512, 1024, 512] 0.40 (0.5), [1, 2048, 1024, 512]
    1.89 (2), matmul 4096² in ten configs within -0.55 / +0.34 of the slice; without it bmm [1, 1024, 512, 512] was
    16.00 MiB, within the default 16 MiB, where libtpu used 16.88 and ran out of VMEM at 16 (the tuner then priced
    it without the over-the-default margin, tune/objective.py). A batched block holds one batch element's: bmm [8,
    256, 1024, 2048] needs 1.1 MiB beyond its buffers (its accumulator is not held either)."""
    most = 0
    for n in body:
        if isinstance(n, Op) and n.kind == "dot" and len(n.args) > 2 and isinstance(n.args[0], Value):
            shape = tuple(n.args[0].meta.shape)
            most = max(most, padded_bytes(shape, n.args[0].meta.dtype) // max(1, math.prod(shape[:-2])))
    return most


_STREAMED = ELEMENTWISE | _NO_VECTOR_WORK | {"mask"}


def held_factor(nodes: list[Node]) -> float:
    """What straight-line code holds in VMEM, as a multiple of its largest value (a lower bound of its temporaries:
    compiler/vmem/floor.py reads it too).

    0: elementwise code from loads to stores, whose values the TPU compiler streams vreg by vreg (libtpu 0.0.42.1,
    v5e and v7x: add's [256, 512] and [1024, 1024] blocks need no VMEM beyond their buffers, where 1.3x the largest
    value said 0.3 and 2.6 MiB); a dot that adds into an accumulator streams too (bmm's `baddbmm` into its carried
    f32 block: 0.0-0.1 MiB in emit_pipeline, where 1.3x the product said 0.6 to 10.4 MiB).
    1: reductions among elementwise code: each value used after a reduction is held whole until it is done
    (`_live_across_reductions`), at least the largest value; a dot of its own, with or without reductions and
    permutes (attention's body): the largest value and a working set beside it (DOT_WORKING_SET_CAP).
    FUSED_FACTOR: anything else, a softmax among them."""
    factor = 0.0
    dot = _has_dot(nodes)
    for n in nodes:
        if not isinstance(n, Op) or n.kind in _STREAMED or (n.kind == "dot" and len(n.args) > 2):
            continue
        if n.kind not in REDUCTIONS and not (dot and n.kind in ("dot", "permute")):
            return FUSED_FACTOR
        factor = 1.0
    return factor


def _own_dots(nodes: list[Node]) -> list[Op]:
    """The dots of their own (not ones adding into an accumulator) among straight-line code."""
    return [n for n in nodes if isinstance(n, Op) and n.kind == "dot" and len(n.args) <= 2]


def _has_dot(nodes: list[Node]) -> bool:
    return bool(_own_dots(nodes))


def _dot_rows(nodes: list[Node]) -> int:
    """The most LHS rows (all dims but the last, batch included) of a dot of its own in straight-line code."""
    return max((math.prod(n.outputs()[0].meta.shape[:-1]) for n in _own_dots(nodes)), default=0)


def holds_values(nodes: list[Node]) -> bool:
    return held_factor(nodes) > 0


def _value_ids(x: object) -> set[int]:
    if isinstance(x, Value):
        return {x.id}
    if isinstance(x, tuple | list):
        return set().union(*(_value_ids(a) for a in x)) if x else set()
    if isinstance(x, dict):
        return _value_ids(list(x.values()))
    return set()


def _used(n: Node) -> set[int]:
    if isinstance(n, Op):
        return _value_ids(n.args) | _value_ids(n.kwargs)
    if isinstance(n, Store):
        return _value_ids(n.value) | _value_ids(n.index)
    if isinstance(n, Load):
        return _value_ids(n.index)
    if isinstance(n, InnerLoop):
        return set().union(*(_used(m) for m in n.body), *(_value_ids(c.init) for c in n.carried))
    return set()


def _live_across_reductions(nodes: list[Node]) -> int:
    """The most bytes of values held across one reduction: computed (or loaded) before it and used after it, so
    whole while it runs. libtpu 0.0.42.1: rms_norm_bwd's [256, 8192] f32 rows need 24 MiB of temporaries on v7x,
    its grad_out, x_hat and dy * weight blocks (8 MiB each) held across the row sum, where 1.3x the largest value
    said 10.4 and the kernel ran out of VMEM at 73.4 MiB against a report of 59.9; batch_softmax's [1, 256, 4096]
    blocks 3.8-3.9 MiB, its f32 logits (4 MiB) across the max, then the exponentials across the sum."""
    later: set[int] = set()
    after: list[set[int]] = []
    for n in reversed(nodes):
        after.append(set(later))
        later |= _used(n)
    after.reverse()
    defined: dict[int, int] = {}
    most = 0
    for n, used_after in zip(nodes, after, strict=True):
        if isinstance(n, Op) and n.kind in REDUCTIONS:
            most = max(most, sum(b for vid, b in defined.items() if vid in used_after))
        outs = n.outputs() if isinstance(n, Op) else (n.out,) if isinstance(n, Load) else ()
        for v in outs:
            defined[v.id] = padded_bytes(v.meta.shape, v.meta.dtype)
    return most


def _carry_bytes(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    """A carried value as the loop body holds it. One with a single dim over 1 is a row statistic (a running
    max or sum): the body broadcasts it against its [rows, k] blocks, so it is held as a column, one row per
    element, padded to 128 lanes. libtpu on v5e, attention 8k fori_loop: 4 KiB per query row beyond the report,
    what an f32 accumulator row of 256 and two statistic rows of 128 lanes take twice (59.7 MiB needed for
    [1, 4096, 1024], 87.1 for [1, 8192, 512], 26.8 for [1, 1024, 1024])."""
    long = [d for d in shape if d > 1]
    if len(long) == 1:
        return padded_bytes((long[0], 1), dtype)
    return padded_bytes(shape, dtype)


def _pipeline_carry_bytes(loop: InnerLoop) -> int:
    return _held_carry_bytes(loop, accumulators=False)


def _held_carry_bytes(loop: InnerLoop, accumulators: bool) -> int:
    """The carried values of a loop body as it holds them: a row statistic of the blocks another carried value
    accumulates (attention's running max and sum, [b, q] beside the [b, q, d] accumulator) as a column, one row per
    element padded to 128 lanes (it is broadcast against them); the rest as _carry_bytes. `accumulators`: count an
    accumulator a dot adds into (a fori_loop's carry is a value; an emit_pipeline's is its scratch, into which the
    MXU adds: matmul ~0.3 MiB of temporaries). The columns in a fori_loop: libtpu for v7x needs 65.4 MiB for
    attention 8k's [2, 2048, 512] where [2, 2048] statistics as rows said 58.6 (fits), as columns 66.3."""
    shapes = [tuple(c.phi.meta.shape) for c in loop.carried]
    total = 0
    for c, shape in zip(loop.carried, shapes, strict=True):
        producer = c.next.producer if c.next is not None else None
        if (not accumulators and isinstance(producer, Op) and producer.kind == "dot" and len(producer.args) > 2
                and producer.args[2] is c.phi):
            continue  # a dot accumulating into it: the MXU adds into the scratch
        if any(len(other) == len(shape) + 1 and other[: len(shape)] == shape for other in shapes):
            total += padded_bytes((*shape, 1), c.phi.meta.dtype)
        else:
            total += _carry_bytes(c.phi.meta.shape, c.phi.meta.dtype)
    return total


def _one_hot_bytes(n: Node, dma: frozenset[int]) -> tuple[int, int] | None:
    """A one-hot gather's (selection matrix + whole gathered block, its one-row-per-position columns) in padded
    bytes; None for any other node, and for an access whose rows are copied by DMA."""
    sizes = gather_sizes(n) if isinstance(n, Load | Store) and id(n) not in dma else None
    if sizes is None:
        return None
    k, r, rest = sizes
    matrix = padded_bytes((k, r), torch.float32) + padded_bytes((r, rest), n.tensor.value.dtype)
    return matrix, padded_bytes((k, rest), torch.float32)


def _gather_temporaries(nodes: list[Node], dma: frozenset[int]) -> float:
    """What the largest one-hot gather in straight-line code holds (GATHER_COLUMNS_FACTOR), or the table-sized
    copies its float gathers make (GATHER_TABLE_FACTOR) when those are more."""
    gathers = [b for b in (_one_hot_bytes(n, dma) for n in nodes) if b is not None]
    one_hot = max((FUSED_FACTOR * matrix + GATHER_COLUMNS_FACTOR * columns for matrix, columns in gathers), default=0.0)
    return max(one_hot, sum(b for _, b in gather_tables(nodes, dma)))


def gather_tables(nodes: list[Node], dma: frozenset[int] = frozenset()) -> list[tuple[Load | Store, int]]:
    """The float one-hot gathers of straight-line code, each with the table-sized copies it makes of the block it
    selects from (GATHER_TABLE_FACTOR x that block as f32): what the VMEM report names, per gathered tensor."""
    out = []
    for n in nodes:
        sizes = gather_sizes(n) if isinstance(n, Load | Store) and id(n) not in dma else None
        if sizes is not None and n.tensor.value.dtype.is_floating_point:
            _, r, rest = sizes
            out.append((n, int(GATHER_TABLE_FACTOR * padded_bytes((r, rest), torch.float32))))
    return out


def largest_gather_tables(nodes: list[Node], dma: frozenset[int] = frozenset()) -> list[tuple[Load | Store, int]]:
    """`gather_tables` of the straight-line region (this one or an inner loop's body) where they add up to most."""
    best = gather_tables(nodes, dma)
    for n in nodes:
        if isinstance(n, InnerLoop):
            inner = largest_gather_tables(n.body, dma)
            if sum(b for _, b in inner) > sum(b for _, b in best):
                best = inner
    return best


def _largest_value(nodes: list[Node], dma: frozenset[int] = frozenset(), reads: Mapping[int, int] | None = None) -> int:
    """Padded bytes of the largest value computed in straight-line code (not descending into loops), the block
    region a picking access reads or merges (`reads`) counted as a value."""
    biggest = max((reads.get(id(n), 0) for n in nodes), default=0) if reads else 0
    for n in nodes:
        outs = n.outputs() if isinstance(n, Op) and n.kind not in ("alloc",) else (n.out,) if isinstance(n, Load) else ()
        for v in outs:
            biggest = max(biggest, padded_bytes(v.meta.shape, v.meta.dtype))
        gather = _one_hot_bytes(n, dma)
        if gather is not None:  # the one-hot selection matrix and the whole gathered block
            biggest = max(biggest, gather[0])
    return biggest
