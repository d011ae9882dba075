"""Abstract interpretation of a kernel body: host code is evaluated, device loops become IR.

All shapes are concrete (one shape set, one config), so sizes are plain ints and tensors are torch meta
tensors. Nothing the user wrote is executed: only a fixed set of pure functions (math, torch on "meta"
tensors) ever runs.

`Tracer` holds the state of one trace (environment, regions, tensors, loops) and binds the kernel's
arguments; what it does is mixed in: expressions (expressions.py), statements and inlined helpers
(kernel_statements.py), device loops (device_loops.py), loads and stores of host tensors (tensor_access.py).
"""

from __future__ import annotations

import ast
import os
from typing import Any

from ..ir.callables import runtime_value
from ..ir.chips import Chip, fp8_problem, get_chip
from ..ir.specs import ArgSpec, CallableSpec, TensorSpec
from ..ir.tile_ir import (
    GridLoop,
    HostTensor,
    InnerLoop,
    KernelIR,
    Load,
    Node,
    Op,
    Return,
    Value,
    drop_unused_loads,
    walk,
)
from ..support.diagnostics import Range, UserError
from .callable_args import closure_of
from .device_loops import DeviceLoops
from .dispatch import TORCH_DTYPES, Dispatcher
from .expressions import ExpressionEvaluator
from .indexing import Indexer
from .kernel_statements import KernelStatements
from .limits import Budget
from .module import ModuleInfo
from .module_constants import dtypes_in, evaluated_constants, links
from .ops import OpBuilder
from .pairs import drop_unused_views
from .tensor_access import TensorAccess
from .values import BlockSizeTable, Closure, NamedConst, lambda_def
from .vllm_platform import TpuPlatform
from .workspace_imports import Foreign, is_plain, platform_or


class Tracer(KernelStatements, DeviceLoops, TensorAccess, ExpressionEvaluator):
    """Walks one kernel function and builds its `KernelIR`."""

    def __init__(self, info: ModuleInfo, fn: ast.FunctionDef, args: dict[str, ArgSpec], blocks: BlockSizeTable,
                 caps: dict[tuple[int, int], int] | None = None, chip: Chip | None = None,
                 tunables: dict[str, Any] | None = None):
        self.info = info
        self.tunables = tunables or {}  # config keys that are the kernel's own (hl.register_tunable)
        self.used_pairs = False  # hl.split / hl.join seen: their replaced view ops are dropped (pairs.py)
        self.chip = chip or get_chip("v7x")  # what `helion.runtime.get_num_sm()` reads (upstream_names.num_sm)
        self.fn = fn
        self.blocks = blocks
        self.caps = caps or {}  # (loop id, axis) -> longest block of a device-bounded loop dim (BlockTooLong)
        self.env: dict[str, Any] = {}
        self.host: list[Node] = []
        self.region: list[Node] = self.host
        self.loops: list[GridLoop | InnerLoop] = []
        self.host_views: dict[tuple, Value] = {}  # (tensor id, shape, purpose) -> its reshape (host_view)
        self.predicate: Value | None = None  # inside `if` on device values: when stores take effect (branches.py)
        self.tensors: dict[int, HostTensor] = {}
        self.arg_values: dict[str, Any] = {}
        self.inner_loops: list[InnerLoop] = []
        self.loads: list[Load] = []
        self.block_dims: dict[int, list[tuple[HostTensor, int]]] = {}
        self.loop_ids = 0
        self.empty_loops = 0  # loops over a zero-size dimension, skipped (device_loops.py)
        self.observed_blocks: set[int] = set()
        self.depth = 0
        self.statements = 0
        self.budget = Budget()  # evaluation steps (see limits.py)
        self.seen: list[tuple[ast.AST, Any]] = []  # (node, value) of each evaluation and binding (KernelIR.seen)
        self.current = Range.of(fn)
        self.ops = OpBuilder(self._emit)
        self.dispatch = Dispatcher(self)
        self.indexer = Indexer(self)
        self._bind_args(args)

    def lookup(self, name: str, rng: Range) -> Any:
        """A name of the kernel, its file or Python's; else a module constant only an evaluation can read
        (`_FP8_MAX = float(torch.finfo(_FP8_DTYPE).max)`, module_constants.py). A name imported from another
        workspace file is read there (workspace_imports.py); vLLM's `current_platform` is the TPU."""
        if name not in self.env:
            linked = links(self.info, self.chip.name)
            if name in linked:
                return self._checked_constant(name, linked.value(name), rng, imported=True)
            platform = platform_or(self.info.imports.get(name), self.chip.name)
            if platform is not None:
                return platform
        try:
            return super().lookup(name, rng)
        except UserError:
            evaluated = evaluated_constants(self.info, self.chip.name)
            if name not in evaluated:
                raise
        return self._checked_constant(name, evaluated[name], rng)

    def _checked_constant(self, name: str, value: Any, rng: Range, imported: bool = False) -> Any:
        if isinstance(value, Foreign | TpuPlatform):
            return value
        if imported and not is_plain(value):
            path, remote = links(self.info, self.chip.name).names[name]
            raise UserError("HPL102", f"`{name}` is imported from {os.path.basename(path)}, where `{remote}` is not "
                                      "a constant or a function this analysis can follow", rng)
        odd = next((d for d in dtypes_in(value) if d not in TORCH_DTYPES.values()), None)
        if odd is not None:
            dtype_name = str(odd).removeprefix("torch.")
            problem = fp8_problem(dtype_name, self.chip)
            raise UserError("HPL108", f"`{name}` is {dtype_name}: {problem}" if problem else
                            f"`{name}` is {dtype_name}, a dtype TPU kernels here do not support", rng)
        return NamedConst(name, value) if isinstance(value, float) else value

    # -- set-up ----------------------------------------------------------------------------------------

    def eval(self, node: ast.expr) -> Any:
        """An expression's value, remembered with its node (what the editor's hover on it says)."""
        value = super().eval(node)
        self.seen.append((node, value))
        return value

    def _bind_args(self, specs: dict[str, ArgSpec]) -> None:
        a = self.fn.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
            raise UserError("HPL101", "kernels take plain positional parameters only", Range.of(self.fn))
        names = [p.arg for p in a.args]
        defaults = dict(zip(names[len(names) - len(a.defaults):], a.defaults, strict=True))
        missing = [n for n in names if n not in specs and n not in defaults]
        extra = [n for n in specs if n not in names]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing {', '.join(missing)}")
            if extra:
                parts.append(f"unexpected {', '.join(extra)}")
            params = self.fn.args.args
            rng = Range(Range.of(params[0]).start, Range.of(params[-1]).end) if params else Range.of(self.fn)
            raise UserError("HPL103", f"args for {self.fn.name}({', '.join(names)}): {'; '.join(parts)}", rng)
        for name in names:
            spec = specs[name] if name in specs else self._default(defaults[name])
            if isinstance(spec, CallableSpec):  # a function argument (score_mod): compiled in, not passed
                spec = closure_of(spec, Range.of(a.args[names.index(name)]))
            if isinstance(spec, Closure):  # a callable default (matmul's epilogue): traced inline, not passed
                self.env[name] = spec
                continue
            if isinstance(spec, TensorSpec):
                value = Value(spec.meta(), "host", hint=name)
                self.tensors[value.id] = HostTensor(value, name, "arg")
                self.env[name] = value
            else:
                spec = runtime_value(spec)  # a dtype argument is the torch dtype
                self.env[name] = NamedConst(name, spec, is_arg=True) if isinstance(spec, float) else spec
            self.arg_values[name] = self.env[name]

    def _default(self, node: ast.expr) -> Any:
        """A parameter's default, bound at compile time: a literal, or a lambda (called inline)."""
        if isinstance(node, ast.Lambda):
            return Closure(lambda_def(node), {})
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            raise UserError("HPL106", "default values of kernel parameters must be literals or lambdas",
                            Range.of(node)) from None

    def _emit(self, op: Op) -> None:
        self.region.append(op)

    @property
    def in_device(self) -> bool:
        return bool(self.loops)

    # -- entry -----------------------------------------------------------------------------------------

    def run(self) -> KernelIR:
        self._add_return(self.exec_function_body(self.fn.body))
        if self.used_pairs:
            drop_unused_views(self.host)
        drop_unused_loads(self.host)
        live = {id(n) for n in walk(self.host)}
        self.loads = [n for n in self.loads if id(n) in live]
        tensors = list(self.tensors.values())
        dims = [self.block_dims.get(i, []) for i in range(len(self.blocks.values))]
        return KernelIR(
            self.fn.name, list(self.arg_values), self.arg_values, self.host, tensors,
            list(self.blocks.values), dims, self.inner_loops, self.loads, Range.of(self.fn), frozenset(self.observed_blocks),
            self.seen, list(self.blocks.extents), list(self.blocks.ranges), self.empty_loops,
        )

    def _add_return(self, ret: Any) -> None:
        is_tuple = isinstance(ret, tuple | list)
        values = tuple(ret) if is_tuple else (ret,)
        for v in values:
            if isinstance(v, Value) and v.space != "host":
                raise UserError("HPL101", "a kernel returns host tensors, not device values", self.current)
            if not isinstance(v, Value | int | float | bool | type(None) | NamedConst):
                raise UserError("HPL101", f"cannot return a {type(v).__name__} from a kernel", self.current)
        self.host.append(Return(self.current, values, is_tuple))
