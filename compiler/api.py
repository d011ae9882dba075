"""The compiler's public face: `load` a file statically, `Kernel.compile` it for shapes + config + chip,
call the result. Nothing below this module knows about files, editors or processes.

`load` and everything a `Kernel` knows before compiling (shape sets, configs, its source hash) import no
torch: the compile machinery (tracer, codegen, VMEM layouts; torch) is imported by the methods that compile,
so the language server can parse files and look up remembered results before torch is loaded. The one
exception is the shape sets of a kernel without a shape line, found in the file's own calls on meta tensors
(`Module.call_shapes`): a process without torch has another one find them and passes them to `load`.
"""

from __future__ import annotations

import ast
import hashlib
import logging
import os
import traceback
from collections import OrderedDict
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .chips import Chip, get_chip
from .config import HELION_KEYS, Config, ConfigError, as_config
from .diagnostics import ArgRankError, CompileError, Diagnostic, Position, Range, Related, UserError, error
from .frontend.call_shapes import InferredShapes, ShapeOrigin
from .frontend.limits import too_deep
from .frontend.module import KernelDef, ModuleInfo, parse_module, source_hash, used_helpers
from .frontend.shape_hint import no_shapes_hint, required_params
from .notebook import NotebookError, NotebookModule, read_notebook
from .plan import AccessInfo, KernelPlan, LoopInfo
from .specs import ArgSpec, SpecError, TensorSpec, coerce_args, format_args
from .tables import IndexTable
from .vmem import VmemReport, fmt_bytes

if TYPE_CHECKING:
    from .codegen.plan_builder import CallLayout
    from .frontend.values import BlockSizeTable
    from .ir import KernelIR
    from .space import BlockUse, ConfigSpace
    from .vmem_floor import VmemFloor

log = logging.getLogger(__name__)
MAX_SOURCE_BYTES = 5_000_000


def load(path_or_source: str | os.PathLike | NotebookModule, name: str | None = None,
         call_shapes: InferredShapes | None = None) -> Module:
    """Parse a file (or source text) statically. Never raises for bad code: problems become diagnostics.

    `name`: the file that source text comes from (an editor's unsaved buffer), for generated headers.
    A Jupyter notebook (an `.ipynb` path, or a `NotebookModule` an editor built) is the module of its code
    cells (see compiler/notebook.py).
    `call_shapes`: the shapes from the file's calls, when another process found them for this very text
    (`Module.call_shapes` of its load); else they are found when first needed (that imports torch)."""
    path = name
    notebook = path_or_source if isinstance(path_or_source, NotebookModule) else None
    text = notebook.text if notebook is not None else str(path_or_source)
    if notebook is None and (isinstance(path_or_source, os.PathLike) or (
            "\n" not in text and text.endswith((".py", ".ipynb")) and os.path.exists(text))):
        path = os.fspath(path_or_source)
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            if path.endswith(".ipynb"):
                notebook = read_notebook(text)
                text = notebook.text
        except (OSError, NotebookError) as exc:
            why = f"cannot read {path}: {exc}" if isinstance(exc, OSError) else str(exc)
            return Module(path, "", ModuleInfo("", None, diagnostics=[error("HPL100", why, Range.lines(0))]))
    if len(text) > MAX_SOURCE_BYTES:
        return Module(path, text, ModuleInfo(text, None, diagnostics=[
            error("HPL100", f"file is too large to analyse ({len(text)} bytes)", Range.lines(0))]))
    try:
        info = parse_module(text)
    except Exception:  # noqa: BLE001 - the one place internal errors become a diagnostic
        log.exception("internal error while parsing")
        info = ModuleInfo(text, None, diagnostics=[_internal(Range.lines(0))])
    return Module(path, text, info, call_shapes, notebook)


class Module:
    """A parsed file. Kernels without a shape line get their shape sets from the calls the file's own code
    makes (`call_shapes`, found when first needed); what stopped that search is among `diagnostics`."""

    def __init__(self, path: str | None, source: str, info: ModuleInfo, call_shapes: InferredShapes | None = None,
                 notebook: NotebookModule | None = None):
        self.path = path
        self.source = source
        self.info = info
        self.notebook = notebook  # set for a Jupyter notebook: where each module line is in its cells
        self._call_shapes = call_shapes
        self.kernels: dict[str, Kernel] = {k.name: Kernel(self, k) for k in info.kernels}

    @property
    def needs_call_shapes(self) -> bool:
        """Some kernel has no shape line (and no bad one), so its shape sets come from the file's calls."""
        return bool(_wanted(self.info))

    @cached_property
    def call_shapes(self) -> InferredShapes:
        """Shape sets from the file's calls, for the kernels without a shape line: as given to `load`, else
        found now (imports torch; nothing is looked for when every kernel has a shape line)."""
        if self._call_shapes is not None:
            return self._call_shapes
        wanted = _wanted(self.info)
        if not wanted:
            return InferredShapes()
        from .frontend.call_shapes import infer_call_shapes

        try:
            return infer_call_shapes(self.info, wanted, line_label=self.line_label)
        except Exception:  # noqa: BLE001 - a bug here costs the inferred shapes, never the file
            log.exception("internal error while inferring shapes from calls")
            return InferredShapes()

    def line_label(self, line: int) -> str:
        """How messages name a line: `line 12`, a notebook's `cell 3:12`."""
        return self.notebook.line_label(line) if self.notebook is not None else f"line {line + 1}"

    @cached_property
    def diagnostics(self) -> list[Diagnostic]:
        """The file's: syntax, shape lines, decorator configs, and limits the search for call shapes hit."""
        out = [*(self.notebook.diagnostics if self.notebook else ()), *self.info.diagnostics,
               *self.call_shapes.diagnostics]
        for k in self.kernels.values():
            out.extend(k.definition.diagnostics)
        return out

    def __repr__(self) -> str:
        return f"<compiler.Module {self.path or '<source>'} kernels={list(self.kernels)}>"

    def describe(self, pos: Position, path: str) -> str:
        """Where `pos` is, for people: `file.py:12:5`, or `notebook.ipynb:cell 3:12:5` (all 1-based)."""
        if self.notebook is not None:
            return f"{path}:{self.notebook.describe(pos)}"
        return f"{path}:{pos.line + 1}:{pos.character + 1}"


class Kernel:
    """One `@helion.kernel` function as written. It keeps the file's facts; of its Module only the shapes
    found in the file's calls, read when its shape sets are first asked for."""

    def __init__(self, module: Module, definition: KernelDef):
        self.info = module.info
        self.path = module.path
        self.notebook = module.notebook
        self.source = module.source
        self.definition = definition
        self.name = definition.name
        self.range = Range.of(definition.node)
        self.name_range = _name_range(definition.node)
        self.decorator_range = Range.of(definition.decorator)
        self.decorator_config = definition.decorator_config
        self.decorator_configs = definition.decorator_configs
        self._call_shapes = lambda: module.call_shapes
        self._siblings = lambda: module.kernels.values()
        self.config_ranges: list[Range] = list(definition.configs_ranges)
        self.config_range_all: Range | None = definition.config_range
        self.params = [a.arg for a in definition.node.args.args]
        # traces by (shapes, given block sizes): configs differing only in strategy, buffering or loop order
        # share one (the tuner compiles ~20 such variants per block-size choice); the IR is not mutated
        self._traces: OrderedDict[tuple, tuple[KernelIR, list[BlockUse], BlockSizeTable]] = OrderedDict()

    def line_label(self, line: int, unnamed: str = "<kernel>") -> str:
        """How generated code names a source line: `file.py:12`, a notebook's `nb.ipynb:cell 3:12`."""
        name = os.path.basename(self.path) if self.path else unnamed
        return f"{name}:{self.notebook.line_label(line) if self.notebook is not None else line + 1}"

    def __repr__(self) -> str:
        return f"<compiler.Kernel {self.name}>"

    @cached_property
    def source_hash(self) -> str:
        info = self.info
        try:
            return source_hash(self.definition.node, self._helpers, info.constants, info.definitions)
        except RecursionError:  # too deep to hash its structure (it gets a diagnostic): hash its text instead
            node = self.definition.node
            text = "".join(self.source.splitlines(keepends=True)[node.lineno - 1 : node.end_lineno])
            return hashlib.sha256(text.encode()).hexdigest()[:20]

    @cached_property
    def _helpers(self) -> list:
        return used_helpers(self.definition.node, self.info.functions)

    @cached_property
    def _too_deep(self) -> Diagnostic | None:
        """A diagnostic when the kernel or a helper holds an expression too deep to analyse."""
        return too_deep([self.definition.node, *self._helpers])

    # -- shape sets: the shape lines, else the file's calls ------------------------------------------------

    @cached_property
    def _inferred(self) -> list[tuple[dict[str, ArgSpec], ShapeOrigin]]:
        if self.definition.shape_sets or _bad_shape_lines(self.definition):
            return []  # shape lines win (and a bad one is what to fix)
        return self._call_shapes().sets.get(self.name, [])

    @cached_property
    def shape_sets(self) -> list[dict[str, ArgSpec]]:
        return self.definition.shape_sets or [specs for specs, _ in self._inferred]

    @cached_property
    def shape_set_ranges(self) -> list[Range]:
        """Each shape set's line; a shape set from the file's calls is anchored on the decorator (its lenses
        sit there, as for a kernel without any shape set)."""
        return self.definition.shape_set_ranges or [self.decorator_range for _ in self._inferred]

    @cached_property
    def shape_set_origins(self) -> list[ShapeOrigin | None]:
        """Where each shape set from the file's calls comes from (label, the call's range); None for a shape
        line."""
        return [o for _, o in self._inferred] or [None] * len(self.shape_sets)

    # -- public entry points --------------------------------------------------------------------------

    @cached_property
    def shape_hint(self) -> Diagnostic | None:
        """Information with a quick fix for a kernel with no shape set (no shape line, no call found); None
        when it has one, or when its shape lines have errors (those are what to fix)."""
        if self.shape_sets or _bad_shape_lines(self.definition):
            return None
        found = self._call_shapes()
        return no_shapes_hint(self.definition.node, self.definition.decorator, self.source.splitlines(),
                              found.misses.get(self.name, []), found.unreached.get(self.name), self._alike())

    def _alike(self) -> tuple[str, list[dict[str, ArgSpec]]] | None:
        """Another kernel of the file that takes the same arguments and has shape sets (its shape lines, else its
        calls'), with those sets: upstream's attention.py calls `attention` and none of its five variants."""
        mine = required_params(self.definition.node)
        for other in self._siblings():
            if other is self or required_params(other.definition.node) != mine:
                continue
            sets = [{name: s[name] for name in mine} for s in other.shape_sets if all(name in s for name in mine)]
            if sets:
                return other.name, sets
        return None

    def resolve_args(self, args: Any = None, shape_set: int | None = None) -> dict[str, ArgSpec]:
        if args is None:
            if not self.shape_sets:
                raise CompileError(_bad_shape_lines(self.definition) or [self.shape_hint])
            index = shape_set or 0
            if not 0 <= index < len(self.shape_sets):
                raise CompileError([error("HPL107", f"`{self.name}` has {len(self.shape_sets)} shape sets; "
                                          f"{index} is out of range", self.decorator_range)])
            return self.shape_sets[index]
        try:
            return coerce_args(args)
        except SpecError as exc:
            raise CompileError([error("HPL104", f"bad args: {exc}", self._param_range(exc.param))]) from None

    def _param_range(self, name: str | None) -> Range:
        """Where the kernel declares parameter `name` (a bad argument for it is shown there), else the decorator."""
        param = next((a for a in self.definition.node.args.args if a.arg == name), None)
        return Range.of(param) if param is not None else self.decorator_range

    def config_for(self, shape_set: int | None) -> Config | None:
        """The config the decorator gives a shape set: `configs=[...]` with one entry per shape set (what
        Apply writes for several shape sets), else `config=`, else the first of `configs`."""
        configs = self.decorator_configs
        if configs and shape_set is not None and len(configs) == len(self.shape_sets) and shape_set < len(configs):
            return configs[shape_set]
        if self.decorator_config is not None:
            return self.decorator_config
        return configs[0] if configs else None

    def config_range(self, shape_set: int | None) -> Range | None:
        """Where the decorator gives `config_for(shape_set)`: that `configs=[...]` entry or `config=`."""
        configs = self.decorator_configs
        if configs and shape_set is not None and len(configs) == len(self.shape_sets) and shape_set < len(configs):
            return self.config_ranges[shape_set]
        if self.decorator_config is not None:
            return self.config_range_all
        return self.config_ranges[0] if configs and self.config_ranges else None

    def compile(self, args: Any = None, config: Config | Mapping | str | None = None, chip: str | Chip = "v7x",
                shape_set: int | None = None, *, emit: bool = True) -> CompiledKernel:
        """Compile for one shape set + config + chip. Raises CompileError (never another exception).

        emit=False skips writing the module text (the result has a plan and a VMEM report but no source and
        cannot be called): for callers that only model it, such as the tuner's search."""
        try:
            return self._compile(args, config, chip, shape_set, emit)
        except CompileError:
            raise
        except RecursionError:  # e.g. helpers that nest a value thousands of operations deep
            raise CompileError([error("HPL101", "the kernel's computation nests too deeply to generate code for "
                                      "(helpers calling helpers?); split it into several statements",
                                      self.range)]) from None
        except Exception as exc:  # noqa: BLE001 - internal errors must not escape to the user
            log.error("internal compiler error in %s:\n%s", self.name, traceback.format_exc())
            raise CompileError([_internal(self.range, exc)]) from None

    def default_config(self, args: Any = None, chip: str | Chip = "v7x") -> Config:
        specs = self.with_defaults(self.resolve_args(args))
        return self._default_blocks(specs, Config(), _chip(chip))[2]

    def config_space(self, args: Any = None, chip: str | Chip = "v7x") -> ConfigSpace:
        from .space import build_space

        specs = self.resolve_args(args)
        ir, uses, _ = self._trace(specs, Config(), _chip(chip))
        space = build_space(ir, uses)
        unknown = {k: v for k, v in (self.decorator_config or {}).items() if k not in _TUNED}
        space.base = Config(unknown)
        return space

    def vmem_floor(self, args: Any = None, chip: str | Chip = "v7x") -> VmemFloor:
        """A lower bound of the VMEM of every config by its block sizes (vmem_floor.py), from the trace the
        config space comes from: the tuner skips block sizes that cannot fit without tracing them."""
        from .vmem_floor import VmemFloor

        ir, _, _ = self._trace(self.resolve_args(args), Config(), _chip(chip))
        return VmemFloor.of(ir)

    # -- internals ------------------------------------------------------------------------------------

    def _trace(self, specs: dict[str, ArgSpec], config: Config, chip: Chip) -> tuple[KernelIR, list[BlockUse], BlockSizeTable]:
        from .frontend import dot_precision
        from .frontend.tracer import Tracer
        from .frontend.values import BlockSizeTable, BlockTooLong
        from .masks import insert_masks
        from .space import block_uses

        given = config.get("block_sizes")
        if given is not None and not (isinstance(given, list) and all(isinstance(b, int) for b in given)):
            raise CompileError([error("HPL109", "block_sizes must be a list of integers", self.decorator_range)])
        tunables = {k: v for k, v in config.items() if k not in HELION_KEYS}  # hl.register_tunable values
        key = (format_args(specs), None if given is None else tuple(given), chip.name, repr(sorted(tunables.items())))
        cached = self._traces.get(key)
        if cached is not None:
            self._traces.move_to_end(key)
            return cached
        if self._too_deep is not None:
            raise CompileError([self._too_deep])
        try:
            precision = dot_precision.setting(self.definition.decorator)
            caps: dict[tuple[int, int], int] = {}
            while True:  # a device-bounded loop's block longer than a dim it indexes is cut to it (BlockTooLong)
                provisional = BlockSizeTable(given, lambda i, extent: min(extent, 128))
                try:
                    ir = Tracer(self.info, self.definition.node, specs, provisional, caps, chip, tunables).run()
                    break
                except BlockTooLong as cut:
                    if caps.get(cut.dim, cut.size + 1) <= cut.size:
                        raise
                    caps[cut.dim] = cut.size
            insert_masks(ir)
            dot_precision.stamp(ir, precision)
        except ArgRankError as exc:
            raise CompileError([self._rank_diagnostic(exc, specs)]) from None
        except UserError as exc:
            raise CompileError([exc.diagnostic(self.range)]) from None
        except RecursionError:
            raise CompileError([error("HPL101", "kernel nests too deeply to analyse", self.range)]) from None
        uses = block_uses(ir, provisional.ranges, provisional.extents)
        self._traces[key] = (ir, uses, provisional)
        if len(self._traces) > _TRACE_CACHE_SIZE:
            self._traces.popitem(last=False)
        return ir, uses, provisional

    def _rank_diagnostic(self, exc: ArgRankError, specs: dict[str, ArgSpec]) -> Diagnostic:
        """On the shape line that gave the argument its rank (at the argument), else where it is unpacked."""
        index = self._shape_set_of(specs)
        if index is None or index >= len(self.shape_set_ranges):
            return exc.diagnostic(self.range)
        origin = self.shape_set_origins[index]
        if origin is not None:  # found in the file's calls: said where the kernel unpacks it, with the call
            return error("HPL105", f"`{exc.arg}` is {exc.rank}-D in shape set {index} ({origin.label}); the kernel "
                         f"unpacks {exc.unpacked} dims from {exc.how}", exc.range or self.range,
                         related=(Related(origin.range, f"shape set {index} comes from this call"),))
        line = self.shape_set_ranges[index]
        rng = _arg_range(self.source, line, exc.arg) or line
        return error("HPL104", f"`{exc.arg}` is {exc.rank}-D in this shape line; the kernel unpacks {exc.unpacked} dims "
                     f"from {exc.how}", rng, related=(Related(exc.range or self.range, f"unpacks {exc.unpacked} dims "
                                                              f"from {exc.how}"),), data={"anchor": "shape_set"})

    def _fill_defaults(self, config: Config, uses: list[BlockUse], ir: KernelIR,
                       caps: Mapping[int, int] | None = None) -> Config:
        """`config` with the blocks it does not give at their defaults for these uses, each at most its cap."""
        from .space import default_block

        values = dict(config)
        given = list(values.get("block_sizes", []))
        blocks = given[: len(uses)] + [default_block(u, (caps or {}).get(u.index)) for u in uses[len(given):]]
        values["block_sizes"] = blocks
        if ir.inner_loops and "pallas_loop_type" not in values:
            values["pallas_loop_type"] = "unroll"
        return Config(values)

    def _default_blocks(self, specs: dict[str, ArgSpec], config: Config, chip: Chip,
                        caps: Mapping[int, int] | None = None) -> tuple[KernelIR, list[BlockUse], Config]:
        """(ir, uses, config) with the blocks `config` does not give at their defaults. A default depends on the
        trace (a sub-tile's extent is its grid tile's block), and the first trace uses placeholder blocks: the
        defaults are recomputed on each re-trace until they stop changing (a few rounds at most)."""
        ir, uses, _ = self._trace(specs, config, chip)
        filled = self._fill_defaults(config, uses, ir, caps)
        for _ in range(_DEFAULT_ROUNDS):
            if list(filled["block_sizes"]) == ir.block_sizes:
                break
            ir, uses, _ = self._trace(specs, filled, chip)
            filled = self._fill_defaults(config, uses, ir, caps)
        if list(filled["block_sizes"]) != ir.block_sizes:  # no fixed point: the last defaults, traced
            ir, uses, _ = self._trace(specs, filled, chip)
        return ir, uses, filled

    def _compile(self, args: Any, config: Any, chip: str | Chip, shape_set: int | None, emit: bool = True
                 ) -> CompiledKernel:
        from . import space as block_space
        from .codegen.emit import emit_module
        from .space import check_blocks
        from .vmem_diagnostics import vmem_diagnostics

        chip = _chip(chip)
        specs = self.resolve_args(args, shape_set)
        if config is None and args is None:
            config = self.config_for(shape_set or 0)
            from_decorator = True
        elif config is None:
            config = self.config_for(self._shape_set_of(specs))
            from_decorator = True
        else:
            from_decorator = False
        try:
            cfg = as_config(config)
        except ConfigError as exc:
            raise CompileError([error("HPL109", str(exc), self.decorator_range)]) from None
        _check_config_kinds(cfg, self.decorator_range)
        index = shape_set if args is None else self._shape_set_of(specs)
        specs = self.with_defaults(specs)
        entry = self.config_range(index) if config is not None and cfg == self.config_for(index) else None
        given_cfg = cfg
        ir, uses, cfg = self._default_blocks(specs, cfg, chip)
        if len(cfg["block_sizes"]) > len(uses):
            cfg = cfg.replace(block_sizes=list(cfg["block_sizes"])[: len(uses)])
        diags = check_blocks(uses, list(cfg["block_sizes"]), from_decorator)
        if any(d.is_error for d in diags):  # raised to legal sizes when that keeps the kernel's meaning, else errors
            ir, uses, blocks, diags = block_space.raise_blocks(
                uses, list(cfg["block_sizes"]), ir, from_decorator, diags,
                lambda b: self._trace(specs, cfg.replace(block_sizes=b), chip)[:2])
            cfg = cfg.replace(block_sizes=blocks)
        layouts, report = self._layouts(ir, cfg, chip)
        chosen = config or {}
        if report.verdict == "out_of_vmem" and ir.inner_loops and "pallas_loop_type" not in chosen:
            # the default strategy keeps inner operands resident; when that cannot fit, stream them instead
            streamed = cfg.replace(pallas_loop_type="emit_pipeline")
            alt_layouts, alt_report = self._layouts(ir, streamed, chip)
            if alt_report.verdict != "out_of_vmem":
                cfg, layouts, report = streamed, alt_layouts, alt_report
        if "block_sizes" not in chosen:
            ir, cfg, layouts, report = self._shrink_defaults(specs, given_cfg, ir, uses, cfg, layouts, report, chip)
        diags.extend(vmem_diagnostics(layouts, chip, entry))
        mutated = sorted({o.tensor.root.name for lay in layouts for o in lay.operands
                          if o.kind == "inout" and o.tensor.root.origin == "arg"}, key=ir.params.index)
        source, source_map = "", []
        narrowed = _narrowed(ir)
        try:
            if emit:
                header = _header(self, specs, cfg, chip, report, narrowed)
                source, source_map = emit_module(ir, layouts, dict(cfg), header, self.line_label, mutated)
        except UserError as exc:
            raise CompileError([exc.diagnostic(self.range)]) from None
        plan = _kernel_plan(ir, layouts, chip, narrowed)
        return CompiledKernel(self, specs, cfg, chip, source, source_map, plan, report, diags, mutated)


    def with_defaults(self, specs: dict[str, ArgSpec]) -> dict[str, ArgSpec]:
        """Every parameter's value in order: a shape set may leave out parameters with defaults (`eps`), but the
        compiled kernel is called with all of them."""
        a = self.definition.node.args
        names = [p.arg for p in a.args]
        defaults = dict(zip(names[len(names) - len(a.defaults):], a.defaults, strict=True))
        if all(n in specs for n in names) or any(n not in specs and n not in defaults for n in names):
            return specs  # complete, or missing a required one (the trace says which)
        out: dict[str, ArgSpec] = {}
        for name in names:
            if name in specs:
                out[name] = specs[name]
                continue
            try:
                out[name] = ast.literal_eval(defaults[name])
            except (ValueError, TypeError, SyntaxError, RecursionError):
                return specs  # not a literal: the trace says so (HPL106)
        return {**out, **{k: v for k, v in specs.items() if k not in out}}

    def _shape_set_of(self, specs: dict[str, ArgSpec]) -> int | None:
        return next((i for i, s in enumerate(self.shape_sets) if s == specs), None)

    def _shrink_defaults(self, specs: dict, given: Config, ir: KernelIR, uses: list[BlockUse], cfg: Config,
                         layouts: list[CallLayout], report: VmemReport, chip: Chip) -> tuple:
        """Default blocks that overflow the default VMEM limit are capped one legal size lower (non-lane dims
        first, lane dims when no other is left) until they fit; the largest ones together, so loops of the same
        shape (whose temporaries count once) shrink at once. The other defaults follow on each re-trace (a
        sub-tile's block stays within its grid tile's). `given` is the config without default blocks."""
        from .space import LANE, candidates, check_blocks

        caps: dict[int, int] = {}
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
            ir2, uses2, smaller = self._default_blocks(specs, given, chip, trial)
            if any(d.is_error for d in check_blocks(uses2, list(smaller["block_sizes"]), False)):
                break
            smaller = Config({**dict(cfg), "block_sizes": smaller["block_sizes"]})  # keeps a streaming fallback
            layouts2, report2 = self._layouts(ir2, smaller, chip)
            if report2.total_bytes >= report.total_bytes:
                break
            caps, ir, uses, cfg, layouts, report = trial, ir2, uses2, smaller, layouts2, report2
        return ir, cfg, layouts, report

    def _layouts(self, ir: KernelIR, cfg: Config, chip: Chip) -> tuple[list[CallLayout], VmemReport]:
        """One pallas_call plan per grid loop, each requesting the VMEM its report says it needs."""
        from .codegen.plan_builder import build_call
        from .ir import GridLoop
        from .vmem import with_limits

        grids = [n for n in ir.host if isinstance(n, GridLoop)]
        if not grids:
            raise CompileError([error("HPL101", f"`{self.name}` has no hl.tile / hl.grid loop: nothing runs on the TPU",
                                      self.name_range)])
        try:
            layouts = [build_call(ir, g, i, cfg, chip) for i, g in enumerate(grids)]
        except UserError as exc:
            raise CompileError([exc.diagnostic(self.range)]) from None
        plans, report = with_limits([lay.plan for lay in layouts], chip)
        for layout, plan in zip(layouts, plans, strict=True):
            layout.plan = plan
        return layouts, report


_TUNED = {"block_sizes", "pallas_loop_type", "pallas_load_buffer_count"}
_TRACE_CACHE_SIZE = 256
_DEFAULT_ROUNDS = 4  # re-traces to settle default blocks that depend on others


class CompiledKernel:
    """A kernel compiled for one shape set, config and chip: generated source, plan, VMEM report, runner."""

    def __init__(self, kernel: Kernel, args: dict[str, ArgSpec], config: Config, chip: Chip, source: str,
                 source_map: list[tuple[int, Range]], plan: KernelPlan, vmem: VmemReport,
                 diagnostics: list[Diagnostic], mutated: list[str]):
        self.kernel = kernel
        self.args = args
        self.config = config
        self.chip = chip
        self.source = source
        self.source_map = source_map
        self.plan = plan
        self.vmem = vmem
        self.diagnostics = diagnostics
        self.mutated = mutated
        self.entry = kernel.name
        self.truth: dict[str, Any] = {}  # stage -> compiler.truth.TruthResult, filled by the check_* methods
        self._fn = None

    def __repr__(self) -> str:
        return f"<CompiledKernel {self.kernel.name} {format_args(self.args)} {self.config} on {self.chip.name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call it as the kernel is called: positional or keyword arguments, defaulted ones left out."""
        from .runtime import bind_call, load_entry, run

        if not self.source:
            raise RuntimeError(f"{self!r} was compiled with emit=False: it has no code to run")
        if self._fn is None:
            self._fn = load_entry(self.source, self.entry, f"<pallas {self.kernel.name}>")
        params, specs, values = bind_call(self.kernel.definition.node, self.args, args, kwargs)
        return run(self._fn, params, specs, self.chip, values, self.mutated)

    def arg_structs(self) -> list[Any]:
        """jax.ShapeDtypeStructs of the tensor arguments (for lowering / compiling without data)."""
        import jax
        import jax.numpy as jnp

        out = []
        for spec in self.call_specs.values():
            if isinstance(spec, TensorSpec):  # int64 arguments are passed as int32 (runtime.to_jax)
                dtype = jnp.int32 if spec.dtype_name == "int64" else jnp.dtype(spec.dtype_name)
                out.append(jax.ShapeDtypeStruct(spec.shape, dtype))
        return out

    def compile_args(self) -> list[Any]:
        """What the generated entry is compiled with: the tensors' ShapeDtypeStructs, then the scalar
        arguments' values (static)."""
        return self.arg_structs() + list(self.scalar_args().values())

    def check_lowering(self) -> list[Diagnostic]:
        """Mosaic lowering for the chip (always available); diagnostics on the kernel source."""
        from .truth import check_lowering

        return self._guarded(check_lowering, "lowering").diagnostics

    def check_tpu_compile(self) -> list[Diagnostic]:
        """The real libtpu compile (one HPL402 info diagnostic when libtpu is absent)."""
        from .truth import check_tpu_compile

        return self._guarded(check_tpu_compile, "libtpu").diagnostics

    def _guarded(self, check: Any, stage: str) -> Any:
        from .truth import TruthResult

        try:
            result = check(self)
        except Exception as exc:  # noqa: BLE001 - a checker bug is one diagnostic, never a crash
            log.error("internal error in the %s check of %s:\n%s", stage, self.kernel.name, traceback.format_exc())
            result = TruthResult(False, [_internal(self.plan.calls[0].range, exc)])
        self.truth[stage] = result
        return result

    def scalar_args(self) -> dict[str, Any]:
        """The generated function's non-tensor arguments (defaulted ones included), in its order."""
        return {n: v for n, v in self.call_specs.items() if not isinstance(v, TensorSpec)}

    @cached_property
    def tables(self) -> tuple[IndexTable, ...]:
        """Integer tensor arguments the kernel reads as offsets, positions or loop counts, and the values each
        takes (compiler/table_roles.py decides from the kernel's use of them). A check draws them as such: a
        random negative length or a position past the gathered dim means nothing to such a kernel. A table
        read one element at a time on the scalar core (in SMEM) whose use says nothing more counts loops."""
        found = {t.name: t for t in self.plan.tables}
        smem = {o.tensor for c in self.plan.calls for o in c.operands if o.memory == "smem" and o.kind == "input"}
        return tuple(found.get(n) or IndexTable(n, "counts") for n, s in self.args.items()
                     if n in found or (n in smem and isinstance(s, TensorSpec) and s.dtype_name.startswith(("int", "uint"))))

    @cached_property
    def call_specs(self) -> dict[str, ArgSpec]:
        """Spec of each parameter the generated function takes (a defaulted one: its default)."""
        from .runtime import bind_call

        params, specs, _ = bind_call(self.kernel.definition.node, self.args, [], {}, compiled_only=True)
        return {p: specs[p] for p in params}

    def to_json(self) -> dict:
        return {
            "kernel": self.kernel.name,
            "args": format_args(self.args),
            "chip": self.chip.name,
            "config": dict(self.config),
            "config_text": repr(self.config),
            "source": self.source,
            "source_map": [{"line": line, "range": rng.to_json()} for line, rng in self.source_map],
            "vmem": self.vmem.to_json(),
            "diagnostics": [d.to_json() for d in self.diagnostics],
        }


def _wanted(info: ModuleInfo) -> list[str]:
    """Kernels whose shape sets come from the file's calls: no shape line, and no bad one."""
    return [k.name for k in info.kernels if not k.shape_sets and not _bad_shape_lines(k)]


def _bad_shape_lines(definition: KernelDef) -> list[Diagnostic]:
    return [d for d in definition.diagnostics if d.code == "HPL104"]


def _chip(chip: str | Chip) -> Chip:
    if isinstance(chip, Chip):
        return chip
    try:
        return get_chip(chip)
    except ValueError as exc:
        raise CompileError([error("HPL109", str(exc), Range.lines(0))]) from None


def _check_config_kinds(cfg: Config, rng: Range) -> None:
    from .config import LOOP_TYPES

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

    from .ir import tensor_params

    return tuple(p for p in tensor_params(ir) if ir.args[p].dtype == torch.int64)


def _kernel_plan(ir: KernelIR, layouts: list[CallLayout], chip: Chip, narrowed: tuple[str, ...] = ()) -> KernelPlan:
    from .codegen.placement import describe
    from .ir import Load, Op, Store, walk
    from .table_roles import table_roles

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

    from .diagnostics import Position

    lines = source.splitlines()
    if line.start.line >= len(lines):
        return None
    text = lines[line.start.line].encode()
    m = re.search(rb"\b" + re.escape(arg.encode()) + rb"\s*=\s*[^\[,)]*(\[[^\]]*\])?", text)
    if m is None:
        return None
    return Range(Position(line.start.line, m.start()), Position(line.start.line, m.end()))


def _name_range(node: Any) -> Range:
    """The function name in `def name(...)` (ast gives the `def` keyword's position)."""
    from .diagnostics import Position

    line, col = node.lineno - 1, node.col_offset + 4
    return Range(Position(line, col), Position(line, col + len(node.name)))


def _internal(rng: Range, exc: BaseException | None = None) -> Diagnostic:
    detail = f" ({type(exc).__name__}: {str(exc)[:200]})" if exc else ""
    return error("HPL900", f"internal compiler error{detail}; the traceback is in the log", rng)
