"""Where the lines of an analysed module are shown: one file, or the code cells of a notebook.

The analyzer works on one module text per document: a file's text, or a notebook's code cells joined in
order (compiler.frontend.notebook). A `Layout` says which client document shows each module line — the file itself,
or a cell, by the cell's own URI — and at which line there. A cell line and its module line hold the same
text (lines the module blanks are never pointed at), so columns need no mapping and the client's position
encoding is converted with the module's lines. Every position a feature publishes or receives goes through a
`Layout` (`location`, `range`, `position`, `edit_range`), so the features are written once for files and
notebooks alike, and every feature also takes a cell's URI where a document's URI is expected.

Published diagnostics take the plain-JSON forms (`range_json`, standard library only: early.py composes
them before the server's imports are done); lsprotocol is imported only by the methods that return its types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compiler.frontend.notebook import NotebookModule
from compiler.support.diagnostics import Position, Range

from .lsp_json import UTF16, position_json

if TYPE_CHECKING:
    from lsprotocol import types


@dataclass(frozen=True)
class Part:
    """One client document showing module lines `first_line` .. `first_line + line_count - 1`."""

    uri: str
    first_line: int
    line_count: int
    version: int | None  # the client's version of that document (edits name it)


@dataclass(frozen=True, eq=False)
class Layout:
    uri: str  # the document analysed: the file, or the notebook
    lines: list[str]  # the module's lines (keepends)
    parts: tuple[Part, ...]
    blanked: frozenset[int] = frozenset()  # module lines that hold a magic in their cell: never pointed at

    @staticmethod
    def file(uri: str, version: int | None, text: str) -> Layout:
        lines = text.splitlines(keepends=True)
        return Layout(uri, lines, (Part(uri, 0, len(lines) + 1, version),))

    @staticmethod
    def notebook(uri: str, module: NotebookModule, versions: Mapping[str, int | None]) -> Layout:
        """The layout of a notebook whose cells' keys are the cells' URIs."""
        parts = tuple(
            Part(cell.key or "", cell.first_line, cell.line_count, versions.get(cell.key or ""))
            for cell in module.cells
        )
        lines = [line + "\n" for line in module.text.split("\n")]  # the cells' lines, joined by "\n" only
        return Layout(uri, lines, parts, module.blanked)

    def part(self, uri: str) -> Part | None:
        return next((p for p in self.parts if p.uri == uri), None)

    def locate(self, line: int) -> tuple[Part, int]:
        """The part showing module line `line` and the line's number there (lines past the end: the last part)."""
        if not self.parts:
            return Part(self.uri, 0, 0, None), line
        for part in self.parts:
            if line < part.first_line + part.line_count:
                return part, max(0, line - part.first_line)
        last = self.parts[-1]
        return last, line - last.first_line

    def _client_position(self, pos: Position, encoding: str) -> tuple[Part, dict[str, int]]:
        part, line = self.locate(pos.line)
        return part, {"line": line, "character": position_json(pos, self.lines, encoding)["character"]}

    def range_json(self, rng: Range, encoding: str = UTF16) -> tuple[str, dict[str, Any]]:
        """(client document, LSP range there as JSON); a range running past its start's cell ends with that
        cell, and one that starts on a magic's line (a whole-file diagnostic on line 0) is put on the next
        line of code."""
        rng = self._off_magics(rng)
        part, start = self._client_position(rng.start, encoding)
        end_part, end = self._client_position(rng.end, encoding)
        if end_part is not part:
            last = part.first_line + part.line_count - 1
            text = self.lines[last].rstrip("\r\n") if 0 <= last < len(self.lines) else ""
            at = position_json(Position(last, len(text.encode())), self.lines, encoding)
            end = {"line": part.line_count - 1, "character": at["character"]}
        return part.uri, {"start": start, "end": end}

    def range(self, rng: Range, encoding: str = UTF16) -> tuple[str, types.Range]:
        """`range_json` as lsprotocol's types."""
        from lsprotocol import types

        uri, found = self.range_json(rng, encoding)
        return uri, types.Range(start=types.Position(**found["start"]), end=types.Position(**found["end"]))

    def _off_magics(self, rng: Range) -> Range:
        line = rng.start.line
        if line not in self.blanked:
            return rng
        code = next((i for i in range(line, len(self.lines)) if i not in self.blanked and self.lines[i].strip()), None)
        if code is None:
            return rng
        return Range(Position(code, 0), Position(code, len(self.lines[code].rstrip("\r\n").encode())))

    def location(self, rng: Range, encoding: str = UTF16) -> types.Location:
        from lsprotocol import types

        uri, client_range = self.range(rng, encoding)
        return types.Location(uri=uri, range=client_range)

    def position(self, uri: str, pos: types.Position, encoding: str = UTF16) -> Position | None:
        """The module position of a client position in document `uri` (None: not one of this layout's)."""
        from lsprotocol import types

        from .lsp import from_lsp_position

        part = self.part(uri)
        if part is None:
            return None
        moved = types.Position(line=part.first_line + pos.line, character=pos.character)
        return from_lsp_position(moved, self.lines, encoding)

    def edit_range(self, text: str, start: int, end: int, encoding: str = UTF16) -> tuple[Part, types.Range]:
        """The client document and range of code-point offsets `start`..`end` of the module `text`; raises
        ValueError for a span that crosses documents (no edit of ours does)."""
        from lsprotocol import types

        from .lsp import offset_to_lsp

        first, last = offset_to_lsp(text, start, encoding), offset_to_lsp(text, end, encoding)
        part, line = self.locate(first.line)
        end_part, end_line = self.locate(last.line)
        if end_part is not part:
            raise ValueError("the edit spans two cells")
        return part, types.Range(
            start=types.Position(line=line, character=first.character),
            end=types.Position(line=end_line, character=last.character),
        )
