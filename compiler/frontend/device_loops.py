"""Device loops of a kernel body (tracer.py): `for ... in hl.tile(...) / hl.grid(...)` becomes a `GridLoop`
(outermost: the launch grid) or an `InnerLoop` (nested: with the device values it carries), and a loop whose
bounds are computed on the device becomes an inner loop with a dynamic trip count.

`DeviceLoops` is mixed into `Tracer`; it needs from it: env, region, host, loops, inner_loops, loop_ids,
blocks, caps, ops, eval (expressions.py), assign/exec_block (kernel_statements.py), in_device.
"""

from __future__ import annotations

import ast
from typing import Any

from ..ir.tile_ir import Carried, GridLoop, InnerLoop, TileDim, Value
from ..support.diagnostics import Range, UserError
from .module import assigned_names, target_name
from .values import BlockSize, StaticRange, Tile, TileLoopSpec

DEVICE_EXTENT_HINT = 1 << 16  # extent a device-bounded loop's block size is chosen for until its dims are known


class DeviceLoops:
    """Traces hl.tile / hl.grid loops into IR loops."""

    def exec_for(self, stmt: ast.For) -> None:
        rng = Range.of(stmt)
        header = Range(rng.start, Range.of(stmt.iter).end)
        if stmt.orelse:
            raise UserError("HPL101", "`for ... else` is not supported", rng)
        spec = self.eval(stmt.iter)
        if isinstance(spec, StaticRange):  # one copy of the body per step, the index a constant in each
            for i in spec.items:
                self.assign(stmt.target, i, header)
                self.exec_block(stmt.body)
            return
        if not isinstance(spec, TileLoopSpec):
            raise UserError(
                "HPL101", "device loops must iterate over hl.tile(...) or hl.grid(...)", Range.of(stmt.iter)
            )
        known = [i for i in range(len(spec.extents)) if spec.device_bounds is None or spec.device_bounds[i] is None]
        if spec.lanes is None and any(spec.extents[i] == spec.begins[i] for i in known):
            self.empty_loops += 1
            return  # a zero-size dimension: no step runs, the body is neither traced nor emitted (as torch runs it)
        loop_id = self.loop_ids
        self.loop_ids += 1
        dims = []
        if spec.device_bounds is not None:
            self._device_loop(stmt, spec, loop_id, rng, header)
            return
        for axis, (extent, begin, bs) in enumerate(zip(spec.extents, spec.begins, spec.block_sizes, strict=True)):
            if spec.api == "grid":
                block, index = 1, None
            elif isinstance(bs, BlockSize):
                block, index = int(bs), bs.index
            elif isinstance(bs, int):
                block, index = bs, None
            else:
                b = self.blocks.allocate(extent - begin, header)
                block, index = int(b), b.index
            if block <= 0:
                raise UserError("HPL109", f"block size must be positive, got {block}", header)
            name = target_name(stmt.target, axis)
            # a block larger than the range is the whole range (a Pallas block may not be larger than its dim)
            dims.append(TileDim(loop_id, axis, extent, min(block, max(1, extent - begin)), begin, spec.api, index,
                                name, spec.parent))
        tiles = [Tile(d) for d in dims]
        bound = tuple(tiles) if spec.multi else tiles[0]
        if self.in_device:
            self._inner_loop(stmt, dims, bound, rng)
        else:
            self._grid_loop(stmt, dims, bound, rng, header)

    def _device_loop(self, stmt: ast.For, spec: TileLoopSpec, loop_id: int, rng: Range, header: Range) -> None:
        """`hl.tile(begin, end)` with a bound computed on the device: an inner loop with a dynamic trip count."""
        if not self.in_device:
            raise UserError("HPL106", "a loop whose bounds are computed on the device must be nested in an "
                                      "hl.grid / hl.tile loop", header)
        dims = []
        for axis, (bounds, extent, begin, bs) in enumerate(zip(spec.device_bounds, spec.extents, spec.begins,
                                                               spec.block_sizes, strict=True)):
            if isinstance(bs, BlockSize):
                block, index = int(bs), bs.index
            elif isinstance(bs, int):
                block, index = bs, None
            else:
                b = self.blocks.allocate(DEVICE_EXTENT_HINT if bounds is not None else extent - begin, header)
                block, index = int(b), b.index
            if block <= 0:
                raise UserError("HPL109", f"block size must be positive, got {block}", header)
            name = target_name(stmt.target, axis)
            if bounds is None:
                dims.append(TileDim(loop_id, axis, extent, min(block, max(1, extent - begin)), begin, "tile", index,
                                    name))
                continue
            block = min(block, self.caps.get((loop_id, axis), block))
            for bound, what in zip(bounds, ("start", "end"), strict=True):
                if isinstance(bound, Value) and bound.hint is None:  # named in the generated code
                    bound.hint = f"{name}_{what}"
            lanes, lane_dims = spec.lanes or (None, ())
            if lanes is not None and lanes.hint is None:
                lanes.hint = f"{name}_ends"
            dims.append(TileDim(loop_id, axis, block, block, 0, "tile", index, name, None, bounds[0], bounds[1],
                                lanes, lane_dims))
        tiles = [Tile(d) for d in dims]
        self._inner_loop(stmt, dims, tuple(tiles) if spec.multi else tiles[0], rng)

    def _grid_loop(self, stmt: ast.For, dims: list[TileDim], bound: Any, rng: Range, header: Range) -> None:
        loop = GridLoop(rng, tuple(dims), [], header)
        self.host.append(loop)
        saved_env = dict(self.env)
        self._trace_body(loop, stmt, bound, rng)
        # names bound inside the grid loop are device values: they do not exist after it
        self.env = saved_env

    def _trace_body(self, loop: GridLoop | InnerLoop, stmt: ast.For, bound: Any, rng: Range) -> None:
        """Bind the loop variables and trace the body into the loop's region, then return to the outer one."""
        outer_region = self.region
        self.loops.append(loop)
        self.region = loop.body
        try:
            self.assign(stmt.target, bound, rng)
            self.exec_block(stmt.body)
        finally:
            self.loops.pop()
            self.region = outer_region

    def _inner_loop(self, stmt: ast.For, dims: list[TileDim], bound: Any, rng: Range) -> None:
        assigned = assigned_names(tuple(stmt.body))
        carried = []
        for name in sorted(assigned):
            cur = self.env.get(name)
            if isinstance(cur, Value) and cur.space == "device":
                phi = Value(cur.meta, "device", hint=name)
                carried.append(Carried(name, cur, phi))
        loop = InnerLoop(rng, tuple(dims), [], carried, index=len(self.inner_loops),
                         depth=sum(isinstance(lp, InnerLoop) for lp in self.loops) + 1)
        self.inner_loops.append(loop)
        outer_region = self.region
        outer_region.append(loop)
        before = dict(self.env)
        for c in carried:
            self.env[c.name] = c.phi
        self._trace_body(loop, stmt, bound, rng)
        for c in carried:
            nxt = self.env[c.name]
            if not isinstance(nxt, Value) or nxt.space != "device":
                raise UserError("HPL105", f"loop-carried `{c.name}` must stay a tensor", rng)
            if tuple(nxt.shape) != tuple(c.phi.shape):
                raise UserError(
                    "HPL105",
                    f"loop-carried `{c.name}` changes shape from {list(c.phi.shape)} to {list(nxt.shape)} in the loop",
                    rng,
                )
            if nxt.dtype != c.phi.dtype:
                self.region = loop.body
                nxt = self.ops.cast(nxt, c.phi.dtype, rng)
                self.region = outer_region
            c.next = nxt
            c.result = Value(c.phi.meta, "device", hint=c.name)
        # values first defined inside the loop do not survive it
        self.env = {k: v for k, v in before.items()}
        for c in carried:
            self.env[c.name] = c.result
