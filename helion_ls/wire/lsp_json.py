"""Compiler positions and diagnostics as LSP JSON, with the standard library only.

The compiler counts columns in UTF-8 bytes (what `ast` reports); LSP clients count in the negotiated
position encoding (UTF-16 unless the client offered another). Lines are needed to convert, so every
function takes the document's lines (diagnostics: its `Layout`, which also says which client document
shows each line). Plain dicts, no lsprotocol: published diagnostics are built here,
also before the server's own imports are done (see early.py); lsp.py has the lsprotocol forms. Each
diagnostic's code links to its entry in the diagnostics reference (docs/diagnostics.md) as `codeDescription`.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Protocol

from compiler.support.diagnostics import Diagnostic, Position, Range

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"


def units(text: str, encoding: str) -> int:
    """Length of `text` in the encoding's code units."""
    if encoding == UTF8:
        return len(text.encode("utf-8"))
    if encoding == UTF32:
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def line_of(lines: list[str], line: int) -> str:
    return lines[line] if 0 <= line < len(lines) else ""


def position_json(pos: Position, lines: list[str], encoding: str = UTF16) -> dict[str, int]:
    if encoding == UTF8:
        return {"line": pos.line, "character": pos.character}
    raw = line_of(lines, pos.line).encode("utf-8")[: pos.character].decode("utf-8", "ignore")
    return {"line": pos.line, "character": units(raw, encoding)}


def range_json(rng: Range, lines: list[str], encoding: str = UTF16) -> dict[str, Any]:
    return {"start": position_json(rng.start, lines, encoding), "end": position_json(rng.end, lines, encoding)}


DIAGNOSTICS_PAGE = "docs/diagnostics.md"  # one entry per code, anchored `#hpl300`


@functools.cache
def _diagnostics_page() -> Path | None:
    """docs/diagnostics.md of the checkout this package runs from (the nearest folder above it that has one);
    None for an install without the docs."""
    for folder in Path(__file__).resolve().parents:
        page = folder / DIAGNOSTICS_PAGE
        if page.is_file():
            return page
    return None


def code_href(code: str) -> str | None:
    """The diagnostics reference's entry for `code`, as a URI the editor opens from the diagnostic's code."""
    page = _diagnostics_page()
    return f"{page.as_uri()}#{code.lower()}" if page is not None and code.startswith("HPL") else None


class Places(Protocol):
    """Which client document shows a module range, and where (layout.Layout is the one): a protocol, so that
    this module does not name layout.py, which builds on it."""

    def range_json(self, rng: Range, encoding: str = UTF16) -> tuple[str, dict[str, Any]]: ...


def diagnostic_json(
    diag: Diagnostic,
    layout: Places,
    encoding: str = UTF16,
    message: str | None = None,
    related: list[tuple[Range, str]] = (),
    extra: dict[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The client document showing the diagnostic (a file, or a notebook's cell) and the LSP diagnostic
    there; the quick fix (if any) and `extra` travel in `data`, which the client sends back with code action
    requests."""
    uri, rng = layout.range_json(diag.range, encoding)
    out: dict[str, Any] = {
        "range": rng,
        "message": message or diag.message,
        "severity": int(diag.severity),
        "code": diag.code,
        "source": "helion",
    }
    href = code_href(diag.code)
    if href is not None:
        out["codeDescription"] = {"href": href}
    infos = []
    for place, msg in [*((r.range, r.message) for r in diag.related), *related]:
        where, place_json = layout.range_json(place, encoding)
        infos.append({"location": {"uri": where, "range": place_json}, "message": msg})
    if infos:
        out["relatedInformation"] = infos
    data: dict[str, Any] = {**diag.data, **(extra or {})}
    if diag.fix is not None:
        data["fix"] = {
            "title": diag.fix.title,
            "range": layout.range_json(diag.fix.range, encoding)[1],
            "newText": diag.fix.new_text,
        }
    if data:
        out["data"] = data
    return uri, out
