"""Read libtpu's Mosaic pass dumps (`--xla_mosaic_dump_to=DIR`): kernel text and static op counts.

libtpu 0.0.42.1 writes one file per pass and kernel compile, named
`<id>-<NNNN>-mosaic-dump-<name>-<stage>.txt`: `0001-...-original`, `0002-...-post-infer-memref-layout`, ...,
`0018-...-post-finalize-llo`. A pass that fails writes `...-post-<pass>-failed.txt` and stops the group.
Single `0000-...-post-deserialization` files (other ids) are re-reads of the same kernel and are ignored.

Op counts are taken from the last pass of a group (the low-level `llo` instruction stream), inside the kernel
function only (the `transform_N` index-map functions are skipped). They are static counts of the body of one
grid step: ops inside loops (`scf.for`, an inner `emit_pipeline`) are counted once. Categories, by exact
op name (all names are libtpu 0.0.42.1's):
  matmul          llo.vmatmul, llo.vmatmul.mubr   (an LHS tile pushed through the MXU; v4/v5 use the former,
                                                   v6e/v7x the latter)
  matmul_operand  llo.vlatch, llo.vlatchi, llo.vmatprep.subr, llo.vmatprep.mubr, llo.vdwg (MXU operand staging)
  matmul_result   llo.vmatres                     (one result tile popped from the MXU)
  vector_load     llo.vector_load*                (llo.vector_load, ..._slane_stride, ..._unpack)
  vector_store    llo.vector_store*               (llo.vector_store, ..._masked, ..._slane_stride, ...)
  transcendental  llo.{vexp, vpow2, vln, vln1p, vtanh, vrsqrt, vrecip, vsqrt, verf, vsin, vcos, vtan, vpow,
                  vatan2}.<type>                  (EUP ops; vpow2 is exp2)
  cross_lane      any llo.v* op with an `.xlane` / `.slane` part (reductions) and llo.{vrot, vperm, vpermres,
                  vsetperm, vxpose, vxpose.result, vbcast_sublane_chunk, vlbroadcast, vslreplicate,
                  vld_sublane_shuffle, vst_sublane_shuffle, vcombine.sublanes}
  vector_alu      llo.{vadd, vsub, vmul, vdiv, vrem, vmax, vmin, vabs, vneg, vcmp, vselect, vand, vor, vxor,
                  vshll, vshra, vshrl, vfloor, vceil, vround, vtrunc, vclz, vpcnt, vnez, vcvt, vcvtsr,
                  vcvt_f32_to_narrow_float, vcvt_narrow_float_to_f32}.<type>   (not cross_lane)
Everything else (constants, scalar ops, vpack/vunpack/vbitcast, DMA and sync ops) is only in `op_counts`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .mlir_text import SourceLoc, loc_aliases, op_loc, strip_locs

_FILE = re.compile(r"^(\d+)-(\d{4})-mosaic-dump-(.+?)-(original|post-[\w-]+?)(-failed)?\.txt$")
_FUNC = re.compile(r"^\s*func\.func (?:private )?@([\w$.]+)")
_OP = re.compile(r'^\s*(?:%[\w#:]+(?:\s*,\s*%[\w#:]+)*\s*=\s*)?"?([a-z_]\w*\.[\w.]+)"?(?=[\s(<{]|$)')
_INDEX_MAP = re.compile(r"transform_\d+$")

_MATMUL = {"llo.vmatmul", "llo.vmatmul.mubr"}
_MATMUL_OPERAND = {"llo.vlatch", "llo.vlatchi", "llo.vmatprep.subr", "llo.vmatprep.mubr", "llo.vdwg"}
_MATMUL_RESULT = {"llo.vmatres"}
_TRANSCENDENTAL = {
    "vexp", "vpow2", "vln", "vln1p", "vtanh", "vrsqrt", "vrecip", "vsqrt", "verf", "vsin", "vcos", "vtan",
    "vpow", "vatan2",
}  # fmt: skip
_CROSS_LANE = {
    "vrot", "vperm", "vpermres", "vsetperm", "vxpose", "vbcast_sublane_chunk", "vlbroadcast", "vslreplicate",
    "vld_sublane_shuffle", "vst_sublane_shuffle", "vcombine",
}  # fmt: skip
_ALU = {
    "vadd", "vsub", "vmul", "vdiv", "vrem", "vmax", "vmin", "vabs", "vneg", "vcmp", "vselect", "vand", "vor",
    "vxor", "vshll", "vshra", "vshrl", "vfloor", "vceil", "vround", "vtrunc", "vclz", "vpcnt", "vnez", "vcvt",
    "vcvtsr", "vcvt_f32_to_narrow_float", "vcvt_narrow_float_to_f32",
}  # fmt: skip
CATEGORIES = (
    "matmul",
    "matmul_operand",
    "matmul_result",
    "vector_load",
    "vector_store",
    "transcendental",
    "cross_lane",
    "vector_alu",
)


def category(op: str) -> str | None:
    """The category of an llo op name (see the module docstring), or None."""
    if not op.startswith("llo."):
        return None
    if op in _MATMUL:
        return "matmul"
    if op in _MATMUL_OPERAND:
        return "matmul_operand"
    if op in _MATMUL_RESULT:
        return "matmul_result"
    if op.startswith("llo.vector_load"):
        return "vector_load"
    if op.startswith("llo.vector_store"):
        return "vector_store"
    parts = op.split(".")
    base = parts[1]
    if base in _TRANSCENDENTAL:
        return "transcendental"
    if base in _CROSS_LANE or ("xlane" in parts or "slane" in parts) and base.startswith("v"):
        return "cross_lane"
    if base in _ALU:
        return "vector_alu"
    return None


@dataclass(frozen=True)
class KernelDump:
    """One kernel as libtpu compiled it.

    mosaic:      the kernel as libtpu received it (the `original` dump), locations stripped.
    final:       the kernel after the last pass that ran (`post-finalize-llo` on success), locations stripped.
    last_pass:   name of that pass; failed_pass: the pass that failed, if any.
    op_counts:   every op of the kernel function in `final`, by name; categories: see the module docstring.
    """

    name: str
    mosaic: str
    final: str
    last_pass: str
    failed_pass: str | None
    op_counts: dict[str, int] = field(default_factory=dict)
    categories: dict[str, int] = field(default_factory=dict)

    def to_json(self, with_text: bool = True) -> dict:
        out = {
            "name": self.name,
            "last_pass": self.last_pass,
            "failed_pass": self.failed_pass,
            "op_counts": self.op_counts,
            "categories": self.categories,
        }
        if with_text:
            out |= {"mosaic": self.mosaic, "final": self.final}
        return out

    @staticmethod
    def from_json(data: dict) -> KernelDump:
        return KernelDump(
            name=data["name"],
            mosaic=data.get("mosaic", ""),
            final=data.get("final", ""),
            last_pass=data["last_pass"],
            failed_pass=data["failed_pass"],
            op_counts=dict(data["op_counts"]),
            categories=dict(data["categories"]),
        )


def count_ops(mlir: str) -> dict[str, int]:
    """Ops per name inside the kernel function(s) of a Mosaic/llo module (index maps skipped)."""
    counts: dict[str, int] = {}
    current = None
    for line in mlir.splitlines():
        if m := _FUNC.match(line):
            current = m.group(1)
            continue
        if current is None or _INDEX_MAP.match(current):
            continue
        if m := _OP.match(line):
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def categorize(op_counts: dict[str, int]) -> dict[str, int]:
    out = dict.fromkeys(CATEGORIES, 0)
    for op, n in op_counts.items():
        if (cat := category(op)) is not None:
            out[cat] += n
    return out


def _groups(dump_dir: Path) -> list[list[tuple[int, str, bool, Path]]]:
    """Pass files per kernel compile, in compile order; each group sorted by pass number."""
    groups: dict[str, list[tuple[int, str, bool, Path]]] = {}
    for path in dump_dir.iterdir():
        if m := _FILE.match(path.name):
            groups.setdefault(m.group(1), []).append((int(m.group(2)), m.group(4), bool(m.group(5)), path))
    ordered = [sorted(groups[key]) for key in sorted(groups, key=int)]
    return [g for g in ordered if any(stage == "original" for _, stage, _, _ in g)]


def _kernel_name(mlir: str) -> str:
    for line in mlir.splitlines():
        if (m := _FUNC.match(line)) and not _INDEX_MAP.match(m.group(1)):
            return m.group(1)
    return "kernel"


def read_dumps(dump_dir: Path, with_text: bool = True) -> list[KernelDump]:
    """Every kernel compiled into `dump_dir`, in compile order."""
    kernels = []
    for group in _groups(dump_dir):
        original = next(p for _, stage, _, p in group if stage == "original").read_text()
        _, last_stage, failed, last_path = group[-1]
        final = last_path.read_text()
        counts = count_ops(final)
        kernels.append(
            KernelDump(
                name=_kernel_name(original),
                mosaic=strip_locs(original) if with_text else "",
                final=strip_locs(final) if with_text else "",
                last_pass=last_stage.removeprefix("post-"),
                failed_pass=last_stage.removeprefix("post-") if failed else None,
                op_counts=counts,
                categories=categorize(counts),
            )
        )
    return kernels


def failure_location(dump_dir: Path, op_name: str, result_type: str | None) -> SourceLoc | None:
    """Source location of the op a failed pass complained about, from the `-failed` dump (needs the dump
    to carry debug info: `--xla_mosaic_enable_dump_debug_info=true`). Among ops named `op_name`, one whose
    line mentions `result_type` is preferred."""
    for group in reversed(_groups(dump_dir)):
        _, _, failed, path = group[-1]
        if not failed:
            continue
        text = path.read_text()
        aliases = loc_aliases(text)
        candidates = [ln for ln in text.splitlines() if (m := _OP.match(ln)) and m.group(1) == op_name]
        if result_type:
            candidates = [ln for ln in candidates if result_type in ln] or candidates
        for line in candidates:
            if (loc := op_loc(line, aliases)) is not None:
                return loc
    return None
