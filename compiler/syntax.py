"""`parse`: `ast.parse` behind one process-wide lock.

Python 3.11's ast module is not thread-safe: turning the C parse tree into Python objects keeps its
recursion depth in interpreter-wide state, so two threads parsing at once (the language server parses
documents in a thread while its event loop parses generated code for a hover) can fail with "SystemError:
AST constructor recursion depth mismatch". Every parse in `compiler` and `helion_ls` goes through here.
`error_range` is where a `SyntaxError` points, as a diagnostic range.
"""

from __future__ import annotations

import ast
import threading

from .diagnostics import Position, Range

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    with _LOCK:
        return ast.parse(source, filename, mode)


def error_range(exc: SyntaxError) -> Range:
    """The zero-based range a syntax error points at (at least one character)."""
    line = max(0, (exc.lineno or 1) - 1)
    col = max(0, (exc.offset or 1) - 1)
    end_line = max(line, (exc.end_lineno or exc.lineno or 1) - 1)
    end_col = max(col + 1, (exc.end_offset or col + 2) - 1) if end_line == line else (exc.end_offset or 1) - 1
    return Range(Position(line, col), Position(end_line, end_col))
