"""VMEM verdicts as diagnostics: HPL300 (out of VMEM, an error), HPL301 (over the default scoped limit, which
the generated code raises: information) and HPL501 (resident operands cause it: information).

A verdict sits where the choice was made: on the config entry that chose the blocks when the kernel was
compiled with one, else on the loop whose blocks they are. Its related information lists the largest
buffers of that pallas_call, compiler temporaries included, so the message never blames one input block
for what temporaries take. Sizes print in MiB; all figures are estimates for the named chip.
"""

from __future__ import annotations

from ..codegen.plan_builder import CallLayout
from ..ir.chips import Chip
from ..ir.plan import CallPlan
from ..support.diagnostics import Diagnostic, Range, Related, error, hint
from .report import GATHER_TABLE_ROLE, VmemRow, call_rows, call_total, fmt_bytes

CONTRIBUTORS = 4  # related entries listed per diagnostic


def vmem_diagnostics(layouts: list[CallLayout], chip: Chip, config_range: Range | None) -> list[Diagnostic]:
    """Verdicts for every pallas_call; `config_range` is the config entry the kernel compiled with, if any."""
    diags = []
    for lay in layouts:
        plan = lay.plan
        total = call_total(plan)
        if total <= chip.default_scoped_vmem_bytes:
            continue
        rng = config_range or plan.range
        anchor = {"anchor": "config"} if config_range is not None else {}
        related = contributors(plan, chip)
        if config_range is not None:
            related = (Related(plan.range, f"the pallas_call of this loop needs {fmt_bytes(total)}"), *related)
        resident = [o for o in lay.operands if o.memory == "resident"]
        if total > chip.max_vmem_limit_bytes:
            diags.append(error(
                "HPL300",
                f"out of VMEM on {chip.name} (estimate): this config's buffers need {fmt_bytes(total)} but at most "
                f"{fmt_bytes(chip.max_vmem_limit_bytes)} can be requested ({fmt_bytes(chip.vmem_capacity_bytes)} "
                f"capacity); {_largest(plan)}",
                rng, related=related, data={"total_bytes": total, "vmem_fixes": True, **anchor},
            ))
            continue
        diags.append(hint(
            "HPL301",
            f"needs {fmt_bytes(total)} of VMEM on {chip.name} (estimate), over the default scoped limit of "
            f"{fmt_bytes(chip.default_scoped_vmem_bytes)}: the generated code requests "
            f"{fmt_bytes(plan.vmem_limit_bytes)} (vmem_limit_bytes), which the chip allows",
            rng, related=related, data={"total_bytes": total, **anchor},
        ))
        rows = call_rows(plan)
        held = sum(r.bytes for r in rows if r.role.startswith("whole-array resident"))
        if resident and total - held <= chip.default_scoped_vmem_bytes:  # they, not the rest, push it over
            shown = {r.operand: r.shown for r in rows}  # `x at line 20`: x has several buffers
            names = ", ".join(shown.get(o.ref_name, o.tensor.name) for o in resident)
            diags.append(hint("HPL501", f"resident inner-loop operands ({names}) push this kernel over the default "
                              "VMEM limit", resident[0].ranges[0]))
    return diags


STREAM_ADVICE = "pallas_loop_type='emit_pipeline' streams resident operands"


def _top_rows(plan: CallPlan) -> list[VmemRow]:
    return sorted(call_rows(plan), key=lambda r: -r.bytes)[:3]


def advises_streaming(plan: CallPlan) -> bool:
    """Does the out-of-VMEM message of this call advise emit_pipeline (whole-array resident operands among its
    largest buffers)? Its quick fixes then offer that strategy first (fixes.py)."""
    return any(r.name != "(temporaries)" and r.role.startswith("whole-array resident") for r in _top_rows(plan))


def _largest(plan: CallPlan) -> str:
    """Names the biggest contributors in the message itself (the related list has them all, with places),
    and what shrinks each kind of them."""
    rows = _top_rows(plan)
    advice: list[str] = []
    for r in rows:
        if r.name == "(temporaries)":
            tip = "smaller blocks shrink the temporaries"
        elif r.role == GATHER_TABLE_ROLE:
            tip = "a gather by tensor-valued positions copies the whole block it selects from: a smaller block shrinks it"
        elif r.role.startswith("whole-array resident"):
            tip = STREAM_ADVICE
        elif r.buffer_count > 1:
            tip = "smaller blocks or pallas_load_buffer_count=1 shrink the buffers"
        else:
            tip = "smaller blocks shrink the buffers"
        if tip not in advice:
            advice.append(tip)
    return "largest: " + ", ".join(f"{_what(r)} {fmt_bytes(r.bytes)}" for r in rows) + "; " + "; ".join(advice)


def _what(row: VmemRow) -> str:
    if row.name == "(temporaries)":
        return "compiler temporaries (estimated)"
    return f"`{row.shown}` ({row.role}{f', {row.buffer_count} buffers' if row.buffer_count > 1 else ''})"


def contributors(plan: CallPlan, chip: Chip) -> tuple[Related, ...]:
    """The largest buffers of one pallas_call, each where it comes from, with its size."""
    rows = sorted(call_rows(plan), key=lambda r: -r.bytes)[:CONTRIBUTORS]
    out = []
    for row in rows:
        rng = _row_range(plan, row)
        block = "[" + ", ".join("-" if d is None else str(d) for d in row.block_shape) + "]"
        detail = "" if row.name == "(temporaries)" else f" {block} {row.dtype}"
        out.append(Related(rng, f"{_what(row)}{detail}: {fmt_bytes(row.bytes)} of VMEM ({chip.name} estimate)"))
    return tuple(out)


def _row_range(plan: CallPlan, row: VmemRow) -> Range:
    """Where a buffer comes from: its operand's first access or its carried value (`row.range`), the loop
    whose iterations an unrolled body keeps alive (temporaries), else the pallas_call's loop."""
    if row.range is not None:
        return row.range
    if row.name == "(temporaries)":
        unrolled = [lp for lp in plan.inner_loops if lp.strategy == "unroll"]
        if unrolled:
            return max(unrolled, key=lambda lp: lp.trips).range
    return plan.range
