"""TPU truth for a compiled kernel: the Mosaic lowering check and the real (deviceless) libtpu compile,
with every failure mapped back to the user's kernel source through the generated code's source map.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..support.diagnostics import Diagnostic, Range, error, hint, warning
from ..vmem.report import call_total, fmt_bytes
from ..vmem.verdicts import contributors

if TYPE_CHECKING:
    from ..ir.chips import Chip
    from ..ir.plan import KernelPlan
    from ..vmem.report import VmemReport


class _Named(Protocol):
    name: str


class CompiledKernel(Protocol):
    """What the checks read of a compile (compiler.compiled.CompiledKernel is one): a protocol, so that this
    stage does not name the top level that calls it (no import circle, not even at type level)."""

    kernel: _Named
    chip: Chip
    source: str
    entry: str
    source_map: list[tuple[int, Range]]
    plan: KernelPlan
    vmem: VmemReport

    def compile_args(self) -> Any: ...

log = logging.getLogger(__name__)


@dataclass
class TruthResult:
    """What a check found: the raw result of the checker and the diagnostics on the kernel source."""

    ok: bool
    diagnostics: list[Diagnostic]
    raw: Any = None
    seconds: float = 0.0
    facts: dict = field(default_factory=dict)


def generated_filename(ck: CompiledKernel) -> str:
    return f"<helion-pallas {ck.kernel.name}>"


def source_range_of_line(ck: CompiledKernel, line: int | None) -> Range | None:
    """Kernel source range of a 1-based generated line (the nearest mapped line at or above it)."""
    if line is None:
        return None
    best = None
    for gen_line, rng in ck.source_map:
        if gen_line <= line - 1 and (best is None or gen_line > best[0]):
            best = (gen_line, rng)
    return best[1] if best else None


def _operand_range(ck: CompiledKernel, kind: str | None, index: int | None) -> tuple[Range | None, str | None]:
    if kind is None or index is None:
        return None, None
    call = ck.plan.calls[0]
    ops = [o for o in call.operands if (o.kind in ("input", "inout")) == (kind == "input")]
    if kind == "output":
        ops = [o for o in call.operands if o.kind in ("output", "inout")]
    if 0 <= index < len(ops):
        return (ops[index].ranges[0] if ops[index].ranges else None), ops[index].tensor
    return None, None


def check_lowering(ck: CompiledKernel) -> TruthResult:
    """Pallas -> Mosaic lowering for the chip, on CPU. Failures land on the kernel line that caused them."""
    from .lowering import lower_check
    from .runtime import load_entry

    fn = load_entry(ck.source, ck.entry, generated_filename(ck))
    args = ck.compile_args()
    result = lower_check(fn, args, ck.chip)
    if result.ok:
        return TruthResult(True, [], result, result.seconds)
    h = result.hints
    rng, tensor = _operand_range(ck, h.operand_kind, h.operand_index)
    loc_rng = source_range_of_line(ck, h.location.line if h.location else None)
    target = rng or loc_rng or ck.plan.calls[0].range
    first = (result.error.splitlines() or ["lowering failed"])[-1][:400]
    if OVERFLOW in result.error:
        return TruthResult(False, [_overflow(ck, target, "lowering")], result, result.seconds)
    what = {
        "block_shape": "block shape is not legal on TPU",
        "unimplemented": f"`{h.primitive or 'an operation'}` has no TPU lowering",
        "buffering": "buffer count not supported at the top level (use 1 or 2)",
        "dimension_semantics": "grid / dimension_semantics mismatch",
    }.get(result.kind or "", "Mosaic lowering failed")
    subject = f" for `{tensor}`" if tensor else ""
    code = "HPL200" if result.kind == "block_shape" else "HPL400"
    diag = error(code, f"{what}{subject} ({ck.chip.name}): {first}", target,
                 data={"stage": "lowering", "kind": result.kind})
    return TruthResult(False, [diag], result, result.seconds)


OVERFLOW = "An overflow was encountered while parsing an argument"  # jax: a Python int past int32


def _overflow(ck: CompiledKernel, target: Any, stage: str) -> Any:
    """jax refused an integer constant of the generated code that does not fit 32 bits: said as such, on the
    call (never as a raw lowering failure)."""
    return error("HPL202", f"a size or position in this kernel does not fit the TPU's 32-bit integers "
                           f"({ck.chip.name}: positions are int32, at most 2**31 - 1); index large tensors through "
                           "more dims", target, data={"stage": stage, "kind": "int32_overflow"})


def compile_code(kind: str | None) -> str:
    """The diagnostic code of a TPU compiler rejection of this kind, the same from libtpu on a CPU and from
    the chip's own compile: HPL302 out of VMEM, HPL303 out of HBM, HPL203 a dtype the chip lacks, HPL401 anything
    else."""
    return {"vmem_oom": "HPL302", "hbm_oom": "HPL303", "unsupported_dtype": "HPL203"}.get(kind or "", "HPL401")


def check_tpu_compile(ck: CompiledKernel, compiler: Any = None) -> TruthResult:
    """The real TPU compiler (libtpu, no TPU needed). Absent libtpu gives one info diagnostic, never a failure."""
    from .libtpu_compile import LibtpuUnavailable, libtpu_available, tpu_compile

    call_range = ck.plan.calls[0].range
    if not libtpu_available():
        return TruthResult(True, [hint("HPL402", "libtpu is not installed: the real TPU compile was skipped "
                                       "(pip install 'helion-ls[tpu]'); VMEM and lowering checks still ran", call_range)],
                           None)
    args = ck.compile_args()
    try:
        run = compiler.compile if compiler is not None else tpu_compile
        result = run(ck.source, ck.entry, args, ck.chip, dump_mosaic=True, filename=generated_filename(ck))
    except LibtpuUnavailable as exc:
        return TruthResult(True, [hint("HPL402", f"libtpu unavailable: {exc}", call_range)], None)
    facts = {
        "vmem_limit_bytes": result.vmem_limit_bytes or ck.vmem.limit_bytes,
        "vmem_used_bytes": result.vmem_used_bytes,
        "op_counts": result.categories if result.ok else {},
        "seconds": result.seconds,
    }
    if result.ok:
        return TruthResult(True, [], result, result.seconds, facts)
    loc_rng = source_range_of_line(ck, result.location.line if result.location else None)
    if OVERFLOW in (result.error or ""):
        return TruthResult(False, [_overflow(ck, loc_rng or call_range, "libtpu")], result, result.seconds, facts)
    if result.kind == "vmem_oom":
        n = result.numbers
        detail = ""
        if n.get("requested_bytes"):
            detail = f": needs {fmt_bytes(n['requested_bytes'])}"
            if n.get("limit_bytes"):
                detail += f", limit {fmt_bytes(n['limit_bytes'])}"
        calls = ck.plan.calls
        related = list(contributors(max(calls, key=call_total), ck.chip)) if calls else []
        diag = error(compile_code("vmem_oom"), f"the TPU compiler ran out of VMEM on {ck.chip.name}{detail} "
                     f"({result.oom_limit or 'scoped'} limit): {result.key_line[:300]}", call_range,
                     related=tuple(related), data={"stage": "libtpu", "kind": "vmem_oom", **n})
    elif result.kind in ("timeout", "crash"):
        what = (f"ran {result.wall_seconds or result.seconds:.0f} s without finishing and was stopped"
                if result.kind == "timeout" else "crashed")
        diag = warning("HPL401", f"the libtpu compile {what}; result unknown", call_range,
                       data={"stage": "libtpu", "kind": result.kind})
    else:
        what = {"vector_layout": "vector layout not supported", "alignment": "unaligned access",
                "unsupported_dtype": f"dtype not supported on {ck.chip.name}"}.get(result.kind or "", "compile failed")
        code = compile_code(result.kind)
        diag = error(code, f"TPU compile ({ck.chip.name}): {what}: {(result.key_line or result.error)[:300]}",
                     loc_rng or call_range, data={"stage": "libtpu", "kind": result.kind})
    return TruthResult(False, [diag], result, result.seconds, facts)
