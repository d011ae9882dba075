"""Conversions between compiler types and LSP (lsprotocol) types.

The compiler counts columns in UTF-8 bytes (what `ast` reports); LSP clients count in the negotiated
position encoding (UTF-16 unless the client offered another). Lines are needed to convert, so every
function takes the document's lines (diagnostics: its `Layout`, which also says which client document shows
each line).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lsprotocol import types

from compiler.diagnostics import Diagnostic, Fix, Position, Range, Related, Severity

if TYPE_CHECKING:
    from .layout import Layout

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"


def _units(text: str, encoding: str) -> int:
    if encoding == UTF8:
        return len(text.encode("utf-8"))
    if encoding == UTF32:
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def _line(lines: list[str], line: int) -> str:
    return lines[line] if 0 <= line < len(lines) else ""


def to_lsp_position(pos: Position, lines: list[str], encoding: str = UTF16) -> types.Position:
    if encoding == UTF8:
        return types.Position(line=pos.line, character=pos.character)
    raw = _line(lines, pos.line).encode("utf-8")[: pos.character].decode("utf-8", "ignore")
    return types.Position(line=pos.line, character=_units(raw, encoding))


def from_lsp_position(pos: types.Position, lines: list[str], encoding: str = UTF16) -> Position:
    if encoding == UTF8:
        return Position(pos.line, pos.character)
    text = _line(lines, pos.line)
    count = 0
    for i, ch in enumerate(text):
        if count >= pos.character:
            return Position(pos.line, len(text[:i].encode("utf-8")))
        count += _units(ch, encoding)
    return Position(pos.line, len(text.encode("utf-8")) + max(0, pos.character - count))


def offset_to_lsp(text: str, offset: int, encoding: str = UTF16) -> types.Position:
    """LSP position of a code-point offset into `text`."""
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    return types.Position(line=line, character=_units(text[start:offset], encoding))


def to_lsp_range(rng: Range, lines: list[str], encoding: str = UTF16) -> types.Range:
    return types.Range(
        start=to_lsp_position(rng.start, lines, encoding), end=to_lsp_position(rng.end, lines, encoding)
    )


def range_json(rng: types.Range) -> dict[str, Any]:
    return {
        "start": {"line": rng.start.line, "character": rng.start.character},
        "end": {"line": rng.end.line, "character": rng.end.character},
    }


_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFORMATION: types.DiagnosticSeverity.Information,
    Severity.HINT: types.DiagnosticSeverity.Hint,
}


def to_lsp_diagnostic(
    diag: Diagnostic,
    layout: Layout,
    encoding: str = UTF16,
    message: str | None = None,
    related: list[tuple[Range, str]] = (),
    extra: dict[str, Any] | None = None,
) -> tuple[str, types.Diagnostic]:
    """The client document showing the diagnostic (a file, or a notebook's cell) and the LSP diagnostic there;
    the quick fix (if any) and `extra` travel in `data`, which the client sends back with code action requests."""
    infos = [
        types.DiagnosticRelatedInformation(location=layout.location(rng, encoding), message=msg)
        for rng, msg in [*((r.range, r.message) for r in diag.related), *related]
    ]
    data: dict[str, Any] = {**diag.data, **(extra or {})}
    if diag.fix is not None:
        data["fix"] = {
            "title": diag.fix.title,
            "range": layout.range(diag.fix.range, encoding)[1],
            "newText": diag.fix.new_text,
        }
    uri, rng = layout.range(diag.range, encoding)
    return uri, types.Diagnostic(
        range=rng,
        message=message or diag.message,
        severity=_SEVERITY[diag.severity],
        code=diag.code,
        source="helion",
        related_information=infos or None,
        data=data or None,
    )


def _range_json(obj: dict) -> Range:
    return Range(
        Position(obj["start"]["line"], obj["start"]["character"]),
        Position(obj["end"]["line"], obj["end"]["character"]),
    )


def diagnostic_from_json(obj: dict) -> Diagnostic:
    """Inverse of `Diagnostic.to_json` (diagnostics come back from worker processes as JSON)."""
    fix = obj.get("fix")
    return Diagnostic(
        severity=Severity[obj["severity"].upper()],
        range=_range_json(obj["range"]),
        code=obj["code"],
        message=obj["message"],
        related=tuple(Related(_range_json(r["range"]), r["message"]) for r in obj.get("related", ())),
        fix=Fix(fix["title"], _range_json(fix["range"]), fix["new_text"]) if fix else None,
        data=obj.get("data") or {},
    )
