"""A bounded abstract evaluation of a module's own Python code (never imported, never run).

It follows module-level statements, `main()` and same-file calls the way Python would — scopes, closures,
lambdas, classes, loops, comprehensions — with torch tensors as meta tensors, so that the arguments each
`@helion.kernel` is called with come out with their shapes and dtypes (call_recorder.py records them).
Anything it cannot know becomes `UNKNOWN` instead of an error: an `if` on an unknown condition runs both
branches, a loop over an unknown iterable runs its body once. Library calls go through host_models.py,
which only ever calls an allowlist of pure functions (torch on meta tensors, math). The evaluation is
bounded: a step budget for the whole module (`Exhausted` ends it), the host-code limits of limits.py on
every integer and sequence it builds, and a call depth.

Expressions reuse the kernel tracer's `ExpressionEvaluator`; this module adds names and scopes, calls,
closures and classes; host_statements.py the statements; host_models.py / host_torch.py what library
calls mean; host_values.py the values.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

import torch

from ..support.diagnostics import Range
from .expressions import ExpressionEvaluator
from .host_builtins import BUILTINS
from .host_models import Models, resolve
from .host_process import Assumptions
from .host_statements import (
    BreakSignal,
    ContinueSignal,
    RaiseSignal,
    ReturnSignal,
    Statements,
    StepBudget,
    truth,
)
from .host_torch import has_unknown
from .host_values import (
    UNKNOWN,
    Bound,
    ClassValue,
    Closure,
    Frame,
    Instance,
    KernelChoice,
    KernelRef,
    Site,
)
from .limits import check_count
from .module import ModuleInfo
from .unreached import RunFacts
from .vllm_platform import PlatformMethod
from .workspace_imports import Foreign, Links, platform_or

MAX_CALL_DEPTH = 24  # nested same-file calls followed; deeper ones are UNKNOWN (recursion)
CALL_STEPS = 25  # budget steps a library call (a torch op on meta tensors, ~50 µs) or a kernel call costs


class HostEvaluator(Statements, ExpressionEvaluator):
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
        self.dispatch = Models(self)
        self.assumed = Assumptions()  # how the process is taken to run (host_process.py)
        self.facts = RunFacts()  # what the run reached, for the hint of a kernel it never calls (unreached.py)
        self.chip: str | None = None  # the TPU vLLM's platform stands for (vllm_platform.py); None: no one chip
        self.links: Links | None = None  # names imported from other workspace files (workspace_imports.py)

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
        if name in self.info.imports or (self.links is not None and name in self.links):
            return self.imported(name, self.info.imports.get(name))
        if name in BUILTINS:
            return BUILTINS[name]
        return UNKNOWN

    def bind(self, name: str, value: Any) -> None:
        if name in self.frame.globals_declared:
            self.globals[name] = value
        else:
            self.frame.vars[name] = value

    def imported(self, local: str, qualname: str | None) -> Any:
        """An imported name's value: from another workspace file (workspace_imports.py), vLLM's platform
        (the TPU), a value the models know, else the name itself (UNKNOWN for a relative import)."""
        if self.links is not None and local in self.links:
            return self.links.value(local)
        platform = platform_or(qualname, self.chip)
        if platform is not None:
            return platform
        return UNKNOWN if qualname is None else resolve(qualname)

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
        self.facts.branch(node, cond)
        value = self.eval(node.body if cond else node.orelse)
        other = node.orelse if cond else node.body
        if isinstance(value, KernelRef) and isinstance(other, ast.Name | ast.Attribute):
            alt = self.eval(other)  # a name, read without side effects
            if isinstance(alt, KernelRef) and alt.name != value.name:
                test = _shorten(ast.unparse(node.test))
                note = (f"a call reaches `{alt.name}` only where `{test}` is {'false' if cond else 'true'} "
                        f"(line {node.lineno}); here it goes to `{value.name}`")
                return KernelChoice(value, KernelRef(alt.name, alt.closure, note))
        return value

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
        """An f-string of plain values (numbers, strings, dtypes: a case key "heads_16_batch_8"); "" when a part
        is anything else (what the text says then never matters to the shapes)."""
        parts: list[str] = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
                continue
            if not isinstance(value, ast.FormattedValue) or value.format_spec is not None:
                return ""
            item = self.eval(value.value)
            if not isinstance(item, int | float | str | torch.dtype):
                return ""
            parts.append(repr(item) if value.conversion == ord("r") else str(item))
        return "".join(parts)

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
        if isinstance(func, Foreign):
            return func.call(args, kwargs, rng)
        if isinstance(func, PlatformMethod):
            return func(*args, **kwargs)
        if isinstance(func, Bound):
            return self._call(func.func, [func.obj, *args], kwargs, rng, node)
        if isinstance(func, KernelRef):
            site = Site(node, args, kwargs, self.frame) if node is not None else self.origin
            return self.on_kernel(func, args, kwargs, site or Site(None, args, kwargs, self.frame))
        if isinstance(func, KernelChoice):
            self._call(func.other, args, kwargs, rng, node)
            return self._call(func.taken, args, kwargs, rng, node)
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
        self.facts.entered.add(id(node))
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
        except ReturnSignal as ret:
            return ret.value
        except (RaiseSignal, BreakSignal, ContinueSignal):
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


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
