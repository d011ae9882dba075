"""The test job's Python part on a TPU VM, in shards that each fit one call of a lent machine:

    OUT=/some/dir python bench/chip_suite.py --shard 0 --of 2 [--workers 12]    # then --shard 1 --of 2
    OUT=/some/dir python bench/chip_suite.py --chip-only                       # the chip's own tests

`.ci/run` installs, runs ruff, then `pytest -n 2 tests` with JAX_PLATFORMS=cpu, then the VS Code extension's
build and its real-editor test. A lent TPU machine has no network (no `pip install`, no `npm ci`), so this runs
what it can there: ruff and the test files of one shard (every `tests/test_*.py`, sorted, every `of`-th from
`shard`) the way `.ci/run` runs them; or, with --chip-only, the tests that need the chip, with it visible
(JAX_PLATFORMS unset). It writes $OUT/chip_suite_<shard or chip>.json (counts and failed test ids) and the pytest
log beside it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHIP_ONLY = "tpu_vm or this_machines_tpu or every_local_chip or on_tpu"  # the tests that need the chip itself
SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|errors?)")
FINAL = re.compile(r"\d+ (passed|failed|errors?)\b.* in [\d.]+s")


def shard_files(shard: int, of: int) -> list[str]:
    """Every `of`-th test file from `shard`: the same split on every machine (sorted names)."""
    files = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").glob("test_*.py"))
    return files[shard::of]


def run_pytest(args: list[str], env: dict[str, str], log: Path, timeout: float) -> dict:
    """One pytest run: its counts, its failed ids, its exit code and wall time (the log has the rest)."""
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", *args], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=timeout)
        out, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        code = "timeout"
    log.write_text(out)
    ends = [line for line in out.splitlines() if FINAL.search(line)]  # pytest's last line: "N passed, ... in T s"
    tail = ends[-1].strip("= ") if ends else ""
    counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n) for n, kind in SUMMARY.findall(tail)}
    failed = sorted({m.group(1) for m in re.finditer(r"^(?:FAILED|ERROR) (\S+)", out, re.M)})
    return {"exit": code, "wall_s": round(time.monotonic() - start, 1), "counts": counts, "failed": failed,
            "summary": tail}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shard", type=int, default=0)
    parser.add_argument("--of", type=int, default=1)
    parser.add_argument("--chip-only", action="store_true", help="the chip's own tests instead of a shard")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--timeout", type=float, default=520.0, help="seconds for the pytest run")
    ns = parser.parse_args()
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    name = "chip" if ns.chip_only else str(ns.shard)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    record: dict = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="minutes"),
                    "commit": commit.stdout.strip() or "unknown", "workers": ns.workers}
    target = out / f"chip_suite_{name}.json"
    if ns.chip_only:
        env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
        record["chip_only"] = run_pytest(["-k", CHIP_ONLY, "tests"], env, out / "chip_suite_chip.log", ns.timeout)
        target.write_text(json.dumps(record, indent=1))
        print(json.dumps(record, indent=1))
        return 0 if record["chip_only"]["exit"] == 0 else 1
    ruff = subprocess.run([sys.executable, "-m", "ruff", "check", "compiler", "helion_ls", "tests", "bench",
                           "examples"], cwd=REPO, capture_output=True, text=True)
    files = shard_files(ns.shard, ns.of)
    record.update(shard=ns.shard, of=ns.of, files=len(files),
                  ruff={"exit": ruff.returncode, "tail": (ruff.stdout + ruff.stderr).strip()[-500:]})
    target.write_text(json.dumps(record, indent=1))
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1"}  # as .ci/run sets them
    record["suite"] = run_pytest(["-n", str(ns.workers), *files], env, out / f"chip_suite_{name}.log", ns.timeout)
    target.write_text(json.dumps(record, indent=1))
    print(json.dumps(record, indent=1))
    return 0 if ruff.returncode == 0 and record["suite"]["exit"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
