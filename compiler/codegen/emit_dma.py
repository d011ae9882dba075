"""The generated code of gathers and scatters whose rows are copied by DMA (planned by codegen/dma.py).

A gather defines `<t>_gathered_fetch(<loop positions>, slot)`, which starts one `pltpu.make_async_copy` per
position into slot `slot` of its VMEM buffer, and `<t>_gathered_wait(slot)`. Prefetched gathers are fetched for the
first step before their loop (or at the launch grid's first step) and, at each step, for the next step into
the other slot before this step's copies are waited for. A scatter writes its values into a staging buffer, starts
one copy per valid position and waits for them at the end of the loop body (or grid step) it is in.
"""

from __future__ import annotations

import math

from ..ir.tile_ir import HostTensor, InnerLoop, Load, Node, Store
from .dma import CHUNK, DmaAccess, ScalarIndex
from .exprs import dtype_text, literal
from .loops import shortest_indexed_dim
from .plan_builder import CallLayout

HELPERS = {
    "pick_lanes": (
        "def _pick_lanes(chunks, lanes):\n"
        '    """chunks[..., lanes[...]]: the element each position gathered, out of the 128-lane chunk copied for it."""\n'
        "    hit = jax.lax.broadcasted_iota(jnp.int32, chunks.shape, chunks.ndim - 1) == lanes[..., None]\n"
        "    return jnp.sum(jnp.where(hit, chunks, 0), axis=-1, dtype=chunks.dtype)\n"
    ),
    "last_writer": (
        "def _last_writer(values, idx, valid):\n"
        '    """Each row of a scatter\'s values replaced by the row of the last valid position with the same index\n'
        "    (torch keeps the later write), so copies that land on one row all carry the same bytes. `valid`: int32,\n"
        "    0 at a partial tile's padding positions (Mosaic reshapes no booleans).\"\"\"\n"
        "    k = idx.shape[0]\n"
        "    later = jax.lax.broadcasted_iota(jnp.int32, (k, k), 1)\n"
        "    same = (idx[:, None] == idx[None, :]) & (valid.reshape(1, k) != 0) \\\n"
        "        & (later >= jax.lax.broadcasted_iota(jnp.int32, (k, k), 0))\n"
        "    last = jnp.max(jnp.where(same, later, -1), axis=1)\n"
        "    last = jnp.where(last < 0, jax.lax.broadcasted_iota(jnp.int32, (k,), 0), last)\n"
        "    values = jnp.where(valid.reshape(k, 1) != 0, values, 0)  # padding rows (NaN in interpret mode) stay out\n"
        "    return _one_hot_rows(last[:, None] == later, values)\n"
    ),
}


class DmaWriter:
    """Mixin of `KernelWriter`: needs layout, names, out, loop_vars, grid_names, ref(), tile_begin(),
    use_helper(), in_ref(), out_ref() and `writer` (the ExprWriter)."""

    layout: CallLayout
    grid_step: str = ""  # the launch grid's step number (set when a gather is prefetched across steps)

    # -- where the copies are issued -------------------------------------------------------------------------

    def dma_prologue(self, indent: int) -> None:
        """Fetch functions of gathers prefetched across the launch grid's steps."""
        grid = [d for d in self.layout.dma.values() if d.kind == "gather" and d.prefetch and d.loop is None]
        if not grid:
            return
        names = self._grid_vars()
        if len(names) > 1:
            steps = [d.steps for d in self.layout.grid_dims]
            terms = [f"{n} * {math.prod(steps[i + 1:])}" if math.prod(steps[i + 1:]) > 1 else n
                     for i, n in enumerate(names)]
            self.grid_step = self.names.fresh("grid_step")
            self.out.add(indent, f"{self.grid_step} = {' + '.join(terms)}  # the grid runs in order: step number")
        else:
            self.grid_step = names[0]
        for d in grid:
            self._fetch_functions(indent, d, names)

    def dma_before_loop(self, indent: int, loop: InnerLoop) -> None:
        """Fetch functions of gathers and windows prefetched across `loop`, and the fetch for its first step."""
        for d in self.layout.dma.values():
            if d.kind == "window_store" and d.loop is loop:
                self._window_store_wait(indent, d)
            if d.kind in ("gather", "window_load") and d.prefetch and d.loop is loop:
                var = self.loop_vars[(loop.dims[0].loop_id, loop.dims[0].axis)]
                if d.kind == "gather":
                    self._fetch_functions(indent, d, [var])
                else:
                    self._window_functions(indent, d, var)
                trips = self._trips(loop)
                if trips.isdigit():
                    self.out.add(indent, f"{d.buffer}_fetch(0, 0)  # rows for the first step", d.node.range)
                else:
                    fn = self.names.fresh(f"{d.buffer}_first")
                    self.out.add(indent, f"@pl.when({trips} > 0)  # rows for the first step", d.node.range)
                    self.out.add(indent, f"def {fn}():")
                    self.out.add(indent + 1, f"{d.buffer}_fetch(0, 0)")

    def dma_load(self, indent: int, n: Load) -> None:
        d = self.layout.dma[id(n)]
        if d.prefetch:
            if d.loop is None:
                names = self._grid_vars()
                current, total = self.grid_step, str(math.prod(dim.steps for dim in self.layout.grid_dims))
                following = self._unravel(f"{current} + 1")
                first = ", ".join(["0"] * len(names))
            else:
                current = self.loop_vars[(d.loop.dims[0].loop_id, d.loop.dims[0].axis)]
                total, following, first = self._trips(d.loop), [f"{current} + 1"], None
            slot = self.names.fresh(f"{d.buffer}_slot")
            self.out.add(indent, f"{slot} = {current} % 2", n.range)
            if first is not None:
                fn = self.names.fresh(f"{d.buffer}_first")
                self.out.add(indent, f"@pl.when({current} == 0)  # rows for the first step")
                self.out.add(indent, f"def {fn}():")
                self.out.add(indent + 1, f"{d.buffer}_fetch({first}, 0)")
            fn = self.names.fresh(f"{d.buffer}_next")
            self.out.add(indent, f"@pl.when({current} + 1 < {total})  # the next step's rows, while this one runs")
            self.out.add(indent, f"def {fn}():")
            self.out.add(indent + 1, f"{d.buffer}_fetch({', '.join(following)}, 1 - {slot})")
        else:
            self._fetch_functions(indent, d, [])
            slot = "0"
            self.out.add(indent, f"{d.buffer}_fetch(0)", n.range)
        self.out.add(indent, f"{d.buffer}_wait({slot})", n.range)
        rows = f"{d.buffer}[{slot}]"
        if n.out.hint is None and n.out.id not in self.names.of:  # readable: named after what it holds
            self.names.bind(n.out, self.names.fresh(f"{n.tensor.name}_{'block' if d.tile else 'rows'}"))
        if d.kind == "window_load":
            self.out.add(indent, f"{self.name_of(n.out)} = {rows}  # the window of `{n.tensor.name}` copied by DMA",
                         n.range)
            return
        if d.chunk:
            self.use_helper("pick_lanes")
            self.use_helper("wrap_index")
            idx, _ = self.ref(d.index)
            rows = f"_pick_lanes({rows}, _wrap_index({idx}, {self._rows(d)}) % {CHUNK})"
        if (d.index.shape if d.chunk else d.copy_shape) != tuple(n.out.shape):
            rows = f"{rows}.reshape{literal(tuple(n.out.shape))}"
        name = self.name_of(n.out)
        self.out.add(indent, f"{name} = {rows}  # rows of `{n.tensor.name}` copied by DMA", n.range)

    def dma_store(self, indent: int, n: Store) -> None:
        d = self.layout.dma[id(n)]
        if d.kind == "window_store":
            self._window_store(indent, n, d)
            return
        dtype = n.tensor.value.dtype
        value, atomic = self.ref(n.value)
        region = tuple(d.index.shape) + tuple(d.row_shape)
        if tuple(n.value.shape) != region:
            value, atomic = f"jnp.broadcast_to({value}, {literal(region)})", True
        if n.value.dtype != dtype:
            value, atomic = f"{value if atomic else '(' + value + ')'}.astype({dtype_text(dtype)})", True
        rows = (d.positions, math.prod(d.row_shape))
        value = f"{value if atomic else '(' + value + ')'}.reshape{literal(rows)}"
        index = ScalarIndex(self.tile_begin, self._block_id, self._smem_ref)
        pos = self._positions(d, "j")
        text = index.render(d.index, pos)
        if d.positions > 1:
            self.use_helper("last_writer")
            self.use_helper("wrap_index")
            idx, _ = self.ref(d.index)
            flat = f"_wrap_index({idx}, {self._rows(d)}).reshape({d.positions})"
            valid = " & ".join(f"({self.writer.valid(td, tuple(d.index.shape), axis)})" for td, axis in
                               self._padding(n, index))
            valid = f"({valid}).astype(jnp.int32).reshape({d.positions})" if valid else \
                f"jnp.ones(({d.positions},), jnp.int32)"
            value = f"_last_writer({value}, {flat}, {valid})"
        self.out.add(indent, f"{d.buffer}[...] = {value}.reshape{literal(d.buffer_shape)}  # rows to scatter",
                     n.range)
        cond = self._valid_text(self._padding(n, index), pos)
        self.use_helper("wrap_index")
        put, wait = f"{d.buffer}_put", f"{d.buffer}_put_wait"
        for fn, verb, row in ((put, "start", f"_wrap_index({text}, {self._rows(d)})"), (wait, "wait", "0")):
            self.out.add(indent, f"def {fn}():")
            body = self.names.fresh("copy_row")
            self.out.add(indent + 1, f"def {body}(j, carry):")
            self._unravel_positions(indent + 2, d)
            inner = indent + 2
            if cond:
                guard = self.names.fresh("when_valid")
                self.out.add(inner, f"@pl.when({cond})  # a position past a partial tile's end writes nothing")
                self.out.add(inner, f"def {guard}():")
                inner += 1
            hbm, vmem = self._row_refs(d, row, ["j" if verb == "start" else "0"], None)
            self.out.add(inner, f"pltpu.make_async_copy({vmem}, {hbm}, {d.sem}.at[0]).{verb}()")
            self.out.add(indent + 2, "return carry")
            self.out.add(indent + 1, f"jax.lax.fori_loop(0, {d.positions}, {body}, None)")
        self.out.add(indent, f"{put}()  # copy each row to `{n.tensor.name}` (waited for at the end of the step)",
                     n.range)

    def dma_region_end(self, indent: int, nodes: list[Node]) -> None:
        """A scatter's copies complete before its loop body (or grid step) ends: the next one reads them."""
        for n in nodes:
            d = self.layout.dma.get(id(n))
            if d is not None and d.kind == "scatter":
                self.out.add(indent, f"{d.buffer}_put_wait()  # the rows copied into `{n.tensor.name}` have landed")

    # -- device-bounded windows -------------------------------------------------------------------------------

    def _window_functions(self, indent: int, d: DmaAccess, var: str) -> None:
        """`<buffer>_fetch(step, slot)` / `<buffer>_wait(slot)` for the window of a device-bounded tile: the same
        `block` rows the resident read would take (its start clamped inside the arrays the tile indexes)."""
        td = d.tile
        lo = self.writer.arg(td.lo, True)
        first = f"{var} * {td.block_size}" if lo == "0" else f"{lo} + {var} * {td.block_size}"
        shortest = shortest_indexed_dim(self.layout.grid.body, td)
        start = f"jnp.clip({first}, 0, {shortest - td.block_size})"
        self.out.add(indent, f"def {d.buffer}_fetch({var}, slot):", d.node.range)
        self.out.add(indent + 1, f'"""Start copying step `{var}`\'s window of `{d.node.tensor.name}` into slot `slot` (DMA)."""')
        self.out.add(indent + 1, f"pltpu.make_async_copy({self._window_ref(d, start, td.block_size)}, {d.buffer}.at[slot], "
                                 f"{d.sem}.at[slot]).start()")
        self.out.add(indent, f"def {d.buffer}_wait(slot):")
        self.out.add(indent + 1, f"pltpu.make_async_copy({self._window_ref(d, '0', td.block_size)}, {d.buffer}.at[slot], "
                                 f"{d.sem}.at[slot]).wait()")

    def _window_ref(self, d: DmaAccess, start: str, size: int) -> str:
        op = self.layout.by_node[id(d.node)]
        ref = self.in_ref(op) if d.kind == "window_load" else self.out_ref(op)
        parts = [str(it[1]) if it[0] == "int" else self.tile_begin(it[1]) for it in d.before]
        parts.append(f"pl.ds({start}, {size})")
        parts += [":" if it[0] == "full" else str(it[1]) if it[0] == "int" else self.tile_begin(it[1]) for it in d.rest]
        while parts and parts[-1] == ":":
            parts.pop()
        return f"{ref}.at[{', '.join(parts)}]"

    def _window_store(self, indent: int, n: Store, d: DmaAccess) -> None:
        """The step's rows inside the loop's range, [first, min(end, window + block)), copied out of one slot of
        a two-slot staging buffer in power-of-two runs (a run's length must be known when the code is compiled);
        the window's other rows belong to other steps or segments and are not written. A slot's copies are
        waited for when the slot comes round again, two steps later (and after the loop)."""
        td = d.tile
        dtype = n.tensor.value.dtype
        value, atomic = self.ref(n.value)
        if tuple(n.value.shape) != d.row_shape:
            value, atomic = f"jnp.broadcast_to({value}, {literal(d.row_shape)})", True
        if n.value.dtype != dtype:
            value = f"{value if atomic else '(' + value + ')'}.astype({dtype_text(dtype)})"
        step = self.loop_vars[(d.loop.dims[0].loop_id, d.loop.dims[0].axis)]
        slot = self.names.fresh(f"{d.buffer}_slot")
        self.out.add(indent, f"{slot} = {step} % 2", n.range)
        fn = self.names.fresh(f"{d.buffer}_free")
        self.out.add(indent, f"@pl.when({step} >= 2)  # this slot's copies from two steps ago have landed")
        self.out.add(indent, f"def {fn}():")
        self.out.add(indent + 1, f"{d.buffer}_wait({slot})")
        self.out.add(indent, f"{d.buffer}[{slot}] = {value}  # the step's window, to copy out", n.range)
        first, window = self.device_positions[(td.loop_id, td.axis)]
        count, skip = self.names.fresh(f"{d.buffer}_rows"), self.names.fresh(f"{d.buffer}_skip")
        hi = self.writer.tile_limit(td)
        self.out.add(indent, f"{count} = jnp.minimum({hi}, {window} + {td.block_size}) - {first}  # rows in range")
        self.out.add(indent, f"{skip} = {first} - {window}  # window rows before this step's first position")
        self.out.add(indent, f"{d.buffer}_count[{slot}] = {count}")
        self.out.add(indent, f"for run in {literal(tuple(self._runs(d)))}:  # copied out, waited for two steps later")
        guard = self.names.fresh("copy_run")
        self.out.add(indent + 1, f"@pl.when(({count} & run) != 0)")
        self.out.add(indent + 1, f"def {guard}(run=run):")
        self.out.add(indent + 2, f"at = {count} & -(2 * run)  # rows the longer runs copied")
        src = f"{d.buffer}.at[{slot}, pl.ds({skip} + at, run)]"
        self.out.add(indent + 2, f"pltpu.make_async_copy({src}, {self._window_ref(d, f'{first} + at', 'run')}, "
                                 f"{d.sem}.at[{slot}]).start()", n.range)

    def _window_store_wait(self, indent: int, d: DmaAccess) -> None:
        """`<buffer>_wait(slot)`: the runs a step copied out of `slot` (their rows' count kept in SMEM)."""
        self.out.add(indent, f"def {d.buffer}_wait(slot):", d.node.range)
        self.out.add(indent + 1, f'"""The copies a step of `{d.tile.name}` made out of `slot` have landed."""')
        self.out.add(indent + 1, f"rows = {d.buffer}_count[slot]")
        self.out.add(indent + 1, f"for run in {literal(tuple(self._runs(d)))}:")
        guard = self.names.fresh("wait_run")
        self.out.add(indent + 2, "@pl.when((rows & run) != 0)")
        self.out.add(indent + 2, f"def {guard}(run=run):")
        self.out.add(indent + 3, f"pltpu.make_async_copy({d.buffer}.at[slot, pl.ds(0, run)], "
                                 f"{self._window_ref(d, '0', 'run')}, {d.sem}.at[slot]).wait()")

    def dma_after_loop(self, indent: int, loop: InnerLoop) -> None:
        """The window stores of `loop`'s last two steps, which no later step waited for."""
        for d in self.layout.dma.values():
            if d.kind == "window_store" and d.loop is loop:
                trips = self._trips(loop)
                for back in (2, 1):
                    fn = self.names.fresh(f"{d.buffer}_drain")
                    self.out.add(indent, f"@pl.when({trips} >= {back})  # the copies of the loop's last steps")
                    self.out.add(indent, f"def {fn}():")
                    self.out.add(indent + 1, f"{d.buffer}_wait(({trips} - {back}) % 2)")

    @staticmethod
    def _runs(d: DmaAccess) -> list[int]:
        return [1 << b for b in range(d.tile.block_size.bit_length() - 1, -1, -1)]

    # -- pieces ----------------------------------------------------------------------------------------------

    def _fetch_functions(self, indent: int, d: DmaAccess, params: list[str]) -> None:
        """`<buffer>_fetch(*params, slot)` and `<buffer>_wait(slot)`; params shadow the loop positions the
        index reads, so the caller may pass the next step's."""
        index = ScalarIndex(self.tile_begin, self._block_id, self._smem_ref)
        pos = self._positions(d, "j")
        text = index.render(d.index, pos)
        self.use_helper("wrap_index")
        sig = ", ".join([*params, "slot"])
        what = f"`{d.node.tensor.name}` rows named by the index"
        self.out.add(indent, f"def {d.buffer}_fetch({sig}):", d.node.range)
        self.out.add(indent + 1, f'"""Start copying the {d.positions} {what} into slot `slot` (DMA)."""')
        body = self.names.fresh("copy_row")
        self.out.add(indent + 1, f"def {body}(j, carry):")
        self._unravel_positions(indent + 2, d)
        src, dst = self._row_refs(d, f"_wrap_index({text}, {self._rows(d)})", [p for p, _ in pos], "slot")
        self.out.add(indent + 2, f"pltpu.make_async_copy({src}, {dst}, {d.sem}.at[slot]).start()")
        self.out.add(indent + 2, "return carry")
        self.out.add(indent + 1, f"jax.lax.fori_loop(0, {d.positions}, {body}, None)")
        self.out.add(indent, f"def {d.buffer}_wait(slot):")
        body = self.names.fresh("wait_row")
        self.out.add(indent + 1, f"def {body}(j, carry):")
        src, dst = self._row_refs(d, "0", ["0"] * len(pos), "slot")
        self.out.add(indent + 2, f"pltpu.make_async_copy({src}, {dst}, {d.sem}.at[slot]).wait()")
        self.out.add(indent + 2, "return carry")
        self.out.add(indent + 1, f"jax.lax.fori_loop(0, {d.positions}, {body}, None)")

    def _positions(self, d: DmaAccess, j: str) -> tuple[tuple[str, int], ...]:
        """Position texts of each index dim for the flat position `j` (unravelled in `_unravel_positions`)."""
        shape = d.index.shape
        if len(shape) == 1:
            return ((j, 0),)
        return tuple((f"p{a}", a) for a in range(len(shape)))

    def _unravel_positions(self, indent: int, d: DmaAccess) -> None:
        shape = d.index.shape
        if len(shape) == 1:
            return
        for a in range(len(shape)):
            below = math.prod(shape[a + 1:])
            text = "j" if below == 1 else f"j // {below}"
            self.out.add(indent, f"p{a} = {text} % {shape[a]}" if a else f"p{a} = {text}")

    @staticmethod
    def _padding(n: Store, index: ScalarIndex) -> list[tuple[object, int]]:
        """(partial tile, index axis) whose padding positions a scatter skips (compiler/frontend/masks.py, and the
        tiles its index reads at their positions)."""
        found = {(td, axis) for axis, td in n.padding} | index.partial
        return sorted(found, key=lambda p: (p[1], p[0].loop_id, p[0].axis))

    def _valid_text(self, padding: list[tuple[object, int]], pos: tuple[tuple[str, int], ...]) -> str:
        conds = [f"{self.tile_begin(td)} + {pos[axis][0]} < {td.extent}" for td, axis in padding]
        return " & ".join(f"({c})" for c in conds) if len(conds) > 1 else (conds[0] if conds else "")

    def _rows(self, d: DmaAccess) -> int:
        """How many positions the index addresses (the flat length for a 1-D gather)."""
        return math.prod(d.node.tensor.value.shape) if d.chunk else d.node.tensor.value.shape[0]

    def _row_refs(self, d: DmaAccess, row: str, at: list[str], slot: str | None) -> tuple[str, str]:
        """(HBM side, VMEM side) of one position's copy: `row` the gathered position, `at` its place in the
        buffer (one text per index dim)."""
        op = self.layout.by_node[id(d.node)]
        ref = self.in_ref(op) if d.kind == "gather" else self.out_ref(op)
        lead = ([slot] if slot is not None else []) + at[:-1]
        shape = d.src.value.shape
        one = ", ".join([*lead, f"pl.ds({at[-1]}, 1)", ":"])  # a 2-D copy: [1, lanes] rows
        whole = ", ".join([*lead, at[-1]])
        if d.chunk:
            lanes = f"pl.ds(0, {CHUNK})" if row == "0" else \
                f"pl.ds(pl.multiple_of({row} // {CHUNK} * {CHUNK}, {CHUNK}), {CHUNK})"
            if len(shape) == 1:
                return f"{ref}.at[{lanes}]", f"{d.buffer}.at[{whole}]"
            return self._chunk_ref(ref, row, tuple(shape)), f"{d.buffer}.at[{one}]"
        if len(shape) == 2:
            return f"{ref}.at[pl.ds({row}, 1), :]", f"{d.buffer}.at[{one}]"
        rest = [":" if it[0] == "full" else str(it[1]) if it[0] == "int" else self.tile_begin(it[1])
                for it in d.rest]
        while rest and rest[-1] == ":":
            rest.pop()
        return f"{ref}.at[{', '.join([row, *rest])}]", f"{d.buffer}.at[{whole}]"

    @staticmethod
    def _chunk_ref(ref: str, flat: str, shape: tuple[int, ...]) -> str:
        """A 1-D view's element `flat` read from the array it views: its row, and the 128-lane chunk of it."""
        parts = []
        for a in range(len(shape)):
            below = math.prod(shape[a + 1:])
            at = f"({flat} // {below})" if below > 1 else f"({flat})"
            at = f"{at} % {shape[a]}" if a else at
            if flat == "0":
                parts.append(f"pl.ds(0, {CHUNK})" if a == len(shape) - 1 else "pl.ds(0, 1)" if a == len(shape) - 2
                             else "0")
            elif a == len(shape) - 1:
                parts.append(f"pl.ds(pl.multiple_of({at} // {CHUNK} * {CHUNK}, {CHUNK}), {CHUNK})")
            elif a == len(shape) - 2:
                parts.append(f"pl.ds({at}, 1)")
            else:
                parts.append(at)
        return f"{ref}.at[{', '.join(parts)}]"

    def _block_id(self, d: object) -> str:
        return self.tile_begin(d, as_id=True)

    def _smem_ref(self, t: HostTensor) -> str:
        op = next(o for o in self.layout.operands if o.memory == "smem" and o.tensor.value.id == t.value.id)
        return op.ref_name

    def _grid_vars(self) -> list[str]:
        return [self.grid_names[(dim.loop_id, dim.axis)] for dim in self.layout.grid_dims]

    def _unravel(self, step: str) -> list[str]:
        steps = [d.steps for d in self.layout.grid_dims]
        out = []
        for a in range(len(steps)):
            below = math.prod(steps[a + 1:])
            at = f"({step}) // {below}" if below > 1 else f"({step})"
            out.append(f"{at} % {steps[a]}" if a else at)
        return out

    def _trips(self, loop: InnerLoop) -> str:
        """The loop's trip count as text (computed on the device for a device-bounded loop)."""
        counts = []
        for dim in loop.dims:
            if not dim.dynamic:
                counts.append(str(dim.steps))
                continue
            lo, hi = self.writer.arg(dim.lo, True), self.writer.arg(dim.hi, True)
            counts.append(f"pl.cdiv({hi} - {lo}, {dim.block_size})" if lo != "0" else f"pl.cdiv({hi}, {dim.block_size})")
        return counts[0] if len(counts) == 1 else " * ".join(f"({c})" for c in counts)

