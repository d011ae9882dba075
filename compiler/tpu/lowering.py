"""Mosaic lowering check: does the Pallas code lower for a TPU? (jaxlib only, no TPU, no libtpu.)

`jax.export.export(jax.jit(fn), platforms=["tpu"])` runs the Pallas -> Mosaic lowering on CPU. It catches
block-shape rules, unimplemented primitives, buffer counts and grid/dimension_semantics mismatches, but not
VMEM overflow, vector layouts, alignment or chip dtype limits (those need `libtpu_compile`).

Two jax facts shape this module (jax 0.10.2):
- lowering must run under an abstract TPU mesh (`tpu_abstract_mesh`), otherwise Pallas asks the CPU device
  for its TPU generation and fails;
- a globally set TPU interpret mode (`pltpu.set_tpu_interpret_mode`) makes the export fail with "the
  platform for the specified backend cpu is different from the lowering platform tpu", so the check masks it
  locally with `force_tpu_interpret_mode(None)`.

Hints come from the exception message and, when the message does not say, from the frames of the failing
lowering code (`bm`, the block mapping being checked; `eqn`, the jaxpr equation being lowered, whose
source_info points at the generated module's line).
"""

from __future__ import annotations

import base64
import json
import re
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import jax
from jax.experimental.pallas import tpu as pltpu

from compiler.ir.chips import Chip

from .mesh import tpu_abstract_mesh
from .mlir_text import SourceLoc, trim_error

LoweringKind = Literal["block_shape", "unimplemented", "buffering", "dimension_semantics", "other"]

Arg = jax.ShapeDtypeStruct | int | float | bool | None | tuple | list | Any
"""An argument of the host function: arrays as ShapeDtypeStruct; Python scalars are passed as static values."""

_CHECKS_DIR = str(Path(__file__).parent)

# Checked in this order; the first match wins.
_KIND_PATTERNS: tuple[tuple[LoweringKind, re.Pattern[str]], ...] = (
    (
        "buffering",
        re.compile(r"buffering are supported|Unsupported pipeline mode|Lookahead is not supported"),
    ),
    ("dimension_semantics", re.compile(r"dimension[ _]semantics", re.I)),
    ("block_shape", re.compile(r"block shape|block_shape|windowing", re.I)),
    ("unimplemented", re.compile(r"Unimplemented primitive|not implemented|unsupported|not supported", re.I)),
)
_PRIMITIVE = re.compile(r"Unimplemented primitive in Pallas TPU lowering for \w+: (\w+)")
_BUFFER_COUNT = re.compile(r"buffering are supported\. Got (\d+)")
_KERNEL_AT = re.compile(r"in pallas_call (\S+) at (.+?):(\d+) ")


@dataclass(frozen=True)
class LoweringHints:
    """What the failure is about, as far as the message and the failing frames tell.

    operand:       Pallas origin of the block spec, e.g. "args[0]", "outputs", "outputs[1]".
    operand_kind / operand_index: the same split into ("input" | "output", flat index).
    block_shape:   block dims (None = squeezed); array_shape: the operand's array shape.
    kernel:        name of the kernel function of the failing pallas_call.
    primitive:     jax primitive whose lowering failed (e.g. "rev", "sort").
    buffer_count:  the rejected `pl.Buffered(n)` count.
    location:      innermost place in user code (the generated module) tied to the failure: the failing
                   equation's line, else the kernel's `def` line. frames: all user frames, innermost first.
    """

    operand: str | None = None
    operand_kind: Literal["input", "output"] | None = None
    operand_index: int | None = None
    block_shape: tuple[int | None, ...] | None = None
    array_shape: tuple[int, ...] | None = None
    kernel: str | None = None
    primitive: str | None = None
    buffer_count: int | None = None
    location: SourceLoc | None = None
    frames: tuple[SourceLoc, ...] = ()

    def to_json(self) -> dict:
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            if value is None or value == ():
                continue
            if key == "location":
                value = value.to_json()
            elif key == "frames":
                value = [f.to_json() for f in value]
            out[key] = value
        return out


@dataclass(frozen=True)
class LoweringResult:
    ok: bool
    seconds: float
    chip: str
    kind: LoweringKind | None = None  # None when ok
    error: str = ""  # trimmed message, "" when ok
    exception_type: str = ""
    hints: LoweringHints = field(default_factory=LoweringHints)
    exported: jax.export.Exported | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "seconds": self.seconds,
            "chip": self.chip,
            "kind": self.kind,
            "error": self.error,
            "exception_type": self.exception_type,
            "hints": self.hints.to_json(),
        }


def static_positions(args: Sequence[Arg]) -> tuple[int, ...]:
    """Positions of the arguments that are not arrays (numbers, None, dtypes, tuples): jit treats them as
    static (baked into the kernel). A list is not hashable, so it is passed as it is (the generated code
    never reads it: the compiler used its values)."""
    return tuple(i for i, a in enumerate(args) if not isinstance(a, jax.ShapeDtypeStruct | list))


def lower_check(fn: Callable[..., Any], arg_structs: Sequence[Arg], chip: Chip) -> LoweringResult:
    """Lower `fn(*arg_structs)` for `chip` with the TPU Mosaic lowering; never raises for a lowering error."""
    static, args = static_positions(arg_structs), tuple(arg_structs)
    start = time.perf_counter()
    try:
        with tpu_abstract_mesh(chip), pltpu.force_tpu_interpret_mode(None):
            exported = jax.export.export(jax.jit(fn, static_argnums=static), platforms=["tpu"])(*args)
    except Exception as exc:  # every lowering failure becomes a result
        seconds = time.perf_counter() - start
        message = str(exc)
        kind = classify_lowering_error(message, exc)
        return LoweringResult(
            ok=False,
            seconds=seconds,
            chip=chip.name,
            kind=kind,
            error=trim_error(message) or type(exc).__name__,
            exception_type=type(exc).__name__,
            hints=lowering_hints(message, exc),
        )
    return LoweringResult(ok=True, seconds=time.perf_counter() - start, chip=chip.name, exported=exported)


def classify_lowering_error(message: str, exc: BaseException | None = None) -> LoweringKind:
    for kind, pattern in _KIND_PATTERNS:
        if pattern.search(message):
            return kind
    if exc is not None and any(isinstance(e, NotImplementedError) for e in _chain(exc)):
        return "unimplemented"
    return "other"


def lowering_hints(message: str, exc: BaseException) -> LoweringHints:
    hints: dict[str, Any] = {}
    if m := _PRIMITIVE.search(message):
        hints["primitive"] = m.group(1)
    if m := _BUFFER_COUNT.search(message):
        hints["buffer_count"] = int(m.group(1))
    kernel_def = None
    if m := _KERNEL_AT.search(message):
        hints["kernel"] = m.group(1)
        kernel_def = SourceLoc(m.group(2), int(m.group(3)))
    block_mapping, eqns = _failing_locals(exc)
    if block_mapping is not None:
        hints.update(_operand_hints(block_mapping))
    if eqns and eqns[-1].primitive.name != "pallas_call":
        hints.setdefault("primitive", eqns[-1].primitive.name)
    frames: tuple[SourceLoc, ...] = ()
    for eqn in reversed(eqns):  # innermost equation that still knows its source line
        frames = _user_frames(eqn.source_info.traceback)
        if frames:
            break
    location = frames[0] if frames else kernel_def
    return LoweringHints(**hints, location=location, frames=frames)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [e.__cause__, e.__context__]
    return seen


def _frames_of(tb: types.TracebackType | None) -> list[types.FrameType]:
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def _failing_locals(exc: BaseException) -> tuple[Any, list[Any]]:
    """The innermost `bm` (pallas BlockMapping) and the `eqn`s (jaxpr equations, outermost first) being
    lowered in the failing frames.

    jax filters its own frames out of the raised traceback but keeps the full one on an
    `UnfilteredStackTrace` in the exception chain, so every traceback in the chain is searched.
    """
    block_mapping = None
    eqns: list[Any] = []
    for e in _chain(exc):
        for frame in _frames_of(e.__traceback__):
            local = frame.f_locals
            bm = local.get("bm")
            if bm is not None and hasattr(bm, "origin") and hasattr(bm, "array_aval"):
                block_mapping = bm
            candidate = local.get("eqn")
            if (
                candidate is not None
                and hasattr(candidate, "primitive")
                and hasattr(candidate, "source_info")
            ):
                eqns.append(candidate)
    return block_mapping, eqns


def _operand_hints(bm: Any) -> dict[str, Any]:
    from jax._src.pallas import core as pallas_core

    origin = str(bm.origin)
    kind = "output" if origin.startswith("outputs") else "input" if origin.startswith("args") else None
    index = re.search(r"\[(\d+)\]", origin)
    dims = pallas_core._get_block_shape(bm.block_shape)
    squeezed = [isinstance(d, pallas_core.Squeezed) or d is None for d in bm.block_shape]
    return {
        "operand": origin,
        "operand_kind": kind,
        "operand_index": int(index.group(1)) if index else (0 if kind == "output" else None),
        "block_shape": tuple(None if sq else int(d) for d, sq in zip(dims, squeezed, strict=True)),
        "array_shape": tuple(int(d) for d in bm.array_aval.shape),
    }


def _user_frames(traceback: Any) -> tuple[SourceLoc, ...]:
    from jax._src import source_info_util

    return tuple(
        SourceLoc(f.file_name, f.start_line, f.start_column)
        for f in source_info_util.user_frames(traceback)
        if not f.file_name.startswith(_CHECKS_DIR)
    )


def mosaic_text(exported: jax.export.Exported, debug_info: bool = False) -> str:
    """Readable Mosaic MLIR (tpu dialect) of every kernel in `exported`, one module per pallas_call.

    Each `tpu_custom_call` carries its kernel as base64 Mosaic bytecode in `backend_config`; it is parsed in an
    MLIR context with the tpu dialect and upgraded with `mosaic-serde{serialize=false}` (as
    jax._src.tpu_custom_call does) before printing.
    """
    from jax._src.interpreters import mlir
    from jax._src.lib import tpu
    from jaxlib.mlir import ir
    from jaxlib.mlir.passmanager import PassManager

    ctx = mlir.make_ir_context()
    tpu.register_dialect(ctx)
    blobs: list[tuple[str, bytes]] = []
    with ctx, ir.Location.unknown():
        ctx.allow_unregistered_dialects = True
        module = ir.Module.parse(exported.mlir_module())

        def visit(op: ir.Operation) -> ir.WalkResult:
            if (
                op.name == "stablehlo.custom_call"
                and _string_attr(op, "call_target_name") == "tpu_custom_call"
            ):
                config = json.loads(_string_attr(op, "backend_config"))
                body = base64.b64decode(config["custom_call_config"]["body"])
                blobs.append((_string_attr(op, "kernel_name") or "kernel", body))
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
        texts = []
        for name, body in blobs:
            kernel = ir.Module.parse(body)
            PassManager.parse("builtin.module(mosaic-serde{serialize=false})").run(kernel.operation)
            texts.append(f"// kernel {name}\n" + kernel.operation.get_asm(enable_debug_info=debug_info))
    return "\n".join(texts)


def _string_attr(op: Any, name: str) -> str:
    from jaxlib.mlir import ir

    attrs = op.attributes
    if name not in attrs:
        return ""
    return ir.StringAttr(attrs[name]).value
