"""Statements of a kernel body (tracer.py): assignment and unpacking, `op=`, `if` (on a device value:
branches.py), `return`, and same-file helper functions traced inline; `for` goes to device_loops.py.

`KernelStatements` is mixed into `Tracer`; it needs from it: env, current, arg_values, depth, statements, seen,
eval/binop/lookup (expressions.py), exec_for (device_loops.py), store (tensor_access.py), in_device.
"""

from __future__ import annotations

import ast
from typing import Any

import torch

from ..ir.tile_ir import Value
from ..support.diagnostics import ArgRankError, Range, UserError
from .branches import trace_device_if
from .expressions import BINOPS
from .values import NamedConst

MAX_INLINE_DEPTH = 16
MAX_STATEMENTS = 20000


class _ReturnSignal(Exception):
    def __init__(self, value: Any):
        self.value = value


class KernelStatements:
    """Runs the statements of the kernel and of the helpers it calls."""

    def exec_function_body(self, body: list[ast.stmt]) -> Any:
        """Run a function's statements; what its `return` gives (None without one)."""
        try:
            self.exec_block(body)
        except _ReturnSignal as sig:
            return sig.value
        return None

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
        elif isinstance(stmt, ast.Assert):
            if not self.in_device:
                self.check_assert(stmt, rng)
        elif isinstance(stmt, ast.Pass | ast.Import | ast.ImportFrom):
            return
        elif isinstance(stmt, ast.While):
            raise UserError("HPL101", "`while` loops are not supported by the Pallas backend", rng)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            raise UserError("HPL101", "nested function definitions are not supported in a kernel", rng)
        else:
            raise UserError("HPL101", f"`{type(stmt).__name__}` statements are not supported in a kernel", rng)

    def check_assert(self, stmt: ast.Assert, rng: Range) -> None:
        """A host `assert` whose test is known for these arguments and false fails the call in Helion (the kernel
        raises before it runs): an error here too, so arguments that break a kernel's own shape relations (the
        tuner's reduced shapes among them) are refused at compile time. A test that cannot be evaluated
        statically is left alone, as before."""
        try:
            holds = self.eval(stmt.test)
        except UserError:
            return
        if not isinstance(holds, bool | int) or holds:
            return
        why = ast.unparse(stmt.test)
        if stmt.msg is not None:
            try:
                message = self.eval(stmt.msg)
            except UserError:
                message = None
            if isinstance(message, str) and message:
                why = f"{message} ({why})"
        raise UserError("HPL113", f"this assert fails for these arguments: {why}", rng)

    def assign(self, target: ast.expr, value: Any, rng: Range) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, Value) and value.hint is None:
                value.hint = target.id
            if isinstance(value, float) and not self.in_device:
                value = NamedConst(target.id, value)
            self.env[target.id] = value
            self.seen.append((target, value))
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
        self.seen.append((stmt.target, result))

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
        try:
            result = self.exec_function_body(fn.body)
        finally:
            self.depth -= 1
            self.env, self.current = saved_env, saved_current
        return result
