"""Abstract interpretation of a kernel body: host code is evaluated, device loops become IR.

All shapes are concrete (one shape set, one config), so sizes are plain ints and tensors are torch meta
tensors. Nothing the user wrote is executed: only a fixed set of pure functions (math, torch on "meta"
tensors) ever runs.
"""

from __future__ import annotations

import ast
from typing import Any

import torch

from ..chips import Chip, get_chip
from ..diagnostics import ArgRankError, Range, UserError
from ..index_exprs import device_tile_positions
from ..ir import (
    Carried,
    GridLoop,
    HostTensor,
    InnerLoop,
    KernelIR,
    Load,
    Node,
    Op,
    Return,
    Store,
    TileDim,
    Value,
    drop_unused_loads,
    walk,
)
from ..specs import ArgSpec, CallableSpec, TensorSpec, runtime_value
from .branches import trace_device_if
from .callable_args import closure_of
from .dispatch import TORCH_DTYPES, Dispatcher
from .expressions import BINOPS, ExpressionEvaluator
from .indexing import Indexer
from .limits import Budget
from .module import ModuleInfo, assigned_names, target_name
from .module_constants import dtypes_in, evaluated_constants
from .ops import OpBuilder, int64_grown_error
from .pairs import drop_unused_views
from .row_views import single_row_view, use_rows
from .split_index import split_view
from .values import BlockSize, BlockSizeTable, Closure, NamedConst, Tile, TileLoopSpec, lambda_def

MAX_INLINE_DEPTH = 16
MAX_STATEMENTS = 20000
DEVICE_EXTENT_HINT = 1 << 16  # extent a device-bounded loop's block size is chosen for until its dims are known

class _ReturnSignal(Exception):
    def __init__(self, value: Any):
        self.value = value


class Tracer(ExpressionEvaluator):
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
        self.observed_blocks: set[int] = set()
        self.depth = 0
        self.statements = 0
        self.budget = Budget()  # evaluation steps (see limits.py)
        self.current = Range.of(fn)
        self.ops = OpBuilder(self._emit)
        self.dispatch = Dispatcher(self)
        self.indexer = Indexer(self)
        self._bind_args(args)

    def lookup(self, name: str, rng: Range) -> Any:
        """A name of the kernel, its file or Python's; else a module constant only an evaluation can read
        (`_FP8_MAX = float(torch.finfo(_FP8_DTYPE).max)`, module_constants.py)."""
        try:
            return super().lookup(name, rng)
        except UserError:
            evaluated = evaluated_constants(self.info)
            if name not in evaluated:
                raise
        value = evaluated[name]
        odd = next((d for d in dtypes_in(value) if d not in TORCH_DTYPES.values()), None)
        if odd is not None:
            raise UserError("HPL108", f"`{name}` is {str(odd).removeprefix('torch.')}, a dtype TPU kernels here do not "
                                      "support (8-bit floats: float8_e4m3fn, float8_e5m2)", rng)
        return NamedConst(name, value) if isinstance(value, float) else value

    # -- set-up ----------------------------------------------------------------------------------------

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
        ret: Any = None
        try:
            self.exec_block(self.fn.body)
        except _ReturnSignal as sig:
            ret = sig.value
        self._add_return(ret)
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

    # -- statements ------------------------------------------------------------------------------------

    def exec_block(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            self.statements += 1
            if self.statements > MAX_STATEMENTS:
                raise UserError("HPL101", "kernel is too large to analyse (statement limit)", Range.of(stmt))
            self.current = Range.of(stmt)
            self.exec_stmt(stmt)

    def exec_stmt(self, stmt: ast.stmt) -> None:
        rng = Range.of(stmt)
        if isinstance(stmt, ast.Assign):
            value = self.eval(stmt.value)
            for target in stmt.targets:
                self._check_rank(target, stmt.value, value, rng)
                self.assign(target, value, rng)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.assign(stmt.target, self.eval(stmt.value), rng)
        elif isinstance(stmt, ast.AugAssign):
            self.aug_assign(stmt, rng)
        elif isinstance(stmt, ast.For):
            self.exec_for(stmt)
        elif isinstance(stmt, ast.If):
            cond = self.eval(stmt.test)
            if isinstance(cond, Value):
                trace_device_if(self, stmt, cond)
            else:
                self.exec_block(stmt.body if cond else stmt.orelse)
        elif isinstance(stmt, ast.Return):
            raise _ReturnSignal(None if stmt.value is None else self.eval(stmt.value))
        elif isinstance(stmt, ast.Expr):
            if not (isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)):
                self.eval(stmt.value)
        elif isinstance(stmt, ast.Pass | ast.Assert | ast.Import | ast.ImportFrom):
            return
        elif isinstance(stmt, ast.While):
            raise UserError("HPL101", "`while` loops are not supported by the Pallas backend", rng)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            raise UserError("HPL101", "nested function definitions are not supported in a kernel", rng)
        else:
            raise UserError("HPL101", f"`{type(stmt).__name__}` statements are not supported in a kernel", rng)

    def assign(self, target: ast.expr, value: Any, rng: Range) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, Value) and value.hint is None:
                value.hint = target.id
            if isinstance(value, float) and not self.in_device:
                value = NamedConst(target.id, value)
            self.env[target.id] = value
        elif isinstance(target, ast.Tuple | ast.List):
            starred = [i for i, t in enumerate(target.elts) if isinstance(t, ast.Starred)]
            if len(starred) > 1:
                raise UserError("HPL105", "only one starred name is allowed in an assignment", rng)
            if not starred:
                items = self._unpack(value, len(target.elts), rng)
                for t, v in zip(target.elts, items, strict=True):
                    self.assign(t, v, rng)
                return
            s = starred[0]
            after = len(target.elts) - s - 1
            items = self._unpack(value, None, rng)
            if len(items) < len(target.elts) - 1:
                raise UserError("HPL105", f"expected at least {len(target.elts) - 1} values to unpack, got {len(items)}",
                                rng)
            for t, v in zip(target.elts[:s], items[:s], strict=True):
                self.assign(t, v, rng)
            self.assign(target.elts[s].value, list(items[s:len(items) - after]), rng)
            for t, v in zip(target.elts[s + 1:], items[len(items) - after:], strict=True):
                self.assign(t, v, rng)
        elif isinstance(target, ast.Subscript):
            self.store(target, value, None, rng)
        else:
            raise UserError("HPL101", f"cannot assign to `{ast.unparse(target)}`", Range.of(target))

    def _check_rank(self, target: ast.expr, node: ast.expr, value: Any, rng: Range) -> None:
        """`b, m, n = q.size()` (or `q.shape`) with `q` an argument of another rank: name the argument."""
        if not isinstance(target, ast.Tuple | ast.List) or any(isinstance(t, ast.Starred) for t in target.elts):
            return
        base = node.func if isinstance(node, ast.Call) and not node.args and not node.keywords else node
        if not (isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name)):
            return
        arg = base.value.id
        how = {"size": f"{arg}.size()", "shape": f"{arg}.shape"}.get(base.attr)
        if how is None or (base.attr == "size") != (base is not node):
            return
        if arg not in self.arg_values or self.env.get(arg) is not self.arg_values[arg]:  # not the argument as given
            return
        if isinstance(value, tuple | list | torch.Size) and len(value) != len(target.elts):
            raise ArgRankError(arg, len(value), len(target.elts), how, rng)

    def _unpack(self, value: Any, n: int | None, rng: Range) -> list:
        """The items of a tuple, list or size (exactly `n` of them unless n is None)."""
        if isinstance(value, torch.Size):
            value = tuple(value)
        if not isinstance(value, tuple | list):
            raise UserError("HPL105", f"cannot unpack a {type(value).__name__} into {n or 'several'} names", rng)
        if n is not None and len(value) != n:
            raise UserError("HPL105", f"expected {n} values to unpack, got {len(value)}", rng)
        return list(value)

    def aug_assign(self, stmt: ast.AugAssign, rng: Range) -> None:
        op = BINOPS.get(type(stmt.op))
        if op is None:
            raise UserError("HPL101", "unsupported augmented assignment", rng)
        if isinstance(stmt.target, ast.Subscript):
            self.store(stmt.target, self.eval(stmt.value), op, rng)
            return
        if not isinstance(stmt.target, ast.Name):
            raise UserError("HPL101", f"cannot assign to `{ast.unparse(stmt.target)}`", rng)
        current = self.lookup(stmt.target.id, Range.of(stmt.target))
        result = self.binop(op, current, self.eval(stmt.value), rng)
        if isinstance(result, Value):
            result.hint = stmt.target.id
        self.env[stmt.target.id] = result

    # -- loops -----------------------------------------------------------------------------------------

    def exec_for(self, stmt: ast.For) -> None:
        rng = Range.of(stmt)
        header = Range(rng.start, Range.of(stmt.iter).end)
        if stmt.orelse:
            raise UserError("HPL101", "`for ... else` is not supported", rng)
        spec = self.eval(stmt.iter)
        if not isinstance(spec, TileLoopSpec):
            raise UserError(
                "HPL101", "device loops must iterate over hl.tile(...) or hl.grid(...)", Range.of(stmt.iter)
            )
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

    # -- loads and stores ------------------------------------------------------------------------------

    def host_tensor(self, value: Value, rng: Range) -> HostTensor:
        ht = self.tensors.get(value.id)
        if ht is not None:
            return ht
        prod = value.producer
        if isinstance(prod, Op) and prod.kind == "alloc":
            ht = HostTensor(value, value.hint or "buf", "alloc", prod.kwargs["init"], prod.kwargs.get("value", 0.0))
        elif isinstance(prod, Op) and prod.kind == "clone":
            ht = HostTensor(value, value.hint or "buf", "alloc", "copy")
        else:
            ht = HostTensor(value, value.hint or "t", "derived")
        self.tensors[value.id] = ht
        return ht

    def _view_base(self, value: Value, rng: Range) -> HostTensor | None:
        """The argument or allocation `value` reshapes, when it is a chain of reshapes of one."""
        prod = value.producer
        if not (isinstance(prod, Op) and prod.kind == "reshape" and isinstance(prod.args[0], Value)):
            return None
        source = prod.args[0]
        ht = self.host_tensor(source, rng)
        if ht.origin in ("arg", "alloc"):
            return ht
        return self._view_base(source, rng)

    def load(self, tensor: Value, index: Any, rng: Range, prepared: bool = False) -> Value:
        """`tensor[index]` in device code; `prepared`: index is already a tuple of IR index items."""
        split = None if prepared else split_view(self, tensor, index, rng, for_store=False)
        if split is not None:
            tensor, index, prepared = *split, True
        ht = self.host_tensor(tensor, rng)
        _no_64_bit(ht, rng, written=False)
        _positions_fit(ht, rng)
        items = index if prepared else self.indexer.items(tensor, index, rng)
        _no_device_tile_runs(items, rng)
        shape = self.indexer.shape(tuple(tensor.shape), items)
        tensor, items = self._as_rows(tensor, items, rng)
        ht = self.host_tensor(tensor, rng)
        dtype = torch.int32 if tensor.dtype == torch.int64 else tensor.dtype  # read as int32 (see _no_64_bit)
        out = Value(torch.empty(shape, dtype=dtype, device="meta"), "device",
                    from_int64="read" if tensor.dtype == torch.int64 else "")
        node = Load(rng, ht, items, out)
        out.producer = node
        self.region.append(node)
        self.loads.append(node)
        return out

    def _as_rows(self, tensor: Value, items: tuple, rng: Range) -> tuple[Value, tuple]:
        """`x[tile]` of a small 1-D tensor with a block too short for a rank-1 block: row `tile.id` of its
        [n / block, block] view (compiler/frontend/row_views.py); a launch-grid tile of one row on the
        second-to-last dim (`hl.tile(tokens, block_size=1)`): row `tile.id` of the [..., n, 1, m] view, a block
        Mosaic accepts ((1, m) of [n, m] is not); otherwise the access as it is."""
        if len(tensor.shape) >= 2:
            return single_row_view(self, tensor, items, rng)
        if len(tensor.shape) != 1 or len(items) != 1 or items[0][0] != "tile":
            return tensor, items
        d: TileDim = items[0][1]
        n, b = tensor.shape[0], d.block_size
        if d.dynamic or d.parent is not None or d.begin or d.extent != n or not use_rows(n, b, tensor.dtype.itemsize):
            return tensor, items
        known = (tensor.id, (n // b, b), "rows") in self.host_views
        view = self.host_view(tensor, (n // b, b), "rows", rng)
        if not known:
            self.host_tensor(view, rng).rows = True
        return view, (("id", d), ("full",))

    def host_view(self, tensor: Value, shape: tuple[int, ...], suffix: str, rng: Range) -> Value:
        """`tensor.reshape(shape)`, made once in host code before the current grid loop (`x_rows`, `x_split`)."""
        key = (tensor.id, tuple(shape), suffix)
        view = self.host_views.get(key)
        if view is None:
            before, self.region = self.region, []
            try:
                view = self.ops.reshape(tensor, tuple(shape), rng)
                made = self.region
            finally:
                self.region = before
            at = self.host.index(self.loops[0])
            self.host[at:at] = made
            view.hint = f"{self.host_tensor(tensor, rng).name}_{suffix}"
            self.host_views[key] = view
        return view

    def store(self, target: ast.Subscript, value: Any, accumulate: str | None, rng: Range) -> None:
        base = self.eval(target.value)
        if not self.in_device and isinstance(base, Value) and base.space == "host":
            self._host_store(target, base, value, accumulate, rng)
            return
        self.store_at(base, self.eval(target.slice), value, accumulate, rng)

    def _host_store(self, target: ast.Subscript, base: Value, value: Any, accumulate: str | None, rng: Range) -> None:
        """`buf[idx] = v` in host code: jax arrays are values, so the name is rebound to the updated array.
        Only a buffer the kernel allocated and no other name refers to can be updated this way."""
        ht = self.tensors.get(base.id)
        names = [k for k, v in self.env.items() if v is base]
        if not isinstance(target.value, ast.Name) or (ht is not None and ht.origin == "arg") or len(names) != 1:
            raise UserError("HPL101", "host code can only write into a tensor it allocated, through its own name; "
                                      "write kernel arguments inside an hl.tile loop", rng)
        index = self.eval(target.slice)
        if accumulate:
            value = self.binop(accumulate, self.indexer.index_value(base, index, rng), value, rng)
        new = self.indexer.host_put(base, index, value, rng)
        new.hint = target.value.id
        self.env[target.value.id] = new

    def store_at(self, base: Any, index: Any, value: Any, accumulate: str | None, rng: Range) -> None:
        """`base[index] = value` (or `op=` with `accumulate`) in device code."""
        if not isinstance(base, Value) or base.space != "host":
            raise UserError("HPL101", "stores must write into a host tensor (a kernel argument or allocation)", rng)
        if not self.in_device:
            raise UserError("HPL101", "host code cannot write into tensors; do it inside an hl.tile loop", rng)
        split = split_view(self, base, index, rng, for_store=True)
        if split is not None:
            base, index = split
        ht = self.host_tensor(base, rng)
        if ht.origin == "derived":
            root = self._view_base(base, rng)
            if root is None:
                raise UserError("HPL101", f"cannot store into `{ht.name}`: only views (.view / .reshape) of a kernel "
                                          "argument or allocation can be written", rng)
            ht.origin, ht.base = "view", root
        _no_64_bit(ht, rng, written=True)
        _positions_fit(ht, rng)
        items = index if split is not None else self.indexer.items(base, index, rng, for_store=True)
        _no_device_tile_runs(items, rng)
        if any(it[0] == "newaxis" for it in items):
            raise UserError("HPL202", "`None` is not allowed in a store index", rng)
        block = self.indexer.shape(tuple(base.shape), items)
        rows, items = self._as_rows(base, items, rng)
        if rows is not base:
            ht = self.host_tensor(rows, rng)
            ht.origin, ht.base = "view", self._view_base(rows, rng)
        if not isinstance(value, Value):
            value = self.ops.full(tuple(block), _scalar(value), base.dtype, rng)
        if value.space != "device":
            raise UserError("HPL101", "the stored value must be computed in device code", rng)
        if value.from_int64 == "grown" and base.dtype != torch.int32:
            raise int64_grown_error("a store into a " + str(base.dtype).removeprefix("torch.") + " tensor", rng)
        try:
            torch.broadcast_shapes(tuple(value.shape), tuple(block))
        except RuntimeError:
            raise UserError("HPL105", f"cannot store a value of shape {list(value.shape)} into a block of shape {block}", rng) from None
        if len(value.shape) > len(block) or torch.broadcast_shapes(tuple(value.shape), tuple(block)) != tuple(block):
            raise UserError("HPL105", f"cannot store a value of shape {list(value.shape)} into a block of shape {block}", rng)
        if rows is not base:
            _no_64_bit(ht, rng, written=True)
        self.region.append(Store(rng, ht, items, value, accumulate, self.predicate))

    def inline(self, fn: ast.FunctionDef, args: list, kwargs: dict, rng: Range,
               captured: dict[str, Any] | None = None) -> Any:
        """Same-file helper functions (and lambdas, with the names they `captured`) are traced inline, like
        Helion does."""
        if self.depth >= MAX_INLINE_DEPTH:
            raise UserError("HPL101", f"helper `{fn.name}` recurses (or nests deeper than {MAX_INLINE_DEPTH})", rng)
        params = [p.arg for p in fn.args.args]
        vararg = fn.args.vararg
        if fn.args.kwarg or (len(args) > len(params) and vararg is None):
            raise UserError("HPL103", f"`{fn.name}` takes {len(params)} positional arguments", rng)
        bound = dict(zip(params, args, strict=False))
        if vararg is not None:  # `lambda score, *_: ...`
            bound[vararg.arg] = tuple(args[len(params):])
        for k, v in kwargs.items():
            if k not in params:
                raise UserError("HPL103", f"`{fn.name}` has no parameter `{k}`", rng)
            bound[k] = v
        defaults = dict(zip(params[len(params) - len(fn.args.defaults):], fn.args.defaults, strict=True))
        for p in params:
            if p not in bound:
                if p not in defaults:
                    raise UserError("HPL103", f"`{fn.name}` is missing argument `{p}`", rng)
                bound[p] = self.eval(defaults[p])
        saved_env, saved_current = self.env, self.current
        self.env = {**captured, **bound} if captured else bound
        self.depth += 1
        result = None
        try:
            self.exec_block(fn.body)
        except _ReturnSignal as sig:
            result = sig.value
        finally:
            self.depth -= 1
            self.env, self.current = saved_env, saved_current
        return result

def _scalar(v: Any) -> Any:
    return v.value if isinstance(v, NamedConst) else v


def _no_device_tile_runs(items: tuple, rng: Range) -> None:
    """Positions made from a device-bounded tile's `tile.index` must index as the tile itself (see
    `index_exprs.device_tile_positions`) or gather (the gathered dims carry the positions' tile, so compiler/masks.py
    masks them); a window would read unmasked rows, so it is refused."""
    for it in items:
        if it[0] == "window":
            d = device_tile_positions(it[1])
            if d is not None:
                raise UserError("HPL106", f"positions computed from `{d.name}.index` (a loop whose bounds are computed "
                                          f"on the device) can only index a tensor as the tile itself, "
                                          f"`x[{d.name}, ...]`, not shifted, scaled or through a loaded block", rng)


INT32_MAX = 2**31 - 1


def _positions_fit(ht: HostTensor, rng: Range) -> None:
    """Positions are 32-bit integers on the TPU: a tensor dim of more than 2**31 elements cannot be addressed
    (jax itself would fail on the first constant of that size)."""
    for d, size in enumerate(ht.value.shape):
        if size > INT32_MAX + 1:
            raise UserError("HPL202", f"dim {d} of `{ht.name}` has {size} elements: positions on the TPU are 32-bit "
                                      f"integers (at most {INT32_MAX}); index it through more dims (`x[row, col]` "
                                      "rather than a flattened view)", rng)


def _no_64_bit(ht: HostTensor, rng: Range, written: bool) -> None:
    """TPUs have no 64-bit vector types. An int64 tensor the device only reads (offsets, indices) is read as
    int32: the call narrows it after checking that every value fits (`runtime.to_jax`), as jax does without
    x64 but never wrapping. A 64-bit tensor written on the device, and any float64 one, is refused (as
    upstream Helion's Pallas backend does): narrowing would change what the kernel returns."""
    value = ht.root.value
    dtype = value.dtype
    if value.wide:  # made by the kernel: torch would make it 64-bit, the TPU holds it in 32 bits
        dtype = torch.int64 if not dtype.is_floating_point else torch.float64
    if dtype == torch.int64 and not written:
        return
    if dtype in (torch.int64, torch.float64):
        narrow = "torch.int32" if dtype == torch.int64 else "torch.float32"
        what = "written on the device" if written else "read on the device"
        where = "before the call" if ht.root.origin == "arg" else "where it is made"
        raise UserError("HPL108", f"`{ht.root.name}` is {str(dtype).removeprefix('torch.')} and {what}: TPUs have no "
                                  f"64-bit vector types; make it {narrow} ({where})", rng)
