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

from compiler.diagnostics import Position, Range


@dataclass(frozen=True)
class KernelSource:
    """One kernel as it appears in one text: the function node (with decorators) and its lines."""

    node: ast.FunctionDef
    segment: str  # the text of the kernel's lines, decorators included
    first_line: int  # zero-based line of the first decorator (or of the def)

    @staticmethod
    def of(node: ast.FunctionDef, lines: list[str]) -> KernelSource:
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
        last = (node.end_lineno or node.lineno) - 1
        return KernelSource(node, "".join(lines[first : last + 1]), first)


def _parts(node: ast.FunctionDef) -> list[ast.AST]:
    """What the normalised hash covers and results point into: signature and body (not decorators)."""
    return [node.args, *([node.returns] if node.returns else []), *node.body]


def _same_structure(a: ast.FunctionDef, b: ast.FunctionDef) -> bool:
    pa, pb = _parts(a), _parts(b)
    return len(pa) == len(pb) and all(ast.dump(x) == ast.dump(y) for x, y in zip(pa, pb, strict=True))


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
        if not _same_structure(old.node, new.node):
            return None
        fwd, bwd = _Table(), _Table()
        fwd.add((old.first_line, 0), (new.first_line, 0))
        bwd.add((new.first_line, 0), (old.first_line, 0))
        fwd.add((old.node.lineno - 1, 0), (new.node.lineno - 1, 0))
        bwd.add((new.node.lineno - 1, 0), (old.node.lineno - 1, 0))
        for part_a, part_b in zip(_parts(old.node), _parts(new.node), strict=True):
            for a, b in zip(ast.walk(part_a), ast.walk(part_b), strict=True):
                if not hasattr(a, "lineno") or not hasattr(b, "lineno"):
                    continue
                starts = ((a.lineno - 1, a.col_offset), (b.lineno - 1, b.col_offset))
                fwd.add(*starts)
                bwd.add(starts[1], starts[0])
                if getattr(a, "end_lineno", None) is not None and getattr(b, "end_lineno", None) is not None:
                    ends = ((a.end_lineno - 1, a.end_col_offset), (b.end_lineno - 1, b.end_col_offset))
                    fwd.add(*ends)
                    bwd.add(ends[1], ends[0])
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

    def backward_range(self, rng: Range) -> Range:
        return Range(self.backward(rng.start), self.backward(rng.end))
