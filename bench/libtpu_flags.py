"""Does a libtpu option make the tuner's verdict cheaper without changing it? (issue 41, item 2)

The tuner's gate asks libtpu's deviceless compile for a verdict on each shape set's winner at its real shapes
(compiler/tune/correctness.py `tpu_verdict`): accepts, or rejects (out of VMEM: with what it needed). An
option that shortens the compile (LIBTPU_INIT_ARGS flags: scheduler, register allocator, verifiers) is usable
only if every config gives the same verdict and the same VMEM figure as the default compile: libtpu's
`vmem_used_bytes` when it compiles, the need in its OOM message when it does not.

For each flag set (the first is always the default, no flags) one gate-style libtpu worker
(`TpuCompiler(mosaic_dump=False)`) is kept; each config is compiled on every worker in turn (interleaved, so a
change in the machine's load hits every flag set alike) and the worker's CPU seconds for that compile are read
from /proc (user + system of the worker process, all its threads). Configs: what a cold
`helion-pallas tune examples/attention.py --chip v7x` asks libtpu (`WINNERS`), then the records of bench/vmem_calibration.json (their
configs, compiled from the generated code of this checkout) up to `--max-seconds` of recorded compile time.

    python bench/libtpu_flags.py --flags=--xla_jf_run_verifier=false --winners-only
    python bench/libtpu_flags.py --flags="--a=1 --b=2" --flags=--c=0 --max-seconds 60 --json out.json

Prints one line per config and flag set (CPU-s, verdict, VMEM figure, same/DIFFERS) and a summary per flag set.
Needs libtpu. One compile at a time; unrolled attention takes ~7-9 CPU-s per compile.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# what a cold `helion-pallas tune examples/attention.py --chip v7x` asks libtpu (at a0ffe1a, 2026-12-07): 8k's
# early candidate (rejected: out of VMEM), 8k's winner, 32k's winner; and 8k's winner before the VMEM report was
# calibrated (docs/tune-speed.md)
WINNERS = (
    ("attention", 0, "v7x", {"block_sizes": [1, 2048, 4096], "loop_orders": [[1, 0]], "pallas_loop_type": "unroll"}),
    ("attention", 0, "v7x", {"block_sizes": [1, 2048, 4096], "pallas_load_buffer_count": [2, 1, 2],
                             "pallas_loop_type": "unroll"}),
    ("attention", 1, "v7x", {"block_sizes": [1, 256, 16384], "pallas_load_buffer_count": [2, 1, 1],
                             "pallas_loop_type": "unroll"}),
    ("attention", 0, "v7x", {"block_sizes": [1, 1024, 8192], "pallas_loop_type": "unroll"}),
)
_TICK = os.sysconf("SC_CLK_TCK")


def worker_cpu(pid: int) -> float:
    """User + system CPU seconds of a running process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def real_compile(kernel: Any, shape_set: int, chip: str, config: dict) -> Any:
    """The config's module at the real shapes, exactly as the tuner's gate asks libtpu for it."""
    from compiler.tune.correctness import RealCompile

    return RealCompile.of(kernel.compile(shape_set=shape_set, config=dict(config), chip=chip))


def verdict(result: Any) -> dict[str, Any]:
    """What the gate reads of a compile: accepted or the kind of rejection, and libtpu's VMEM figure."""
    return {"ok": result.ok, "kind": result.kind, "vmem_used_bytes": result.vmem_used_bytes,
            "vmem_limit_bytes": result.vmem_limit_bytes, "vmem_operand_bytes": result.vmem_operand_bytes,
            "requested_bytes": result.numbers.get("requested_bytes"), "oom_limit": result.oom_limit}


SAME = ("ok", "kind", "vmem_used_bytes", "requested_bytes", "vmem_limit_bytes", "vmem_operand_bytes", "oom_limit")


def same_verdict(default: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether a compile under other flags told the gate exactly what the default compile did: accepted or
    rejected alike (same kind), with the same VMEM figures (used, needed, limit, operands in VMEM)."""
    return all(default[k] == other[k] for k in SAME)


def compile_cpu(compiler: Any, real: Any, chip: Any) -> tuple[Any, float]:
    """Compile on `compiler`'s worker; the worker's CPU seconds for this compile alone (it is started and
    ready before the count starts)."""
    compiler.start()
    proc = compiler._proc  # noqa: SLF001 - the bench reads the worker's own CPU time
    if not compiler._ready:  # noqa: SLF001 - wait out its imports, so they are not counted
        compiler._await_ready(proc)  # noqa: SLF001
    before = worker_cpu(proc.pid)
    result = compiler.compile(real.source, real.entry, list(real.args), chip, dump_mosaic=False)
    after = worker_cpu(proc.pid) if proc.poll() is None else float("nan")
    return result, after - before


def configs(max_seconds: float, winners_only: bool) -> list[tuple[str, int, str, dict, str]]:
    out = [(k, s, c, cfg, "winner") for k, s, c, cfg in WINNERS]
    if winners_only:
        return out
    saved = json.loads((REPO / "bench" / "vmem_calibration.json").read_text())
    seen = {json.dumps([k, s, c, cfg], sort_keys=True) for k, s, c, cfg, _ in out}
    for r in sorted(saved["records"], key=lambda r: r["seconds"]):
        key = json.dumps([r["kernel"], r["shape_set"], r["chip"], r["config"]], sort_keys=True)
        if r["seconds"] <= max_seconds and key not in seen and not r["libtpu"].startswith("timeout"):
            seen.add(key)
            out.append((r["kernel"], r["shape_set"], r["chip"], r["config"], r["why"]))
    return out


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flags", action="append", default=[], help="a LIBTPU_INIT_ARGS flag set to compare")
    ap.add_argument("--winners-only", action="store_true", help="only what the attention tune asks (WINNERS)")
    ap.add_argument("--max-seconds", type=float, default=60.0,
                    help="calibration records whose recorded compile took at most this long")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--json", type=Path)
    opts = ap.parse_args(argv)

    import compiler
    from compiler.ir.chips import get_chip
    from compiler.tpu.libtpu_compile import TpuCompiler

    flag_sets = ["", *opts.flags]
    workers = []
    base = os.environ.get("LIBTPU_INIT_ARGS", "")
    for flags in flag_sets:  # each worker reads LIBTPU_INIT_ARGS when it starts
        os.environ["LIBTPU_INIT_ARGS"] = f"{base} {flags}".strip()
        worker = TpuCompiler(timeout=opts.timeout, mosaic_dump=False)
        worker.start()
        workers.append(worker)
    os.environ["LIBTPU_INIT_ARGS"] = base
    kernels: dict[str, Any] = {}
    rows = []
    load = os.getloadavg()
    try:
        for name, shape_set, chip, config, why in configs(opts.max_seconds, opts.winners_only):
            kernel = kernels.setdefault(name, compiler.load(REPO / "examples" / f"{name}.py").kernels[name])
            real = real_compile(kernel, shape_set, chip, config)
            row: dict[str, Any] = {"kernel": name, "shape_set": shape_set, "chip": chip, "config": config,
                                   "why": why, "runs": []}
            for flags, worker in zip(flag_sets, workers, strict=True):
                result, cpu = compile_cpu(worker, real, get_chip(chip))
                run = {"flags": flags, "cpu_s": round(cpu, 2), "wall_s": round(result.wall_seconds, 2),
                       **verdict(result), "key_line": result.key_line[:160]}
                run["same"] = same_verdict(row["runs"][0], run) if row["runs"] else True
                row["runs"].append(run)
                figure = run["vmem_used_bytes"] if run["ok"] else run["requested_bytes"]
                print(f"{name}[{shape_set}] {config.get('block_sizes')} {config.get('pallas_loop_type', '')} {chip}"
                      f" | {flags or '(default)'}: {run['cpu_s']:6.2f} CPU-s {'ok' if run['ok'] else run['kind']}"
                      f" vmem {figure} {'same' if run['same'] else 'DIFFERS ' + run['key_line']}", flush=True)
            rows.append(row)
    finally:
        for worker in workers:
            worker.close()
    summary = []
    for i, flags in enumerate(flag_sets):
        runs = [r["runs"][i] for r in rows]
        summary.append({"flags": flags, "cpu_s": round(sum(r["cpu_s"] for r in runs), 2),
                        "winners_cpu_s": [r["runs"][i]["cpu_s"] for r in rows if r["why"] == "winner"],
                        "differ": [f"{r['kernel']}[{r['shape_set']}] {r['config']} {r['chip']}"
                                   for r in rows if not r["runs"][i]["same"]], "configs": len(runs)})
        print(f"# {flags or '(default)'}: {summary[-1]['cpu_s']} CPU-s over {len(runs)} configs, winners "
              f"{summary[-1]['winners_cpu_s']}, differ on {len(summary[-1]['differ'])}: {summary[-1]['differ']}")
    if opts.json:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                text=True).stdout.strip()
        opts.json.write_text(json.dumps({
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit,
            "machine": f"{os.cpu_count()} cores, deviceless compile", "libtpu": _version("libtpu"),
            "jax": _version("jax"),
            "load_before": load, "load_after": os.getloadavg(), "summary": summary, "rows": rows,
        }, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
