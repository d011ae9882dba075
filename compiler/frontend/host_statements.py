"""Statements for the module-level evaluation (host_eval.py): assignments and unpacking, `if` (both
branches when the condition is unknown), `for`/`while` (bounded by the step budget; device loops of a
kernel body are skipped), `try`, `with`, function and class definitions, imports, `return`/`raise`.

`Statements` is mixed into `HostEvaluator`; a statement that goes over a host-code limit is said once
(`on_note`) and skipped, one the models did not foresee is skipped quietly.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Callable
from typing import Any

import torch

from ..support.diagnostics import Range, UserError
from .expressions import BINOPS
from .host_models import resolve
from .host_torch import has_unknown
from .host_values import UNKNOWN, ClassValue, DeviceLoop, Frame, KernelRef, Site
from .limits import Budget

log = logging.getLogger(__name__)


class Exhausted(Exception):  # noqa: N818 - the budget ran out: the evaluation ends here
    def __init__(self, rng: Range, limit: int):
        super().__init__(rng)
        self.range = rng
        self.limit = limit
        self.loop: Range | None = None  # the header of the innermost loop running then (where it is said)


class StepBudget(Budget):
    def step(self, rng: Range) -> None:
        self.steps += 1
        if self.steps > self.limit:
            raise Exhausted(rng, self.limit)


class ReturnSignal(Exception):  # noqa: N818 - control flow
    def __init__(self, value: Any):
        self.value = value


class BreakSignal(Exception):  # noqa: N818
    pass


class ContinueSignal(Exception):  # noqa: N818
    pass


class RaiseSignal(Exception):  # noqa: N818 - the code raises: the function ends with an unknown result
    pass


CONTROL = (ReturnSignal, BreakSignal, ContinueSignal, RaiseSignal, Exhausted)


class Statements:
    """Statement execution of `HostEvaluator` (see host_eval.py for the attributes it uses)."""

    frame: Frame
    origin: Site | None

    def exec_block(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            self.exec_stmt(stmt)

    def exec_stmt(self, stmt: ast.stmt) -> None:
        rng = Range.of(stmt)
        self.budget.step(rng)
        handler = _STATEMENTS.get(type(stmt))
        if handler is None:
            return
        try:
            handler(self, stmt)
        except CONTROL:
            raise
        except UserError as exc:  # a host-code limit (limits.py) is said; either way the statement is skipped
            if exc.code == "HPL105":
                self.on_note(exc.range or rng, exc.message)
        except RecursionError:
            self.on_note(rng, "this statement nests too deeply to follow")
        except Exception:  # noqa: BLE001 - a value the models did not foresee: the statement is skipped
            log.debug("host evaluation skipped line %d", rng.start.line + 1, exc_info=True)

    def _assign(self, stmt: ast.Assign) -> None:
        value = self.eval(stmt.value)
        for target in stmt.targets:
            self.assign(target, value)

    def _ann_assign(self, stmt: ast.AnnAssign) -> None:
        if stmt.value is not None:
            self.assign(stmt.target, self.eval(stmt.value))

    def _aug_assign(self, stmt: ast.AugAssign) -> None:
        rng = Range.of(stmt)
        load = _as_load(stmt.target)
        current = self.eval(load) if load is not None else UNKNOWN
        value = self.binop(BINOPS[type(stmt.op)], current, self.eval(stmt.value), rng)
        if isinstance(current, list) and isinstance(stmt.op, ast.Add) and isinstance(value, list):
            current[:] = value  # `xs += [...]` extends the list other names hold too
            return
        self.assign(stmt.target, value)

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.bind(target.id, value)
        elif isinstance(target, ast.Tuple | ast.List):
            self._unpack(target.elts, value)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, value)
        elif isinstance(target, ast.Subscript):
            self.dispatch.setitem(self.eval(target.value), self.eval(target.slice), value)
        elif isinstance(target, ast.Attribute):
            self.dispatch.setattr(self.eval(target.value), target.attr, value)

    def _unpack(self, targets: list[ast.expr], value: Any) -> None:
        items = self.iterate(value)
        starred = [i for i, t in enumerate(targets) if isinstance(t, ast.Starred)]
        if items is not None and not starred and len(items) != len(targets):
            items = None
        if items is not None and starred:
            s = starred[0]
            after = len(targets) - s - 1
            if len(items) < len(targets) - 1:
                items = None
            else:
                items = [*items[:s], list(items[s:len(items) - after]), *items[len(items) - after:]]
        for i, t in enumerate(targets):
            self.assign(t, UNKNOWN if items is None else items[i])

    def iterate(self, value: Any) -> list | None:
        """The items of an iterable the evaluation knows, else None."""
        return self.dispatch.items_of(value)

    def _expr(self, stmt: ast.Expr) -> None:
        if not isinstance(stmt.value, ast.Constant):
            self.eval(stmt.value)

    def _if(self, stmt: ast.If) -> None:
        cond = truth(self.eval(stmt.test))
        if cond is not UNKNOWN:
            self.facts.branch(stmt, cond)
            self.exec_block(stmt.body if cond else stmt.orelse)
            return
        self.facts.branch(stmt, True)
        self.facts.branch(stmt, False)
        self.both(stmt.body, stmt.orelse)

    def both(self, first: list[ast.stmt], second: list[ast.stmt]) -> None:
        """Runs both branches of an `if` the evaluation cannot decide; names they set differently become
        unknown. The frame's dict is changed in place: the module's is also `globals`, which functions read."""
        names = self.frame.vars
        before = dict(names)
        first_ended = False
        try:
            self.exec_block(first)
        except (ReturnSignal, RaiseSignal):
            first_ended = True
        after_first = dict(names)
        _replace(names, before)
        try:
            self.exec_block(second)
        except RaiseSignal:
            if first_ended:
                raise
            _replace(names, after_first)  # only the first branch goes on
            return
        if first_ended:
            return
        for name in set(after_first) | set(names):
            if after_first.get(name, UNKNOWN) is not names.get(name, UNKNOWN):
                names[name] = UNKNOWN

    def _for(self, stmt: ast.For) -> None:
        try:
            self._for_loop(stmt)
        except Exhausted as exc:
            exc.loop = exc.loop or _header(stmt, stmt.iter)
            raise

    def _for_loop(self, stmt: ast.For) -> None:
        iterable = self.eval(stmt.iter)
        if isinstance(iterable, DeviceLoop):
            return  # a device loop of a kernel body: only its host code matters here
        items = self.iterate(iterable)
        if items is None:
            self.assign(stmt.target, UNKNOWN)
            try:
                self.exec_block(stmt.body)
            except (BreakSignal, ContinueSignal):
                pass
            return
        for item in items:
            self.budget.step(Range.of(stmt.target))
            self.assign(stmt.target, item)
            try:
                self.exec_block(stmt.body)
            except BreakSignal:
                return
            except ContinueSignal:
                continue
        self.exec_block(stmt.orelse)

    def _while(self, stmt: ast.While) -> None:
        try:
            self._while_loop(stmt)
        except Exhausted as exc:
            exc.loop = exc.loop or _header(stmt, stmt.test)
            raise

    def _while_loop(self, stmt: ast.While) -> None:
        while True:
            cond = truth(self.eval(stmt.test))
            if cond is False:
                self.exec_block(stmt.orelse)
                return
            try:
                self.exec_block(stmt.body)
            except BreakSignal:
                return
            except ContinueSignal:
                pass
            if cond is UNKNOWN:
                return

    def _with(self, stmt: ast.With) -> None:
        for item in stmt.items:
            self.eval(item.context_expr)
            if item.optional_vars is not None:
                self.assign(item.optional_vars, UNKNOWN)
        self.exec_block(stmt.body)

    def _try(self, stmt: ast.Try) -> None:
        try:
            try:
                self.exec_block(stmt.body)
            except RaiseSignal:
                if stmt.handlers:
                    handler = stmt.handlers[0]
                    if handler.name:
                        self.bind(handler.name, UNKNOWN)
                    self.exec_block(handler.body)
                    return
                raise
            self.exec_block(stmt.orelse)
        finally:
            self.exec_block(stmt.finalbody)

    def _function_def(self, stmt: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        closure = self.make_closure(stmt)
        value: Any = closure
        name = self.kernel_nodes.get(id(stmt))
        if name is not None:
            value = KernelRef(name, closure)
        elif any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in stmt.decorator_list):
            closure.static = True
        self.bind(stmt.name, value)

    def _class_def(self, stmt: ast.ClassDef) -> None:
        bases = tuple(self.eval(b) for b in stmt.bases)
        frame = Frame({}, self.frame, is_class=True)
        outer, self.frame = self.frame, frame
        try:
            self.exec_block(stmt.body)
        finally:
            self.frame = outer
        self.bind(stmt.name, ClassValue(stmt.name, bases, frame.vars))

    def _import(self, stmt: ast.Import) -> None:
        for alias in stmt.names:
            if alias.asname:
                self.bind(alias.asname, resolve(alias.name))
            else:
                root = alias.name.split(".")[0]
                self.bind(root, resolve(root))

    def _import_from(self, stmt: ast.ImportFrom) -> None:
        for alias in stmt.names:
            if alias.name != "*":
                known = stmt.module is not None and stmt.level == 0
                self.bind(alias.asname or alias.name,
                          self.imported(alias.asname or alias.name, f"{stmt.module}.{alias.name}" if known else None))

    def _return(self, stmt: ast.Return) -> None:
        raise ReturnSignal(None if stmt.value is None else self.eval(stmt.value))

    def _raise(self, stmt: ast.Raise) -> None:
        raise RaiseSignal()

    def _break(self, stmt: ast.Break) -> None:
        raise BreakSignal()

    def _continue(self, stmt: ast.Continue) -> None:
        raise ContinueSignal()

    def _delete(self, stmt: ast.Delete) -> None:
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                self.frame.vars.pop(target.id, None)
            elif isinstance(target, ast.Subscript):
                self.dispatch.delitem(self.eval(target.value), self.eval(target.slice))

    def _global(self, stmt: ast.Global) -> None:
        self.frame.globals_declared.update(stmt.names)


def _replace(names: dict[str, Any], values: dict[str, Any]) -> None:
    names.clear()
    names.update(values)


def _header(stmt: ast.stmt, last: ast.expr) -> Range:
    """`for x in xs` / `while cond`: the statement up to the end of its iterable or condition."""
    return Range(Range.of(stmt).start, Range.of(last).end)


def truth(value: Any) -> Any:
    """True / False, or UNKNOWN for values whose truth the evaluation cannot know (tensors, unknowns)."""
    if value is UNKNOWN or isinstance(value, torch.Tensor) or has_unknown(value):
        return UNKNOWN
    try:
        return bool(value)
    except Exception:  # noqa: BLE001 - an object without a truth value
        return UNKNOWN


def _as_load(target: ast.expr) -> ast.expr | None:
    if isinstance(target, ast.Name):
        return ast.copy_location(ast.Name(target.id, ast.Load()), target)
    if isinstance(target, ast.Subscript):
        return ast.copy_location(ast.Subscript(target.value, target.slice, ast.Load()), target)
    if isinstance(target, ast.Attribute):
        return ast.copy_location(ast.Attribute(target.value, target.attr, ast.Load()), target)
    return None


_STATEMENTS: dict[type, Callable[[Statements, Any], None]] = {
    ast.Assign: Statements._assign,
    ast.AnnAssign: Statements._ann_assign,
    ast.AugAssign: Statements._aug_assign,
    ast.Expr: Statements._expr,
    ast.If: Statements._if,
    ast.For: Statements._for,
    ast.AsyncFor: Statements._for,
    ast.While: Statements._while,
    ast.With: Statements._with,
    ast.AsyncWith: Statements._with,
    ast.Try: Statements._try,
    ast.FunctionDef: Statements._function_def,
    ast.AsyncFunctionDef: Statements._function_def,
    ast.ClassDef: Statements._class_def,
    ast.Import: Statements._import,
    ast.ImportFrom: Statements._import_from,
    ast.Return: Statements._return,
    ast.Raise: Statements._raise,
    ast.Break: Statements._break,
    ast.Continue: Statements._continue,
    ast.Delete: Statements._delete,
    ast.Global: Statements._global,
}
