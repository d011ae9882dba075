"""One diagnostics model for every stage: parse, front end, IR, codegen, VMEM, lowering, libtpu.

Positions follow LSP conventions (zero-based line and character) so the language server can publish
them unchanged. Codes are stable; `CODES` documents each one.
"""

from __future__ import annotations

import ast
import enum
import functools
from dataclasses import dataclass, field


class Severity(enum.IntEnum):
    """LSP severities (same numbers as the protocol)."""

    ERROR = 1
    WARNING = 2
    INFORMATION = 3
    HINT = 4


@dataclass(frozen=True, order=True)
class Position:
    line: int
    character: int

    def to_json(self) -> dict:
        return {"line": self.line, "character": self.character}


@dataclass(frozen=True, order=True)
class Range:
    start: Position
    end: Position

    @staticmethod
    def of(node: ast.AST, line_offset: int = 0) -> Range:
        """Range of an ast node (ast lines are 1-based; columns are UTF-8 byte offsets, close enough)."""
        lineno = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        end_lineno = getattr(node, "end_lineno", None) or lineno
        end_col = getattr(node, "end_col_offset", None)
        if end_col is None:
            end_col = col
        return _range(lineno - 1 + line_offset, col, end_lineno - 1 + line_offset, end_col)

    @staticmethod
    def lines(first: int, last: int | None = None, end_character: int = 0) -> Range:
        """A range from the start of zero-based line `first` to `end_character` on `last`."""
        return Range(Position(first, 0), Position(first if last is None else last, end_character))

    def contains(self, pos: Position) -> bool:
        return self.start <= pos <= self.end

    def to_json(self) -> dict:
        return {"start": self.start.to_json(), "end": self.end.to_json()}


ZERO_RANGE = Range(Position(0, 0), Position(0, 0))


@functools.lru_cache(maxsize=16384)  # the tracer asks for the ranges of the same nodes at every evaluation
def _range(line: int, character: int, end_line: int, end_character: int) -> Range:
    """A Range from its four numbers (immutable, so one object may serve every node at those positions)."""
    return Range(Position(line, character), Position(end_line, end_character))


@dataclass(frozen=True)
class Related:
    range: Range
    message: str


@dataclass(frozen=True)
class Fix:
    """A quick fix: replace `range` with `new_text` (one edit is enough for every fix we offer)."""

    title: str
    range: Range
    new_text: str


@dataclass(frozen=True)
class Diagnostic:
    severity: Severity
    range: Range
    code: str
    message: str
    related: tuple[Related, ...] = ()
    fix: Fix | None = None
    data: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_error(self) -> bool:
        return self.severity == Severity.ERROR

    def to_json(self) -> dict:
        out = {
            "severity": self.severity.name.lower(),
            "code": self.code,
            "message": self.message,
            "range": self.range.to_json(),
        }
        if self.related:
            out["related"] = [{"range": r.range.to_json(), "message": r.message} for r in self.related]
        if self.fix:
            out["fix"] = {"title": self.fix.title, "range": self.fix.range.to_json(), "new_text": self.fix.new_text}
        if self.data:
            out["data"] = self.data
        return out


def error(code: str, message: str, rng: Range, **kw) -> Diagnostic:
    return Diagnostic(Severity.ERROR, rng, code, message, **kw)


def warning(code: str, message: str, rng: Range, **kw) -> Diagnostic:
    return Diagnostic(Severity.WARNING, rng, code, message, **kw)


def hint(code: str, message: str, rng: Range, **kw) -> Diagnostic:
    return Diagnostic(Severity.INFORMATION, rng, code, message, **kw)


def internal_error(rng: Range, exc: BaseException | None = None) -> Diagnostic:
    """HPL900 for a compiler bug (the traceback goes to the log): what a caught internal exception becomes."""
    detail = f" ({type(exc).__name__}: {str(exc)[:200]})" if exc else ""
    return error("HPL900", f"internal compiler error{detail}; the traceback is in the log", rng)


class CompileError(Exception):
    """Raised by `Kernel.compile` when the kernel cannot be compiled; carries the diagnostics."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = list(diagnostics)
        first = next((d for d in self.diagnostics if d.is_error), None) or (
            self.diagnostics[0] if self.diagnostics else None
        )
        super().__init__(f"{first.code}: {first.message}" if first else "compile failed")


class UserError(Exception):
    """Internal signal: a problem in the user's kernel at `range`; turned into a Diagnostic."""

    def __init__(self, code: str, message: str, rng: Range | None = None, fix: Fix | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.range = rng
        self.fix = fix

    def diagnostic(self, fallback: Range) -> Diagnostic:
        return error(self.code, self.message, self.range or fallback, fix=self.fix)


class ArgRankError(UserError):
    """A tensor argument has another rank than the kernel unpacks from its size: the shape that gave the
    argument (a shape line) is where the diagnostic belongs, so the argument's name travels with it."""

    def __init__(self, arg: str, rank: int, unpacked: int, how: str, rng: Range):
        super().__init__("HPL105", f"`{arg}` is {rank}-D; the kernel unpacks {unpacked} dims from {how}", rng)
        self.arg, self.rank, self.unpacked, self.how = arg, rank, unpacked, how


# Stable codes. HPL1xx front end, HPL2xx TPU legality, HPL3xx VMEM, HPL4xx lowering/compile, HPL5xx perf hints,
# HPL9xx internal.
CODES: dict[str, str] = {
    "HPL100": "Python syntax error",
    "HPL101": "unsupported construct in a kernel",
    "HPL102": "unknown name",
    "HPL103": "wrong number or kind of arguments",
    "HPL104": "bad '# helion: args(...)' shape line",
    "HPL105": "shape or dtype error (broadcasting, promotion, indexing)",
    "HPL106": "a value that must be known at compile time is not",
    "HPL107": "kernel has no shape set: no shape line and no call with known arguments in the file (information, "
              "with a quick fix that adds a shape line)",
    "HPL108": "unsupported dtype",
    "HPL109": "bad config",
    "HPL110": "host code could not be evaluated",
    "HPL111": "tensor used in device code is not a kernel argument or host allocation",
    "HPL112": "finding kernel shapes from the file's own calls stopped at a limit (steps, sizes)",
    "HPL113": "an `assert` in the kernel's host code fails for these arguments",
    "HPL115": "a setting for another backend (a GPU's) is ignored on a TPU (information)",
    "HPL116": "a kernel defined only on one branch of a module-level `if` (information: which branch)",
    "HPL200": "block size is not TPU-legal (lane dim multiple of 128, sublane dim multiple of 8, or full)",
    "HPL201": "a sub-tile's block size must divide its grid tile's block",
    "HPL202": "index expression not supported on TPU",
    "HPL203": "dtype not supported by this chip",
    "HPL204": "a written tensor is accessed in an order the TPU pipeline cannot keep (another view or block, "
              "or a block revisited out of order)",
    "HPL205": "block size raised to the next TPU-legal size (the kernel computes the same thing)",
    "HPL210": "a partial tile's padding would reach a result and cannot be masked",
    "HPL300": "out of VMEM: buffers exceed the chip's VMEM capacity",
    "HPL301": "over the default scoped VMEM limit (the generated code raises vmem_limit_bytes)",
    "HPL302": "real TPU compile ran out of VMEM",
    "HPL303": "the kernel's arrays do not fit the chip's HBM",
    "HPL400": "Mosaic lowering failed",
    "HPL401": "libtpu compile failed",
    "HPL402": "libtpu is not installed: the real TPU compile was skipped",
    "HPL500": "performance hint: lane dimension below 128",
    "HPL501": "performance hint: resident operand pushes the kernel over the default VMEM limit",
    "HPL502": "performance hint: sublane dimension below the packed tile height",
    "HPL900": "internal compiler error",
}
