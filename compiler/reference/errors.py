"""The one exception type the eager reference raises, carrying the kernel source line."""

from __future__ import annotations

from types import TracebackType


class ReferenceRunError(Exception):
    """The user's module or kernel failed while running eagerly.

    `line` is 1-based in the kernel source (None when unknown); `kernel` names the kernel being run.
    The original exception is chained as `__cause__`.
    """

    def __init__(self, message: str, line: int | None = None, kernel: str | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.kernel = kernel


def deepest_line(tb: TracebackType | None, filename: str) -> int | None:
    """The innermost traceback line that lies in `filename` (the user's module)."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def describe(exc: BaseException, source_lines: list[str], line: int | None, kernel: str | None) -> str:
    """`kernel 'add', line 12: RuntimeError: ...` plus the offending source line."""
    where = []
    if kernel is not None:
        where.append(f"kernel {kernel!r}")
    if line is not None:
        where.append(f"line {line}")
    head = ", ".join(where)
    text = f"{type(exc).__name__}: {exc}"
    message = f"{head}: {text}" if head else text
    if line is not None and 0 < line <= len(source_lines):
        message += f"\n    {source_lines[line - 1].strip()}"
    return message
