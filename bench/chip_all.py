"""Every on-chip check still owed by the TPU VM work (issues 41 and 42), in one call on a TPU VM:

    OUT=/some/dir python bench/chip_all.py [--workers 12] [--skip suite]

A lent machine's calls end after ten minutes, so there each step is its own call (docs/tpu-vm.md); on a TPU VM
of your own this runs them all, one after the other, each a separate process that holds the chip only while it
runs (one process at a time may):
  suite     bench/chip_suite.py --shard 0/1 --of 2, then --chip-only: the test job's Python part on this host
            (ruff, every test with JAX_PLATFORMS=cpu as .ci/run sets it) and the chip's own tests;
  editor    bench/chip_ls_on_tpu.py: the language server with default settings on this machine's chip;
  chips     bench/chip_multi.py: tuning on every local chip at once;
  picks     bench/tpu_measure.py --only picks: the tuner's current picks for bmm and matmul, measured, for
            bench/tune_vs_chip.py against the recorded sweeps.
Each step's own files land in $OUT; $OUT/chip_all.json says, per step, its command, exit status and wall time
(written after each step, so a run cut short keeps what it has). Exit 1 when a step failed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def steps(out: Path, workers: int) -> dict[str, list[list[str]]]:
    """Each step's commands, in the order they run."""
    py = sys.executable
    suite = [[py, str(BENCH / "chip_suite.py"), "--shard", str(i), "--of", "2", "--workers", str(workers),
              "--timeout", "3600"] for i in (0, 1)]  # fmt: skip
    return {
        "suite": [*suite, [py, str(BENCH / "chip_suite.py"), "--chip-only", "--timeout", "1800"]],
        "editor": [[py, str(BENCH / "chip_ls_on_tpu.py")]],
        "chips": [[py, str(BENCH / "chip_multi.py")]],
        "picks": [[py, str(BENCH / "tpu_measure.py"), "--only", "picks", "--kernels", "bmm", "matmul",
                   "--out", str(out / "v5e_picks.json")]],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1), help="pytest workers")
    parser.add_argument("--skip", nargs="*", default=[], choices=["suite", "editor", "chips", "picks"])
    ns = parser.parse_args()
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OUT": str(out)}
    record: dict = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="minutes"), "steps": []}
    failed = False
    for name, commands in steps(out, ns.workers).items():
        if name in ns.skip:
            continue
        for cmd in commands:
            start = time.monotonic()
            code = subprocess.run(cmd, env=env, cwd=BENCH.parent).returncode
            record["steps"].append({"step": name, "command": " ".join(cmd[1:]), "exit": code,
                                    "wall_s": round(time.monotonic() - start, 1)})
            failed |= code != 0
            (out / "chip_all.json").write_text(json.dumps(record, indent=1))
    print(json.dumps(record, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
