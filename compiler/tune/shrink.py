"""Reduced shapes for checking a config's correctness: same config, same tile structure, far less work.

A correctness run in interpret mode on the real shapes would take hours; what must be preserved is the
structure the config gives the generated code: the same block sizes, loop strategies, memory placement
and buffering, each tiled dimension still split into several tiles (two, or one when it had one), the
same ragged last tiles, the same blocks that span a whole dimension. Shrinking is a search over argument
shapes, checked by compiling: a candidate is accepted only when the plan it compiles to has the original
plan's structure.

Dimensions are shrunk by value first (every dimension of size 8192 becomes the same smaller size, which
keeps shapes that must agree in agreement), then position by position where a kernel allows it (queries
shorter than keys, for instance), then in pairs by a common factor where neither moves alone (a matmul's K
in x and in w once N, of the same size, has kept its two tiles; int4_gemm's K in A and K // 2 in B). A
dimension an inner loop walks that was exactly the loop's extent stays so, and dimensions one inner loop walks
that were the same size stay the same size: the extent may come from another argument, and the kernel (or the
file's own reference) needs them to agree. Lane and sublane dimensions are not taken
below 128 (or their size).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..api import Kernel
from ..ir.chips import Chip
from ..ir.plan import KernelPlan
from ..ir.specs import ArgSpec, TensorSpec
from ..support.diagnostics import CompileError

LANE_FLOOR = 128  # the lane width: a minor dimension keeps at least this many elements (or all it has)
SUBLANE_UNIT = 16  # rows of a packed 16-bit tile (a multiple of the 8 rows of a 32-bit one)
TILES = 2  # tiles kept along each tiled dimension that had at least this many
PAIR_TRIALS = 24  # compiles spent on dimensions that shrink only in pairs (each ~1-10 ms)


@dataclass(frozen=True)
class _Structure:
    """What a reduced shape must preserve of a plan, and the tile counts it is measured by."""

    shape: tuple[Any, ...]  # must be equal
    counts: tuple[int, ...]  # tiles per loop dimension and inner-loop trips: must be >= min(original, TILES)


def _structure(plan: KernelPlan) -> _Structure:
    shape: list[Any] = []
    counts: list[int] = []
    for lp in plan.loops:
        ragged = tuple(e % b != 0 for e, b in zip(lp.extents, lp.block_sizes, strict=True))
        shape.append((lp.kind, lp.api, lp.block_sizes, lp.strategy, ragged))
        counts.extend(lp.steps)
    for call in plan.calls:
        walkers = {lp.index: lp for lp in call.inner_loops}
        for op in call.operands:
            full = tuple(
                None if b is None else b >= a for b, a in zip(op.block_shape, op.array_shape, strict=True)
            )
            # a dim an inner loop walks that is exactly the loop's extent stays so: the extent may come from
            # another argument (int4_gemm walks B's K // 2 rows with a loop over A's K // 2)
            walker = walkers.get(op.inner_loop)
            exact = tuple(op.array_shape[d] == walker.extent for d in op.inner_axes) if walker else ()
            shape.append((op.name, op.kind, op.memory, op.buffer_count, op.grid_axes, op.inner_loop, full, exact))
        shape.append(tuple((s.name, s.role) for s in call.scratch))
        for lp in call.inner_loops:
            shape.append((lp.strategy, lp.block_size))
            counts.append(lp.trips)
            # dims one loop walks that were the same size stay the same size: upstream rms_norm_bwd walks x's,
            # grad_out's and rsqrt's rows with one loop over x's, and grad_out's alone shrank (384 rows of 512)
            walked = [op.array_shape[d] for op in call.operands if op.inner_loop == lp.index for d in op.inner_axes]
            shape.append(tuple(a == b for a, b in itertools.combinations(walked, 2)))
    return _Structure(tuple(shape), tuple(counts))


def _keeps(original: _Structure, reduced: _Structure) -> bool:
    return original.shape == reduced.shape and all(
        r >= min(o, TILES) for o, r in zip(original.counts, reduced.counts, strict=True)
    )


@dataclass(frozen=True)
class _Layout:
    """What a dimension's layout requires of a smaller size: at least `floor`, the same residue mod `unit`."""

    floor: int = 1
    unit: int = 1

    def merge(self, other: _Layout) -> _Layout:
        return _Layout(max(self.floor, other.floor), math.lcm(self.unit, other.unit))


def _layout(spec: TensorSpec, i: int) -> _Layout:
    """Minor dims keep their padding in (sublane, 128-lane) tiles: lanes mod 128, sublanes mod 16."""
    n, d = len(spec.shape), spec.shape[i]
    if i == n - 1:
        return _Layout(min(d, LANE_FLOOR), LANE_FLOOR)
    if i == n - 2:
        return _Layout(min(d, LANE_FLOOR), SUBLANE_UNIT)
    return _Layout()


def _candidates(size: int, blocks: list[int], layout: _Layout) -> list[int]:
    """Smaller sizes worth trying for a dimension of `size`, ascending: a few tiles of each block size
    (keeping the remainder, so a ragged last tile stays ragged), and halvings."""
    out: set[int] = set()
    for m in {1, layout.unit, *blocks}:
        if m < size:
            rest = size % m
            out.update(rest + t * m for t in (1, 2, 3))
    half = size
    while half % 2 == 0 and half > 1:
        half //= 2
        out.add(half)
    return sorted(c for c in out if layout.floor <= c < size and c % layout.unit == size % layout.unit)


def _apply(args: Mapping[str, ArgSpec], sizes: Mapping[tuple[str, int], int]) -> dict[str, ArgSpec]:
    out: dict[str, ArgSpec] = {}
    for name, spec in args.items():
        if isinstance(spec, TensorSpec):
            shape = tuple(sizes.get((name, i), d) for i, d in enumerate(spec.shape))
            out[name] = spec.resized(shape)
        else:
            out[name] = spec
    return out


def reduced_args(
    kernel: Kernel, args: Mapping[str, ArgSpec], config: Mapping[str, Any], chip: Chip
) -> dict[str, ArgSpec]:
    """The smallest argument shapes (found greedily) whose compiled plan keeps the structure of `args`'.

    Raises CompileError when `config` does not compile for `args` itself.
    """
    original = _structure(kernel.compile(args=dict(args), config=dict(config), chip=chip, emit=False).plan)
    blocks = [b for b in config.get("block_sizes", []) if isinstance(b, int)]
    positions = [(n, i) for n, s in args.items() if isinstance(s, TensorSpec) for i in range(len(s.shape))]
    layouts: dict[int, _Layout] = {}
    for n, i in positions:
        size = args[n].shape[i]
        layouts[size] = layouts.get(size, _Layout()).merge(_layout(args[n], i))
    sizes: dict[tuple[str, int], int] = {}

    def accept(trial: dict[tuple[str, int], int]) -> bool:
        try:
            plan = kernel.compile(args=_apply(args, trial), config=dict(config), chip=chip, emit=False).plan
        except CompileError:
            return False
        return _keeps(original, _structure(plan))

    # 1. by value: dimensions of equal size shrink together
    for value in sorted({args[n].shape[i] for n, i in positions}, reverse=True):
        where = [(n, i) for n, i in positions if args[n].shape[i] == value]
        for cand in _candidates(value, blocks, layouts[value]):
            trial = {**sizes, **dict.fromkeys(where, cand)}
            if accept(trial):
                sizes = trial
                break
    def size(pos: tuple[str, int]) -> int:
        return sizes.get(pos, args[pos[0]].shape[pos[1]])

    # 2. position by position, where the kernel lets one dimension differ from its equals
    stuck = []
    for pos in positions:
        name, i = pos
        for cand in _candidates(size(pos), blocks, _layout(args[name], i)):
            trial = {**sizes, pos: cand}
            if accept(trial):
                sizes = trial
                break
        else:
            stuck.append(pos)
    # 3. two dimensions that shrink only together (int4_gemm's A[:, K] and B[K // 2, :]; a matmul's x[:, K] and
    # w[K, :] when N is as large), by the largest common factor that keeps the structure: equal sizes first, at
    # most PAIR_TRIALS compiles
    pairs = sorted(itertools.combinations([p for p in stuck if size(p) > 1], 2),
                   key=lambda pq: size(pq[0]) != size(pq[1]))
    trials, moved = 0, set()
    for p, q in pairs:
        if p in moved or q in moved or trials >= PAIR_TRIALS:
            continue
        a, b = size(p), size(q)
        best = None
        for factor in _common_factors(a, b, _layout(args[p[0]], p[1]), _layout(args[q[0]], q[1])):
            if trials >= PAIR_TRIALS:
                break
            trials += 1  # smallest factor first: a pair that cannot shrink by it costs one compile
            trial = {**sizes, p: a // factor, q: b // factor}
            if not accept(trial):
                break
            best = trial
        if best is not None:
            sizes, moved = best, moved | {p, q}
    return _apply(args, sizes)


def _common_factors(a: int, b: int, layout_a: _Layout, layout_b: _Layout) -> list[int]:
    """The factors dividing both sizes that leave each within its layout, smallest first."""

    def fits(size: int, layout: _Layout) -> bool:
        return size >= layout.floor and size % layout.unit == 0

    return [f for f in range(2, math.gcd(a, b) + 1)
            if a % f == 0 and b % f == 0 and fits(a // f, layout_a) and fits(b // f, layout_b)]


def work_ratio(original: Mapping[str, ArgSpec], reduced: Mapping[str, ArgSpec]) -> float:
    """Elements of the reduced tensors over the original's (how much smaller the check is)."""

    def elems(args: Mapping[str, ArgSpec]) -> int:
        return sum(math.prod(s.shape) for s in args.values() if isinstance(s, TensorSpec))

    return elems(reduced) / max(1, elems(original))
