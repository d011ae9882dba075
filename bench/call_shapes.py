"""How long finding kernel shapes from a file's own calls takes (compiler/frontend/call_shapes.py).

    python bench/call_shapes.py [FILE.py ...] [--runs 5]

For each file (default: tests/upstream_style/*.py; pass e.g. a checkout of upstream Helion's examples): the
median wall time of the search after a warm-up run (the first run of a process also imports torch's meta
kernels), its evaluation steps and the shape sets found. Prints the 1-minute load average and the time of a
bare `import torch` measured in a fresh interpreter in the same run, since figures on a shared machine are
only comparable as multiples of it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def torch_import_seconds() -> float:
    done = subprocess.run([sys.executable, "-c", "import time; t = time.perf_counter(); import torch; "
                                                 "print(time.perf_counter() - t)"], capture_output=True, text=True)
    return float(done.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    ns = parser.parse_args()
    files = ns.files or sorted((REPO / "tests" / "upstream_style").glob("*.py"))

    import compiler
    from compiler.frontend.call_recorder import infer_call_shapes
    from compiler.frontend.module import parse_module

    compiler.skip_dynamo_import()  # as the compile workers do
    print(f"load average {os.getloadavg()[0]:.2f}; bare `import torch` {torch_import_seconds():.2f} s")
    print(f"{'file':<24} {'first ms':>9} {'median ms':>10} {'steps':>7} {'sets':>5}")
    for path in files:
        info = parse_module(path.read_text())
        wanted = [k.name for k in info.kernels]
        times, result = [], None
        for _ in range(ns.runs + 1):
            start = time.perf_counter()
            result = infer_call_shapes(info, wanted)
            times.append(time.perf_counter() - start)
        sets = sum(len(v) for v in result.sets.values())
        print(f"{path.name:<24} {times[0] * 1e3:>9.1f} {statistics.median(times[1:]) * 1e3:>10.1f} "
              f"{result.steps:>7} {sets:>5}")


if __name__ == "__main__":
    main()
