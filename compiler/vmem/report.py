"""VMEM report: every buffer a compiled kernel keeps in VMEM, padded as the TPU lays it out, against the
scoped limit the generated code requests and the chip's capacity.

Rows are read off the Pallas plan, so they describe exactly the generated code. Compiler temporaries are
an estimate (peak of simultaneously live values in the kernel body) and are labelled as such.
The report's types and `fmt_bytes` import no torch (the language server reads reports without it);
computing a report does.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from dataclasses import dataclass

from ..ir.chips import Chip
from ..ir.plan import CallPlan, Operand
from ..support.diagnostics import Range

MiB = 1024 * 1024

ROLES = {
    ("vmem_block", "input"): "input block",
    ("vmem_block", "output"): "output block",
    ("vmem_block", "inout"): "in/out block",
    ("resident", "input"): "whole-array resident operand",
    ("resident", "output"): "whole-array resident output",
    ("resident", "inout"): "whole-array resident in/out",
    ("hbm", "input"): "inner-pipeline buffer",
    ("hbm", "output"): "inner-pipeline buffer",
    ("hbm", "inout"): "inner-pipeline buffer",
    ("smem", "input"): "scalar table (SMEM)",
}
GATHER_TABLE_ROLE = "gather table copies (estimated)"  # a one-hot gather's copies of the block it selects from
READ_BACK = {  # in/out operands whose old block is copied in: input and output buffers both in VMEM
    "vmem_block": "in/out block (read back)",
    "resident": "resident in/out (read back)",
    "hbm": "inner-pipeline in/out (read back)",
}


@dataclass(frozen=True)
class VmemRow:
    """One buffer: an operand (one per distinct access pattern of a tensor), a scratch value, or the
    compiler's temporaries."""

    name: str  # the tensor or scratch value as named in the source
    role: str
    block_shape: tuple[int | None, ...]
    dtype: str
    tile_bytes: int  # one buffer, padded to (8|16|32) x 128 tiles
    buffer_count: int
    bytes: int
    call: str
    operand: str = ""  # Operand.name in its call (what an access's AccessInfo.operand names)
    range: Range | None = None  # where it comes from: the operand's first access, the carried value
    label: str = ""  # the name as shown: `x at line 29` when the report has several buffers named `x`

    @property
    def shown(self) -> str:
        return self.label or self.name

    def to_json(self) -> dict:
        out = {"name": self.name, "label": self.shown, "role": self.role, "block_shape": list(self.block_shape),
               "dtype": self.dtype, "tile_bytes": self.tile_bytes, "buffer_count": self.buffer_count,
               "bytes": self.bytes, "call": self.call, "operand": self.operand}
        if self.range is not None:
            out["line"] = self.range.start.line + 1
        return out


@dataclass(frozen=True)
class VmemReport:
    chip: str
    rows: tuple[VmemRow, ...]
    total_bytes: int  # the largest pallas_call's total (calls run one after another)
    limit_bytes: int  # vmem_limit_bytes the generated code requests
    default_limit_bytes: int
    capacity_bytes: int
    max_limit_bytes: int

    @property
    def verdict(self) -> str:
        if self.total_bytes > self.max_limit_bytes:
            return "out_of_vmem"
        if self.total_bytes > self.default_limit_bytes:
            return "over_default_limit"
        return "fits"

    def to_json(self) -> dict:
        return {"total_bytes": self.total_bytes, "limit_bytes": self.limit_bytes,
                "default_limit_bytes": self.default_limit_bytes, "capacity_bytes": self.capacity_bytes,
                "verdict": self.verdict, "chip": self.chip, "buffers": [r.to_json() for r in self.rows]}

    def table(self) -> str:
        """A plain-text table, as printed by `helion-pallas compile --emit vmem` and shown in hovers."""
        head = f"{'buffer':<22} {'role':<33} {'block':<22} {'dtype':<9} {'bufs':>4} {'bytes':>12}"
        lines = [head, "-" * len(head)]
        for r in self.rows:
            block = "[" + ", ".join("-" if d is None else str(d) for d in r.block_shape) + "]"
            lines.append(f"{r.shown:<22} {r.role:<33} {block:<22} {r.dtype:<9} {r.buffer_count:>4} {fmt_bytes(r.bytes):>12}")
        lines.append("-" * len(head))
        lines.append(
            f"total {fmt_bytes(self.total_bytes)} | requested limit {fmt_bytes(self.limit_bytes)} | default scoped "
            f"{fmt_bytes(self.default_limit_bytes)} | capacity {fmt_bytes(self.capacity_bytes)} ({self.chip}) -> "
            f"{self.verdict.replace('_', ' ')}"
        )
        return "\n".join(lines)


def fmt_bytes(n: float, mib_digits: int = 2) -> str:
    """Human-readable bytes; hovers use one MiB digit, reports two."""
    if n >= MiB:
        return f"{n / MiB:.{mib_digits}f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{int(n)} B"


@functools.lru_cache(maxsize=4096)  # the tuner asks for the same few blocks thousands of times
def _padded_bytes(shape: tuple[int | None, ...], dtype: str) -> int:
    """One buffer's bytes in (8|16|32) x 128 tiles; `dtype` is the plan's name ("bfloat16"), torch's too."""
    import torch

    from ..codegen.work import padded_bytes

    return padded_bytes(shape, getattr(torch, dtype))


def operand_row(op: Operand, call: str) -> VmemRow:
    tile = _padded_bytes(op.block_shape, op.dtype)
    role, bufs = ROLES[(op.memory, op.kind)], op.buffer_count
    if op.kind == "inout" and op.reads_old:
        whole = op.memory != "hbm" and op.block_shape == op.array_shape
        role, bufs = READ_BACK[op.memory], bufs + (1 if whole else 2)  # + the output side's buffers
    return VmemRow(op.tensor, role, op.block_shape, op.dtype, tile, bufs, tile * bufs, call, op.name,
                   op.ranges[0] if op.ranges else None)


def call_rows(call: CallPlan) -> list[VmemRow]:
    return labelled(_rows(call))


def _rows(call: CallPlan) -> list[VmemRow]:
    """The call's buffers, not yet labelled (labels do not change their bytes)."""
    # an operand in SMEM or left in HBM for DMA copies takes no VMEM (the copies' buffers are scratch rows)
    rows = [operand_row(op, call.name) for op in call.operands if op.memory not in ("smem", "dma")]
    for s in call.scratch:
        if s.role in ("counter", "dma_sem"):  # SMEM / semaphores
            continue
        if s.role in ("dma_buffer", "dma_window_out"):
            # [slots, ...]: the step's rows, and the next (or previous) step's while it runs
            b = _padded_bytes(s.shape[1:], s.dtype)
            role = "rows copied in (DMA buffer)" if s.role == "dma_buffer" else "rows copied out (DMA staging)"
            rows.append(VmemRow(s.name, role, s.shape[1:], s.dtype, b, s.shape[0], b * s.shape[0], call.name, s.name,
                                s.range))
            continue
        b = _padded_bytes(s.shape, s.dtype)
        role = "rows copied out (DMA staging)" if s.role == "dma_staging" else "scratch / carried value"
        rows.append(VmemRow(s.name, role, s.shape, s.dtype, b, 1, b, call.name, s.name, s.range))
    rest = call.temporaries_bytes
    tables = sum(b for _, _, b in call.gather_tables)
    if call.gather_tables and tables <= rest:  # they decide the temporaries: each named, on its gather
        for name, rng, b in call.gather_tables:
            rows.append(VmemRow(name, GATHER_TABLE_ROLE, (), "-", b, 1, b, call.name, "", rng))
        rest -= tables
    if rest:
        rows.append(VmemRow("(temporaries)", "compiler temporaries (estimated)", (), "-", rest, 1, rest, call.name))
    return rows


def labelled(rows: list[VmemRow]) -> list[VmemRow]:
    """Buffers that share a name (a tensor loaded by several distinct accesses) are told apart by the line
    of their access, and by its column when they share that too: `x at line 29`, `x at line 38`."""
    def where(r: VmemRow, column: bool) -> str:
        if r.range is None:
            return r.name
        at = f"{r.range.start.line + 1}:{r.range.start.character + 1}" if column else f"line {r.range.start.line + 1}"
        return f"{r.name} at {at}"

    names = Counter(r.name for r in rows)
    if all(n < 2 for n in names.values()) and not any(r.label for r in rows):
        return list(rows)  # every name is unique and none carries a label: nothing to tell apart (the usual case)
    lines = Counter(where(r, False) for r in rows)
    out = []
    for r in rows:
        label = "" if names[r.name] < 2 else where(r, lines[where(r, False)] > 1)
        out.append(r if label == r.label else dataclasses.replace(r, label=label))
    return out


def call_total(call: CallPlan) -> int:
    return sum(r.bytes for r in _rows(call))


# What the generated code asks for beyond the report's total. The temporaries are an estimate: libtpu once needed
# up to 1.44x the report's total on v5e (attention 8k unrolled, before the report counted every unrolled iteration
# there: [1, 1024, 1024] needed 54.0 MiB against 41.2 and failed at the 51 MiB it asked for); since the calibration
# of docs/vmem-calibration.md the report is within 15 % on the examples, and the headroom stays for kernels it has
# not seen. What libtpu uses barely moves with the limit asked for (36.9 MiB for attention [1, 1024, 512] under 49 or
# 128; rms_norm_bwd [128] on v7x 36.2 or 38.2).
LIMIT_HEADROOM = 1.5


def requested_limit(total: int, chip: Chip) -> int:
    """vmem_limit_bytes for the generated code: the default unless more may be needed, never above the chip's max."""
    wanted = -(-int(total * LIMIT_HEADROOM + MiB) // MiB) * MiB
    return max(chip.default_scoped_vmem_bytes, min(wanted, chip.max_vmem_limit_bytes))


def vmem_report(calls: list[CallPlan], chip: Chip) -> VmemReport:
    return _report(calls, [_rows(c) for c in calls], chip)


def with_limits(calls: list[CallPlan], chip: Chip) -> tuple[list[CallPlan], VmemReport]:
    """The calls, each requesting the VMEM its buffers need (`requested_limit`), and their report: each call's
    rows are built once (they do not depend on the limit)."""
    per_call = [_rows(c) for c in calls]
    calls = [dataclasses.replace(c, vmem_limit_bytes=requested_limit(sum(r.bytes for r in rows), chip))
             for c, rows in zip(calls, per_call, strict=True)]
    return calls, _report(calls, per_call, chip)


def _report(calls: list[CallPlan], per_call: list[list[VmemRow]], chip: Chip) -> VmemReport:
    rows = labelled([r for call in per_call for r in call])  # a name shared across calls is told apart too
    total = max((sum(r.bytes for r in call) for call in per_call), default=0)
    limit = max((c.vmem_limit_bytes for c in calls), default=chip.default_scoped_vmem_bytes)
    return VmemReport(chip.name, tuple(rows), total, limit, chip.default_scoped_vmem_bytes, chip.vmem_capacity_bytes,
                      chip.max_vmem_limit_bytes)
