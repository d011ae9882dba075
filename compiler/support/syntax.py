"""`parse`: `ast.parse` behind one process-wide lock.

Python 3.11's ast module is not thread-safe: turning the C parse tree into Python objects keeps its
recursion depth in interpreter-wide state, so two threads parsing at once (the language server parses
documents in a thread while its event loop parses generated code for a hover) can fail with "SystemError:
AST constructor recursion depth mismatch". The same error also comes without a second thread (CPython
gh-106905: the check counts depths that code run during the conversion, a garbage-collected object's
finalizer, can shift; seen in CI on 3.11.7), so a parse that fails with it is done once more: parsing is
deterministic, and the error says nothing about the source. Every parse in `compiler` and `helion_ls`
goes through here.
`error_range` is where a `SyntaxError` points, as a diagnostic range.
"""

from __future__ import annotations

import ast
import threading

from .diagnostics import Position, Range

_LOCK = threading.Lock()


_SPURIOUS = "AST constructor recursion depth mismatch"


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    with _LOCK:
        try:
            return ast.parse(source, filename, mode)
        except SystemError as exc:
            if _SPURIOUS not in str(exc):
                raise
            return ast.parse(source, filename, mode)


def error_range(exc: SyntaxError) -> Range:
    """The zero-based range a syntax error points at (at least one character)."""
    line = max(0, (exc.lineno or 1) - 1)
    col = max(0, (exc.offset or 1) - 1)
    end_line = max(line, (exc.end_lineno or exc.lineno or 1) - 1)
    end_col = max(col + 1, (exc.end_offset or col + 2) - 1) if end_line == line else (exc.end_offset or 1) - 1
    return Range(Position(line, col), Position(end_line, end_col))
