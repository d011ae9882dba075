"""Tuning on every chip of a TPU VM at once (compiler/tune/chip_workers.py), checked in one call on the VM:

    OUT=/some/dir python bench/chip_multi.py [--shape-set 0 | --args SPECS] [--budget 60]

It writes $OUT/chip_multi.json after each step (a run cut short keeps what it has):
  1. host      what the OS shows (Google PCI functions, /dev/accel*, /dev/vfio groups, the TPU_* environment) and the
               chips compiler.tpu.local_chips counts from it;
  2. jax       what one unpinned process sees (jax.devices(): the count the rule must agree with);
  3. pinned    one process per counted chip, all at once, each pinned with local_chips.pin_env(i): the devices each
               sees (one each, all different, none refused) — the pin itself, apart from the tuner;
  4. tune      examples/attention.py tuned with --evaluator tpu twice, one worker per chip (--executor local) and
               one worker (--executor local:1), each with its own fresh store: wall time, the measuring phase's
               time (refine, from the progress events), the best, and how many measurements each chip made
               (the candidates' `measured_on`).
With one chip the two tunings take the same path (one unpinned worker): the file says so.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from compiler.ir.chips import CHIP_NAMES, get_chip  # noqa: E402
from compiler.tpu.local_chips import local_chips, pin_env  # noqa: E402

DEVICES = ("import jax, json; d = jax.devices(); "
           "print(json.dumps({'count': len(d), 'kinds': sorted({x.device_kind for x in d}), "
           "'ids': [x.id for x in d], 'platform': d[0].platform}))")


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def host_facts() -> dict[str, Any]:
    pci = [
        {"slot": os.path.basename(d), "device": _read(f"{d}/device"), "iommu_group": os.path.basename(
            os.path.realpath(f"{d}/iommu_group")) if os.path.exists(f"{d}/iommu_group") else None}
        for d in sorted(glob.glob("/sys/bus/pci/devices/*")) if _read(f"{d}/vendor").lower() == "0x1ae0"
    ]
    return {
        "pci_google_functions": pci,
        "dev_accel": sorted(glob.glob("/dev/accel*")),
        "dev_vfio": sorted(glob.glob("/dev/vfio/*")),
        "iommu_groups_in_sysfs": os.path.isdir("/sys/kernel/iommu_groups"),
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("TPU_")},
        "local_chips": local_chips().to_json(),
    }


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}  # jax picks the TPU
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    env["HELION_LS_ANALYSIS_CACHE"] = "off"  # no remembered verdicts: both tunings do the same work
    return env | (extra or {})


def _answer(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return {"rc": None, "error": f"timed out after {timeout:.0f} s", "stderr_tail": err[-1500:]}
    line = out.strip().splitlines()[-1] if out.strip() else ""
    try:
        seen = json.loads(line)
    except json.JSONDecodeError:
        seen = None
    return {"rc": proc.returncode, "seen": seen, "stderr_tail": "" if seen else err[-1500:]}


def devices(extra: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", DEVICES], env=_env(extra), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def tune(executor: str, chip: str, which: list[str], ns: argparse.Namespace, out: Path) -> dict[str, Any]:
    store = out / f"store_{executor.replace(':', '_')}.sqlite"
    store.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "compiler.cli", "tune", str(REPO / "examples" / "attention.py"), *which,
           "--chip", chip, "--evaluator", ns.evaluator, "--executor", executor, "--budget", str(ns.budget),
           "--top", "1000", "--json", "--progress", "jsonl", "--store", str(store)]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    phases: dict[str, float] = {}  # progress phase -> seconds after the start when it was first seen
    other: list[str] = []

    def read_progress() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            try:
                phase = json.loads(line).get("phase")
            except (json.JSONDecodeError, AttributeError):
                other.append(line)
                continue
            phases.setdefault(str(phase), round(time.monotonic() - start, 1))

    reader = threading.Thread(target=read_progress, daemon=True)
    reader.start()
    try:
        stdout, _ = proc.communicate(timeout=ns.timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"executor": executor, "rc": None, "error": f"timed out after {ns.timeout:.0f} s", "phases": phases,
                "stderr_tail": "".join(other)[-2000:]}
    wall = time.monotonic() - start
    reader.join(10)
    end = phases.get("verify", phases.get("done"))
    record: dict[str, Any] = {
        "executor": executor, "rc": proc.returncode, "wall_seconds": round(wall, 1), "phases": phases,
        # the measuring itself: from the refine phase's start to the gate's (or the end)
        "measuring_seconds": round(end - phases["refine"], 1) if end is not None and "refine" in phases else None,
        "stderr_tail": "".join(other)[-2000:],
    }
    try:
        result = json.loads(stdout)
    except json.JSONDecodeError:
        return record
    result = result[0] if isinstance(result, list) and result else result
    if not isinstance(result, dict):
        return record
    where = [c.get("measured_on") for c in result["top"]] + [r.get("measured_on") for r in result["rejected"]]
    counts = Counter(f"{w['host']}/chip {w['chip']}" for w in where if w)
    best = result.get("best") or {}
    return record | {"chip": result["chip"], "evaluator": result["evaluator"], "measured": sum(counts.values()),
                     "measurements_by_chip": dict(sorted(counts.items())),
                     "best": {"config": best.get("config"), "seconds": best.get("seconds")},
                     "elapsed": result.get("elapsed")}


def _per_minute(run: dict[str, Any]) -> float | None:
    """Measurements per minute of the measuring phase (else of the whole run)."""
    seconds = run.get("measuring_seconds") or run["wall_seconds"]
    return round(60 * run["measured"] / seconds, 2) if seconds else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--shape-set", type=int, default=0, help="attention.py's shape set (default 0: 8k)")
    which.add_argument("--args", help="argument specs instead of a shape set")
    parser.add_argument("--budget", type=float, default=60, help="each tuning's --budget in seconds (default 60)")
    parser.add_argument("--timeout", type=float, default=270, help="seconds each tuning may take (default 270)")
    parser.add_argument("--evaluator", default="tpu", help="tpu (default); another only to try the script on a CPU")
    ns = parser.parse_args(argv)
    out = Path(os.environ.get("OUT") or ".")
    out.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"date_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                              "tool": "bench/chip_multi.py", "cpu_cores": os.cpu_count()}

    def save() -> None:
        (out / "chip_multi.json").write_text(json.dumps(record, indent=1) + "\n")
        print(json.dumps(record, indent=1)[-3000:], flush=True)

    record["host"] = host_facts()
    save()
    record["jax_unpinned"] = _answer(devices(), 120)
    save()
    chips = local_chips().indices
    if len(chips) > 1:
        procs = {i: devices(pin_env(i)) for i in chips}  # all at once, as the tuner's workers start
        record["pinned"] = {str(i): _answer(p, 180) for i, p in procs.items()}
        seen = [a.get("seen") or {} for a in record["pinned"].values()]
        record["pinned_ok"] = all(s.get("count") == 1 and s.get("platform") == "tpu" for s in seen)
    else:
        record["pinned"] = f"{len(chips)} chip(s) counted: no pin, the single unpinned worker of before"
    save()
    spec = ["--args", ns.args] if ns.args else ["--shape-set", str(ns.shape_set)]
    kinds = (record["jax_unpinned"].get("seen") or {}).get("kinds") or []
    chip = next((n for n in CHIP_NAMES if kinds and get_chip(n).device_kind == kinds[0]), "v5e")
    record["tune_every_chip"] = tune("local", chip, spec, ns, out)
    save()
    record["tune_one_worker"] = tune("local:1", chip, spec, ns, out)
    many, one = record["tune_every_chip"], record["tune_one_worker"]
    if many.get("measured") and one.get("measured"):
        record["summary"] = {
            "chips_counted": len(chips), "chips_measuring": len(many["measurements_by_chip"]),
            "wall_every_chip_s": many["wall_seconds"], "wall_one_worker_s": one["wall_seconds"],
            "measuring_every_chip_s": many["measuring_seconds"], "measuring_one_worker_s": one["measuring_seconds"],
            "measured_every_chip": many["measured"], "measured_one_worker": one["measured"],
            "measurements_per_minute_every_chip": _per_minute(many),
            "measurements_per_minute_one_worker": _per_minute(one),
        }
    save()
    return 0 if many.get("rc") == 0 and one.get("rc") == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
