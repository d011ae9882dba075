"""The jitted host function: host-side jnp code in program order, one explicit pl.pallas_call per grid loop
(grid, BlockSpecs, out_shape, scratch, aliases, compiler params), and the kernel's return value."""

from __future__ import annotations

import torch

from ..ir.tile_ir import VIEW_OPS, GridLoop, KernelIR, Load, Op, Return, Store, TileDim, Value, viewed, walk
from ..support.diagnostics import UserError
from .emit_base import RESERVED, Names, Output, RegionWriter, about, flat
from .exprs import dtype_text, literal
from .plan_builder import CallLayout, OperandLayout
from .work import CARRIED


class HostWriter(RegionWriter):
    def __init__(self, ir: KernelIR, layouts: list[CallLayout], out: Output, kernel_kwargs: list[dict[str, str]],
                 mutated: list[str]):
        self.ir = ir
        self.layouts = {id(lay.grid): lay for lay in layouts}
        self.kernel_kwargs = kernel_kwargs
        self.call_index = {id(lay.grid): i for i, lay in enumerate(layouts)}
        self.mutated = mutated
        reserved = RESERVED | {lay.name for lay in layouts} | {ir.name} | set(ir.params)
        super().__init__(ir.host, Names(reserved), out)
        for lay in layouts:  # tensors a pallas_call reads or writes are used by it: they need names
            for o in lay.operands:
                self.uses.setdefault(o.tensor.value.id, []).append((None, -1))
                self.inline.pop(o.tensor.value.id, None)
        for name, v in ir.args.items():
            if isinstance(v, Value):
                self.names.bind(v, name)
        for n in ir.host:  # an argument filled in host code (`scale.zero_()`) keeps its name
            if isinstance(n, Op) and n.kind == "alloc" and n.kwargs.get("param"):
                self.names.bind(n.out, n.kwargs["param"])
        self.inline = {k: n for k, n in self.inline.items() if isinstance(n, Op) and n.kind != "alloc"}

    def write(self) -> None:
        ir = self.ir
        tensors = [p for p in ir.params if isinstance(ir.args.get(p), Value)]
        scalars = [p for p in ir.params if not isinstance(ir.args.get(p), Value)]
        # every scalar is static (baked in) but a list, which jit cannot hash (and this code never reads)
        static = ", ".join(f'"{s}"' for s in scalars + ["interpret"] if not isinstance(ir.args.get(s), list)) + ","
        self.out.add(0, f"@functools.partial(jax.jit, static_argnames=({static}))")
        params = ", ".join(tensors + scalars) + (", " if tensors or scalars else "") + "*, interpret=False"
        self.out.add(0, f"def {ir.name}({params}):", ir.range)  # named as the kernel (callers look it up)
        returns = "its outputs" + (f", then the updated {', '.join(self.mutated)}" if self.mutated else "")
        self.out.add(1, f'"""Runs `{ir.name}`; returns {returns}. '
                        'On CPU pass interpret=pltpu.InterpretParams()."""')
        for p in tensors:
            if ir.args[p].dtype in CARRIED:
                carried = dtype_text(ir.args[p].dtype)
                self.out.add(1, f"{p} = {p}.astype({carried})  # Mosaic has no float16 vectors: carried as {carried}")
        initialized = self._initialized_allocs()
        for n in ir.host:
            if isinstance(n, Op):
                if n.kind == "alloc" and n.out.id not in initialized:
                    continue
                self.define(1, n)
            elif isinstance(n, GridLoop):
                self.pallas_call(n)
            elif isinstance(n, Return):
                self.ret(n)

    def _initialized_allocs(self) -> set[int]:
        """Allocations that must exist before their first pallas_call writes them: every one, except those whose
        first use is as a write-only output (the call's fresh result takes their name)."""
        allocs = {n.out.id for n in self.ir.host if isinstance(n, Op) and n.kind == "alloc"}
        needed, bound = set(), set()

        def use(ids) -> None:
            needed.update(i for i in ids if i in allocs and i not in bound)

        for n in self.ir.host:
            if isinstance(n, Op) and n.kind != "alloc":
                use(a.id for a in flat(n.args) if isinstance(a, Value))
            elif isinstance(n, Return):
                use(v.id for v in n.values if isinstance(v, Value))
            elif isinstance(n, GridLoop):
                ops = self.layouts[id(n)].operands
                use(o.tensor.root.value.id for o in ops if o.kind != "output")
                bound.update(o.tensor.root.value.id for o in ops)
        return needed

    def pallas_call(self, grid: GridLoop) -> None:
        lay = self.layouts[id(grid)]
        plan = lay.plan
        kwargs = self.kernel_kwargs[self.call_index[id(grid)]]
        fn = lay.name
        if kwargs:
            fn = f"functools.partial({lay.name}, {', '.join(f'{k}={v}' for k, v in kwargs.items())})"
        rng = grid.header_range
        self.out.add(1, f"# grid loop `{_loop_text(grid)}` -> pallas_call {lay.name}", rng)
        ins, outs, aliases = lay.inputs, lay.outputs, {}
        for j, o in enumerate(outs):
            if o.kind == "inout":
                aliases[ins.index(o)] = j
        targets = [self._host_name(o.tensor.value) for o in outs]
        padded = {id(o): _whole_blocks(o) for o in outs if o.kind == "inout" and _whole_blocks(o)}
        for o in outs:
            if id(o) in padded:
                name, shape = self._host_name(o.tensor.value), tuple(o.tensor.value.shape)
                widths = tuple((0, p - a) for p, a in zip(padded[id(o)], shape, strict=True))
                self.out.add(1, "if interpret:  # jax's TPU interpret mode cannot alias an array whose edge blocks "
                                "are partial: whole blocks, cropped after the call", rng)
                self.out.add(2, f"{name} = jnp.pad({name}, {literal(widths)})")
        lhs = ", ".join(targets) + ("," if len(targets) == 1 else "")
        if len(targets) == 1:
            lhs = targets[0]
        self.out.add(1, f"{lhs} = pl.pallas_call(", rng)
        self.out.add(2, f"{fn},")
        self.out.add(2, f"grid={literal(plan.grid)},")
        self.out.add(2, "in_specs=[")
        for o in ins:
            self.out.add(3, self._spec(o, input_side=True), about(o.ranges[0]))
        self.out.add(2, "],")
        out_specs = [self._spec(o) for o in outs]
        if len(outs) == 1:
            self.out.add(2, f"out_specs={out_specs[0]}", about(outs[0].ranges[0]))
        else:
            self.out.add(2, "out_specs=[")
            for o, s in zip(outs, out_specs, strict=True):
                self.out.add(3, s, about(o.ranges[0]))
            self.out.add(2, "],")
        shapes = []
        for o in outs:
            shape = literal(tuple(o.tensor.value.shape))
            if id(o) in padded:
                shape = f"{literal(padded[id(o)])} if interpret else {shape}"
            shapes.append(f"jax.ShapeDtypeStruct({shape}, {dtype_text(o.tensor.value.dtype)})")
        self.out.add(2, f"out_shape={shapes[0] if len(shapes) == 1 else '[' + ', '.join(shapes) + ']'},")
        if lay.scratch_plan:
            self.out.add(2, "scratch_shapes=[")
            for s in lay.scratch_plan:
                if s.role == "dma_sem":
                    self.out.add(3, f"pltpu.SemaphoreType.DMA({literal(tuple(s.shape))}),  # {s.name}", s.range)
                    continue
                space = "SMEM" if s.role == "counter" else "VMEM"
                self.out.add(3, f"pltpu.{space}({literal(tuple(s.shape))}, jnp.{s.dtype}),  # {s.name}", s.range)
            self.out.add(2, "],")
        if aliases:
            self.out.add(2, f"input_output_aliases={aliases!r},")
        self.out.add(2, "compiler_params=pltpu.CompilerParams(")
        self.out.add(3, f"dimension_semantics={literal(plan.dimension_semantics)},")
        self.out.add(3, f"vmem_limit_bytes={plan.vmem_limit_bytes},  # from the VMEM report ({plan.vmem_limit_bytes / 2**20:.1f} MiB)")
        self.out.add(2, "),")
        self.out.add(2, "interpret=interpret,")
        self.out.add(1, f")({', '.join(self._host_name(o.tensor.value) for o in ins)})")
        for o in outs:
            if id(o) in padded:
                name = self._host_name(o.tensor.value)
                crop = ", ".join(f":{a}" for a in o.tensor.value.shape)
                self.out.add(1, "if interpret:")
                self.out.add(2, f"{name} = {name}[{crop}]")
        for o in outs:  # a view the kernel wrote: the tensor it views now has those contents
            if o.tensor.base is not None:
                root = o.tensor.root.value
                self.out.add(1, f"{self._host_name(root)} = {self._host_name(o.tensor.value)}.reshape{literal(tuple(root.shape))}")
        self._refresh_views(grid, {o.tensor.root.value.id for o in outs}, {o.tensor.value.id for o in outs})

    def _refresh_views(self, grid: GridLoop, roots: set[int], results: set[int]) -> None:
        """Torch views see writes to the tensor they view; jax arrays are values. Views made before this call
        of a tensor it wrote, and used after it, are taken again from the new contents."""
        pos = self.ir.host.index(grid)
        later: set[int] = set()
        for n in self.ir.host[pos + 1:]:
            if isinstance(n, Op):
                later.update(a.id for a in flat(n.args) if isinstance(a, Value))
            elif isinstance(n, Return):
                later.update(v.id for v in n.values if isinstance(v, Value))
            elif isinstance(n, GridLoop):
                later.update(a.tensor.value.id for a in walk(n.body) if isinstance(a, Load | Store))
        views = [n for n in self.ir.host[:pos] if isinstance(n, Op) and n.kind in VIEW_OPS
                 and viewed(n.out).id in roots and n.out.id not in results and n.out.id in self.names.of]
        for n in reversed(views):  # a view another refreshed view is taken from must be refreshed first
            if n.out.id in later:
                later.add(n.args[0].id)
        for n in views:
            if n.out.id in later:
                self.out.add(1, f"{self.names.of[n.out.id]} = {self.expr(n)[0]}  # the view sees the new contents",
                             n.range)

    def _spec(self, o: OperandLayout, input_side: bool = False) -> str:
        if input_side and o.kind == "inout" and not o.reads_old and o.memory != "hbm":
            return (f"pl.BlockSpec(memory_space=pl.ANY),  # {o.tensor.name}: aliased to the output, not read "
                    "(elements the kernel does not write keep their values)")
        if o.memory == "hbm":
            return "pl.BlockSpec(memory_space=pl.ANY),  # " + f"{o.tensor.name}: stays in HBM, streamed by emit_pipeline"
        if o.memory == "dma":
            return "pl.BlockSpec(memory_space=pl.ANY),  # " + f"{o.tensor.name}: stays in HBM, rows copied by DMA"
        if o.memory == "smem":
            return "pl.BlockSpec(memory_space=pltpu.SMEM),  # " + f"{o.tensor.name}: scalar reads, whole table in SMEM"
        block = literal(tuple(o.block_shape))
        block = block.replace("None", "pl.Squeezed()")
        mode = f", pipeline_mode=pl.Buffered({o.buffer_count})" if o.kind != "output" and o.buffer_count != 2 and not all(
            b is not None and b >= s for b, s in zip(o.block_shape, o.tensor.value.shape, strict=True)) else ""
        note = {"vmem_block": "", "resident": f"  # {o.tensor.name}: whole inner-loop extent resident in VMEM"}[o.memory]
        return f"pl.BlockSpec({block}, {o.index_map}{mode}),{note}"

    def _host_name(self, v: Value) -> str:
        return self.name_of(v)

    def ret(self, n: Return) -> None:
        vals = [self._as_declared(self.ref(v)[0], v.dtype) if isinstance(v, Value) else literal(v) for v in n.values]
        extra = [self._as_declared(m, self.ir.args[m].dtype) for m in self.mutated]
        if n.is_tuple or extra:
            items = vals + extra if n.values != (None,) else extra
            if n.values == (None,) and len(extra) == 1:
                self.out.add(1, f"return {extra[0]}", n.range)
                return
            self.out.add(1, f"return ({', '.join(items)}{',' if len(items) == 1 else ''})", n.range)
        else:
            self.out.add(1, f"return {vals[0]}", n.range)

    @staticmethod
    def _as_declared(text: str, dtype: torch.dtype) -> str:
        """A result in the dtype the kernel gives it (a float16 one was carried as float32)."""
        return f"{text}.astype(jnp.{str(dtype).removeprefix('torch.')})" if dtype in CARRIED else text

    def load_expr(self, node: Load) -> str:
        raise AssertionError("host code has no loads")

    def tile_begin(self, dim: TileDim, as_id: bool = False) -> str:
        raise UserError("HPL202", "tile attributes exist only inside device loops", None)


def _whole_blocks(o: OperandLayout) -> tuple[int, ...] | None:
    """The array padded to whole blocks, when its blocks do not divide it (None when they do)."""
    if o.memory not in ("vmem_block", "resident"):
        return None
    shape = tuple(o.tensor.value.shape)
    whole = tuple(a if b is None else -(-a // b) * b for a, b in zip(shape, o.block_shape, strict=True))
    return whole if whole != shape else None


def _loop_text(grid: GridLoop) -> str:
    names = ", ".join(d.name for d in grid.dims)
    api = grid.dims[0].api
    return f"for {names} in hl.{api}(...)"
