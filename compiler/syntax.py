"""`parse`: `ast.parse` behind one process-wide lock.

Python 3.11's ast module is not thread-safe: turning the C parse tree into Python objects keeps its
recursion depth in interpreter-wide state, so two threads parsing at once (the language server parses
documents in a thread while its event loop parses generated code for a hover) can fail with "SystemError:
AST constructor recursion depth mismatch". Every parse in `compiler` and `helion_ls` goes through here.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    with _LOCK:
        return ast.parse(source, filename, mode)
