"""Conversions between compiler types and LSP (lsprotocol) types; the JSON forms and the column
conventions are in lsp_json.py."""

from __future__ import annotations

from lsprotocol import types

from compiler.support.diagnostics import Diagnostic, Fix, Position, Range, Related, Severity

from .lsp_json import UTF8, UTF16, line_of, position_json, units


def to_lsp_position(pos: Position, lines: list[str], encoding: str = UTF16) -> types.Position:
    return types.Position(**position_json(pos, lines, encoding))


def from_lsp_position(pos: types.Position, lines: list[str], encoding: str = UTF16) -> Position:
    if encoding == UTF8:
        return Position(pos.line, pos.character)
    text = line_of(lines, pos.line)
    count = 0
    for i, ch in enumerate(text):
        if count >= pos.character:
            return Position(pos.line, len(text[:i].encode("utf-8")))
        count += units(ch, encoding)
    return Position(pos.line, len(text.encode("utf-8")) + max(0, pos.character - count))


def offset_to_lsp(text: str, offset: int, encoding: str = UTF16) -> types.Position:
    """LSP position of a code-point offset into `text`."""
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    return types.Position(line=line, character=units(text[start:offset], encoding))


def to_lsp_range(rng: Range, lines: list[str], encoding: str = UTF16) -> types.Range:
    return types.Range(start=to_lsp_position(rng.start, lines, encoding), end=to_lsp_position(rng.end, lines, encoding))


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
