"""Jupyter notebooks as one module: the code cells in order, IPython-only lines blanked in place.

A notebook runs its code cells top to bottom in one namespace, so a kernel defined in one cell and called in
a later one is one module's kernel and call. `notebook_module(cells)` joins the cells' texts into that
module's text line for line (each cell starts on a new line), so every module line is one line of one cell
and positions map back with `NotebookModule.locate`. What Python cannot parse is blanked where it stands,
keeping its line: line magics (`%pip install ...`), shell lines (`!ls`, `files = !ls`), help (`obj?`) and
whole cell-magic cells (`%%time`); an indented one becomes `pass`, so its block still parses. A line that
only looks like one (`% n)` continuing a bracket, a line of a string) is kept. A cell that still does not
parse on its own is blanked too and its syntax error reported on its own line, so one broken cell does not
hide the other cells' kernels (IPython also compiles each cell on its own).

`read_notebook(text)` reads an .ipynb (JSON, nbformat 4) into such a module; cells keep their index among
all the notebook's cells (markdown included), which `describe` shows 1-based: `cell 3:12:5`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass

from ..support.diagnostics import Diagnostic, Position, Range, error
from ..support.syntax import error_range, parse

MAGIC = re.compile(r"^\s*[%!]")  # `%pip install x`, `!ls`
MAGIC_ASSIGN = re.compile(r"^\s*[A-Za-z_][\w.]*\s*=\s*[%!]")  # `files = !ls`, `t = %timeit -o f()`
HELP = re.compile(r"^\s*\?{0,2}[A-Za-z_][\w.]*\?{0,2}\s*$")  # `obj?`, `??obj` (checked to hold a `?`)
PYTHON = ("python", "python3", "ipython", "ipython3")
LINE_BREAK = re.compile(r"\r\n|\r|\n")  # what ends a line for Python and for LSP (not \f, \v, \x85, ...)
# Bounds on the work done per cell and per notebook (an editor rebuilds the module on its event loop at each
# edit): a larger cell is kept as written, unblanked and unchecked, and so is every cell of a larger notebook
# (whose module compiler.load refuses as too large anyway).
MAX_CELL_CHARS = 100_000
MAX_NOTEBOOK_CHARS = 5_000_000


@dataclass(frozen=True)
class Cell:
    """Where one code cell sits in the module text."""

    index: int  # position among the notebook's cells (all kinds), from 0
    key: str | None  # the cell's id in the .ipynb, or the editor's URI for the cell
    first_line: int  # zero-based module line of the cell's first line
    line_count: int


@dataclass(frozen=True)
class NotebookModule:
    text: str
    cells: tuple[Cell, ...]
    blanked: frozenset[int]  # module lines that hold IPython syntax in their cell (nothing may point there)
    diagnostics: tuple[Diagnostic, ...]  # syntax errors of cells that do not parse, in module lines

    def locate(self, line: int) -> tuple[Cell, int] | None:
        """The cell holding module line `line` and the line's zero-based number in that cell."""
        for cell in self.cells:
            if cell.first_line <= line < cell.first_line + cell.line_count:
                return cell, line - cell.first_line
        return None

    def line_label(self, line: int) -> str:
        """`cell 3:12` (1-based cell and line) for a module line."""
        found = self.locate(line)
        if found is None:
            return f"{line + 1}"
        cell, at = found
        return f"cell {cell.index + 1}:{at + 1}"

    def describe(self, pos: Position) -> str:
        """`cell 3:12:5` (1-based cell, line and column) for a module position."""
        return f"{self.line_label(pos.line)}:{pos.character + 1}"


def notebook_module(cells: Iterable[tuple[int, str | None, str]]) -> NotebookModule:
    """The module of code cells given as (index, key, text), in notebook order."""
    parts: list[str] = []
    spans: list[Cell] = []
    blanked: set[int] = set()
    diagnostics: list[Diagnostic] = []
    first = 0
    cells = list(cells)
    raw = sum(len(text) for _, _, text in cells) > MAX_NOTEBOOK_CHARS
    for index, key, text in cells:
        if raw or len(text) > MAX_CELL_CHARS:
            kept, magic, problem = tuple(LINE_BREAK.split(text)), frozenset(), None
        else:
            kept, magic, problem = _python_of(text)
        if problem is not None:
            diagnostics.append(_shifted(problem, first))
        blanked.update(first + i for i in magic)
        spans.append(Cell(index, key, first, len(kept)))
        parts.extend(kept)
        first += len(kept)
    text = "\n".join(parts) + "\n" if parts else ""
    return NotebookModule(text, tuple(spans), frozenset(blanked), tuple(diagnostics))


@functools.lru_cache(maxsize=512)
def _python_of(text: str) -> tuple[tuple[str, ...], frozenset[int], Diagnostic | None]:
    """One cell's lines as the module holds them, which were blanked, and its syntax error (in cell lines).
    Remembered by text: an editor rebuilds the module on every edit, and most cells did not change."""
    lines = LINE_BREAK.split(text)  # as editors count lines: "x\n" is two, the second empty
    kept, magic = _blank_ipython(lines)
    problem = _cell_problem("\n".join(kept) + "\n")
    if problem is not None:  # left out of the module, but its lines are its own: its error is shown there
        return ("",) * len(lines), frozenset(), problem
    return tuple(kept), frozenset(magic), None


class NotebookError(ValueError):
    """The file is not a notebook this reader understands (not JSON, not nbformat 4)."""


def read_notebook(text: str) -> NotebookModule:
    """The module of an .ipynb's code cells (a notebook in another language than Python has none)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise NotebookError(f"not a Jupyter notebook: the file is not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise NotebookError("not a Jupyter notebook: no 'cells' list")
    if doc.get("nbformat") != 4:
        raise NotebookError(f"nbformat {doc.get('nbformat')!r} notebooks are not supported (only nbformat 4)")
    if not _is_python(doc.get("metadata")):
        return notebook_module([])
    cells = []
    for index, cell in enumerate(doc["cells"]):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            source = cell.get("source")
            text = "".join(s for s in source if isinstance(s, str)) if isinstance(source, list) else source
            text = text if isinstance(text, str) else ""
            key = cell.get("id") if isinstance(cell.get("id"), str) else None
            cells.append((index, key, text))
    return notebook_module(cells)


def _is_python(metadata: object) -> bool:
    """The notebook's kernel language is Python (or the notebook does not say)."""
    if not isinstance(metadata, dict):
        return True
    for section, field in (("language_info", "name"), ("kernelspec", "language")):
        value = metadata.get(section)
        if isinstance(value, dict) and isinstance(value.get(field), str):
            return value[field].lower() in PYTHON
    return True


def _blank_ipython(lines: list[str]) -> tuple[list[str], set[int]]:
    """The cell's lines with IPython syntax blanked, and which lines were."""
    first_code = next((line for line in lines if line.strip()), "")
    if first_code.startswith("%%"):  # a cell magic: the whole cell is the magic's input, not Python
        return [""] * len(lines), set(range(len(lines)))
    if not any(_looks_like_ipython(line) for line in lines):
        return list(lines), set()
    return _Blanker(lines).run()


class _Blanker:
    """One tokenize pass over the cell that blanks a line looking like IPython syntax only where a logical line
    starts (not inside brackets, a multi-line string, or after a backslash: `% n)` there is Python). The
    tokenizer reads the lines one by one as blanked so far, so what it sees is the final text."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.kept: list[str] = []
        self.blanked: set[int] = set()
        self.fresh = True  # the next line starts a logical line
        self.depth = 0

    def readline(self) -> str:
        i = len(self.kept)
        if i >= len(self.lines):
            return ""
        line = self.lines[i]
        if self.fresh and _looks_like_ipython(line):
            line = _blank(line)
            self.blanked.add(i)
        self.kept.append(line)
        return line + "\n"

    def run(self) -> tuple[list[str], set[int]]:
        try:
            for tok in tokenize.generate_tokens(self.readline):
                if tok.type == tokenize.OP and tok.string in ("(", "[", "{"):
                    self.depth += 1
                elif tok.type == tokenize.OP and tok.string in (")", "]", "}"):
                    self.depth = max(0, self.depth - 1)
                # Read before the next line is: a line end outside brackets starts a logical line.
                self.fresh = tok.type in (tokenize.NEWLINE, tokenize.NL) and self.depth == 0
        except (tokenize.TokenError, SyntaxError):
            pass  # a cell that does not tokenize does not parse either: its lines are kept, its parse says why
        self.kept.extend(self.lines[len(self.kept):])
        return self.kept, self.blanked


def _looks_like_ipython(line: str) -> bool:
    if MAGIC.match(line) or MAGIC_ASSIGN.match(line):
        return True
    return "?" in line and HELP.match(line) is not None


def _blank(line: str) -> str:
    indent = line[: len(line) - len(line.lstrip())]
    return f"{indent}pass" if indent else ""


def _cell_problem(text: str) -> Diagnostic | None:
    """The cell's syntax error, if it has one."""
    try:
        parse(text)
    except SyntaxError as exc:
        return error("HPL100", f"syntax error: {exc.msg}", error_range(exc))
    except (ValueError, RecursionError, MemoryError) as exc:
        return error("HPL100", f"cannot parse this cell: {exc}", Range.lines(0))
    return None


def _shifted(diag: Diagnostic, lines: int) -> Diagnostic:
    start, end = diag.range.start, diag.range.end
    moved = Range(Position(start.line + lines, start.character), Position(end.line + lines, end.character))
    return dataclasses.replace(diag, range=moved)
