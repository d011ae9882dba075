"""Hovers on the names, calls and subscripts of a kernel body, from the compiler's facts (compiler/facts.py).

What the trace found each expression to be, per shape set: a device value (shape, dtype, the op as the
generated code spells it, the generated statement, the VMEM its values and a reduction's input take), a
block read only for its shape and dtype (not loaded), a host tensor, a host number, a tile, a config block
size (`hl.register_block_size`: its value, where it comes from, its legal values) or a dtype. A token the
trace never evaluated for any shape set (an untaken host branch, an assert's message) says so. Answered from
cached compile results only, like every hover.
"""

from __future__ import annotations

import ast
from typing import Any

from compiler.ir.config import Config
from compiler.support.diagnostics import Position, Range
from compiler.vmem.report import fmt_bytes

from ..session.documents import KernelView

Hit = tuple[int, Any, Any, Range]  # (unit index, CompiledSnapshot, compiler.facts.ExprFact, its basis range)


def size(rng: Range) -> tuple[int, int]:
    """How much text a range spans: the smallest range holding a position is the token under it."""
    return (rng.end.line - rng.start.line, rng.end.character - rng.start.character)


def find(units: list[tuple[int, Any, Any]], pos: Position) -> tuple[Range, list[Hit]] | None:
    """The smallest fact holding `pos` in each compiled unit (units: (index, snapshot, PositionMap)); the range
    is in shown coordinates."""
    hits: list[Hit] = []
    shown: Range | None = None
    for index, ck, pmap in units:
        found = ck.facts.at(pmap.backward(pos)) if getattr(ck, "facts", None) is not None else None
        if found is not None:
            rng, fact = found
            hits.append((index, ck, fact, rng))
            shown = shown or pmap.forward_range(rng)
    return (shown, hits) if hits and shown is not None else None


def prefer_fact(fact: tuple[Range, list[Hit]] | None, access: tuple[Range, list] | None) -> bool:
    """Is the fact the better hover than the tensor access around it? The smaller range wins (a tile or a
    value inside an access); the tensor named by the access and the access itself are the access's."""
    if fact is None:
        return False
    if access is None:
        return True
    _, _, first, rng = fact[1][0]
    return first.kind != "tensor" and size(rng) < size(access[1][0][2].range)


def fact_markdown(view: KernelView, hits: list[Hit]) -> str:
    """The fact's title, then what each shape set says (sets that say the same are written once)."""
    first = hits[0][2]
    whats = {fact.what for _, _, fact, _ in hits}
    title = f"**`{first.text}`** — {first.what}" if len(whats) == 1 else f"**`{first.text}`**"
    sections: dict[str, list[int]] = {}
    for index, ck, fact, rng in hits:
        body = _body(view, index, ck, fact, rng, with_what=len(whats) > 1)
        sections.setdefault(body, []).append(index)
    parts = [title]
    several = len(sections) > 1  # sets that all say the same need no headings
    for body, indices in sections.items():
        if several:
            label = "Shape set" if len(indices) == 1 else "Shape sets"
            names = ", ".join(f"{i} (`{view.shape_label(i)}`)" for i in indices)
            parts.append(f"#### {label} {names}")
        if body:
            parts.append(body)
    return "\n\n".join(parts)


def _body(view: KernelView, index: int, ck: Any, fact: Any, rng: Range, with_what: bool) -> str:
    lines = [f"- {fact.what}"] if with_what else []
    lines += [f"- {d}" for d in fact.details]
    if fact.kind == "block_size" and fact.block_index is not None:
        lines.append(f"- {block_origin(view, index, ck, fact.block_index)}")
    parts = ["\n".join(lines)] if lines else []
    if fact.kind == "device":
        code = generated_statement(ck, fact.origin_range() or rng)
        if code is not None:
            line, text = code
            parts.append(f"Generated code (line {line + 1} of the module):\n```python\n{text}\n```")
        temporaries = next((r for r in ck.vmem.rows if r.name == "(temporaries)" and r.call == fact.call), None)
        if temporaries is not None:
            parts.append(f"`{fact.call}`'s compiler temporaries (estimated, in the kernel hover's VMEM table): "
                         f"**{fmt_bytes(temporaries.bytes, mib_digits=1)}**")
    return "\n\n".join(parts)


def block_origin(view: KernelView, index: int, ck: Any, block: int) -> str:
    """Where `block_sizes[block]` of the config this shape set compiles with comes from."""
    config: Config | None = view.units[index].config
    value = list(ck.config.get("block_sizes") or [])[block] if block < len(ck.config.get("block_sizes") or []) else None
    given = list(config.get("block_sizes") or []) if config is not None else []
    if config is None:
        return (f"From: a default ({value}), the decorator gives no config: the largest legal size up to a "
                "target for its dim that fits the default scoped VMEM. *Tune* searches it; *Apply* writes the best.")
    if block >= len(given):
        return f"From: a default ({value}): the decorator's `block_sizes` has no entry {block}."
    if given[block] == value:
        return "From: the decorator's config."
    return f"From: the decorator asks for {given[block]}; compiled with {value}, the nearest legal size (HPL205)."


def generated_statement(ck: Any, rng: Range) -> tuple[int, str] | None:
    """The generated statement that computes (or writes inline) the expression at `rng` (basis coordinates):
    of the source-map entries holding it, the one spanning the least source; its text without the comment
    naming the source line."""
    holding = [(size(r), gen) for gen, r in ck.source_map if r.start <= rng.start and rng.end <= r.end]
    if not holding:
        return None
    gen = min(holding)[1]
    lines = ck.source.splitlines()
    if gen >= len(lines):
        return None
    text = lines[gen].strip()
    cut = text.rfind("  # ")
    return gen, text[:cut] if cut > 0 else text


def token_at(view: KernelView, pos: Position) -> tuple[str, Range] | None:
    """The name, attribute, call or subscript of the kernel's body under `pos` (shown coordinates)."""
    node = view.kernel.definition.node
    best: ast.AST | None = None
    for stmt in node.body:
        if not Range.of(stmt).contains(pos):  # only the statement under the position is walked
            continue
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name | ast.Attribute | ast.Call | ast.Subscript):
                rng = Range.of(n)
                if rng.contains(pos) and (best is None or size(rng) < size(Range.of(best))):
                    best = n
    if best is None:
        return None
    text = ast.unparse(best)
    return (text if len(text) <= 60 else text[:59] + "…"), Range.of(best)


def not_evaluated(view: KernelView, units: list[tuple[int, Any, Any]], pos: Position) -> tuple[str, Range] | None:
    """For a token of a compiled kernel's body that no fact covers: the trace never evaluated it."""
    if not units:
        return None
    found = token_at(view, pos)
    if found is None:
        return None
    text, rng = found
    sets = ", ".join(str(i) for i, _, _ in units)
    return (f"**`{text}`** — not evaluated when compiling shape set{'s' if len(units) > 1 else ''} {sets}: this "
            "code does not run for these shapes and config (an untaken host branch, an assert's message), so "
            "nothing is generated from it."), rng
