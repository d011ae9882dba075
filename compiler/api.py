"""The compiler's public face: `load` a file statically, `Kernel.compile` it for shapes + config + chip,
call the result. Nothing below this module knows about files, editors or processes.

`load` and everything a `Kernel` knows before compiling (shape sets, configs, its source hash) import no
torch: the compile machinery (tracer, codegen, VMEM layouts; torch) is imported by the functions of
compiler/pipeline.py when they run, so the language server can parse files and look up remembered results
before torch is loaded. The result of a compile is a `CompiledKernel` (compiler/compiled.py). The one
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

from . import pipeline
from .frontend.call_shapes import InferredShapes, ShapeOrigin
from .frontend.limits import too_deep
from .frontend.module import (
    KernelDef,
    ModuleInfo,
    analysis_hash,
    followed_files,
    parse_module,
    source_hash,
    used_helpers,
)
from .frontend.notebook import NotebookError, NotebookModule, read_notebook
from .frontend.shape_hint import no_shapes_hint, required_params
from .ir.callables import coerce_args
from .ir.chips import Chip
from .ir.config import Config
from .ir.specs import ArgSpec, SpecError
from .support.diagnostics import CompileError, Diagnostic, Position, Range, error, internal_error

if TYPE_CHECKING:
    from .codegen.space import BlockUse, ConfigSpace
    from .compiled import CompiledKernel
    from .frontend.values import BlockSizeTable
    from .ir.tile_ir import KernelIR
    from .vmem.floor import VmemFloor

log = logging.getLogger(__name__)
MAX_SOURCE_BYTES = 5_000_000


def load(path_or_source: str | os.PathLike | NotebookModule, name: str | None = None,
         call_shapes: InferredShapes | None = None, where: str | None = None) -> Module:
    """Parse a file (or source text) statically. Never raises for bad code: problems become diagnostics.

    `name`: the file that source text comes from (an editor's unsaved buffer), for generated headers.
    A Jupyter notebook (an `.ipynb` path, or a `NotebookModule` an editor built) is the module of its code
    cells (see compiler/frontend/notebook.py).
    `call_shapes`: the shapes from the file's calls, when another process found them for this very text
    (`Module.call_shapes` of its load); else they are found when first needed (that imports torch).
    `where`: the file's full path when `name` is not it (an editor's buffer): the kernel wrappers its project
    names or its workspace defines are looked up from there (frontend/kernel_forms.py)."""
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
        info = parse_module(text, where or (path if path and os.path.isabs(path) else
                                            os.path.abspath(path) if path and os.path.exists(path) else None))
    except Exception:  # noqa: BLE001 - the one place internal errors become a diagnostic
        log.exception("internal error while parsing")
        info = ModuleInfo(text, None, diagnostics=[internal_error(Range.lines(0))])
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
        # which cases of an input generator are shape sets: None a few representative ones, "all", or a
        # comma-separated selection of indices and case-label parts (`select_cases`); set before reading them
        self.cases: str | None = None
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
        from .frontend.call_recorder import infer_call_shapes

        try:
            return infer_call_shapes(self.info, wanted, line_label=self.line_label)
        except Exception:  # noqa: BLE001 - a bug here costs the inferred shapes, never the file
            log.exception("internal error while inferring shapes from calls")
            return InferredShapes()

    def line_label(self, line: int) -> str:
        """How messages name a line: `line 12`, a notebook's `cell 3:12`."""
        return self.notebook.line_label(line) if self.notebook is not None else f"line {line + 1}"

    @property
    def followed_files(self) -> tuple[str, ...]:
        """The other workspace files the file's imports are read from, transitively (see Kernel.followed_files)."""
        return followed_files(self.info)

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
        self._cases = lambda: module.cases
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

    @property
    def followed_files(self) -> tuple[str, ...]:
        """The other workspace files this file's imports are read from (vLLM's `get_fp8_dtype` in its package's
        utils.py), transitively, sorted: an analysis of the kernel depends on their text as well as its own.
        Found statically (no torch); the same for every kernel of the file."""
        return followed_files(self.info)

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
    def analysis_hash(self) -> str:
        """What a remembered analysis of this kernel is keyed by besides its unit: everything of the file (and
        of the files read for it) the analysis may read (frontend.module.analysis_hash), with the comment
        lines above the kernel (its shape lines)."""
        node = self.definition.node
        lines = self.source.splitlines()
        line = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 2
        comments = []
        while 0 <= line < len(lines) and lines[line].lstrip().startswith("#"):
            comments.append(lines[line].strip())
            line -= 1
        return analysis_hash(node, self.info, "\n".join(reversed(comments)))

    @cached_property
    def _helpers(self) -> list:
        return used_helpers(self.definition.node, self.info.functions)

    @cached_property
    def _too_deep(self) -> Diagnostic | None:
        """A diagnostic when the kernel or a helper holds an expression too deep to analyse."""
        return too_deep([self.definition.node, *self._helpers])

    # -- shape sets: the shape lines, else the file's calls ------------------------------------------------

    @cached_property
    def all_inferred(self) -> list[tuple[dict[str, ArgSpec], ShapeOrigin]]:
        """Every shape set found in the file's code: its calls', or each case of its input generator."""
        if self.definition.shape_sets or _bad_shape_lines(self.definition):
            return []  # shape lines win (and a bad one is what to fix)
        return self._call_shapes().sets.get(self.name, [])

    @cached_property
    def _inferred(self) -> list[tuple[dict[str, ArgSpec], ShapeOrigin]]:
        """The shape sets used: of an input generator's dozens of cases a few that stand for them (the smallest,
        a middle one, the largest), unless the module's `cases` asks for all or some (`select_cases`)."""
        found = self.all_inferred
        if not any(o.case_label is not None for _, o in found):
            return found
        return [found[i] for i in select_cases(found, self._cases())]

    @cached_property
    def shape_sets(self) -> list[dict[str, ArgSpec]]:
        return self.definition.shape_sets or [specs for specs, _ in self._inferred]

    @cached_property
    def shape_set_ranges(self) -> list[Range]:
        """Each shape set's line; a shape set from the file's calls is anchored on the decorator (its lenses
        sit there, as for a kernel without any shape set)."""
        return self.definition.shape_set_ranges or [self.decorator_range for _ in self._inferred]

    def shape_set_range(self, index: int | None) -> Range:
        """The line of shape set `index`; the decorator for shapes that are none of the kernel's sets."""
        ranges = self.shape_set_ranges
        return ranges[index] if index is not None and index < len(ranges) else self.decorator_range

    @cached_property
    def shape_set_origins(self) -> list[ShapeOrigin | None]:
        """Where each shape set from the file's calls comes from (label, the call's range); None for a shape
        line."""
        return [o for _, o in self._inferred] or [None] * len(self.shape_sets)

    @cached_property
    def declaration_text(self) -> str | None:
        """How the file declares the kernel when not plainly (`@helion.kernel`), and where its shape sets come
        from when that is an input generator: one sentence for hovers and the CLI; None when plain."""
        d = self.definition
        parts = []
        if d.declared_by:
            parts.append(f"declared with `{d.declared_by.rsplit('.', 1)[-1]}` ({d.declared_by}), which applies "
                         "helion.kernel with its helion_settings")
        if d.condition:
            parts.append(f"defined only where {d.condition}")
        found = self.all_inferred if d.input_generator else []
        if found and found[0][1].case_label is not None:
            shown = len(self.shape_sets)
            parts.append(f"shape sets: {shown} of the {len(found)} cases of `{d.input_generator}()`"
                         + (" (the smallest, a middle and the largest)" if shown < len(found) and
                            self._cases() is None else ""))
        if d.baseline:
            parts.append(f"reference: `{d.baseline}` (autotune_baseline_fn)")
        return "; ".join(parts) if parts else None

    # -- public entry points --------------------------------------------------------------------------

    @cached_property
    def shape_hint(self) -> Diagnostic | None:
        """Information with a quick fix for a kernel with no shape set (no shape line, no call found); None
        when it has one, or when its shape lines have errors (those are what to fix)."""
        if self.shape_sets or _bad_shape_lines(self.definition):
            return None
        found = self._call_shapes()
        if self.name in found.unshaped:  # the input generator said why it gave none: that, not this hint too
            return found.unshaped[self.name]
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
            return pipeline.compile_kernel(self, args, config, chip, shape_set, emit)
        except CompileError:
            raise
        except RecursionError:  # e.g. helpers that nest a value thousands of operations deep
            raise CompileError([error("HPL101", "the kernel's computation nests too deeply to generate code for "
                                      "(helpers calling helpers?); split it into several statements",
                                      self.range)]) from None
        except Exception as exc:  # noqa: BLE001 - internal errors must not escape to the user
            log.error("internal compiler error in %s:\n%s", self.name, traceback.format_exc())
            raise CompileError([internal_error(self.range, exc)]) from None

    def default_config(self, args: Any = None, chip: str | Chip = "v7x") -> Config:
        specs = self.with_defaults(self.resolve_args(args))
        return pipeline.default_blocks(self, specs, Config(), pipeline.as_chip(chip))[2]

    def config_space(self, args: Any = None, chip: str | Chip = "v7x") -> ConfigSpace:
        from .codegen.space import build_space

        specs = self.resolve_args(args)
        ir, uses, _ = pipeline.trace(self, specs, Config(), pipeline.as_chip(chip))
        space = build_space(ir, uses)
        unknown = {k: v for k, v in (self.decorator_config or {}).items() if k not in _TUNED}
        space.base = Config(unknown)
        return space

    def vmem_floor(self, args: Any = None, chip: str | Chip = "v7x") -> VmemFloor:
        """A lower bound of the VMEM of every config by its block sizes (vmem/floor.py), from the trace the
        config space comes from: the tuner skips block sizes that cannot fit without tracing them."""
        from .vmem.floor import VmemFloor

        ir, _, _ = pipeline.trace(self, self.resolve_args(args), Config(), pipeline.as_chip(chip))
        return VmemFloor.of(ir)

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


_TUNED = {"block_sizes", "pallas_loop_type", "pallas_load_buffer_count"}
REPRESENTATIVE_CASES = 3


def select_cases(found: list[tuple[dict[str, ArgSpec], ShapeOrigin]], selection: str | None) -> list[int]:
    """Indices of the generator cases `selection` names: None a few representative ones; "all"; else each
    comma-separated item an index into all the cases or a part of their labels ("num_tokens=128")."""
    if selection is None:
        from .frontend.case_choice import representative

        return representative([specs for specs, _ in found], REPRESENTATIVE_CASES)
    if selection.strip() == "all":
        return list(range(len(found)))
    chosen: list[int] = []
    for item in (p.strip() for p in selection.split(",")):
        if item.isdigit():
            if int(item) < len(found):
                chosen.append(int(item))
            continue
        chosen += [i for i, (_, o) in enumerate(found) if item and item in (o.case_label or o.label)]
    return sorted(set(chosen))


def _wanted(info: ModuleInfo) -> list[str]:
    """Kernels whose shape sets come from the file's calls: no shape line, and no bad one."""
    return [k.name for k in info.kernels if not k.shape_sets and not _bad_shape_lines(k)]


def _bad_shape_lines(definition: KernelDef) -> list[Diagnostic]:
    return [d for d in definition.diagnostics if d.code == "HPL104"]


def _name_range(node: Any) -> Range:
    """The function name in `def name(...)` (ast gives the `def` keyword's position)."""
    from .support.diagnostics import Position

    line, col = node.lineno - 1, node.col_offset + 4
    return Range(Position(line, col), Position(line, col + len(node.name)))
