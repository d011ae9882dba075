"""VMEM report vs the real TPU compiler, over every example, loop strategy and chip.

For each example (examples/*.py), shape set, loop strategy (kernels with an inner loop) and chip (v5e, v7x)
it compiles a few configs: the default, the tuner's picks (the model's best, and its best of each loop
strategy), and large blocks near the chip's limit (the largest whose report still fits, the smallest that
does not). Each config's report total (compiler/vmem/report.py) is set beside what libtpu's deviceless
compile says the kernel uses (`vmem_used_bytes`, plus any operand XLA copied into VMEM before the kernel, which it
then reads in place: small arrays on v7x) or, when it runs out, needs (the size in its OOM message).

The bars (issue 41, item 6; `score`): the report within +-15 % of libtpu on at least 90 % of configs, and
never more than 10 % under libtpu where the verdict (fits the chip's largest VMEM limit or not) is at stake
(`near_flip`: libtpu's figure within 0.75-1.35x of the limit, or the two verdicts differ).

The saved JSON (`--json`) is data for tests/test_vmem_calibration.py: it recomputes the report of every
recorded config and holds it to the recorded libtpu figures, without compiling anything.

    python bench/vmem_calibration.py                      # every config, v5e and v7x (~1 h on 2 busy cores)
    python bench/vmem_calibration.py --quick              # a subset (shape set 0; default and near-limit)
    python bench/vmem_calibration.py --json out.json      # also write the records
    python bench/vmem_calibration.py --configs old.json   # the configs of an earlier run, compiled again
    python bench/vmem_calibration.py --report-only old.json   # no libtpu: the current report against a record

Needs libtpu (pip install 'helion-ls[tpu]') except with --report-only. Compiles run one at a time in a worker
process with a time limit (--timeout); one that times out or crashes is recorded as such and left out of the
score.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

MiB = 1024 * 1024
CHIPS = ("v5e", "v7x")
EXAMPLES = ("add", "attention", "batch_softmax", "bmm", "rms_norm_bwd", "softmax")
LOOP_TYPES = ("unroll", "fori_loop", "emit_pipeline")
WITHIN = 0.15  # the report within +-15 % of libtpu ...
WITHIN_SHARE = 0.90  # ... on at least this share of configs
UNDER_AT_FLIP = 0.10  # never more than 10 % under libtpu near the flip
FLIP_ZONE = (0.75, 1.35)  # libtpu's figure over the chip's largest limit: where the verdict is at stake
MAX_UNROLL_TRIPS = 32  # unrolled loops longer than this take libtpu minutes to compile: left out of the sweep
NEAR_LIMIT_SAMPLES = 160  # block configs traced per (kernel, shape set, loop type, chip) to find the near-limit ones


# configs an earlier calibration or a user found the report short on (the 102 vs 155 MiB first)
KNOWN = (
    ("attention", 0, "v5e", {"block_sizes": [1, 4096, 256], "pallas_loop_type": "unroll"}),
    ("attention", 0, "v5e", {"block_sizes": [1, 1024, 1024], "pallas_loop_type": "unroll"}),
    ("attention", 0, "v5e", {"block_sizes": [1, 8192, 512], "pallas_loop_type": "fori_loop"}),
    ("attention", 0, "v5e", {"block_sizes": [256, 64, 128], "pallas_loop_type": "emit_pipeline",
                             "pallas_load_buffer_count": [2, 1, 2]}),
    ("attention", 0, "v7x", {"block_sizes": [1, 2048, 1024], "pallas_loop_type": "unroll"}),
    ("bmm", 0, "v7x", {"block_sizes": [1, 512, 512, 2048], "pallas_loop_type": "unroll"}),
)


@dataclass
class Case:
    """One config to compare: which kernel at which shapes, on which chip, and why it was chosen."""

    kernel: str
    shape_set: int
    chip: str
    config: dict[str, Any]
    why: str  # "default" | "tuned" | "tuned <loop type>" | "under limit" | "over limit"

    @property
    def key(self) -> str:
        return json.dumps([self.kernel, self.shape_set, self.chip, self.config], sort_keys=True)


def load_kernel(name: str) -> Any:
    import compiler

    return compiler.load(REPO / "examples" / f"{name}.py").kernels[name]


def report_bytes(kernel: Any, case: Case) -> int:
    """The report's total for a case (the largest pallas_call's buffers and temporaries)."""
    return kernel.compile(shape_set=case.shape_set, config=case.config, chip=case.chip).vmem.total_bytes


def _loop_types(kernel: Any, shape_set: int, chip: str) -> list[str | None]:
    dims = dict(kernel.config_space(kernel.resolve_args(shape_set=shape_set), chip).dimensions)
    return list(LOOP_TYPES) if "pallas_loop_type" in dims else [None]


def _unroll_trips_ok(ck: Any) -> bool:
    """Whether every unrolled inner loop of a compiled config is short enough to compile in a sane time."""
    return all(loop.trips <= MAX_UNROLL_TRIPS for call in ck.plan.calls for loop in call.inner_loops
               if loop.strategy == "unroll")


def tuned_cases(kernel: Any, name: str, shape_set: int, chip: str) -> list[Case]:
    """The model's best config, and its best of each loop strategy (the search only, no correctness gate)."""
    from compiler.support.diagnostics import CompileError
    from compiler.tune.driver import TuneOptions, TuneRun
    from compiler.tune.problem import Problem

    path = REPO / "examples" / f"{name}.py"
    problem = Problem(path.read_text(), name, kernel.resolve_args(shape_set=shape_set), chip, str(path), shape_set)
    try:
        run = TuneRun(problem, TuneOptions(verify=False, max_evals=400))
    except CompileError:
        return []
    out, seen = [], set()
    for cand in run.candidates:
        loop = cand.config.get("pallas_loop_type")
        why = "tuned" if not out else f"tuned {loop}"
        if (not out or loop not in seen) and (not out or loop is not None):
            out.append(Case(name, shape_set, chip, dict(cand.config), why))
            seen.add(loop)
    return out


def near_limit_cases(kernel: Any, name: str, shape_set: int, chip: str, loop: str | None) -> list[Case]:
    """The largest sampled block config whose report fits the chip's largest limit, and the smallest that does
    not (up to 1.5x the limit): where a wrong report flips the verdict."""
    from compiler.ir.chips import get_chip
    from compiler.support.diagnostics import CompileError

    limit = get_chip(chip).max_vmem_limit_bytes
    args = kernel.resolve_args(shape_set=shape_set)
    default = dict(kernel.default_config(args, chip))
    dims = dict(kernel.config_space(args, chip).dimensions)
    blocks = sorted((n for n in dims if n.startswith("block_sizes[")), key=lambda n: int(n[12:-1]))
    # blocks from half the default's up: smaller ones are far from any limit
    choices = [[v for v in dims[n] if 2 * v >= default["block_sizes"][i]] for i, n in enumerate(blocks)]
    rng = random.Random(f"{name}/{shape_set}/{chip}/{loop}")
    picks = {tuple(rng.choice(c) for c in choices) for _ in range(NEAR_LIMIT_SAMPLES)}
    under: tuple[int, dict] | None = None
    over: tuple[int, dict] | None = None
    for sizes in sorted(picks):
        config = {**default, "block_sizes": list(sizes)}
        if loop is not None:
            config["pallas_loop_type"] = loop
        try:
            ck = kernel.compile(shape_set=shape_set, config=config, chip=chip)
        except CompileError:
            continue
        if not _unroll_trips_ok(ck):
            continue
        total = ck.vmem.total_bytes
        if total <= limit and (under is None or total > under[0]):
            under = (total, config)
        if limit < total <= 1.5 * limit and (over is None or total < over[0]):
            over = (total, config)
    return [Case(name, shape_set, chip, c, why) for found, why in ((under, "under limit"), (over, "over limit"))
            if found is not None for c in (found[1],)]


def choose_cases(chips: Iterable[str], quick: bool) -> list[Case]:
    """Every example x shape set x loop strategy x chip: default, tuned, near the limit (quick: shape set 0,
    default and under the limit)."""
    from compiler.support.diagnostics import CompileError

    cases: dict[str, Case] = {}

    def add(case: Case) -> None:
        cases.setdefault(case.key, case)

    for name, shape_set, chip, config in KNOWN:
        if chip in chips and not (quick and shape_set):
            add(Case(name, shape_set, chip, config, "known"))
    for chip in chips:
        for name in EXAMPLES:
            kernel = load_kernel(name)
            for shape_set in range(1 if quick else len(kernel.shape_sets)):
                args = kernel.resolve_args(shape_set=shape_set)
                try:
                    default = dict(kernel.default_config(args, chip))
                    kernel.compile(shape_set=shape_set, config=default, chip=chip)
                except CompileError:
                    continue
                if not _fits_hbm(kernel, name, shape_set, chip):
                    print(f"# {name} shape set {shape_set}: its arrays do not fit {chip}'s HBM; left out", flush=True)
                    continue
                for loop in _loop_types(kernel, shape_set, chip):
                    config = {**default, **({"pallas_loop_type": loop} if loop else {})}
                    ck = kernel.compile(shape_set=shape_set, config=config, chip=chip)
                    if _unroll_trips_ok(ck):
                        add(Case(name, shape_set, chip, config, "default"))
                    for case in near_limit_cases(kernel, name, shape_set, chip, loop)[: 1 if quick else 2]:
                        add(case)
                if not quick:
                    for case in tuned_cases(kernel, name, shape_set, chip):
                        add(case)
                print(f"# chose {name} shape set {shape_set} on {chip}: {len(cases)} configs so far", flush=True)
    return list(cases.values())


def _fits_hbm(kernel: Any, name: str, shape_set: int, chip: str) -> bool:
    from compiler.support.diagnostics import CompileError
    from compiler.tune.problem import Problem

    path = REPO / "examples" / f"{name}.py"
    try:
        Problem(path.read_text(), name, kernel.resolve_args(shape_set=shape_set), chip, str(path),
                shape_set).require_hbm()
    except CompileError:
        return False
    return True


def libtpu_figure(result: Any) -> tuple[int | None, str, int]:
    """What libtpu says the kernel takes: (bytes, how, bytes of operands XLA copied into VMEM before the kernel) —
    "used" when it compiled (its scoped use plus those operands), "needs" from an OOM message."""
    if result.ok and result.vmem_used_bytes is not None:
        placed = result.vmem_operand_bytes or 0  # the kernel reads them in place: no buffers of its own for them
        how = f"used (+{placed / MiB:.1f} MiB of operands in VMEM)" if placed else "used"
        return result.vmem_used_bytes + placed, how, placed
    if result.kind == "vmem_oom" and result.numbers.get("requested_bytes"):
        return result.numbers["requested_bytes"], f"needs ({result.oom_limit or 'scoped'} OOM)", 0
    return None, f"{result.kind}: {result.key_line[:120]}", 0


def comparable(r: dict[str, Any]) -> bool:
    """Whether a record's libtpu figure is the kernel's own layout: not when XLA copied a sizeable operand into VMEM
    (over a tenth of the figure; small arrays on v7x), which the kernel then reads in place instead of through the
    pipelined blocks the report counts. XLA does that only with room to spare, so such a config is far from any
    verdict; it is listed, not scored."""
    return bool(r.get("libtpu_bytes")) and r.get("libtpu_operand_bytes", 0) <= 0.1 * r["libtpu_bytes"]


def cost(kernel: Any, case: Case) -> float:
    """How long libtpu is likely to take on a case, relative: its report total, times the trips of an unrolled
    loop (each trip is compiled as code of its own). Cases run cheapest first, so a run cut short has the most."""
    ck = kernel.compile(shape_set=case.shape_set, config=case.config, chip=case.chip)
    trips = max((lp.trips for c in ck.plan.calls for lp in c.inner_loops if lp.strategy == "unroll"), default=1)
    return ck.vmem.total_bytes * trips


def measure(cases: list[Case], timeout: float, done: list[dict[str, Any]],
            save: Any = None) -> list[dict[str, Any]]:
    """Compile each case with libtpu (one worker, one compile at a time) and record both figures; `done`: records
    of an earlier, interrupted run (their cases are not compiled again); `save(records)` after each."""
    from compiler.ir.chips import get_chip
    from compiler.tpu.libtpu_compile import TpuCompiler

    records = list(done)
    have = {Case(r["kernel"], r["shape_set"], r["chip"], r["config"], r["why"]).key for r in done}
    kernels: dict[str, Any] = {}
    todo = [c for c in cases if c.key not in have]
    with TpuCompiler(timeout=timeout) as tpu:
        for i, case in enumerate(todo):
            kernel = kernels.setdefault(case.kernel, load_kernel(case.kernel))
            ck = kernel.compile(shape_set=case.shape_set, config=case.config, chip=case.chip)
            result = tpu.compile(ck.source, ck.entry, ck.compile_args(), ck.chip, dump_mosaic=False)
            real, how, placed = libtpu_figure(result)
            record = {**asdict(case), "report_bytes": ck.vmem.total_bytes, "libtpu_bytes": real, "libtpu": how,
                      "libtpu_operand_bytes": placed,
                      "limit_bytes": get_chip(case.chip).max_vmem_limit_bytes,
                      "seconds": round(result.wall_seconds, 1)}
            records.append(record)
            print(f"[{len(done) + i + 1}/{len(done) + len(todo)}] " + row(record) + f" ({record['seconds']:.0f} s)",
                  flush=True)
            if save is not None:
                save(records)
    return records


def near_flip(report: int, real: int, limit: int) -> bool:
    """Whether a config's verdict is at stake: libtpu's figure near the chip's largest limit, or the report
    and libtpu on opposite sides of it."""
    return FLIP_ZONE[0] * limit <= real <= FLIP_ZONE[1] * limit or (report <= limit) != (real <= limit)


def score(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The bars over records with a libtpu figure: share within +-15 %, and configs more than 10 % under
    libtpu near the flip (each one named)."""
    rated = [r for r in records if comparable(r)]
    within = [r for r in rated if abs(r["report_bytes"] / r["libtpu_bytes"] - 1) <= WITHIN]
    flips = [r for r in rated if near_flip(r["report_bytes"], r["libtpu_bytes"], r["limit_bytes"])]
    short = [r for r in flips if r["report_bytes"] < (1 - UNDER_AT_FLIP) * r["libtpu_bytes"]]
    wrong = [r for r in rated if (r["report_bytes"] <= r["limit_bytes"]) != (r["libtpu_bytes"] <= r["limit_bytes"])]
    share = len(within) / len(rated) if rated else 0.0
    return {
        "configs": len(records), "rated": len(rated), "within": len(within), "within_share": round(share, 4),
        "operands_in_vmem": [label(r) for r in records if r.get("libtpu_bytes") and not comparable(r)],
        "near_flip": len(flips), "under_at_flip": [label(r) for r in short],
        "verdicts_differ": [label(r) for r in wrong],
        "holds": bool(rated) and share >= WITHIN_SHARE and not short,
    }


def label(r: dict[str, Any]) -> str:
    c = r["config"]
    loop = f" {c['pallas_loop_type']}" if "pallas_loop_type" in c else ""
    return f"{r['kernel']}[{r['shape_set']}] {c.get('block_sizes')}{loop} {r['chip']}"


def row(r: dict[str, Any]) -> str:
    real = r["libtpu_bytes"]
    ratio = f"{r['report_bytes'] / real:.2f}" if real else "-"
    real_text = f"{real / MiB:8.1f}" if real else "       -"
    return (f"{label(r):<56} {r['why']:<22} {r['report_bytes'] / MiB:8.1f} {real_text} {ratio:>6} "
            f"{_fits(r['report_bytes'], r):>4}/{_fits(real, r) if real else '-':<4} {r['libtpu']}")


def print_table(records: list[dict[str, Any]]) -> None:
    print(f"{'config':<56} {'why':<22} {'rep MiB':>8} {'tpu MiB':>8} {'ratio':>6} rep/tpu libtpu")
    for r in records:
        print(row(r))
    for chip in sorted({r["chip"] for r in records}):
        print(f"{chip}: {summary_line(score([r for r in records if r['chip'] == chip]))}")
    print(f"all: {summary_line(score(records))}")


def summary_line(s: dict[str, Any]) -> str:
    return (f"{s['within']}/{s['rated']} within +-{WITHIN:.0%} ({s['within_share']:.0%}; bar {WITHIN_SHARE:.0%}); "
            f"{len(s['under_at_flip'])} of {s['near_flip']} near the flip more than {UNDER_AT_FLIP:.0%} under "
            f"{s['under_at_flip'] or ''}; verdicts differ on {len(s['verdicts_differ'])} "
            f"{s['verdicts_differ'] or ''}; not scored (operands in VMEM): {len(s['operands_in_vmem'])} "
            f"-> {'holds' if s['holds'] else 'FAILS'}")


def markdown(records: list[dict[str, Any]]) -> str:
    """The records as a markdown table (docs/vmem-calibration.md), worst ratio first within each chip."""
    def off(r: dict[str, Any]) -> float:
        return abs(r["report_bytes"] / r["libtpu_bytes"] - 1) if r.get("libtpu_bytes") else 9.0

    lines = ["| chip | kernel [shape set] | blocks | loop | why | report MiB | libtpu MiB | ratio | verdicts (report / libtpu) |",
             "|---|---|---|---|---|---:|---:|---:|---|"]
    for r in sorted(records, key=lambda r: (r["chip"], -off(r))):
        c, real = r["config"], r.get("libtpu_bytes")
        extra = "".join(f" {k}={c[k]}" for k in ("pallas_load_buffer_count", "loop_orders") if k in c)
        note = "" if real is None or comparable(r) else " (operands in VMEM: not scored)"
        real_text = f"{real / MiB:.1f}" if real else r["libtpu"][:40]
        ratio = f"{r['report_bytes'] / real:.2f}" if real else "-"
        verdicts = f"{_fits(r['report_bytes'], r)} / {_fits(real, r) if real else '-'}"
        lines.append(f"| {r['chip']} | {r['kernel']} [{r['shape_set']}] | {c.get('block_sizes')}{extra} | "
                     f"{c.get('pallas_loop_type', '-')} | {r['why']} | {r['report_bytes'] / MiB:.1f} | {real_text} | "
                     f"{ratio} | {verdicts}{note} |")
    return "\n".join(lines)


def _fits(n: int, r: dict[str, Any]) -> str:
    return "fits" if n <= r["limit_bytes"] else "OOM"


def recompute(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with the current report's total in place of the recorded one (no libtpu needed)."""
    kernels: dict[str, Any] = {}
    out = []
    for r in records:
        kernel = kernels.setdefault(r["kernel"], load_kernel(r["kernel"]))
        case = Case(r["kernel"], r["shape_set"], r["chip"], r["config"], r["why"])
        out.append({**r, "report_bytes": report_bytes(kernel, case)})
    return out


def _provenance() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()

    import jax

    try:
        from importlib.metadata import version

        libtpu = version("libtpu")
    except Exception:  # noqa: BLE001 - provenance only
        libtpu = "?"
    return {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": git("rev-parse", "--short", "HEAD") + ("+dirty" if git("status", "--porcelain") else ""),
            "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores (deviceless compile)",
            "libtpu": libtpu, "jax": jax.__version__}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chips", default=",".join(CHIPS))
    ap.add_argument("--quick", action="store_true", help="shape set 0 only; default and near-limit configs")
    ap.add_argument("--json", type=Path, help="write the records and the score here")
    ap.add_argument("--configs", type=Path, help="compile the configs of an earlier --json again")
    ap.add_argument("--report-only", type=Path, help="no libtpu: an earlier --json's libtpu figures, current report")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds one compile may take")
    ap.add_argument("--limit", type=int, help="compile at most this many configs")
    ap.add_argument("--markdown", action="store_true", help="with --report-only: print the records as a markdown table")
    opts = ap.parse_args(argv)
    chips = [c.strip() for c in opts.chips.split(",") if c.strip()]
    if opts.report_only:
        saved = json.loads(opts.report_only.read_text())
        records = recompute([r for r in saved["records"] if r["chip"] in chips])
        if opts.markdown:
            print(markdown(records))
        else:
            print_table(records)
        return 0 if score(records)["holds"] else 1
    from compiler.tpu.libtpu_compile import libtpu_available

    if not libtpu_available():
        print("libtpu is not installed; nothing to compare against (pip install 'helion-ls[tpu]')")
        return 1
    start = time.monotonic()
    saved = json.loads(opts.json.read_text()) if opts.json and opts.json.exists() else {}
    if opts.configs or saved.get("cases"):  # the cases of an earlier run (this file's own: carry on where it ended)
        earlier = json.loads(opts.configs.read_text()) if opts.configs else saved
        cases = [Case(c["kernel"], c["shape_set"], c["chip"], c["config"], c["why"])
                 for c in earlier.get("cases", earlier.get("records", [])) if c["chip"] in chips]
    else:
        cases = choose_cases(chips, opts.quick)
        kernels = {n: load_kernel(n) for n in {c.kernel for c in cases}}
        cases.sort(key=lambda c: cost(kernels[c.kernel], c))
    cases = cases[: opts.limit] if opts.limit else cases
    done = [r for r in saved.get("records", []) if r["chip"] in chips]
    print(f"# {len(cases)} configs chosen in {time.monotonic() - start:.0f} s; compiling with libtpu", flush=True)
    head = {**_provenance(), "bars": {"within": WITHIN, "within_share": WITHIN_SHARE, "under_at_flip": UNDER_AT_FLIP,
                                      "flip_zone": FLIP_ZONE}}

    def save(records: list[dict[str, Any]]) -> None:
        if opts.json:
            by_chip = {chip: score([r for r in records if r["chip"] == chip]) for chip in chips}
            opts.json.write_text(json.dumps({**head, "score": score(records), "by_chip": by_chip, "records": records,
                                             "cases": [asdict(c) for c in cases]}, indent=1) + "\n")

    save(done)
    records = measure(cases, opts.timeout, done, save)
    print_table(records)
    print(f"# {time.monotonic() - start:.0f} s in all")
    return 0 if score(records)["holds"] else 1


if __name__ == "__main__":
    sys.exit(main())
