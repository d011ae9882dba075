"""The device kernel function of one pallas_call: refs, program ids, loads/stores with BlockSpec-relative
indexing, and the three inner-loop strategies (unrolled Python loop, lax.fori_loop, nested emit_pipeline)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..frontend import index_exprs as ix
from ..frontend.indexing import Indexer
from ..frontend.values import NamedConst
from ..ir.tile_ir import InnerLoop, KernelIR, Load, Node, Op, Store, TileDim, walk
from ..support.diagnostics import UserError
from . import outputs
from .chunks import one_hot_positions, scatter_chunk
from .emit_base import RESERVED, Names, Output, RegionWriter, about, flat
from .emit_dma import DmaWriter
from .emit_index import IndexWriter, gather_chunk
from .exprs import cast_text, dtype_text, literal
from .loops import loop_strategy, shortest_indexed_dim
from .plan_builder import STEP, CallLayout, OperandLayout, alias_param, py_name


@dataclass
class Unrolled:
    """An open unrolled loop (with those it is nested in): where the reads hoisted out of it go (`at`, the
    line of the outermost, at its `indent`), the names they got (input ref -> name), and how many times its
    body is written (`steps`)."""

    at: int
    indent: int
    names: dict[str, str]
    steps: int


class KernelWriter(DmaWriter, IndexWriter, RegionWriter):
    def __init__(self, ir: KernelIR, layout: CallLayout, config: dict, out: Output):
        self.ir = ir
        self.layout = layout
        self.config = config
        self.kwargs: dict[str, str] = {}
        self.grid_names = {(d.loop_id, d.axis): py_name(d.name) for d in layout.grid.dims}
        self.loop_vars: dict[tuple[int, int], str] = {}
        self.strategy: dict[int, str] = {}
        self.block_refs: dict[tuple[int, str], str] = {}  # (id(operand), "in"/"out") -> ref in a pipeline body
        self.device_positions: dict[tuple[int, int], tuple[str, str]] = {}  # device-bounded tile: (first, window)
        self.window_multiple: dict[tuple[int, int], int] = {}  # device-bounded tile: its window start's multiple
        self.interpret_flag = False  # does the kernel take `interpret` (its chunked gathers and scatters read it)?
        self.unrolled: list[Unrolled | None] = []  # the open inner loops, innermost last (None: not unrolled)
        dma_fns = {f"{d.buffer}_{suffix}" for d in layout.dma.values() for suffix in ("fetch", "wait", "put", "put_wait")}
        names = Names(RESERVED | {o.ref_name for o in layout.operands} | {alias_param(o) for o in layout.operands}
                      | set(layout.scratch.values()) | {s.name for s in layout.scratch_plan} | dma_fns
                      | set(self.grid_names.values()) | {layout.name})
        super().__init__(layout.grid.body, names, out)
        self.helpers = self.writer.helpers
        for d in layout.dma.values():  # a load copied by DMA is statements (wait, then read the buffer)
            if isinstance(d.node, Load):
                self.inline.pop(d.node.out.id, None)

    # -- refs and indexing -----------------------------------------------------------------------------

    def in_ref(self, op: OperandLayout) -> str:
        """Where reads come from: a written tensor's current contents live in its output block."""
        if op.kind != "input":
            return self.out_ref(op)
        if op.memory == "hbm":
            return self.block_refs[(id(op), "in")]
        return op.ref_name

    def out_ref(self, op: OperandLayout) -> str:
        if op.memory == "dma":
            return op.ref_name if op.kind == "output" else f"{op.ref_name[:-4]}_out_hbm"
        if op.memory == "hbm":
            return self.block_refs[(id(op), "out")]
        return op.ref_name if op.kind == "output" else f"{op.ref_name.rsplit('_', 1)[0]}_out_ref"

    def load_expr(self, node: Load) -> str:
        op = self.layout.by_node[id(node)]
        ref = self.in_ref(op)
        text = self.read(op, ref, node)
        gathered = self.gather_axis(op, node)
        if gathered is not None:
            axis, idx = gathered
            chunk = None
            if axis == 0 and text == f"{ref}[...]":  # the whole block: it can be read a chunk at a time
                chunk = gather_chunk(op.block_dims_visible(), one_hot_positions(tuple(idx.shape)), op.tensor.value.dtype)
            if chunk is not None:
                self.use_helper("gather_chunked")
                text = f"_gather_chunked({ref}, {self.ref(idx)[0]}, {self._chunk_text(chunk)})"
            else:
                self.use_helper("gather")
                text = f"_gather({self._once(op, ref) if text == f'{ref}[...]' else text}, {self.ref(idx)[0]}, axis={axis})"
        elif text == f"{ref}[...]":
            text = self._once(op, ref)
        if any(it[0] == "newaxis" for it in node.index):
            idx = []
            for it in node.index:
                if it[0] == "newaxis":
                    idx.append("None")
                elif it[0] in ("tile", "full", "window"):
                    idx.append(":")
                elif it[0] == "gather":
                    idx.extend([":"] * len(it[1].shape))
            text += f"[{', '.join(idx)}]"
        return text

    def tile_begin(self, dim: TileDim, as_id: bool = False, first: bool = False) -> str:
        """Where the tile's block starts: its first position; `first=False` for a device-bounded loop gives
        where its window starts (clamped inside the arrays it reads, so at or before the first position)."""
        key = (dim.loop_id, dim.axis)
        if dim.dynamic and not as_id:
            first_var, window = self.device_positions[key]
            return first_var if first else window
        var = self.grid_names.get(key) or self.loop_vars.get(key)
        if var is None:
            raise UserError("HPL101", f"tile `{dim.name}`'s position is not available inside an emit_pipeline loop; "
                                      "use pallas_loop_type 'unroll' or 'fori_loop'", None)
        if as_id or dim.api == "grid":
            return var if not dim.begin or as_id else f"{var} + {dim.begin}"
        text = f"{var} * {dim.block_size}"
        if dim.parent is not None:
            return f"{self.tile_begin(dim.parent)} + {text}"
        return text + (f" + {dim.begin}" if dim.begin else "")

    # -- the kernel function ---------------------------------------------------------------------------

    def write(self) -> KernelWriter:
        lay = self.layout
        params = [alias_param(o) for o in lay.inputs]
        params += [self._sig_out(o) for o in lay.outputs]
        params += [s.name for s in lay.scratch_plan]
        consts = self._named_consts()
        self.names.used.update(consts)
        sig = ", ".join(params)
        if consts:
            sig += ", *, " + ", ".join(consts)
        grid = lay.grid
        header = len(self.out.lines)
        self.out.add(0, f"def {lay.name}({sig}):", grid.header_range)
        self.out.add(1, f'"""Device kernel for the `{self.ir.name}` grid loop (one grid step = one block of each tile)."""')
        for axis, d in enumerate(lay.grid_dims):
            self.out.add(1, f"{self.grid_names[(d.loop_id, d.axis)]} = pl.program_id({axis})", grid.header_range)
        self.dma_prologue(1)
        for o in lay.outputs:
            if o.reads_old and o.memory != "hbm":
                names = [self.grid_names[(d.loop_id, d.axis)] for d in lay.grid_dims]
                self._copy_in(1, o, o.ref_name, self.out_ref(o), list(o.grid_axes), [d.steps for d in lay.grid_dims],
                              names)
        self.region(1, grid.body)
        if self.interpret_flag:  # known once the body is written: the flag joins the keyword-only params
            flag = "interpret: bool"
            self.out.lines[header] = self.out.lines[header].replace(
                f"def {lay.name}({sig}):", f"def {lay.name}({sig}{', ' if consts else ', *, '}{flag}):", 1)
        return self

    def _chunk_text(self, chunk: int) -> str:
        """A chunked gather's or scatter's chunk: libtpu's small one (minutes for a long block's one-hot at once),
        or in interpret mode None: the whole block at once by the helper's direct path (jnp's gather or scatter),
        since the CPU interpreter pays for each loop step and for every element of a one-hot (upstream
        jagged_layer_norm's scatters: 47.6 CPU s a call by one-hots, 1.0 direct). The values are the same. The
        kernel takes `interpret` from the host (`bool(interpret)`: Pallas's own argument may be its params)."""
        if not self.interpret_flag:
            self.interpret_flag = True
            self.kwargs["interpret"] = "bool(interpret)"
        return f"None if interpret else {chunk}"

    def _copy_in(self, indent: int, o: OperandLayout, src: str, dst: str, axes: list[int], steps: list[int],
                 names: list[str]) -> None:
        """The old contents of a block that is read back (or only partly written) go into its output block
        once, when the first step of a run of steps visiting that block begins (outputs.py)."""
        cond = outputs.first_visit(axes, steps, names)
        copy = f"{dst}[...] = {src}[...]"
        if cond is None:
            self.out.add(indent, f"{copy}  # old contents of `{o.tensor.name}`: read back or partly written", about(o.ranges[0]))
            return
        fn = self.names.fresh(f"copy_in_{py_name(o.tensor.name)}")
        self.out.add(indent, f"@pl.when({cond})  # first step on this block of `{o.tensor.name}`", about(o.ranges[0]))
        self.out.add(indent, f"def {fn}():")
        self.out.add(indent + 1, copy, about(o.ranges[0]))

    def _sig_out(self, o: OperandLayout) -> str:
        if o.memory in ("hbm", "dma"):
            return o.ref_name if o.kind == "output" else f"{o.ref_name[:-4]}_out_hbm"
        return self.out_ref(o)

    def _named_consts(self) -> list[str]:
        found: dict[str, NamedConst] = {}
        for n in walk(self.layout.grid.body):
            if isinstance(n, Op):
                for a in flat(list(n.args) + list(n.kwargs.values())):
                    if isinstance(a, NamedConst):
                        found[a.name] = a
        for name, c in found.items():
            self.kwargs[name] = name if c.is_arg else literal(c.value)
        return list(found)

    def region(self, indent: int, nodes: list[Node]) -> None:
        for n in nodes:
            if id(n) in self.layout.dma:
                if isinstance(n, Load):
                    self.dma_load(indent, n)
                else:
                    self.dma_store(indent, n)
            elif isinstance(n, Op | Load):
                self.define(indent, n)
            elif isinstance(n, Store):
                self.store(indent, n)
            elif isinstance(n, InnerLoop):
                self.inner_loop(indent, n)
        self.dma_region_end(indent, nodes)

    def store(self, indent: int, n: Store) -> None:
        op = self.layout.by_node[id(n)]
        ref = self.out_ref(op)
        idx = self.index_text(op, n)
        region = Indexer.shape(tuple(op.tensor.value.shape), n.index)
        spills = self.spilling_tiles(op, n)
        value, atomic = self.ref(n.value)
        dtype = op.tensor.value.dtype
        gathered = self.gather_axis(op, n)
        current = self.read(op, ref, n)  # a written tensor's current contents live in its output block
        chunk = None  # a scatter into a long whole block: written a chunk of it at a time (see chunks.py)
        if gathered is not None and gathered[0] == 0 and current == f"{ref}[...]" and n.pred is None and not spills:
            chunk = scatter_chunk(op.block_dims_visible(), math.prod(gathered[1].shape), dtype)
        if gathered is not None and chunk is None and (n.accumulate or n.value.dtype != dtype or tuple(n.value.shape) != tuple(region)
                                                       or n.pred is not None):
            # the scatter needs the values in the stored dtype and shape, or (under a device-side `if`) the old
            # values twice: name the block once
            block = self.names.fresh(f"{op.tensor.name}_block")
            self.out.add(indent, f"{block} = {current}", n.range)
            current = block
        adds = n.accumulate == "atomic_add"  # hl.atomic_add at tensor positions: values added, duplicates summed
        if n.accumulate and not adds:
            sym = {"add": "+", "sub": "-", "mul": "*", "div": "/"}.get(n.accumulate)
            if sym is None:
                raise UserError("HPL101", f"in-place `{n.accumulate}` stores are not supported", n.range)
            old = current
            if gathered is not None:
                self.use_helper("gather")
                old = f"_gather({current}, {self.ref(gathered[1])[0]}, axis={gathered[0]})"
            value = f"{old} {sym} {value if atomic else '(' + value + ')'}"
            atomic = False
        if tuple(n.value.shape) != tuple(region):
            value = f"jnp.broadcast_to({value}, {literal(tuple(region))})"
            atomic = True
        if n.value.dtype != dtype:
            value = cast_text(value, atomic, n.value.dtype, dtype)
        if spills:  # the padding of a partial tile would land on valid elements: keep their old values there
            shape = tuple(region)
            cond = " & ".join(f"({self.writer.valid(td, shape, axis, self.store_lanes(n, td))})"
                              for axis, td in spills)
            value = f"jnp.where({cond}, {value}, {0 if adds else current})"
        if gathered is not None:
            helper = "scatter_add" if adds else "scatter"
            self.use_helper(helper)
            axis, index = gathered
            valid = " & ".join(f"({self.writer.valid(td, tuple(index.shape), a)})" for a, td in n.padding)
            valid = f", valid={valid}" if valid else ""
            if chunk is not None:
                self.use_helper("chunked_write")
                self.out.add(indent, f"_chunked_write(_{helper}, {ref}, {self.ref(index)[0]}, {value}, "
                                     f"{self._chunk_text(chunk)}{valid})",
                             n.range)
                return
            value = f"_{helper}({current}, {self.ref(index)[0]}, {value}, axis={axis}{valid})"
        if n.pred is not None:  # under `if` on a device value: the old values stay where it is false
            value = f"jnp.where({self.ref(n.pred)[0]}, {value}, {current})"
        window = self.unaligned_window(op, n) if gathered is None else None
        if window is not None:  # see emit_index: a window Mosaic cannot address is written by a one-hot select
            row, axis, positions = window
            self.use_helper("scatter")
            self.out.add(indent, f"{ref}[{row}] = _scatter({ref}[{row}], {positions}, {value}, axis={axis})", n.range)
            return
        merged = self.masked_write(op, ref, n, value)
        if merged is not None:  # one row (of a narrow type, or one element): merged into its block dim
            self.out.add(indent, f"{ref}[{merged[0]}] = {merged[1]}  # one row of the block", n.range)
            return
        parts = self.index_parts(op, n) if op.memory != "smem" else []
        if parts and parts[-1][1]:  # one lane: TPUs store whole vectors, so merge it into its row
            row = ", ".join([p for p, _ in parts[:-1]] + [":"])
            row = "..." if set(row.split(", ")) == {":"} else row
            # the lane mask at the row's whole shape: Mosaic cannot broadcast an i1 vector of a few lanes over
            # leading dims (libtpu for v5e, a [1, 32, 32, 2] row: "Invalid relayout ... vector<1x32x32x2xi1>")
            lanes = op.block_dims_visible()[-1]
            kept = sum(not picks for _, picks in parts[:-1])
            shape = tuple(region) + (lanes,) if len(region) == kept else (lanes,)
            iota = f"jax.lax.broadcasted_iota(jnp.int32, {literal(shape)}, {len(shape) - 1})"
            self.out.add(indent, f"{ref}[{row}] = jnp.where({iota} == {parts[-1][0]}, jnp.expand_dims({value}, -1), "
                                 f"{ref}[{row}])  # one lane of the row", n.range)
            return
        self.out.add(indent, f"{ref}[{idx}] = {value}", n.range)

    # -- inner loops -----------------------------------------------------------------------------------

    def inner_loop(self, indent: int, loop: InnerLoop) -> None:
        self._inner_loop(indent, loop)
        self.dma_after_loop(indent, loop)

    def _inner_loop(self, indent: int, loop: InnerLoop) -> None:
        strategy = loop_strategy(self.layout.loop_type, loop)
        steps = math.prod(d.steps for d in loop.dims)
        if strategy != "unroll":
            self.unrolled.append(None)
        elif self.unrolled and self.unrolled[-1] is not None:  # nested in an unrolled loop: the same Python code
            self.unrolled.append(Unrolled(self.unrolled[-1].at, self.unrolled[-1].indent, self.unrolled[-1].names,
                                          self.unrolled[-1].steps * steps))
        else:
            self.unrolled.append(Unrolled(len(self.out.lines), indent, {}, steps))
        try:
            self._write_inner_loop(indent, loop, strategy)
        finally:
            self.unrolled.pop()

    def _once(self, op: OperandLayout, ref: str) -> str:
        """A whole block of an input read inside unrolled loops that run its body more than once: read once,
        before the outermost of them (inputs do not change within a grid step), so the copies of the body share
        one value. Upstream moe_matmul_ogs (v5e, 8 bodies gathering rows of a 1000 x 500 block): libtpu's compile
        ran past 200 s with the reads in each body, and ends within check's 45 s on an idle core so (see
        docs/check-times.md); interpret mode copies each block out of its memory once a step, not once a body."""
        whole = f"{ref}[...]"
        loop = self.unrolled[-1] if self.unrolled else None
        if loop is None or loop.steps < 2 or op.kind != "input" or op.memory not in ("vmem_block", "resident"):
            return whole
        if ref not in loop.names:
            loop.names[ref] = self.names.fresh(f"{py_name(op.tensor.name)}_block")
            self.out.insert(loop.at + len(loop.names) - 1, loop.indent,
                            f"{loop.names[ref]} = {whole}  # read once for the unrolled loop below")
        return loop.names[ref]

    def _write_inner_loop(self, indent: int, loop: InnerLoop, strategy: str) -> None:
        if strategy not in ("unroll", "fori_loop", "emit_pipeline"):
            raise UserError("HPL109", f"unknown pallas_loop_type {strategy!r}", loop.range)
        lid = loop.dims[0].loop_id
        self.strategy[lid] = strategy
        for c in loop.carried:
            init_name = self.names.of.get(c.init.id)
            only_carried = all(r is None for r, _ in self.uses.get(c.init.id, []))
            name = init_name if init_name and only_carried and c.init.id not in self.inline else self.names.fresh(c.name)
            self.names.bind(c.phi, name)
            self.names.bind(c.result, name)
            if c.next is not None and c.next.id not in self.names.of and self._next_can_reuse(loop, c):
                self.names.bind(c.next, name)
        if strategy == "emit_pipeline":
            self._emit_pipeline(indent, loop)
            return
        for c in loop.carried:
            init, _ = self.ref(c.init)
            if init != self.names.of[c.phi.id]:
                self.out.add(indent, f"{self.names.of[c.phi.id]} = {init}", loop.range)
        vars_ = [self.names.fresh(d.name) for d in loop.dims]
        for d, var in zip(loop.dims, vars_, strict=True):
            self.loop_vars[(d.loop_id, d.axis)] = var
        self.dma_before_loop(indent, loop)
        if strategy == "unroll":
            self.out.add(indent, "# unrolled inner loop: static pl.ds slices of VMEM-resident blocks")
            for k, (d, var) in enumerate(zip(loop.dims, vars_, strict=True)):
                self.out.add(indent + k, f"for {var} in range({d.steps}):", loop.range if k == 0 else None)
            inner = indent + len(loop.dims)
            self.region(inner, loop.body)
            self._carry_update(inner, loop)
            return
        if any(d.dynamic for d in loop.dims):
            self._device_bounded_loop(indent, loop, vars_)
            return
        # fori_loop
        body_name = self.names.fresh(f"{vars_[0]}_body")
        carried = [self.names.of[c.phi.id] for c in loop.carried]
        if len(loop.dims) == 1:
            self.out.add(indent, f"def {body_name}({vars_[0]}, carry):", loop.range)
        else:
            flat = self.names.fresh("step")
            self.out.add(indent, f"def {body_name}({flat}, carry):", loop.range)
            rest = 1
            for d, var in reversed(list(zip(loop.dims, vars_, strict=True))):
                self.out.add(indent + 1, f"{var} = ({flat} // {rest}) % {d.steps}")
                rest *= d.steps
        if carried:
            self.out.add(indent + 1, f"{', '.join(carried)}{',' if len(carried) == 1 else ''} = carry")
        self.region(indent + 1, loop.body)
        nxt = [self.ref(c.next)[0] for c in loop.carried]
        self.out.add(indent + 1, f"return ({', '.join(nxt)}{',' if len(nxt) == 1 else ''})" if nxt else "return carry")
        trips = 1
        for d in loop.dims:
            trips *= d.steps
        init = f"({', '.join(carried)}{',' if len(carried) == 1 else ''})" if carried else "None"
        target = f"{', '.join(carried)}{',' if len(carried) == 1 else ''} = " if carried else ""
        self.out.add(indent, f"{target}jax.lax.fori_loop(0, {trips}, {body_name}, {init})", loop.range)

    def _device_bounded_loop(self, indent: int, loop: InnerLoop, vars_: list[str]) -> None:
        """`hl.tile(begin, end)` with bounds read on the device: a fori_loop over cdiv(end - begin, block) steps
        (times the steps of any compile-time dims of the same loop). Each step reads a window of `block`
        positions starting at its first position, clamped so the window stays inside every array the tile
        indexes (the TPU never reads past a ref's end; interpret mode would shift the rows silently); positions
        outside [first, end) are masked (compiler/frontend/masks.py)."""
        counts = []
        for d in loop.dims:
            if not d.dynamic:
                counts.append(str(d.steps))
                continue
            lo, hi = self.writer.arg(d.lo), self.writer.arg(d.hi)
            span = hi if lo == "0" else f"{self.writer.arg(d.hi, True)} - {self.writer.arg(d.lo, True)}"
            counts.append(f"pl.cdiv({span}, {d.block_size})")
        carried = [self.names.of[c.phi.id] for c in loop.carried]
        body_name = self.names.fresh(f"{vars_[0]}_body")
        single = len(loop.dims) == 1
        step = vars_[0] if single else self.names.fresh("step")
        self.out.add(indent, f"def {body_name}({step}, carry):", loop.range)
        if not single:
            rest = []
            for var, count in reversed(list(zip(vars_, counts, strict=True))):
                flat_step = f"({step} // {' // '.join(rest)})" if rest else step
                self.out.add(indent + 1, f"{var} = {flat_step} % {count}")
                rest.insert(0, count if " " not in count else f"({count})")
        if carried:
            self.out.add(indent + 1, f"{', '.join(carried)}{',' if len(carried) == 1 else ''} = carry")
        for d, var in zip(loop.dims, vars_, strict=True):
            if not d.dynamic:
                continue
            first = self.names.fresh(f"{d.name}_begin")
            shortest = shortest_indexed_dim(self.layout.grid.body, d)
            window = self.names.fresh(f"{d.name}_at") if shortest is not None else first
            self.device_positions[(d.loop_id, d.axis)] = (first, window)
            lo = self.writer.arg(d.lo, True)
            start = f"{var} * {d.block_size}" if lo == "0" else f"{lo} + {var} * {d.block_size}"
            self.out.add(indent + 1, f"{first} = {start}  # first position of this step")
            if shortest is None:
                continue
            last = shortest - d.block_size
            multiple = math.gcd(ix.multiple(d.lo), d.block_size, last)
            self.window_multiple[(d.loop_id, d.axis)] = multiple
            if last == 0:
                self.out.add(indent + 1, f"{window} = 0  # window start: the {d.block_size} positions read are all "
                                         f"{shortest}")
                continue
            clamped = f"jnp.clip({first}, 0, {last})"
            if multiple > 1:  # Mosaic addresses a sublane / lane window only at a start it can prove aligned
                clamped = f"pl.multiple_of({clamped}, {multiple})"
            self.out.add(indent + 1, f"{window} = {clamped}  "
                                     f"# window start: the {d.block_size} positions read stay inside {shortest}")
        self.region(indent + 1, loop.body)
        nxt = [self.ref(c.next)[0] for c in loop.carried]
        self.out.add(indent + 1, f"return ({', '.join(nxt)}{',' if len(nxt) == 1 else ''})" if nxt else "return carry")
        trips = " * ".join(c if single or " " not in c else f"({c})" for c in counts)
        init = f"({', '.join(carried)}{',' if len(carried) == 1 else ''})" if carried else "None"
        target = f"{', '.join(carried)}{',' if len(carried) == 1 else ''} = " if carried else ""
        self.out.add(indent, f"{target}jax.lax.fori_loop(0, {trips}, {body_name}, {init})  "
                             "# trip count computed on the device", loop.range)

    def _next_can_reuse(self, loop: InnerLoop, c) -> bool:
        """The body's last value of a carried variable may reuse its name once the old value is dead."""
        producer = c.next.producer
        if producer is None or c.next.id in self.inline or c.next.hint != c.name:
            return False
        try:
            at = next(i for i, n in enumerate(loop.body) if n is producer)
        except StopIteration:
            return False
        others = [u for u in self.uses.get(c.next.id, []) if u[0] is not None]
        if others:
            return False
        return all(r is loop.body and i <= at for r, i in self.uses.get(c.phi.id, []))

    def _carry_update(self, indent: int, loop: InnerLoop) -> None:
        pairs = [(self.names.of[c.phi.id], self.ref(c.next)[0]) for c in loop.carried]
        pairs = [(a, b) for a, b in pairs if a != b]
        if pairs:
            self.out.add(indent, f"{', '.join(a for a, _ in pairs)} = {', '.join(b for _, b in pairs)}", loop.range)

    def _emit_pipeline(self, indent: int, loop: InnerLoop) -> None:
        lay = self.layout
        streamed = [o for o in lay.operands if o.loop is loop and o.memory == "hbm"]
        for c in loop.carried:
            scratch = lay.scratch[(loop.index, c.name)]
            init, _ = self.ref(c.init)
            if not c.init.shape:
                init = f"jnp.full((1,), {init}, {dtype_text(c.phi.dtype)})"
            self.out.add(indent, f"{scratch}[...] = {init}", loop.range)
        params, ins, outs, in_args, out_args = [], [], [], [], []
        for o in streamed:
            base = o.ref_name[:-4]
            spec = self._inner_spec(o)
            if o.kind == "input" or o.reads_old:
                name = self.names.fresh(f"{base}_blk" if o.kind == "input" else f"{base}_in_blk")
                self.block_refs[(id(o), "in")] = name
                params.append(name)
                ins.append(spec)
                in_args.append(o.ref_name)
        for o in streamed:
            base = o.ref_name[:-4]
            if o.kind in ("output", "inout"):
                name = self.names.fresh(f"{base}_blk" if o.kind == "output" else f"{base}_out_blk")
                self.block_refs[(id(o), "out")] = name
                params.append(name)
                outs.append(self._inner_spec(o))
                out_args.append(o.ref_name if o.kind == "output" else f"{o.ref_name[:-4]}_out_hbm")
        counter = lay.scratch.get((loop.index, STEP))
        if counter:
            self.out.add(indent, f"{counter}[0] = 0", loop.range)
        body_name = self.names.fresh(f"{py_name(loop.dims[0].name)}_body")
        self.out.add(indent, f"def {body_name}({', '.join(params)}):", loop.range)
        if counter:  # the pipeline body does not see its step: count steps in SMEM
            step = self.names.fresh("step")
            self.out.add(indent + 1, f"{step} = {counter}[0]")
            rest = 1
            for d in reversed(loop.dims):
                var = self.names.fresh(d.name)
                self.loop_vars[(d.loop_id, d.axis)] = var
                self.out.add(indent + 1, f"{var} = {step}" if len(loop.dims) == 1 else f"{var} = ({step} // {rest}) % {d.steps}")
                rest *= d.steps
            self.out.add(indent + 1, f"{counter}[0] = {step} + 1")
        for o in streamed:
            if o.reads_old:
                names = [self.loop_vars.get((d.loop_id, d.axis), "") for d in loop.dims]
                self._copy_in(indent + 1, o, self.block_refs[(id(o), "in")], self.block_refs[(id(o), "out")],
                              outputs.inner_axes_used(o), [d.steps for d in loop.dims], names)
        for c in loop.carried:
            scratch = lay.scratch[(loop.index, c.name)]
            read = f"{scratch}[...]" if c.phi.shape else f"{scratch}[0]"
            self.out.add(indent + 1, f"{self.names.of[c.phi.id]} = {read}")
        self.region(indent + 1, loop.body)
        for c in loop.carried:
            scratch = lay.scratch[(loop.index, c.name)]
            nxt, _ = self.ref(c.next)
            if not c.phi.shape:
                nxt = f"jnp.full((1,), {nxt}, {dtype_text(c.phi.dtype)})"
            self.out.add(indent + 1, f"{scratch}[...] = {nxt}")
        if not loop.body and not loop.carried:
            self.out.add(indent + 1, "pass")
        grid = tuple(d.steps for d in loop.dims)
        self.out.add(indent, f"pltpu.emit_pipeline(\n    {body_name},\n    grid={literal(grid)},", loop.range)
        self.out.add(indent + 1, "in_specs=[" + ", ".join(ins) + "],")
        self.out.add(indent + 1, "out_specs=[" + ", ".join(outs) + "],")
        self.out.add(indent, f")({', '.join(in_args + out_args)})")
        for c in loop.carried:
            scratch = lay.scratch[(loop.index, c.name)]
            read = f"{scratch}[...]" if c.phi.shape else f"{scratch}[0]"
            self.out.add(indent, f"{self.names.of[c.result.id]} = {read}")

    def _inner_spec(self, o: OperandLayout) -> str:
        block = literal(tuple(o.block_shape))
        block = block.replace("None", "pl.Squeezed()") if "None" in block else block
        mode = f", pipeline_mode=pl.Buffered({o.buffer_count})" if o.buffer_count != 2 and o.kind != "output" else ""
        return f"pl.BlockSpec({block}, {o.inner_index_map}{mode})"
