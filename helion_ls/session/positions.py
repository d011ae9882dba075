"""Map positions between two texts of the same kernel.

Compile results are cached by the kernel's *normalised* source hash, so a result computed on one text is
reused after edits that move the kernel or change its comments and whitespace. Its ranges (diagnostics,
plan accesses, source map) are in the coordinates of the text it was computed on; this module pairs up
the two kernels' AST nodes and translates positions both ways. Positions are compiler coordinates:
zero-based lines, UTF-8 byte columns (what `ast` reports).
"""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass, field

from compiler import parse_python
from compiler.support.diagnostics import Position, Range


@dataclass(frozen=True, eq=False)
class KernelSource:
    """One kernel as it appears in one text, reduced to what mapping needs (no AST is kept).

    Cached results hold one of these each; plain strings and int tuples keep them cheap for the garbage
    collector. Compared by identity.
    """

    segment: str  # the text of the kernel's lines, decorators included
    first_line: int  # zero-based line of the first decorator (or of the def)
    def_line: int  # zero-based line of `def`
    structure: str  # AST dump (no positions) of the signature and body: equal means mappable
    spans: tuple[int, ...]  # per node of the signature and body, in walk order: line, col, end line, end col

    @staticmethod
    def of(node: ast.FunctionDef, lines: list[str]) -> KernelSource:
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
        last = (node.end_lineno or node.lineno) - 1
        parts = _parts(node)
        spans: list[int] = []
        for part in parts:
            for n in ast.walk(part):
                if hasattr(n, "lineno"):
                    end_line = getattr(n, "end_lineno", None)
                    end_col = getattr(n, "end_col_offset", None)
                    spans += [
                        n.lineno - 1,
                        n.col_offset,
                        -1 if end_line is None else end_line - 1,
                        end_col or 0,
                    ]
                else:
                    spans += [-1, -1, -1, -1]
        segment = "".join(lines[first : last + 1])
        try:
            structure = "\n".join(ast.dump(p) for p in parts)
        except RecursionError:  # nested too deep to dump (the compiler says so): map only the same text
            structure = segment
        return KernelSource(segment, first, node.lineno - 1, structure, tuple(spans))

    @staticmethod
    def from_text(segment: str, first_line: int) -> KernelSource | None:
        """The kernel whose text (decorators to the end of its body) is `segment`, at zero-based line
        `first_line` of its file; None when it does not parse as one function."""
        try:
            tree = parse_python(segment)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
            return None
        ast.increment_lineno(tree, first_line)
        return KernelSource.of(tree.body[0], [""] * first_line + segment.splitlines(keepends=True))

    def moved(self, first_line: int) -> KernelSource:
        """The same text starting at another line."""
        delta = first_line - self.first_line
        spans = tuple(v + delta if i % 2 == 0 and v >= 0 else v for i, v in enumerate(self.spans))
        return KernelSource(self.segment, first_line, self.def_line + delta, self.structure, spans)


def _parts(node: ast.FunctionDef) -> list[ast.AST]:
    """What the normalised hash covers and results point into: signature and body (not decorators)."""
    return [node.args, *([node.returns] if node.returns else []), *node.body]


@dataclass
class _Table:
    """Exact node positions old -> new, plus a line table for everything in between."""

    exact: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    lines: dict[int, int] = field(default_factory=dict)
    sorted_lines: list[int] = field(default_factory=list)

    def add(self, old: tuple[int, int], new: tuple[int, int]) -> None:
        self.exact.setdefault(old, new)
        self.lines.setdefault(old[0], new[0])

    def freeze(self) -> None:
        self.sorted_lines = sorted(self.lines)

    def map(self, pos: Position) -> Position:
        hit = self.exact.get((pos.line, pos.character))
        if hit is not None:
            return Position(*hit)
        line = self.lines.get(pos.line)
        if line is not None:
            return Position(line, pos.character)
        i = bisect.bisect_right(self.sorted_lines, pos.line) - 1
        anchor = self.sorted_lines[max(i, 0)]
        return Position(pos.line - anchor + self.lines[anchor], pos.character)


class PositionMap:
    """Translates positions in the `old` kernel text to the `new` one (`forward`) and back (`backward`)."""

    def __init__(self, forward: _Table | int, backward: _Table | int):
        self._fwd = forward
        self._bwd = backward

    @staticmethod
    def between(old: KernelSource, new: KernelSource) -> PositionMap | None:
        """None when the kernels differ in structure (the cached result must not be reused)."""
        if old.segment == new.segment:
            delta = new.first_line - old.first_line
            return PositionMap(delta, -delta)
        if old.structure != new.structure or len(old.spans) != len(new.spans):
            return None
        fwd, bwd = _Table(), _Table()
        for a, b in (((old.first_line, 0), (new.first_line, 0)), ((old.def_line, 0), (new.def_line, 0))):
            fwd.add(a, b)
            bwd.add(b, a)
        o, n = old.spans, new.spans
        for i in range(0, len(o), 4):
            if o[i] < 0 or n[i] < 0:
                continue
            fwd.add((o[i], o[i + 1]), (n[i], n[i + 1]))
            bwd.add((n[i], n[i + 1]), (o[i], o[i + 1]))
            if o[i + 2] >= 0 and n[i + 2] >= 0:
                fwd.add((o[i + 2], o[i + 3]), (n[i + 2], n[i + 3]))
                bwd.add((n[i + 2], n[i + 3]), (o[i + 2], o[i + 3]))
        fwd.freeze()
        bwd.freeze()
        return PositionMap(fwd, bwd)

    @property
    def is_identity(self) -> bool:
        return self._fwd == 0

    @staticmethod
    def _apply(table: _Table | int, pos: Position) -> Position:
        if isinstance(table, int):
            return Position(pos.line + table, pos.character) if table else pos
        return table.map(pos)

    def forward(self, pos: Position) -> Position:
        return self._apply(self._fwd, pos)

    def backward(self, pos: Position) -> Position:
        return self._apply(self._bwd, pos)

    def forward_range(self, rng: Range) -> Range:
        return Range(self.forward(rng.start), self.forward(rng.end))
