"""Why the file's run (host_eval.py) never calls a kernel, for the hint of a kernel with no shape set
(shape_hint.py): where the file names it and why the run does not get there. A chain of steps, each at a
place in the file: nothing names it (or only a comment does); it is called only in a function nothing on the
way calls, only in an autograd Function's `backward` that no gradient ever reaches, only in a lambda the run
passes on without calling, or only behind a condition that goes the other way (`DEVICE.type == "tpu"`).

It reads what the evaluation recorded (`RunFacts`: the functions it entered, the branches it took) and the
module's syntax; it imports no torch, and what it returns pickles.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..support.diagnostics import Range

MAX_STEPS = 6  # steps said before the chain is cut short


@dataclass
class RunFacts:
    """What the evaluation reached: the functions and lambdas it called (node ids) and the sides of the `if`
    statements and expressions it ran (an unknown condition runs both)."""

    entered: set[int] = field(default_factory=set)
    taken: set[tuple[int, bool]] = field(default_factory=set)

    def branch(self, node: ast.If | ast.IfExp, side: bool) -> None:
        self.taken.add((id(node), bool(side)))


@dataclass(frozen=True)
class Unreached:
    """`reason` finishes the hint's sentence ("… and nothing in this file calls it"); `related` are the places
    its steps name."""

    reason: str
    related: tuple[tuple[Range, str], ...] = ()


@dataclass(frozen=True)
class _Step:
    """`subject` is `text` ("called only in `f` (line 12)"), at `range`; `names` is what the text names (the
    next step, about it, follows with "which is")."""

    subject: str
    text: str
    range: Range
    names: str = ""


def why_unreached(tree: ast.Module, source: str, names: list[str], facts: RunFacts | None,
                  line_label: Callable[[int], str]) -> dict[str, Unreached]:
    """Why the run never calls each kernel of `names` (defined at module level), for those it can say it for;
    `facts` None for a run cut short, which says nothing about where it would have gone (only that nothing
    names a kernel can be said)."""
    chain = _Chain(tree, source, facts, line_label)
    out: dict[str, Unreached] = {}
    for name in names:
        chain.seen = set()
        why = chain.why(name)
        if why is not None:
            out[name] = why
    return out


def _defined(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.Assign):
        return {t.id for t in stmt.targets if isinstance(t, ast.Name)}
    return {stmt.name}  # type: ignore[union-attr]


class _Chain:
    """The module's reads of each name and each node's parent, with what the run reached; explains one kernel
    at a time (`seen` stops a chain from going round)."""

    def __init__(self, tree: ast.Module, source: str, facts: RunFacts | None, line_label: Callable[[int], str]):
        self.tree = tree
        self.source = source
        self.complete = facts is not None
        self.facts = facts or RunFacts()
        self._comments: list[tuple[int, str]] | None = None
        self.line_label = line_label
        self.parents: dict[int, ast.AST] = {}
        self.names: dict[str, list[ast.Name]] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.names.setdefault(node.id, []).append(node)
        for refs in self.names.values():
            refs.sort(key=lambda n: (n.lineno, n.col_offset))
        self.seen: set[str] = set()

    def why(self, name: str) -> Unreached | None:
        """Why the run never calls kernel `name`, or None when it cannot say."""
        kernel = next((s for s in self.tree.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.Assign)
                       and name in _defined(s)), None)
        refs = self.refs(name, self.tree, kernel)
        if not refs:
            line = self.comment_naming(name)
            if line is None:
                return Unreached("nothing in this file calls it")
            return Unreached(f"nothing in this file calls it (only a comment names it, at {self.line_label(line)})",
                             ((Range.lines(line), f"`{name}` is named in this comment"),))
        steps = self.explain(name, refs, 0) if self.complete else []
        if not steps:
            return None
        parts = []
        for i, step in enumerate(steps):
            if i == 0:
                parts.append(f"it is {step.text}")
            elif step.subject == steps[i - 1].names:
                parts.append(f"which is {step.text}")
            else:
                parts.append(f"and `{step.subject}` is {step.text}")
        reason = "this file's run never calls it: " + ", ".join(parts)
        return Unreached(reason, tuple((s.range, f"`{s.subject}` is {s.text}") for s in steps))

    def ancestors(self, node: ast.AST) -> Iterator[tuple[ast.AST, ast.AST]]:
        """(child, parent) pairs from `node` up to the module."""
        while id(node) in self.parents:
            parent = self.parents[id(node)]
            yield node, parent
            node = parent

    def refs(self, name: str, scope: ast.AST, exclude: ast.AST | None) -> list[ast.Name]:
        """Reads of `name` inside `scope`, leaving out those inside `exclude` (the definition itself)."""
        def inside(node: ast.AST, container: ast.AST) -> bool:
            return container is self.tree or any(p is container for _, p in self.ancestors(node))
        return [r for r in self.names.get(name, []) if inside(r, scope) and (exclude is None or not inside(r, exclude))]

    def comment_naming(self, name: str) -> int | None:
        """The zero-based line of the first comment naming `name`."""
        if self._comments is None:
            self._comments = []
            try:
                for tok in tokenize.generate_tokens(io.StringIO(self.source).readline):
                    if tok.type == tokenize.COMMENT:
                        self._comments.append((tok.start[0] - 1, tok.string))
            except (tokenize.TokenError, SyntaxError):
                pass
        word = re.compile(rf"\b{re.escape(name)}\b")
        return next((line for line, text in self._comments if word.search(text)), None)

    def where(self, node: ast.AST) -> str:
        return self.line_label(node.lineno - 1)

    def explain(self, name: str, refs: list[ast.Name], depth: int) -> list[_Step]:
        """Why the run reaches none of `refs` (reads of `name`), from the first it can say it for; [] when it
        cannot."""
        for ref in refs:
            steps = self._from_ref(name, ref, depth)
            if steps:
                return steps
        return []

    def _from_ref(self, name: str, ref: ast.Name, depth: int) -> list[_Step]:
        verb = "called" if self._is_called(ref) else "named"
        lam: ast.Lambda | None = None
        outermost: ast.FunctionDef | ast.AsyncFunctionDef | None = None
        for child, parent in self.ancestors(ref):
            if isinstance(parent, ast.If | ast.IfExp) and child is not parent.test and outermost is None:
                side = child is parent.body if isinstance(parent, ast.IfExp) else _in(child, parent.body)
                if (id(parent), not side) in self.facts.taken and (id(parent), side) not in self.facts.taken:
                    test = _short(ast.unparse(parent.test))
                    return [_Step(name, f"{'called' if verb == 'called' else 'used'} only where `{test}` is "
                                        f"{'true' if side else 'false'} ({self.where(parent)})", Range.of(parent.test))]
            if isinstance(parent, ast.Lambda) and id(parent) not in self.facts.entered and outermost is None:
                lam = lam or parent
            if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef):
                if id(parent) in self.facts.entered:
                    break
                outermost = parent
            if isinstance(parent, ast.Assign | ast.AnnAssign) and isinstance(self.parents.get(id(parent)), ast.Module) \
                    and child is parent.value and outermost is None and lam is None:
                return self._through_name(name, parent, verb, depth)
        if outermost is not None:
            return self._through_function(name, outermost, ref, verb, depth)
        if lam is not None:
            return [_Step(name, f"{verb} only in a lambda{self._passed_to(lam)} ({self.where(lam)}), which the run "
                                "never calls", Range.of(lam))]
        return []

    def _through_name(self, name: str, assign: ast.Assign | ast.AnnAssign, verb: str, depth: int) -> list[_Step]:
        """A module-level `TABLE = {... name ...}`: why the run never uses TABLE to call it."""
        targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if not names:
            return []
        step = _Step(name, f"{verb} only in `{names[0]}` ({self.where(assign)})", Range.of(targets[0]), names[0])
        return [step, *self._why_name(names[0], self.tree, assign, depth + 1)]

    def _through_function(self, name: str, fn: ast.FunctionDef | ast.AsyncFunctionDef, ref: ast.Name, verb: str,
                          depth: int) -> list[_Step]:
        """`ref` inside `fn`, a function the run never enters."""
        cls = self.parents.get(id(fn))
        if isinstance(cls, ast.ClassDef):
            method = f"{cls.name}.{fn.name}"
            step = _Step(name, f"{verb} only in `{method}` ({self.where(ref)})", Range.of(ref), method)
            forward = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "forward"), None)
            if fn.name == "backward" and _is_autograd(cls) and forward is not None \
                    and id(forward) in self.facts.entered:
                return [step, _Step(method, f"run only when a gradient flows back through `{cls.name}.apply`, which "
                                            "this file's run never asks for (no `.backward()` on its output, no "
                                            "`run_example(..., bwd=True)`)", _name_range(fn))]
            return [step, *self._why_name(cls.name, self._scope_of(cls), cls, depth + 1)]
        step = _Step(name, f"{verb} only in `{fn.name}` ({self.where(ref)})", Range.of(ref), fn.name)
        return [step, *self._why_name(fn.name, self._scope_of(fn), fn, depth + 1)]

    def _why_name(self, name: str, scope: ast.AST, definition: ast.AST, depth: int) -> list[_Step]:
        """Why the run never uses `name` (defined by `definition` in `scope`)."""
        where = _name_range(definition)
        if depth >= MAX_STEPS or name in self.seen:
            return [_Step(name, "reached only through calls not followed here", where)]
        self.seen.add(name)
        refs = self.refs(name, scope, definition)
        if not refs:
            return [_Step(name, "called nowhere in this file", where)]
        return self.explain(name, refs, depth) or [_Step(name, "not called on the way", where)]

    def _scope_of(self, node: ast.AST) -> ast.AST:
        """The function a nested definition is local to, else the module."""
        return next((p for _, p in self.ancestors(node) if isinstance(p, ast.FunctionDef | ast.AsyncFunctionDef)),
                    self.tree)

    def _is_called(self, ref: ast.Name) -> bool:
        """`name(...)` or `name.method(...)` (`Fn.apply(...)`)."""
        node: ast.AST = ref
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Attribute):
            node, parent = parent, self.parents.get(id(parent))
        return isinstance(parent, ast.Call) and parent.func is node

    def _passed_to(self, lam: ast.Lambda) -> str:
        call = self.parents.get(id(lam))
        if isinstance(call, ast.Call) and lam in call.args:
            return f" passed to `{_short(ast.unparse(call.func), 30)}`"
        return ""


def _name_range(definition: ast.AST) -> Range:
    """A definition's first line (a def's or class's header, an assignment)."""
    return Range.lines(getattr(definition, "lineno", 1) - 1)


def _in(node: ast.AST, block: list[ast.stmt]) -> bool:
    return any(s is node for s in block)


def _is_autograd(cls: ast.ClassDef) -> bool:
    return any(ast.unparse(b).endswith("Function") for b in cls.bases)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
