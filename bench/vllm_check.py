"""`helion-pallas check --chip CHIP` on every kernel of a folder of vLLM Helion op files that is declared the way vLLM
declares them (`register_kernel`), as a dated markdown table (issue 40's bar): per kernel its file, how it is
declared, its shape sets (its own input generator's cases), the verdict of each loop type, the one diagnostic when it
does not pass, and "N of M pass" (a kernel passes when every row of its check is ok).

The op files are read from where they were fetched (never kept in this repository). Each kernel is checked as the
CLI checks it (`compiler.check.check_rows`: its first shape set, every loop type it has; on the chip itself when
this machine has CHIP, else in interpret mode after the deviceless libtpu compile). On a TPU machine:

    python bench/vllm_check.py OPS/vllm --files mla_decode_fp8_per_token.py --json $OUT/vllm.json > $OUT/vllm.md

    python bench/vllm_check.py [DIR] [--chip v5e] [--files a.py,b.py] [--loop-types ...] [--json OUT]

DIR defaults to /work/vllm-ops/vllm; `--files` keeps the files whose names (or paths under DIR) are listed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

DEFAULT_DIR = Path("/work/vllm-ops/vllm")
LOOP_TYPES = ("unroll", "emit_pipeline", "fori_loop")
WRAPPER = "register_kernel"


@dataclass
class KernelRow:
    """One register_kernel kernel's check: `verdicts` per loop type ("-": a kernel with no inner loop)."""

    kernel: str
    file: str
    declared: str
    shape_sets: str
    verdicts: dict[str, str] = field(default_factory=dict)
    diagnostic: str = ""  # why it does not pass (the first row or note that is not ok); empty when it passes

    @property
    def passes(self) -> bool:
        return bool(self.verdicts) and all(v.startswith("ok") for v in self.verdicts.values()) and not self.diagnostic


def op_files(root: Path, only: list[str] | None = None) -> list[Path]:
    """The .py files under `root` that name register_kernel (its definition, register.py, declares no kernel)."""
    files = sorted(p for p in root.rglob("*.py") if WRAPPER in p.read_text(errors="replace"))
    if only:
        files = [p for p in files if p.name in only or str(p.relative_to(root)) in only]
    return files


def declared_kernels(path: Path) -> list[Any]:
    """The kernels of `path` declared with register_kernel (read statically: the file is never imported)."""
    import compiler

    module = compiler.load(path)
    return [k for k in module.kernels.values()
            if (k.definition.declared_by or "").rsplit(".", 1)[-1] == WRAPPER]


def check_kernel(path: Path, kernel: Any, root: Path, chip: str, loop_types: list[str]) -> KernelRow:
    from compiler.check import check_rows

    d = kernel.definition
    declared = WRAPPER + (" + Settings" if d.baseline else "") + (f" (only where {d.condition})" if d.condition else "")
    cases = kernel.all_inferred if d.input_generator else []
    sets = f"{len(cases)} cases of {d.input_generator}()" if cases else "none"
    row = KernelRow(kernel.name, str(path.relative_to(root)), declared, sets)
    report = check_rows(str(path), kernel.name, chip, loop_types)
    for r in report.rows:
        hlo = r.verdict == "ok" and "HLO interpreter" in r.eager  # not TPU interpret mode: said so in the table
        row.verdicts[r.loop_type] = "ok (HLO interpreter)" if hlo else r.verdict
        if r.verdict != "ok" and not row.diagnostic:
            row.diagnostic = f"{r.verdict}: {r.eager}" if not r.eager.startswith(("bad inputs", "compile error")) \
                else r.eager
    failed = [n.removeprefix("FAILED: ") for n in report.notes if n.startswith("FAILED: ")]
    if failed and not row.diagnostic:
        row.diagnostic = failed[0]
    return row


def table(rows: list[KernelRow], chip: str, loop_types: list[str], when: str, where: str) -> str:
    """The dated markdown table and its summary line."""
    head = ["kernel", "file", "declared", "shape sets", *loop_types, "diagnostic (when not ok)"]
    lines = [f"`check --chip {chip}` of every register_kernel kernel, {when} ({where})", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        no_loop = "-" in r.verdicts
        only = r.verdicts.get("-", "")
        cells = [only + (" (no inner loop)" if only == "ok" else "") if no_loop and i == 0 else
                 "" if no_loop else r.verdicts.get(lt, "") for i, lt in enumerate(loop_types)]
        text = r.diagnostic.replace("|", "\\|").replace("\n", " ")[:400]
        lines.append(f"| {r.kernel} | {r.file} | {r.declared} | {r.shape_sets} | " + " | ".join(cells) + f" | {text} |")
    lines += ["", f"**{sum(r.passes for r in rows)} of {len(rows)} pass** (every loop type ok)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", nargs="?", default=str(DEFAULT_DIR))
    parser.add_argument("--chip", default="v5e")
    parser.add_argument("--files", help="comma-separated file names (or paths under DIR) to check")
    parser.add_argument("--loop-types", default=",".join(LOOP_TYPES))
    parser.add_argument("--json", metavar="OUT", help="write the rows as JSON here")
    ns = parser.parse_args(argv)
    root = Path(ns.dir).resolve()
    loop_types = [t for t in ns.loop_types.split(",") if t]
    from compiler.tpu.runtime import claim_tpu

    claim_tpu()  # as the CLI: this process alone runs kernels on a TPU here (the eager reference's stays on the CPU)
    rows = [check_kernel(path, k, root, ns.chip, loop_types)
            for path in op_files(root, ns.files.split(",") if ns.files else None)
            for k in declared_kernels(path)]
    from compiler.ir.chips import get_chip
    from compiler.tpu.libtpu_compile import libtpu_available
    from compiler.tpu.runtime import runs_on_chip

    where = (f"on the chip ({get_chip(ns.chip).device_kind})" if runs_on_chip(get_chip(ns.chip)) else
             f"interpret mode on {platform.node() or 'this machine'} ({os.cpu_count()} CPUs), "
             + ("libtpu's deviceless compile first" if libtpu_available() else "libtpu not installed"))
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(table(rows, ns.chip, loop_types, when, where))
    if ns.json:
        Path(ns.json).write_text(json.dumps({"chip": ns.chip, "when": when, "where": where,
                                             "passed": sum(r.passes for r in rows), "kernels": len(rows),
                                             "rows": [{**asdict(r), "passes": r.passes} for r in rows]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
