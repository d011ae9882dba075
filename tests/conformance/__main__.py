"""`python -m tests.conformance [-k NAME] [--fast [--every-strategy]] [-j N] [-v]`: run the conformance suite and
print its table.

Exit status 1 when any kernel compiled and then gave a wrong answer (a silent mismatch), crashed at run
time, or was accepted where a diagnostic is expected.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

from .case import PASSING, discover, write_passing  # noqa: E402
from .runner import exit_code, report, run_all  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.conformance", description=__doc__.split("\n")[0])
    parser.add_argument("-k", dest="pattern", help="only cases whose file name contains this")
    parser.add_argument("--fast", action="store_true", help="one config and loop strategy per case")
    parser.add_argument("--every-strategy", action="store_true",
                        help="with --fast: one config, every loop strategy (what CI runs)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every run as it finishes")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="run cases in this many processes")
    parser.add_argument("--write-passing", action="store_true",
                        help=f"record the kernels that pass in {PASSING.name} (the floor CI holds; full runs only)")
    ns = parser.parse_args(argv)
    if ns.every_strategy and not ns.fast:
        parser.error("--every-strategy narrows --fast (a full run already runs every strategy)")
    if ns.write_passing and (ns.pattern or ns.fast):
        parser.error("--write-passing records a full run: no -k, no --fast")
    paths = discover(ns.pattern)
    if not paths:
        print(f"no conformance cases match {ns.pattern!r}", file=sys.stderr)
        return 2
    start = time.perf_counter()

    def progress(res):  # noqa: ANN001, ANN202 - a callback
        if ns.verbose:
            for r in res.runs:
                print(f"  {res.name} {r.strategy or 'grid'} {r.config or ''}: {r.outcome} {r.seconds:.2f}s "
                      f"{r.detail[:200]}", flush=True)

    results = run_all(paths, fast=ns.fast, progress=progress, workers=ns.jobs, every_strategy=ns.every_strategy)
    print(f"({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    print(report(results), flush=True)
    if ns.write_passing:
        write_passing(r.name for r in results if r.passed)
    return exit_code(results)


if __name__ == "__main__":
    sys.exit(main())
