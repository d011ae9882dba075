"""TPU-truth latency per example kernel and chip: VMEM report, Mosaic lowering, libtpu compile (ms).

Goals on this 2-core machine: VMEM report <= 1 ms, lowering <= 100 ms, libtpu compile <= 600 ms per kernel
and config (warm), so an editor can run the first two on every save.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

import compiler  # noqa: E402
from compiler.support.diagnostics import CompileError  # noqa: E402
from compiler.tpu.libtpu_compile import libtpu_available  # noqa: E402
from compiler.vmem.report import vmem_report  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CHIPS = sys.argv[1:] or ["v7x", "v6e"]


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> int:
    print(f"libtpu installed: {libtpu_available()}")
    header = ("kernel", "chip", "vmem ms", "lowering ms", "libtpu ms", "verdict")
    rows = []
    for path in sorted((REPO / "examples").glob("*.py")):
        for name, k in compiler.load(path).kernels.items():
            for chip in CHIPS:
                try:
                    ck = k.compile(shape_set=0, chip=chip, config={"pallas_loop_type": "emit_pipeline"}
                                   if k.config_space(chip=chip).n_loops else None)
                except CompileError as exc:
                    rows.append((name, chip, "-", "-", "-", str(exc)[:40]))
                    continue
                calls = list(ck.plan.calls)
                vm = median_ms(lambda calls=calls, chip=ck.chip: vmem_report(calls, chip), 200)
                ck.check_lowering()
                low = median_ms(ck.check_lowering, 5)
                tpu = "-"
                if libtpu_available():
                    ck.check_tpu_compile()
                    tpu = f"{median_ms(ck.check_tpu_compile, 3):.0f}"
                rows.append((name, chip, f"{vm:.3f}", f"{low:.0f}", tpu, ck.vmem.verdict))
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    print("warm medians (first calls excluded); shape set 0; emit_pipeline for kernels with inner loops")
    return 0


if __name__ == "__main__":
    sys.exit(main())
