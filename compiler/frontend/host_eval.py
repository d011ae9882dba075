"""A bounded abstract evaluation of a module's own Python code (never imported, never run).

It follows module-level statements, `main()` and same-file calls the way Python would — scopes, closures,
lambdas, classes, loops, comprehensions — with torch tensors as meta tensors, so that the arguments each
`@helion.kernel` is called with come out with their shapes and dtypes (call_shapes.py records them).
Anything it cannot know becomes `UNKNOWN` instead of an error: an `if` on an unknown condition runs both
branches, a loop over an unknown iterable runs its body once. Library calls go through host_models.py,
which only ever calls an allowlist of pure functions (torch on meta tensors, math). The evaluation is
bounded: a step budget for the whole module (`Exhausted` ends it), the host-code limits of limits.py on
every integer and sequence it builds, and a call depth.

Expressions reuse the kernel tracer's `ExpressionEvaluator`; this module adds statements and the Python
object model that module-level code needs and kernel bodies do not.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Callable
from typing import Any

import torch

from ..diagnostics import Range, UserError
from .expressions import BINOPS, ExpressionEvaluator
from .host_models import BUILTINS, Models, has_unknown, resolve
from .host_values import (
    UNKNOWN,
    Bound,
    ClassValue,
    Closure,
    DeviceLoop,
    Frame,
    Instance,
    KernelRef,
    Site,
)
from .limits import Budget, check_count
from .module import ModuleInfo

log = logging.getLogger(__name__)
MAX_CALL_DEPTH = 24  # nested same-file calls followed; deeper ones are UNKNOWN (recursion)
CALL_STEPS = 25  # budget steps a library call (a torch op on meta tensors, ~50 µs) or a kernel call costs


class Exhausted(Exception):  # noqa: N818 - the budget ran out: the evaluation ends here
    def __init__(self, rng: Range, limit: int):
        super().__init__(rng)
        self.range = rng
        self.limit = limit


class StepBudget(Budget):
    def step(self, rng: Range) -> None:
        self.steps += 1
        if self.steps > self.limit:
            raise Exhausted(rng, self.limit)


class _Return(Exception):  # noqa: N818 - control flow
    def __init__(self, value: Any):
        self.value = value


class _Break(Exception):  # noqa: N818
    pass


class _Continue(Exception):  # noqa: N818
    pass


class _Raise(Exception):  # noqa: N818 - the code raises: the function ends with an unknown result
    pass


_CONTROL = (_Return, _Break, _Continue, _Raise, Exhausted)


class HostEvaluator(ExpressionEvaluator):
    """Evaluates one module. `on_note(range, message)` hears about limits hit (each a diagnostic);
    `on_kernel(ref, args, kwargs, site)` is called for every kernel call and returns the call's result."""

    in_device = False
    ops = None

    def __init__(self, info: ModuleInfo, kernels: dict[str, ast.FunctionDef], budget: StepBudget,
                 on_kernel: Callable[[KernelRef, list, dict, Site], Any], on_note: Callable[[Range, str], None]):
        self.info = info
        self.kernel_nodes = {id(node): name for name, node in kernels.items()}
        self.budget = budget
        self.on_kernel = on_kernel
        self.on_note = on_note
        self.globals: dict[str, Any] = {"__name__": "__main__"}
        self.frame = self.module_frame = Frame(self.globals, None, entry=True)
        self.env = self.globals  # ExpressionEvaluator's name table (lookup is overridden below)
        self.depth = 0
        self.origin: Site | None = None  # the call made from entry code that the current work is part of
        self.loops: list[Range] = []  # headers of the loops running now (where a budget that ran out is said)
        self.dispatch = Models(self)

    # -- entry ---------------------------------------------------------------------------------------
    def run_module(self, tree: ast.Module) -> None:
        """Module-level code in order, then `main()` if nothing called it (a notebook has no `__main__`)."""
        self.exec_block(tree.body)
        main = self.globals.get("main")
        if isinstance(main, Closure) and not self.dispatch.main_called and not _required_params(main.node):
            self.call_value(main, [], {}, Range.of(main.node), None)

    # -- names ---------------------------------------------------------------------------------------
    def lookup(self, name: str, rng: Range) -> Any:
        frame: Frame | None = self.frame
        while frame is not None:
            if name in frame.vars and not (frame.is_class and frame is not self.frame):
                return frame.vars[name]
            frame = frame.parent
        if name in self.globals:
            return self.globals[name]
        if name in self.info.imports:
            return resolve(self.info.imports[name])
        if name in BUILTINS:
            return BUILTINS[name]
        return UNKNOWN

    def bind(self, name: str, value: Any) -> None:
        if name in self.frame.globals_declared:
            self.globals[name] = value
        else:
            self.frame.vars[name] = value

    # -- expressions ---------------------------------------------------------------------------------
    def eval(self, node: ast.expr) -> Any:
        kind = type(node)
        if kind in _OWN:
            self.budget.step(Range.of(node))
            return _OWN[kind](self, node)
        return super().eval(node)

    def _ifexp(self, node: ast.IfExp) -> Any:
        cond = truth(self.eval(node.test))
        if cond is UNKNOWN:
            return UNKNOWN
        return self.eval(node.body if cond else node.orelse)

    def _boolop(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        value: Any = None
        for sub in node.values:
            value = self.eval(sub)
            t = truth(value)
            if t is UNKNOWN:
                return UNKNOWN
            if t != is_and:
                return value
        return value

    def _dict(self, node: ast.Dict) -> Any:
        out: dict = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                more = self.eval(v)
                if not isinstance(more, dict):
                    return UNKNOWN
                out.update(more)
            else:
                key = self.eval(k)
                if not _hashable(key):
                    return UNKNOWN
                out[key] = self.eval(v)
        return out

    def _set(self, node: ast.Set) -> Any:
        items = self.elements(node.elts)
        return set(items) if all(_hashable(i) for i in items) else UNKNOWN

    def _lambda(self, node: ast.Lambda) -> Any:
        return self.make_closure(node)

    def _starred(self, node: ast.Starred) -> Any:
        return self.eval(node.value)

    def _named(self, node: ast.NamedExpr) -> Any:
        value = self.eval(node.value)
        self.assign(node.target, value)
        return value

    def _unknown(self, node: ast.expr) -> Any:
        return UNKNOWN

    def _joined(self, node: ast.JoinedStr) -> Any:
        return ""

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> Any:
        outer = self.frame
        self.frame = Frame({}, outer)
        items: list = []
        try:
            if not self._generate(node, node.generators, items):
                return UNKNOWN
        finally:
            self.frame = outer
        if isinstance(node, ast.DictComp):
            return dict(items) if all(_hashable(k) for k, _ in items) else UNKNOWN
        if isinstance(node, ast.SetComp):
            return set(items) if all(_hashable(i) for i in items) else UNKNOWN
        return items

    def _generate(self, node: Any, gens: list[ast.comprehension], out: list) -> bool:
        """Appends the comprehension's items to `out`; False when its length cannot be known."""
        if not gens:
            if isinstance(node, ast.DictComp):
                out.append((self.eval(node.key), self.eval(node.value)))
            else:
                out.append(self.eval(node.elt))
            check_count(len(out), Range.of(node), "this comprehension")
            return True
        gen = gens[0]
        values = self.iterate(self.eval(gen.iter))
        if values is None:
            return False
        for value in values:
            self.assign(gen.target, value)
            conds = [truth(self.eval(c)) for c in gen.ifs]
            if any(c is UNKNOWN for c in conds):
                return False
            if all(conds) and not self._generate(node, gens[1:], out):
                return False
        return True

    def call(self, node: ast.Call) -> Any:
        rng = Range.of(node)
        func = self.eval(node.func)
        args = self.elements(node.args)
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            value = self.eval(kw.value)
            if kw.arg is not None:
                kwargs[kw.arg] = value
            elif isinstance(value, dict) and all(isinstance(k, str) for k in value):
                kwargs.update(value)
            else:
                return UNKNOWN
        return self.call_value(func, args, kwargs, rng, node)

    def elements(self, nodes: list[ast.expr]) -> list[Any]:
        out: list[Any] = []
        for a in nodes:
            if isinstance(a, ast.Starred):
                items = self.iterate(self.eval(a.value))
                out.extend(items if items is not None else [UNKNOWN])
            else:
                out.append(self.eval(a))
        return out

    def call_value(self, func: Any, args: list, kwargs: dict, rng: Range, node: ast.Call | None) -> Any:
        """Calls `func` with evaluated arguments; a call made from entry code becomes the origin of every
        kernel call under it."""
        outer = self.origin
        if self.frame.entry and node is not None and not (isinstance(func, Closure) and func.name == "main"):
            self.origin = Site(node, args, kwargs, self.frame)
        try:
            return self._call(func, args, kwargs, rng, node)
        finally:
            self.origin = outer

    def _call(self, func: Any, args: list, kwargs: dict, rng: Range, node: ast.Call | None) -> Any:
        if not isinstance(func, Closure | Bound | ClassValue | Instance):
            self.budget.steps += CALL_STEPS
        if isinstance(func, Closure):
            return self.call_closure(func, args, kwargs, rng)
        if isinstance(func, Bound):
            return self._call(func.func, [func.obj, *args], kwargs, rng, node)
        if isinstance(func, KernelRef):
            site = Site(node, args, kwargs, self.frame) if node is not None else self.origin
            return self.on_kernel(func, args, kwargs, site or Site(None, args, kwargs, self.frame))
        if isinstance(func, ClassValue):
            return self.instantiate(func, args, kwargs, rng)
        if isinstance(func, Instance):
            method = func.cls.find("__call__") or (func.cls.find("forward") if func.cls.derives("torch.nn.Module")
                                                   else None)
            return self._call(method, [func, *args], kwargs, rng, node) if method is not None else UNKNOWN
        return self.dispatch.call(func, args, kwargs, rng)

    def call_closure(self, fn: Closure, args: list, kwargs: dict, rng: Range) -> Any:
        if self.depth >= MAX_CALL_DEPTH:
            return UNKNOWN
        node = fn.node
        frame = Frame({}, fn.scope, entry=fn.name == "main" and fn.scope is None)
        _bind_params(frame.vars, node.args, fn, args, kwargs)
        outer, self.frame = self.frame, frame
        self.depth += 1
        try:
            if isinstance(node, ast.Lambda):
                return self.eval(node.body)
            if _is_generator(node):
                return UNKNOWN
            if frame.entry:
                self.dispatch.main_called = True
            self.exec_block(node.body)
        except _Return as ret:
            return ret.value
        except (_Raise, _Break, _Continue):
            return UNKNOWN
        finally:
            self.frame = outer
            self.depth -= 1
        return None

    def instantiate(self, cls: ClassValue, args: list, kwargs: dict, rng: Range) -> Any:
        obj = Instance(cls)
        init = cls.find("__init__")
        if isinstance(init, Closure):
            self.call_closure(init, [obj, *args], kwargs, rng)
        return obj

    def make_closure(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> Closure:
        scope = self.frame
        while scope is not None and scope.is_class:
            scope = scope.parent
        defaults = [self.eval(d) for d in node.args.defaults]
        kw_defaults = {a.arg: self.eval(d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)
                       if d is not None}
        return Closure(node, None if scope is self.module_frame else scope, defaults, kw_defaults)

    # -- attributes and subscripts ---------------------------------------------------------------------
    def subscript(self, node: ast.Subscript, rng: Range) -> Any:
        base = self.eval(node.value)
        index = self.eval(node.slice)
        return self.dispatch.getitem(base, index, rng)

    def compare(self, node: ast.Compare, rng: Range) -> Any:
        left = self.eval(node.left)
        result: Any = True
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.eval(right_node)
            if isinstance(op, ast.Is | ast.IsNot):
                if left is UNKNOWN or right is UNKNOWN:
                    return UNKNOWN
                r: Any = (left is right) == isinstance(op, ast.Is)
            elif isinstance(op, ast.In | ast.NotIn):
                r = self.dispatch.contains(right, left, rng)
                r = r if r is UNKNOWN else r == isinstance(op, ast.In)
            else:
                r = self.binop(_CMP[type(op)], left, right, rng)
            if r is UNKNOWN or isinstance(r, torch.Tensor):
                return UNKNOWN if len(node.ops) > 1 or r is UNKNOWN else r
            if not r:
                return False
            left = right
        return result

    def binop(self, op: str, a: Any, b: Any, rng: Range) -> Any:
        return self.dispatch.binop(op, a, b, rng, super().binop)

    def unaryop(self, node: ast.UnaryOp, v: Any, rng: Range) -> Any:
        if has_unknown(v) or not isinstance(v, int | float | bool | torch.Tensor):
            return UNKNOWN
        try:
            return super().unaryop(node, v, rng)
        except (RuntimeError, TypeError):
            return UNKNOWN

    # -- statements ----------------------------------------------------------------------------------
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
        except _CONTROL:
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
            self.exec_block(stmt.body if cond else stmt.orelse)
            return
        self.both(stmt.body, stmt.orelse)

    def both(self, first: list[ast.stmt], second: list[ast.stmt]) -> None:
        """Runs both branches of an `if` the evaluation cannot decide; names they set differently become
        unknown."""
        before = dict(self.frame.vars)
        first_ended = False
        try:
            self.exec_block(first)
        except (_Return, _Raise):
            first_ended = True
        after_first = self.frame.vars
        self.frame.vars = dict(before)
        try:
            self.exec_block(second)
        except _Raise:
            if first_ended:
                raise
            self.frame.vars = after_first  # only the first branch goes on
            return
        if first_ended:
            return
        for name in set(after_first) | set(self.frame.vars):
            if after_first.get(name, UNKNOWN) is not self.frame.vars.get(name, UNKNOWN):
                self.frame.vars[name] = UNKNOWN

    def _for(self, stmt: ast.For) -> None:
        self.loops.append(_header(stmt, stmt.iter))
        try:
            self._for_loop(stmt)
        finally:
            self.loops.pop()

    def _for_loop(self, stmt: ast.For) -> None:
        iterable = self.eval(stmt.iter)
        if isinstance(iterable, DeviceLoop):
            return  # a device loop of a kernel body: only its host code matters here
        items = self.iterate(iterable)
        if items is None:
            self.assign(stmt.target, UNKNOWN)
            try:
                self.exec_block(stmt.body)
            except (_Break, _Continue):
                pass
            return
        for item in items:
            self.budget.step(Range.of(stmt.target))
            self.assign(stmt.target, item)
            try:
                self.exec_block(stmt.body)
            except _Break:
                return
            except _Continue:
                continue
        self.exec_block(stmt.orelse)

    def _while(self, stmt: ast.While) -> None:
        self.loops.append(_header(stmt, stmt.test))
        try:
            self._while_loop(stmt)
        finally:
            self.loops.pop()

    def _while_loop(self, stmt: ast.While) -> None:
        while True:
            cond = truth(self.eval(stmt.test))
            if cond is False:
                self.exec_block(stmt.orelse)
                return
            try:
                self.exec_block(stmt.body)
            except _Break:
                return
            except _Continue:
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
            except _Raise:
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
                self.bind(alias.asname or alias.name, resolve(f"{stmt.module}.{alias.name}") if known else UNKNOWN)

    def _return(self, stmt: ast.Return) -> None:
        raise _Return(None if stmt.value is None else self.eval(stmt.value))

    def _raise(self, stmt: ast.Raise) -> None:
        raise _Raise()

    def _break(self, stmt: ast.Break) -> None:
        raise _Break()

    def _continue(self, stmt: ast.Continue) -> None:
        raise _Continue()

    def _delete(self, stmt: ast.Delete) -> None:
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                self.frame.vars.pop(target.id, None)
            elif isinstance(target, ast.Subscript):
                self.dispatch.delitem(self.eval(target.value), self.eval(target.slice))

    def _global(self, stmt: ast.Global) -> None:
        self.frame.globals_declared.update(stmt.names)


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


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return value is not UNKNOWN


def _required_params(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> bool:
    a = node.args
    return len(a.posonlyargs) + len(a.args) > len(a.defaults) or any(d is None for d in a.kw_defaults)


def _is_generator(node: ast.AST) -> bool:
    todo = list(ast.iter_child_nodes(node))
    while todo:
        sub = todo.pop()
        if isinstance(sub, ast.Yield | ast.YieldFrom):
            return True
        if not isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            todo.extend(ast.iter_child_nodes(sub))
    return False


def _bind_params(out: dict[str, Any], a: ast.arguments, fn: Closure, args: list, kwargs: dict) -> None:
    """Python's argument binding; a parameter nothing gives is UNKNOWN."""
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    defaults = dict(zip(positional[len(positional) - len(fn.defaults):], fn.defaults, strict=True))
    for name, value in zip(positional, args, strict=False):
        out[name] = value
    extra = list(args[len(positional):])
    if a.vararg is not None:
        out[a.vararg.arg] = tuple(extra)
    rest = dict(kwargs)
    for name in positional:
        if name in rest:
            out[name] = rest.pop(name)
        elif name not in out:
            out[name] = defaults.get(name, UNKNOWN)
    for p in a.kwonlyargs:
        out[p.arg] = rest.pop(p.arg) if p.arg in rest else fn.kw_defaults.get(p.arg, UNKNOWN)
    if a.kwarg is not None:
        out[a.kwarg.arg] = rest


def _as_load(target: ast.expr) -> ast.expr | None:
    if isinstance(target, ast.Name):
        return ast.copy_location(ast.Name(target.id, ast.Load()), target)
    if isinstance(target, ast.Subscript):
        return ast.copy_location(ast.Subscript(target.value, target.slice, ast.Load()), target)
    if isinstance(target, ast.Attribute):
        return ast.copy_location(ast.Attribute(target.value, target.attr, ast.Load()), target)
    return None


_CMP = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}

_OWN: dict[type, Callable[[HostEvaluator, Any], Any]] = {
    ast.IfExp: HostEvaluator._ifexp,
    ast.BoolOp: HostEvaluator._boolop,
    ast.Dict: HostEvaluator._dict,
    ast.Set: HostEvaluator._set,
    ast.Lambda: HostEvaluator._lambda,
    ast.Starred: HostEvaluator._starred,
    ast.NamedExpr: HostEvaluator._named,
    ast.JoinedStr: HostEvaluator._joined,
    ast.ListComp: HostEvaluator._comprehension,
    ast.SetComp: HostEvaluator._comprehension,
    ast.GeneratorExp: HostEvaluator._comprehension,
    ast.DictComp: HostEvaluator._comprehension,
    ast.Await: HostEvaluator._unknown,
    ast.Yield: HostEvaluator._unknown,
    ast.YieldFrom: HostEvaluator._unknown,
}

_STATEMENTS: dict[type, Callable[[HostEvaluator, Any], None]] = {
    ast.Assign: HostEvaluator._assign,
    ast.AnnAssign: HostEvaluator._ann_assign,
    ast.AugAssign: HostEvaluator._aug_assign,
    ast.Expr: HostEvaluator._expr,
    ast.If: HostEvaluator._if,
    ast.For: HostEvaluator._for,
    ast.AsyncFor: HostEvaluator._for,
    ast.While: HostEvaluator._while,
    ast.With: HostEvaluator._with,
    ast.AsyncWith: HostEvaluator._with,
    ast.Try: HostEvaluator._try,
    ast.FunctionDef: HostEvaluator._function_def,
    ast.AsyncFunctionDef: HostEvaluator._function_def,
    ast.ClassDef: HostEvaluator._class_def,
    ast.Import: HostEvaluator._import,
    ast.ImportFrom: HostEvaluator._import_from,
    ast.Return: HostEvaluator._return,
    ast.Raise: HostEvaluator._raise,
    ast.Break: HostEvaluator._break,
    ast.Continue: HostEvaluator._continue,
    ast.Delete: HostEvaluator._delete,
    ast.Global: HostEvaluator._global,
}
