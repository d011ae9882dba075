"""What each name, call and subscript of a kernel body is, for one shape set and config (the editor's hovers).

The trace remembers every expression it evaluated and every name it bound (`KernelIR.seen`); this module says
what each became: a device value (its shape and dtype, the op spelled as the generated code spells it, the VMEM
it and a reduction's input take), a block read only for its shape and dtype (not loaded at all), a host tensor
(argument or allocation, and the pallas_calls that read or write it), a host int or float, a loop tile, a
config block size (`hl.register_block_size`: its value, the extent it tiles, its legal values) or a dtype.
`hl.tile` / `hl.grid` calls and tensor accesses are left to the plan's LoopInfo / AccessInfo. Facts are plain
text (markdown code spans) on source ranges, in the coordinates of the kernel source the compile was given.
"""

from __future__ import annotations

import ast
import logging
from dataclasses import dataclass, replace
from typing import Any

from .support.diagnostics import Position, Range
from .vmem.report import fmt_bytes

log = logging.getLogger(__name__)
KINDS = ("device", "shape_only", "tensor", "scalar", "tile", "block_size", "dtype", "other")
TEXT_CHARS = 60  # an expression's text is cut to this many characters in a fact


@dataclass(frozen=True)
class ExprFact:
    """What one expression (or bound name) of the kernel body is: `what` in a line, then `details`. Equal
    facts (a name used on several lines) are one object in `BodyFacts`."""

    kind: str  # one of KINDS
    text: str  # the expression as written (shortened)
    what: str  # e.g. "f32[256, 1] on the device"
    details: tuple[str, ...] = ()
    call: str = ""  # CallPlan.name of the pallas_call whose device kernel computes it ("" on the host)
    block_index: int | None = None  # kind "block_size" / "tile": its entry of the config's block_sizes
    # kind "device": where the expression that computes the value is (a name's definition): line, character,
    # end line, end character
    origin: tuple[int, int, int, int] | None = None

    def origin_range(self) -> Range | None:
        return None if self.origin is None else Range(Position(*self.origin[:2]), Position(*self.origin[2:]))


@dataclass(frozen=True)
class BodyFacts:
    """The facts of a kernel body and where each holds, kept compact (a compile result is kept by the
    hundred): `spans` has four ints per place (line, character, end line, end character), `which` the index
    of its fact in `facts`."""

    spans: tuple[int, ...] = ()
    which: tuple[int, ...] = ()
    facts: tuple[ExprFact, ...] = ()

    def __len__(self) -> int:
        return len(self.which)

    def at(self, pos: Position) -> tuple[Range, ExprFact] | None:
        """The fact of the smallest place holding `pos` (ends included, as `Range.contains`)."""
        best: tuple[tuple[int, int], int] | None = None
        s = self.spans
        for i in range(len(self.which)):
            a, b, c, d = s[4 * i : 4 * i + 4]
            if (a, b) <= (pos.line, pos.character) <= (c, d):
                size = (c - a, d - b)
                if best is None or size < best[0]:
                    best = (size, i)
        if best is None:
            return None
        i = best[1]
        return Range(Position(*s[4 * i : 4 * i + 2]), Position(*s[4 * i + 2 : 4 * i + 4])), self.facts[self.which[i]]


def expression_facts(ck: Any) -> BodyFacts:
    """The facts of a CompiledKernel's body, from the trace it was compiled from (the kernel keeps its traces:
    asking again right after the compile costs a lookup). Empty when the trace cannot be had again, and when
    describing it fails: a fault here costs hovers, never the compile result that carries them."""
    from .pipeline import trace

    try:
        ir, _, _ = trace(ck.kernel, ck.args, ck.config, ck.chip)
        return facts_of(ir, ck.plan)
    except Exception:  # CompileError, or a bug in this module
        log.warning("no expression facts for %s", getattr(ck.kernel, "name", "?"), exc_info=True)
        return BodyFacts()


def facts_of(ir: Any, plan: Any) -> BodyFacts:
    """Facts for every expression of `ir.seen` inside the kernel function (helpers traced inline are left out:
    their text is elsewhere), the last evaluation of each range kept."""
    from .codegen.space import block_uses

    where = _Where(ir, plan)
    uses = {u.index: u for u in block_uses(ir, ir.block_ranges, ir.block_extents)} if ir.block_ranges else {}
    parents: dict[int, ast.AST] = {}
    values: dict[int, Any] = {}
    indexed: dict[int, ast.AST] = {}  # a subscript's base -> the subscript
    for node, value in ir.seen:
        values[id(node)] = value
        if isinstance(node, ast.Attribute):
            parents[id(node.value)] = node
        elif isinstance(node, ast.Call):
            parents[id(node.func)] = node
        elif isinstance(node, ast.Subscript):
            indexed[id(node.value)] = node
    out: dict[tuple[int, int, int, int], ExprFact] = {}
    for node, value in ir.seen:
        rng = Range.of(node)
        if not (ir.range.start <= rng.start and rng.end <= ir.range.end):
            continue
        owner, owned = _owner(node, value, parents, values)
        if _is_loop_spec(owned):
            continue  # `hl.tile(...)` / `hl.grid(...)`: the loop's own hover (LoopInfo)
        fact = describe(owner, owned, where, uses, rng)
        block = indexed.get(id(node))
        if block is not None and where.shape_only(values.get(id(block))):  # `x` of `x[tile_m, 0]`: what the block is
            fact = describe(block, values[id(block)], where, uses, rng)
        if fact is not None:
            out[_span(rng)] = fact
    distinct: dict[ExprFact, int] = {}
    which = tuple(distinct.setdefault(f, len(distinct)) for f in out.values())
    texts: dict[str, str] = {}  # equal lines of different facts as one object: a pickle writes each once
    shared = tuple(replace(f, details=tuple(texts.setdefault(d, d) for d in f.details),
                           call=texts.setdefault(f.call, f.call)) for f in distinct)
    return BodyFacts(tuple(n for span in out for n in span), which, shared)


def _span(rng: Range) -> tuple[int, int, int, int]:
    return (rng.start.line, rng.start.character, rng.end.line, rng.end.character)


def _owner(node: ast.AST, value: Any, parents: dict[int, ast.AST], values: dict[int, Any]) -> tuple[ast.AST, Any]:
    """A function, method or module named on the way to a call (`torch`, `torch.mean`, `x.size`) stands for what
    the call or attribute it leads to gives."""
    while _is_callee(value) and id(node) in parents:
        node = parents[id(node)]
        value = values.get(id(node))
    return node, value


def _is_callee(value: Any) -> bool:
    from .frontend.dispatch import BoundMethod
    from .frontend.values import Module

    return isinstance(value, Module | BoundMethod | ast.FunctionDef) or callable(value) and not isinstance(value, type)


def _is_loop_spec(value: Any) -> bool:
    from .frontend.values import TileLoopSpec

    return isinstance(value, TileLoopSpec)


def _text(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def type_text(shape: tuple[int, ...], dtype: Any) -> str:
    """`f32[256, 1]`, as shape lines write tensors."""
    from .ir.specs import SHORT_NAMES

    full = str(dtype).removeprefix("torch.")
    name = SHORT_NAMES.get(full, full)
    return f"{name}[{', '.join(str(d) for d in shape)}]"


def describe(node: ast.AST, value: Any, where: _Where, uses: dict, rng: Range) -> ExprFact | None:
    """The fact of one expression whose value the trace found."""
    import torch

    from .frontend.values import BlockSize, Module, NamedConst, Tile, TileId
    from .ir.tile_ir import Value

    text = _text(node)
    if isinstance(value, Value):
        return where.value_fact(value, text, rng)
    if isinstance(value, BlockSize):
        return _block_size_fact(value, text, rng, uses)
    if isinstance(value, Tile | TileId):
        return _tile_fact(value, text, rng, isinstance(value, TileId))
    if isinstance(value, NamedConst):
        how = "a scalar argument of the kernel" if value.is_arg else "a host float"
        return ExprFact("scalar", text, f"`{value.value!r}`: {how}", (
            f"The device kernel takes it as the static keyword `{value.name}`: its value is compiled in.",))
    if isinstance(value, torch.dtype):
        from .codegen.exprs import dtype_text

        return ExprFact("dtype", text, f"dtype `{str(value).removeprefix('torch.')}`",
                        (f"`{dtype_text(value)}` in the generated code.",))
    if isinstance(value, bool | int | float) and not isinstance(value, BlockSize):
        return ExprFact("scalar", text, f"`{value!r}`: a host {type(value).__name__}", (
            "Known when compiling for this shape set: the generated code has the number itself.",))
    if isinstance(value, torch.Size):
        value = tuple(value)
    if isinstance(value, tuple | list):
        return ExprFact("scalar", text, f"`{_short(value)}`: a host {type(value).__name__}", (
            "Known when compiling for this shape set.",))
    if isinstance(value, slice):
        return ExprFact("scalar", text, f"`{_item(value)}`: " + ("every position of the dim" if value == slice(None)
                                                                     else "a slice of the dim"))
    if isinstance(value, Module):
        what = "the tensor's device" if value.qualname == "torch.device" else f"`{value.qualname}`"
        return ExprFact("other", text, what)
    return ExprFact("other", text, f"a {type(value).__name__} known when compiling" if value is not None
                    else "`None`")


def _short(value: Any) -> str:
    """A host tuple or list as written: ints as numbers, tiles by name, `:` for a whole slice."""
    items = ", ".join(_item(v) for v in value)
    text = f"[{items}]" if isinstance(value, list) else f"({items}{',' if len(value) == 1 else ''})"
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def _item(v: Any) -> str:
    from .frontend.values import NamedConst, Tile, TileId
    from .ir.tile_ir import Value

    if isinstance(v, Tile | TileId):
        return v.dim.name + (".id" if isinstance(v, TileId) else "")
    if isinstance(v, slice):
        return ":" if v == slice(None) else f"{v.start}:{v.stop}" + (f":{v.step}" if v.step is not None else "")
    if isinstance(v, Value):
        return type_text(v.shape, v.dtype)
    if isinstance(v, NamedConst):
        return v.name
    if isinstance(v, tuple | list):
        return _short(v)
    return repr(v)


def _block_size_fact(value: Any, text: str, rng: Range, uses: dict) -> ExprFact:
    index = value.index
    use = uses.get(index)
    details = []
    if use is not None:
        what = ", ".join(f"`{t}`" for t in use.tensors) or "positions only"
        details.append(f"Tiles an extent of {use.extent} ({what}; {'an inner loop' if use.inner else 'the launch grid'}).")
        details.append(f"Legal values: {legal_rule(use)}. Tuning tries {', '.join(str(c) for c in _candidates(use))}.")
    return ExprFact("block_size", text, f"block size **{int(value)}**: `block_sizes[{index}]` of this config",
                    tuple(details), block_index=index)


def _candidates(use: Any) -> list[int]:
    from .codegen.space import candidates

    return candidates(use)


def legal_rule(use: Any) -> str:
    """The rule `space.legal` applies to a block size, in words."""
    from .codegen.space import LANE, RANK1, SUBLANE

    parts = []
    if LANE in use.roles:
        parts.append("a multiple of 128 (it tiles a last, lane dim)")
    elif SUBLANE in use.roles:
        parts.append("a multiple of 8 (it tiles a second-to-last, sublane dim)")
    if RANK1 in use.roles:
        parts.append("a rank-1 block a TPU can lay out (a multiple of 128 × 32-bit words, or rows of a 2-D view)")
    if use.divides:
        parts.append(f"a divisor of {use.extent} (a sub-tile of its grid tile)")
    if not parts:
        parts.append("any size from 1")
    return " and ".join(parts) + f", up to the whole extent {use.extent}"


def _tile_fact(value: Any, text: str, rng: Range, is_id: bool) -> ExprFact:
    d = value.dim
    index = "" if d.block_index is None else f" (`block_sizes[{d.block_index}]`)"
    if d.api == "grid":
        what = f"an index of `hl.grid` over {d.extent}: one position per step"
    else:
        span = f"{d.extent - d.begin}" if not d.begin else f"{d.begin}..{d.extent}"
        what = f"a tile of {span}: blocks of {d.block_size}{index}, {d.steps} step{'s' if d.steps != 1 else ''}"
    if d.dynamic:
        what = f"a tile of a range computed on the device: blocks of {d.block_size}{index}"
    if is_id:
        what = f"the block number of tile `{d.name}` ({what})"
    details = [f"masked tail: the last block holds {d.tail} of {d.block_size}"] if d.tail and not d.dynamic else []
    return ExprFact("tile", text, what, tuple(details), block_index=d.block_index)


class _Where:
    """Where each device value of the IR is computed: its pallas_call and inner loop."""

    def __init__(self, ir: Any, plan: Any):
        from .ir.tile_ir import GridLoop, InnerLoop, Load, Op, walk

        self.ir = ir
        self.plan = plan
        self.live: set[int] = {id(n) for n in walk(ir.host)}
        self.region: dict[int, tuple[str, Any]] = {}  # value id -> (call name, innermost InnerLoop or None)
        self.carried: dict[int, tuple[Any, Any, bool]] = {}  # value id -> (Carried, loop, inside the loop?)
        self.tensors = {t.value.id: t for t in ir.tensors}
        grids = [n for n in ir.host if isinstance(n, GridLoop)]
        calls = [c.name for c in plan.calls]

        def visit(nodes: list, call: str, loop: Any) -> None:
            for n in nodes:
                if isinstance(n, Op):
                    for v in n.outputs():
                        self.region[v.id] = (call, loop)
                elif isinstance(n, Load):
                    self.region[n.out.id] = (call, loop)
                elif isinstance(n, InnerLoop):
                    for c in n.carried:
                        self.carried[c.phi.id] = (c, n, True)
                        if c.result is not None:
                            self.carried[c.result.id] = (c, n, False)
                    visit(n.body, call, n)

        for i, g in enumerate(grids):
            visit(g.body, calls[i] if i < len(calls) else "", None)

    def shape_only(self, v: Any) -> bool:
        """Is `v` a block read only for its shape and dtype (its load was dropped: nothing reads its data)?"""
        from .ir.tile_ir import Load, Value

        return isinstance(v, Value) and isinstance(v.producer, Load) and id(v.producer) not in self.live

    def value_fact(self, v: Any, text: str, rng: Range) -> ExprFact:
        if v.space == "host":
            return self._host_fact(v, text, rng)
        typed = type_text(v.shape, v.dtype)
        found = self.carried.get(v.id)
        if found is not None:
            c, loop, inside = found
            when = "at the start of each iteration" if inside else "after the loop"
            return ExprFact("device", text, f"{typed} on the device", (
                f"Carried through the inner loop at line {loop.range.start.line + 1} (`{c.name}`, its value {when}).",
                _bytes_line(v)), self._call_of(loop))
        producer = v.producer
        from .ir.tile_ir import Load, Op

        if self.shape_only(v):
            return self._shape_only(v, producer, text, rng)
        call, loop = self.region.get(v.id, ("", None))
        per = f"per iteration of the inner loop at line {loop.range.start.line + 1}" if loop is not None else \
            "per grid step"
        details = [f"Computed in `{call}` {per}." if call else "Computed on the device."]
        if producer is not None and producer.range.start.line != rng.start.line:
            details.append(f"Defined at line {producer.range.start.line + 1}.")
        if isinstance(producer, Op):
            spelled = spell(producer)
            if spelled:
                details.append(f"Spelled in jax: `{spelled}` (operands by their names in the kernel)")
            details.extend(_vmem_lines(producer, v))
        elif isinstance(producer, Load):
            details.append(f"A block of `{producer.tensor.name}` read from VMEM.")
            details.append(_bytes_line(v))
        else:
            details.append(_bytes_line(v))
        return ExprFact("device", text, f"{typed} on the device", tuple(details), call,
                        origin=_span(producer.range) if producer is not None else None)

    def _call_of(self, loop: Any) -> str:
        for v in (c.phi for c in loop.carried):
            found = self.region.get(v.id)
            if found is not None:
                return found[0]
        return ""

    def _shape_only(self, v: Any, load: Any, text: str, rng: Range) -> ExprFact:
        stands = index_text(load)
        return ExprFact("shape_only", text, f"not loaded: read only for its shape and dtype, {type_text(v.shape, v.dtype)}", (
            f"Stands for {stands} of `{load.tensor.name}`; only its shape and dtype are used (as `torch.zeros_like` "
            "reads them), so the generated code has no BlockSpec, DMA or VMEM buffer for it.",))

    def _host_fact(self, v: Any, text: str, rng: Range) -> ExprFact:
        ht = self.tensors.get(v.id)
        typed = type_text(v.shape, v.dtype)
        if ht is None:
            return ExprFact("tensor", text, f"{typed} on the host", (
                "A host tensor the kernel computes before its loops (a view or arithmetic on host tensors).",))
        origin = {"arg": "a kernel argument", "alloc": "allocated by the kernel", "derived": "a view the kernel makes",
                  "view": "a view the kernel writes through"}[ht.origin]
        details = []
        for call in self.plan.calls:
            for op in call.operands:
                if op.tensor == ht.name:
                    verb = {"input": "reads", "output": "writes", "inout": "reads and writes"}[op.kind]
                    block = ", ".join("–" if d is None else str(d) for d in op.block_shape)
                    details.append(f"`{call.name}` {verb} it as `{op.name}` (blocks of ({block}), ×{op.buffer_count}).")
        if not details:
            details.append("No pallas_call reads or writes it.")
        return ExprFact("tensor", text, f"{typed} in HBM: {origin}", tuple(dict.fromkeys(details)))


def index_text(load: Any) -> str:
    """What a block's index items select, in words: `tile_m`'s block (128) × position 0."""
    parts = []
    for it in load.index:
        kind = it[0]
        if kind == "tile":
            parts.append(f"`{it[1].name}`'s block ({it[1].block_size})")
        elif kind == "full":
            parts.append("the whole dim")
        elif kind == "int":
            parts.append(f"position {it[1]}")
        elif kind == "grid":
            parts.append(f"position `{it[1].name}`")
        elif kind == "newaxis":
            continue
        else:
            parts.append(f"{kind} positions")
    return "the block at " + " × ".join(parts) if parts else "the whole tensor"


def _padded(v: Any) -> int:
    from .codegen.work import padded_bytes

    return padded_bytes(tuple(v.shape), v.dtype)


def _bytes_line(v: Any) -> str:
    return f"{fmt_bytes(_padded(v))} once laid out in (sublane, 128-lane) tiles."


def _vmem_lines(op: Any, out: Any) -> list[str]:
    """The VMEM an op's values take: its result, and for a reduction the input it keeps live while it runs."""
    from .frontend.ops import REDUCTIONS
    from .ir.tile_ir import Value

    lines = [f"Result: {_bytes_line(out)}"]
    if op.kind in REDUCTIONS | {"softmax", "log_softmax", "logsumexp"}:
        ins = [a for a in op.args if isinstance(a, Value)]
        if ins:
            src = ins[0]
            total = _padded(src) + _padded(out)
            lines.append(
                f"Reduces {type_text(src.shape, src.dtype)} ({fmt_bytes(_padded(src))}): its input and result are "
                f"live together while it runs, about {fmt_bytes(total)} of compiler temporaries (counted in the VMEM "
                "table's *(temporaries)* row).")
    return lines


def spell(op: Any, depth: int = 3) -> str:
    """The op as the generated code spells it, its operands by their names in the kernel (a value without one
    spelled in place, `depth` levels deep). Empty when it cannot be spelled on its own."""
    from .codegen.exprs import ExprWriter

    def ref(v: Any) -> tuple[str, bool]:
        return _operand(v, depth)

    def tile_begin(dim: Any, as_id: bool = False, first: bool = False) -> str:
        return f"{dim.name}.id" if as_id else f"{dim.name}.begin"

    try:
        return ExprWriter(ref, tile_begin).op(op)[0]
    except Exception:  # an op the writer spells only with emission state: the generated line shows it
        return ""


def _operand(v: Any, depth: int) -> tuple[str, bool]:
    from .ir.tile_ir import Load, Op

    if v.hint:
        return v.hint, True
    producer = v.producer
    if isinstance(producer, Op) and depth > 0 and len(producer.outputs()) == 1:
        text = spell(producer, depth - 1)
        if text:
            return text, False
    if isinstance(producer, Load):
        return f"{producer.tensor.name}[…]", True
    return "…", True

