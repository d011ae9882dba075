"""Shared pieces of module emission: output lines with a source map, readable unique names, and the
decision of which values get a name and which are inlined into their single use."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..ir.tile_ir import InnerLoop, Load, Node, Op, Return, Store, TileDim, Value, bound_values, flat
from ..support.diagnostics import Range
from .exprs import ExprWriter
from .plan_builder import py_name

RESERVED = {"jax", "jnp", "pl", "pltpu", "functools", "interpret", "lambda", "def", "return", "for", "in",
            "range", "carry", "None", "True", "False", "min", "max"}


@dataclass
class Output:
    """Generated lines and their source map: (generated line, source range) for each statement, its own
    range first, then the ranges of the values written inline into it (`inlined`, gathered while its text
    is built), so every source line whose code ends up in a statement finds that statement."""

    lines: list[str] = field(default_factory=list)
    source_map: list[tuple[int, Range]] = field(default_factory=list)
    line_label: Callable[[int], str] = lambda line: f"kernel.py:{line + 1}"  # a source line, for comments
    inlined: list[Range] = field(default_factory=list)

    def add(self, indent: int, text: str, rng: Range | None = None) -> None:
        for i, part in enumerate(text.split("\n")):
            line = "    " * indent + part
            if rng is not None and i == 0:
                line += f"  # {self.line_label(rng.start.line)}"
                self.source_map.append((len(self.lines), rng))
                for other in dict.fromkeys(self.inlined):
                    if other != rng:
                        self.source_map.append((len(self.lines), other))
            self.lines.append(line)
        self.inlined.clear()

    def insert(self, at: int, indent: int, text: str) -> None:
        """One line written before line `at` (a read hoisted out of a loop already begun); the source map of
        the lines after it moves with them."""
        self.source_map[:] = [(line + (line >= at), rng) for line, rng in self.source_map]
        self.lines.insert(at, "    " * indent + text)


def about(rng: Range) -> Range:
    """The source-map range of a line about an access rather than the access itself (its BlockSpec, the
    copy-in of its block's old contents): the access's start, so a lookup of that source line prefers the
    statement that does the access (compiler/codegen/source_map.py ranks wider ranges first) and Go to Source still
    lands on it."""
    return Range(rng.start, rng.start)


class Names:
    """Readable, unique Python names for values (the user's variable names where possible)."""

    def __init__(self, reserved: set[str]):
        self.used = set(reserved)
        self.of: dict[int, str] = {}

    def fresh(self, hint: str) -> str:
        base = py_name(hint)
        if base in RESERVED:
            base += "_"
        name, i = base, 1
        while name in self.used:
            name = f"{base}_{i}"
            i += 1
        self.used.add(name)
        return name

    def bind(self, v: Value, name: str) -> None:
        self.of[v.id] = name


def value_uses(nodes: list[Node]) -> dict[int, list[tuple[list[Node], int]]]:
    """value id -> [(region, position)] of every use."""
    uses: dict[int, list] = {}

    def visit(region: list[Node]) -> None:
        for i, n in enumerate(region):
            vals = []
            if isinstance(n, Op):
                vals = [a for a in flat(n.args) if isinstance(a, Value)]
            elif isinstance(n, Load):
                vals = index_values(n.index)
            elif isinstance(n, Store):
                vals = [n.value, *index_values(n.index), *([n.pred] if n.pred is not None else [])]
            elif isinstance(n, InnerLoop):
                for v in bound_values(n):  # read by the trip count and in the body: always named
                    uses.setdefault(v.id, []).extend([(region, i), (region, i)])
                for c in n.carried:
                    uses.setdefault(c.init.id, []).append((None, -1))
                    if c.next is not None:
                        uses.setdefault(c.next.id, []).append((None, -1))
                visit(n.body)
            elif isinstance(n, Return):
                vals = [v for v in n.values if isinstance(v, Value)]
            for v in vals:
                uses.setdefault(v.id, []).append((region, i))

    visit(nodes)
    return uses


def index_values(items: tuple) -> list[Value]:
    """Device values an access's index items read (computed positions, window starts, index tensors)."""
    return [it[1] for it in items if it[0] in ("scalar", "window", "gather") and isinstance(it[1], Value)]


class RegionWriter:
    """Shared logic: decide which values get names and which are inlined into their single use."""

    def __init__(self, nodes: list[Node], names: Names, out: Output):
        self.names = names
        self.out = out
        self.uses = value_uses(nodes)
        self.inline: dict[int, Node] = {}
        self.writer = ExprWriter(self.ref, self.tile_begin)
        self._plan_inlining(nodes)

    def _plan_inlining(self, nodes: list[Node]) -> None:
        def visit(region: list[Node]) -> None:
            stores_at = [i for i, n in enumerate(region) if isinstance(n, Store)]
            for i, n in enumerate(region):
                if isinstance(n, InnerLoop):
                    visit(n.body)
                    continue
                if isinstance(n, Op) and len(n.outputs()) == 1 or isinstance(n, Load):
                    v = n.out if isinstance(n, Load) else n.outputs()[0]
                    u = self.uses.get(v.id, [])
                    if v.hint is None and len(u) == 1 and u[0][0] is region:
                        j = u[0][1]
                        if isinstance(n, Load) and any(i < s < j for s in stores_at):
                            continue
                        self.inline[v.id] = n

        visit(nodes)

    def name_of(self, v: Value) -> str:
        name = self.names.of.get(v.id)
        if name is None:
            name = self.names.fresh(v.hint or "t")
            self.names.bind(v, name)
        return name

    def ref(self, v: Value) -> tuple[str, bool]:
        node = self.inline.get(v.id)
        if node is not None:
            self.out.inlined.append(node.range)
            return self.expr(node)
        return self.name_of(v), True

    def expr(self, node: Node) -> tuple[str, bool]:
        if isinstance(node, Op):
            return self.writer.op(node)
        if isinstance(node, Load):
            return self.load_expr(node), True
        raise AssertionError(node)

    def define(self, indent: int, node: Op | Load) -> None:
        outs = node.outputs() if isinstance(node, Op) else (node.out,)
        if len(outs) == 1 and outs[0].id in self.inline:
            return
        if not any(v.id in self.uses for v in outs) and isinstance(node, Op) and node.kind != "alloc":
            # an unused result (e.g. the indices of torch.max): skip it
            return
        text, _ = self.expr(node) if len(outs) == 1 else (self.writer.op(node)[0], True)
        targets = ", ".join(self.name_of(v) for v in outs)
        self.out.add(indent, f"{targets} = {text}", node.range)

    def load_expr(self, node: Load) -> str:
        raise NotImplementedError

    def tile_begin(self, dim: TileDim, as_id: bool = False, first: bool = False) -> str:
        raise NotImplementedError
