"""Text helpers shared by the lowering and libtpu checks: trimming error messages and reading MLIR locations.

MLIR printed with debug info ends each op with `loc(#locN)` and defines the aliases at the bottom, e.g.
`#loc3 = loc("/path/mod.py":11:8 to :18)`, `#loc9 = loc(callsite(#loc5 at #loc6))`, `#loc13 = loc("get:"(#loc11))`.
Following an alias to its first file location gives the line of the generated module that produced the op.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NOISE = (
    "Please report a bug at",
    "[type.googleapis.com/",
    "See details at https://docs.jax.dev",
    "... additional diagnostics were skipped.",
)

_LOC_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$", re.M)
_FILE_LOC = re.compile(r'"([^"]+)":(\d+):(\d+)')
_TRAILING_LOC = re.compile(r"\s*loc\((?:#loc\d*|unknown)\)")


@dataclass(frozen=True)
class SourceLoc:
    """A place in a Python file: `line` is 1-based (Python/MLIR convention), `column` 0-based."""

    file: str
    line: int
    column: int = 0

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "column": self.column}


def trim_error(text: str, max_lines: int = 30, max_chars: int = 4000) -> str:
    """The message without boilerplate (bug-report links, serialized protos), capped in size."""
    lines = [ln.rstrip() for ln in text.strip().splitlines() if not any(n in ln for n in _NOISE)]
    while lines and not lines[-1]:
        lines.pop()
    out = "\n".join(lines[:max_lines])
    if len(lines) > max_lines:
        out += f"\n... ({len(lines) - max_lines} more lines)"
    return out if len(out) <= max_chars else out[:max_chars] + " ..."


def loc_aliases(mlir: str) -> dict[str, str]:
    """`#locN` -> the text inside its `loc(...)` definition."""
    return {m.group(1): m.group(2) for m in _LOC_DEF.finditer(mlir)}


def resolve_loc(loc: str, aliases: dict[str, str], _depth: int = 0) -> SourceLoc | None:
    """The first file location reachable from `loc` (an alias such as `#loc13` or an inline loc body).

    For `callsite(callee at caller)` the callee comes first, i.e. the innermost frame.
    """
    if _depth > 50:
        return None
    for token in re.finditer(r'"[^"]+":\d+:\d+|#loc\d*', loc):
        text = token.group(0)
        if text.startswith('"'):
            m = _FILE_LOC.match(text)
            return SourceLoc(m.group(1), int(m.group(2)), int(m.group(3)))
        if text in aliases and text != loc:
            found = resolve_loc(aliases[text], aliases, _depth + 1)
            if found is not None:
                return found
    return None


def op_loc(line: str, aliases: dict[str, str]) -> SourceLoc | None:
    """Location of the op printed on `line` (its trailing `loc(...)`)."""
    idx = line.rfind(" loc(")
    return resolve_loc(line[idx:], aliases) if idx >= 0 else None


def strip_locs(mlir: str) -> str:
    """MLIR text without location annotations (for reading)."""
    lines = [ln for ln in mlir.splitlines() if not ln.startswith("#loc")]
    return "\n".join(_TRAILING_LOC.sub("", ln) for ln in lines) + "\n"
