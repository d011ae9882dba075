"""Reading a generated module's source map: (generated line, kernel source range) pairs, zero-based lines.

Each statement has its own range first, then the ranges of values written inline into it; a loop's
statements carry the whole loop's range. So a source line is looked up among the ranges that hold it
spanning the fewest lines (the statement on that line, not the loop around it) and, of those, the widest
(the whole statement, not a sub-expression the generated code names on a line of its own, nor a line
about an access, which maps to the access's start only); a generated line goes back to its first range. The editor's generated view (vscode-client/src/generatedUri.ts) follows the
same rules.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..support.diagnostics import Range


def _rank(rng: Range) -> tuple[int, int]:
    """Fewest lines first, then the widest on its line."""
    return (rng.end.line - rng.start.line, rng.start.character - rng.end.character)


def generated_line(source_map: Sequence[tuple[int, Range]], source_line: int) -> int | None:
    """The generated line of the code from `source_line`: of the ranges holding it, the one spanning the
    fewest lines and then the widest (the first such generated line), else the closest range starting
    above it; None for an empty map."""
    holding = [(_rank(rng), line) for line, rng in source_map if rng.start.line <= source_line <= rng.end.line]
    if holding:
        return min(holding)[1]
    above = [(rng.start.line, -line) for line, rng in source_map if rng.start.line <= source_line]
    return -max(above)[1] if above else None


def source_range(source_map: Sequence[tuple[int, Range]], line: int) -> Range | None:
    """The kernel source that generated line `line` comes from (its statement's own range)."""
    return next((rng for gen, rng in source_map if gen == line), None)
