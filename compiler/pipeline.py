"""The compile pipeline for one shape set + config + chip: trace the kernel (cached per Kernel), fill default
block sizes, raise illegal ones, lay out each pallas_call, shrink defaults that overflow VMEM, emit the module
and describe its plan. `Kernel.compile` (compiler/api.py) is its entry; the result is a `CompiledKernel`
(compiler/compiled.py).

Its own module so that the public face (`load`, `Module`, `Kernel`) stays what a process needs before it
compiles: these functions take the Kernel (its facts and its trace cache) and import the heavy machinery
(tracer, codegen, VMEM layouts; torch) only when they run. Nothing here imports compiler.api.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from .compiled import CompiledKernel
from .ir.chips import Chip, get_chip
from .ir.config import HELION_KEYS, Config, ConfigError, as_config
from .ir.plan import AccessInfo, KernelPlan, LoopInfo
from .ir.specs import ArgSpec, format_args
from .support.diagnostics import ArgRankError, CompileError, Diagnostic, Range, Related, UserError, error
from .vmem.report import VmemReport, fmt_bytes

if TYPE_CHECKING:
    from collections import OrderedDict

    from .codegen.plan_builder import CallLayout
    from .codegen.space import BlockUse
    from .frontend.call_shapes import ShapeOrigin
    from .frontend.module import KernelDef, ModuleInfo
    from .frontend.values import BlockSizeTable
    from .ir.tile_ir import KernelIR

_TRACE_CACHE_SIZE = 256
_DEFAULT_ROUNDS = 4  # re-traces to settle default blocks that depend on others


def as_chip(chip: str | Chip) -> Chip:
    if isinstance(chip, Chip):
        return chip
    try:
        return get_chip(chip)
    except ValueError as exc:
        raise CompileError([error("HPL109", str(exc), Range.lines(0))]) from None



class Kernel(Protocol):
    """What the pipeline reads of a kernel (api.Kernel is the one): a protocol, so that the pipeline does not
    name the public face that calls it (api -> pipeline imports one way, also at type level)."""

    name: str
    source: str
    info: ModuleInfo
    definition: KernelDef
    range: Range
    name_range: Range
    decorator_range: Range
    _traces: OrderedDict[tuple, tuple[KernelIR, list[BlockUse], BlockSizeTable]]

    @property
    def _too_deep(self) -> Diagnostic | None: ...
    @property
    def shape_set_ranges(self) -> list[Range]: ...
    @property
    def shape_set_origins(self) -> list[ShapeOrigin | None]: ...
    def line_label(self, line: int, unnamed: str = ...) -> str: ...
    def shape_set_range(self, index: int | None) -> Range: ...
    def resolve_args(self, args: Any = None, shape_set: int | None = None) -> dict[str, ArgSpec]: ...
    def config_for(self, shape_set: int | None) -> Config | None: ...
    def config_range(self, shape_set: int | None) -> Range | None: ...
    def with_defaults(self, specs: dict[str, ArgSpec]) -> dict[str, ArgSpec]: ...
    def _shape_set_of(self, specs: dict[str, ArgSpec]) -> int | None: ...

def trace(kernel: Kernel, specs: dict[str, ArgSpec], config: Config, chip: Chip
          ) -> tuple[KernelIR, list[BlockUse], BlockSizeTable]:
    from .codegen.space import block_uses
    from .frontend import dot_precision
    from .frontend.masks import insert_masks
    from .frontend.tracer import Tracer
    from .frontend.values import BlockSizeTable, BlockTooLong

    given = config.get("block_sizes")
    if given is not None and not (isinstance(given, list) and all(isinstance(b, int) for b in given)):
        raise CompileError([error("HPL109", "block_sizes must be a list of integers", kernel.decorator_range)])
    tunables = {k: v for k, v in config.items() if k not in HELION_KEYS}  # hl.register_tunable values
    key = (format_args(specs), None if given is None else tuple(given), chip.name, repr(sorted(tunables.items())))
    cached = kernel._traces.get(key)
    if cached is not None:
        kernel._traces.move_to_end(key)
        return cached
    if kernel._too_deep is not None:
        raise CompileError([kernel._too_deep])
    try:
        precision = dot_precision.setting(kernel.definition.decorator)
        caps: dict[tuple[int, int], int] = {}
        while True:  # a device-bounded loop's block longer than a dim it indexes is cut to it (BlockTooLong)
            provisional = BlockSizeTable(given, lambda i, extent: min(extent, 128))
            try:
                ir = Tracer(kernel.info, kernel.definition.node, specs, provisional, caps, chip, tunables).run()
                break
            except BlockTooLong as cut:
                if caps.get(cut.dim, cut.size + 1) <= cut.size:
                    raise
                caps[cut.dim] = cut.size
        insert_masks(ir)
        dot_precision.stamp(ir, precision)
    except ArgRankError as exc:
        raise CompileError([_rank_diagnostic(kernel, exc, specs)]) from None
    except UserError as exc:
        raise CompileError([exc.diagnostic(kernel.range)]) from None
    except RecursionError:
        raise CompileError([error("HPL101", "kernel nests too deeply to analyse", kernel.range)]) from None
    uses = block_uses(ir, provisional.ranges, provisional.extents)
    kernel._traces[key] = (ir, uses, provisional)
    if len(kernel._traces) > _TRACE_CACHE_SIZE:
        kernel._traces.popitem(last=False)
    return ir, uses, provisional


def _rank_diagnostic(kernel: Kernel, exc: ArgRankError, specs: dict[str, ArgSpec]) -> Diagnostic:
    """On the shape line that gave the argument its rank (at the argument), else where it is unpacked."""
    index = kernel._shape_set_of(specs)
    if index is None or index >= len(kernel.shape_set_ranges):
        return exc.diagnostic(kernel.range)
    origin = kernel.shape_set_origins[index]
    if origin is not None:  # found in the file's calls: said where the kernel unpacks it, with the call
        return error("HPL105", f"`{exc.arg}` is {exc.rank}-D in shape set {index} ({origin.label}); the kernel "
                     f"unpacks {exc.unpacked} dims from {exc.how}", exc.range or kernel.range,
                     related=(Related(origin.range, f"shape set {index} comes from this call"),))
    line = kernel.shape_set_ranges[index]
    rng = _arg_range(kernel.source, line, exc.arg) or line
    return error("HPL104", f"`{exc.arg}` is {exc.rank}-D in this shape line; the kernel unpacks {exc.unpacked} dims "
                 f"from {exc.how}", rng, related=(Related(exc.range or kernel.range, f"unpacks {exc.unpacked} dims "
                                                          f"from {exc.how}"),), data={"anchor": "shape_set"})


def _fill_defaults(config: Config, uses: list[BlockUse], ir: KernelIR,
                   caps: Mapping[int, int] | None = None) -> Config:
    """`config` with the blocks it does not give at their defaults for these uses, each at most its cap."""
    from .codegen.space import default_block

    values = dict(config)
    given = list(values.get("block_sizes", []))
    blocks = given[: len(uses)] + [default_block(u, (caps or {}).get(u.index)) for u in uses[len(given):]]
    values["block_sizes"] = blocks
    if ir.inner_loops and "pallas_loop_type" not in values:
        values["pallas_loop_type"] = "unroll"
    return Config(values)


def default_blocks(kernel: Kernel, specs: dict[str, ArgSpec], config: Config, chip: Chip,
                   caps: Mapping[int, int] | None = None) -> tuple[KernelIR, list[BlockUse], Config]:
    """(ir, uses, config) with the blocks `config` does not give at their defaults. A default depends on the
    trace (a sub-tile's extent is its grid tile's block), and the first trace uses placeholder blocks: the
    defaults are recomputed on each re-trace until they stop changing (a few rounds at most)."""
    ir, uses, _ = trace(kernel, specs, config, chip)
    filled = _fill_defaults(config, uses, ir, caps)
    for _ in range(_DEFAULT_ROUNDS):
        if list(filled["block_sizes"]) == ir.block_sizes:
            break
        ir, uses, _ = trace(kernel, specs, filled, chip)
        filled = _fill_defaults(config, uses, ir, caps)
    if list(filled["block_sizes"]) != ir.block_sizes:  # no fixed point: the last defaults, traced
        ir, uses, _ = trace(kernel, specs, filled, chip)
    return ir, uses, filled


def compile_kernel(kernel: Kernel, args: Any, config: Any, chip: str | Chip, shape_set: int | None,
                   emit: bool = True) -> CompiledKernel:
    """`Kernel.compile` without its guard (which turns any other exception into a CompileError)."""
    from .codegen.emit import emit_module
    from .codegen.space import check_blocks, raise_blocks
    from .vmem.hbm import hbm_diagnostics
    from .vmem.verdicts import vmem_diagnostics

    chip = as_chip(chip)
    specs = kernel.resolve_args(args, shape_set)
    if config is None and args is None:
        config = kernel.config_for(shape_set or 0)
        from_decorator = True
    elif config is None:
        config = kernel.config_for(kernel._shape_set_of(specs))
        from_decorator = True
    else:
        from_decorator = False
    try:
        cfg = as_config(config)
    except ConfigError as exc:
        raise CompileError([error("HPL109", str(exc), kernel.decorator_range)]) from None
    _check_config_kinds(cfg, kernel.decorator_range)
    index = shape_set if args is None else kernel._shape_set_of(specs)
    specs = kernel.with_defaults(specs)
    entry = kernel.config_range(index) if config is not None and cfg == kernel.config_for(index) else None
    given_cfg = cfg
    ir, uses, cfg = default_blocks(kernel, specs, cfg, chip)
    if len(cfg["block_sizes"]) > len(uses):
        cfg = cfg.replace(block_sizes=list(cfg["block_sizes"])[: len(uses)])
    diags = check_blocks(uses, list(cfg["block_sizes"]), from_decorator)
    if any(d.is_error for d in diags):  # raised to legal sizes when that keeps the kernel's meaning, else errors
        ir, uses, blocks, diags = raise_blocks(
            uses, list(cfg["block_sizes"]), ir, from_decorator, diags,
            lambda b: trace(kernel, specs, cfg.replace(block_sizes=b), chip)[:2])
        cfg = cfg.replace(block_sizes=blocks)
    layouts, report = _layouts(kernel, ir, cfg, chip)
    chosen = config or {}
    if report.verdict == "out_of_vmem" and ir.inner_loops and "pallas_loop_type" not in chosen:
        # the default strategy keeps inner operands resident; when that cannot fit, stream them instead
        streamed = cfg.replace(pallas_loop_type="emit_pipeline")
        alt_layouts, alt_report = _layouts(kernel, ir, streamed, chip)
        if alt_report.verdict != "out_of_vmem":
            cfg, layouts, report = streamed, alt_layouts, alt_report
    if "block_sizes" not in chosen:
        ir, cfg, layouts, report = _shrink_defaults(kernel, specs, given_cfg, ir, uses, cfg, layouts, report, chip)
    diags.extend(vmem_diagnostics(layouts, chip, entry))
    diags.extend(hbm_diagnostics(ir, chip, kernel.shape_set_range(index)))
    mutated = sorted({o.tensor.root.name for lay in layouts for o in lay.operands
                      if o.kind == "inout" and o.tensor.root.origin == "arg"}
                     | {n.kwargs["param"] for n in ir.host if getattr(n, "kind", None) == "alloc" and n.kwargs.get("param")},
                     key=ir.params.index)
    source, source_map = "", []
    narrowed = _narrowed(ir)
    try:
        if emit:
            header = _header(kernel, specs, cfg, chip, report, narrowed)
            source, source_map = emit_module(ir, layouts, dict(cfg), header, kernel.line_label, mutated)
    except UserError as exc:
        raise CompileError([exc.diagnostic(kernel.range)]) from None
    plan = _kernel_plan(ir, layouts, chip, narrowed)
    return CompiledKernel(kernel, specs, cfg, chip, source, source_map, plan, report, diags, mutated)


# The least share of its VMEM the smaller default blocks of a kernel left over the default limit must save (see
# _shrink_defaults). Upstream's examples and pretuned kernels (v5e, 2026-12-07): moe_matmul_ogs saves 0.75 %, the
# next least, mamba2_chunk_state, 1.39 %; every other shrink reaches a better verdict or saves 8.7 % or more.
MIN_SAVING = 0.01


def _shrink_defaults(kernel: Kernel, specs: dict, given: Config, ir: KernelIR, uses: list[BlockUse], cfg: Config,
                     layouts: list[CallLayout], report: VmemReport, chip: Chip) -> tuple:
    """Default blocks that overflow the default VMEM limit are capped one legal size lower (non-lane dims
    first, lane dims when no other is left) until they fit; the largest ones together, so loops of the same
    shape (whose temporaries count once) shrink at once. The other defaults follow on each re-trace (a
    sub-tile's block stays within its grid tile's). `given` is the config without default blocks.

    A kernel over the default limit (one that fits the chip's VMEM with a raised limit) whose shrinking leaves it
    over that limit, having saved under MIN_SAVING of its VMEM, keeps its first blocks: what no block changes
    (upstream moe_matmul_ogs's gather tables, all but 0.75 % of its 30 MiB) would otherwise take its 128-row
    default to 8 rows, for no verdict, and its unrolled loop to 125 bodies (libtpu's compile of those ran past
    240 s; 8 bodies at 128 rows)."""
    from .codegen.space import LANE, candidates, check_blocks

    caps: dict[int, int] = {}
    first = (ir, cfg, layouts, report)
    for _ in range(16):
        if report.verdict == "fits":
            break
        blocks = list(cfg["block_sizes"])
        smaller_exists = [u for u in uses if any(c < blocks[u.index] for c in candidates(u))]
        shrinkable = [u for u in smaller_exists if LANE not in u.roles] or smaller_exists
        if not shrinkable:
            break
        largest = max(blocks[u.index] for u in shrinkable)
        trial = dict(caps)
        for use in shrinkable:
            if blocks[use.index] == largest:
                trial[use.index] = max(c for c in candidates(use) if c < largest)
        ir2, uses2, smaller = default_blocks(kernel, specs, given, chip, trial)
        if any(d.is_error for d in check_blocks(uses2, list(smaller["block_sizes"]), False)):
            break
        smaller = Config({**dict(cfg), "block_sizes": smaller["block_sizes"]})  # keeps a streaming fallback
        layouts2, report2 = _layouts(kernel, ir2, smaller, chip)
        if report2.total_bytes >= report.total_bytes:
            break
        caps, ir, uses, cfg, layouts, report = trial, ir2, uses2, smaller, layouts2, report2
    start = first[3]
    if start.verdict == report.verdict == "over_default_limit" and \
            start.total_bytes - report.total_bytes < MIN_SAVING * start.total_bytes:
        return first
    return ir, cfg, layouts, report


def _layouts(kernel: Kernel, ir: KernelIR, cfg: Config, chip: Chip) -> tuple[list[CallLayout], VmemReport]:
    """One pallas_call plan per grid loop, each requesting the VMEM its report says it needs."""
    from .codegen.plan_builder import build_call
    from .ir.tile_ir import GridLoop
    from .vmem.report import with_limits

    grids = [n for n in ir.host if isinstance(n, GridLoop)]
    if not grids and ir.empty_loops:  # every loop is over a zero-size dimension: the host code alone runs
        return [], with_limits([], chip)[1]
    if not grids:
        raise CompileError([error("HPL101", f"`{kernel.name}` has no hl.tile / hl.grid loop: nothing runs on the TPU",
                                  kernel.name_range)])
    try:
        layouts = [build_call(ir, g, i, cfg, chip) for i, g in enumerate(grids)]
    except UserError as exc:
        raise CompileError([exc.diagnostic(kernel.range)]) from None
    plans, report = with_limits([lay.plan for lay in layouts], chip)
    for layout, plan in zip(layouts, plans, strict=True):
        layout.plan = plan
    return layouts, report


def _check_config_kinds(cfg: Config, rng: Range) -> None:
    from .ir.config import LOOP_TYPES

    loop = cfg.get("pallas_loop_type")
    loops = loop if isinstance(loop, list) else [loop] if loop is not None else []
    for lt in loops:
        if lt not in LOOP_TYPES:
            raise CompileError([error("HPL109", f"pallas_loop_type {lt!r} is not one of {', '.join(LOOP_TYPES)}", rng)])
    bufs = cfg.get("pallas_load_buffer_count")
    items = bufs if isinstance(bufs, list) else [bufs] if bufs is not None else []
    for b in items:
        if b is not None and (not isinstance(b, int) or isinstance(b, bool) or not 1 <= b <= 8):
            raise CompileError([error("HPL109", f"pallas_load_buffer_count {b!r} must be an integer from 1 to 8", rng)])


def _narrowed(ir: KernelIR) -> tuple[str, ...]:
    """The int64 tensor arguments, which the device reads as int32 (compiler/frontend/tensor_access.py
    `_no_64_bit`)."""
    import torch

    from .ir.tile_ir import tensor_params

    return tuple(p for p in tensor_params(ir) if ir.args[p].dtype == torch.int64)


def _kernel_plan(ir: KernelIR, layouts: list[CallLayout], chip: Chip, narrowed: tuple[str, ...] = ()) -> KernelPlan:
    from .codegen.placement import describe
    from .frontend.table_roles import table_roles
    from .ir.tile_ir import Load, Op, Store, walk

    flops = 0.0
    for lay in layouts:
        steps = lay.plan.grid_steps
        flops += lay.plan.outer_work.mxu_flops * steps
        for lp in lay.plan.inner_loops:
            flops += lp.work.mxu_flops * lp.trips * steps
    nodes = list(walk(ir.host))
    accessed = {id(n.tensor) for n in nodes if isinstance(n, Load | Store)}
    hbm = float(sum(t.value.meta.numel() * t.value.dtype.itemsize for t in ir.tensors if id(t) in accessed))
    loops, accesses = [], []
    for lay in layouts:
        g = lay.grid
        loops.append(LoopInfo(g.header_range or g.range, "grid", g.dims[0].api, tuple(d.extent for d in g.dims),
                              tuple(d.block_size for d in g.dims), tuple(d.block_index for d in g.dims),
                              tuple(d.steps for d in g.dims), "grid", tuple(d.begin for d in g.dims),
                              tuple(d.tail for d in g.dims)))
        for lp in lay.plan.inner_loops:
            node = ir.inner_loops[lp.index]
            loops.append(LoopInfo(node.range, "inner", node.dims[0].api, tuple(d.extent for d in node.dims),
                                  tuple(d.block_size for d in node.dims), tuple(d.block_index for d in node.dims),
                                  tuple(d.steps for d in node.dims), lp.strategy, tuple(d.begin for d in node.dims),
                                  tuple(d.tail for d in node.dims), tuple(d.dynamic for d in node.dims), lp.note))
        for n in walk(g.body):
            if isinstance(n, Load | Store):
                op = lay.by_node[id(n)]
                copies = lay.dma.get(id(n))
                how = copies.describe() if copies is not None else describe(n, lay.modes.get(id(n), ()))
                accesses.append(AccessInfo(n.range, n.tensor.name, op.ref_name, isinstance(n, Store), how,
                                           lay.plan.name))
    tree_scans = any(isinstance(n, Op) and n.kind == "scan_valid" for n in nodes)
    precisions = frozenset(n.kwargs["precision"] for n in nodes if isinstance(n, Op) and n.kind == "dot")
    return KernelPlan(ir.name, chip.name, tuple(lay.plan for lay in layouts), flops, hbm, tuple(loops), tuple(accesses),
                      narrowed, table_roles(ir), tree_scans, precisions)


def _header(kernel: Kernel, specs: dict[str, ArgSpec], cfg: Config, chip: Chip, report: VmemReport,
            narrowed: tuple[str, ...]) -> str:
    where = kernel.line_label(kernel.range.start.line, "<source>")
    ints = (f"Pass {', '.join(narrowed)} (int64 in the kernel's signature) as int32, after checking every value fits:\n"
            "TPUs have no 64-bit vector types (helion-ls's own call raises OverflowError when one does not fit).\n"
            ) if narrowed else ""
    return (
        f'"""Pallas TPU kernel generated by helion-ls from `{kernel.name}` ({where}).\n\n'
        f"Shapes: {format_args(specs)}\n"
        f"Chip: {chip.name}   Config: {cfg!r}\n"
        f"VMEM: {fmt_bytes(report.total_bytes)} of {fmt_bytes(report.limit_bytes)} requested "
        f"({report.verdict.replace('_', ' ')})\n\n"
        f"Standalone: needs only jax. Call {kernel.name}(...) with jax arrays; on a machine without a TPU pass\n"
        f"interpret=pltpu.InterpretParams() inside a TPU abstract mesh.\n{ints}"
        f'"""'
    )


def _arg_range(source: str, line: Range, arg: str) -> Range | None:
    """`q=bf16[8, 32, 8192, 256]` within a shape line (UTF-8 columns, as ast reports them)."""
    import re

    from .support.diagnostics import Position

    lines = source.splitlines()
    if line.start.line >= len(lines):
        return None
    text = lines[line.start.line].encode()
    m = re.search(rb"\b" + re.escape(arg.encode()) + rb"\s*=\s*[^\[,)]*(\[[^\]]*\])?", text)
    if m is None:
        return None
    return Range(Position(line.start.line, m.start()), Position(line.start.line, m.end()))
