"""Reading what the TPU compiler scheduled: libtpu's LLO dumps of one compiled kernel.

libtpu writes these when started with `--xla_jf_dump_to=DIR --xla_jf_dump_llo_pass_label_regex=final` (and
`--xla_jf_dump_static_llo_profile_to=DIR2` for the simulated cycles); see shared/notes/libtpu-static-schedule.md.
Per kernel (a `pallas_call` is one custom call, e.g. `softmax.1`):

- `<id>-<kernel>-NN-final_bundles.txt`: the VLIW schedule, one bundle per address (`0x5 LB: > { ... }`; a
  bundle's comment may run on over several lines). A loop is the bundles from the start of region N to a
  backward `sbr.rel ... target = $regionN`; its trip count is the constant of its `/* loop exit test */`
  compare (Mosaic's loops count an index from 0 by 1). The grid of a `pallas_call` is the outermost loop, run
  for the grid steps plus the pipeline's fill/drain iterations.
- `<id>-<kernel>-NN-final_hlo-static-per-bundle-utilization.txt`: the slot capacity of each unit and, per
  bundle in address order, the slots it uses.
- `<kernel>_static_llo_profile.textproto` (v5e, v5p, v6e only): `estimated_cycles`, simulated with a DMA
  latency model; 0 when the simulator skipped the kernel (it does not model `dma.general`, which v6e uses for
  the copies of a nested `emit_pipeline`).

Bundles executed = Σ bundles × the trip counts of the loops around them: a compute-issue lower bound (a
`dma.done.wait` is one bundle however long it waits). Pure text parsing: no libtpu here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

_BUNDLE = re.compile(r"^\s*(0x[0-9a-fA-F]+|\d+)\s+(?:([A-Z]{2}))?\s*:\s*(>*)\s*\{")
_START = re.compile(r"Start(?:/End empty)? region (\d+)")
_BACK = re.compile(r"sbr\.rel\b[^;}]*?target = \$region(\d+)")
_EXIT = re.compile(r"scmp\.(?:ge|gt)\.[su]32\S*\s+%\w+,\s*(-?\d+|%\w+)\s*/\* loop exit test \*/")
_CYCLES = re.compile(r'hlo_op_name:\s*"([^"]*)"\s*estimated_cycles:\s*(\d+)')
_CUSTOM_CALL = re.compile(r'^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=.*custom_call_target="tpu_custom_call"', re.M)
_FILE = re.compile(r"^\d+-(.+)-\d\d-(final_bundles|final_hlo-static-per-bundle-utilization)\.txt$")

# Units of the utilisation dump, grouped as a report shows them: (label, unit names in the dump).
UNIT_GROUPS = (
    ("MXU", ("MXU",)),
    ("VPU", ("VALU",)),
    ("EUP", ("EUP",)),
    ("XLU", ("XLU",)),
    ("load/store", ("VLOAD", "VSTORE")),
    ("scalar", ("SALU",)),
)


@dataclass(frozen=True)
class Loop:
    """One loop of the schedule: bundles [start, end] (end holds the backward branch)."""

    start: int
    end: int
    depth: int  # 1 for an outermost loop
    trips: int | None  # None: the bound is a register (a device-computed trip count)

    @property
    def bundles(self) -> int:
        return self.end - self.start + 1


@dataclass(frozen=True)
class KernelSchedule:
    """The scheduled bundles of one kernel and what they keep busy.

    bundles:       scheduled bundles (static code size).
    loops:         every loop, outermost first.
    executed:      bundles executed once, every loop run for its trip count (unknown counts as 1).
    grid_loop:     the outermost loop (the pallas_call grid plus pipeline fill/drain), if any.
    per_step:      bundles executed by one iteration of the grid loop (its inner loops included), or all of
                   `executed` when there is no grid loop.
    outside:       bundles executed outside the grid loop (set-up and final drain).
    utilisation:   per unit group (UNIT_GROUPS labels), the share of its slots used over the executed bundles.
    unknown_trips: loops whose trip count the schedule does not state (counted once).
    """

    name: str
    bundles: int
    loops: tuple[Loop, ...]
    executed: float
    per_step: float
    outside: float
    grid_trips: int | None
    utilisation: dict[str, float] = field(default_factory=dict)
    unknown_trips: int = 0

    def executed_for(self, grid_steps: int) -> float:
        """Bundles executed for `grid_steps` steps of the grid (not its fill/drain iterations)."""
        if self.grid_trips is None:
            return self.executed
        return self.outside + self.per_step * grid_steps

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "bundles": self.bundles,
            "executed": self.executed,
            "per_step": self.per_step,
            "outside": self.outside,
            "grid_trips": self.grid_trips,
            "loops": [[lp.start, lp.end, lp.depth, lp.trips] for lp in self.loops],
            "utilisation": dict(self.utilisation),
            "unknown_trips": self.unknown_trips,
        }

    @staticmethod
    def from_json(data: Mapping) -> KernelSchedule:
        return KernelSchedule(
            name=data["name"],
            bundles=data["bundles"],
            loops=tuple(Loop(*lp) for lp in data.get("loops", ())),
            executed=data["executed"],
            per_step=data["per_step"],
            outside=data["outside"],
            grid_trips=data.get("grid_trips"),
            utilisation=dict(data.get("utilisation", {})),
            unknown_trips=data.get("unknown_trips", 0),
        )


def _bundle_texts(lines: Iterable[str]) -> list[tuple[int, str]]:
    """(address, text) per bundle, continuation lines joined to their bundle."""
    out: list[tuple[int, str]] = []
    for line in lines:
        m = _BUNDLE.match(line)
        if m:
            out.append((int(m.group(1), 0), line))
        elif out:
            out[-1] = (out[-1][0], out[-1][1] + " " + line.strip())
    return out


def parse_loops(text: str) -> tuple[int, list[Loop]]:
    """(number of bundles, loops outermost first) of a `final_bundles.txt`."""
    bundles = _bundle_texts(text.splitlines())
    starts: dict[int, int] = {}
    spans: list[tuple[int, int]] = []
    for addr, body in bundles:
        for m in _START.finditer(body):
            starts.setdefault(int(m.group(1)), addr)
        for m in _BACK.finditer(body):
            start = starts.get(int(m.group(1)))
            if start is not None and start <= addr:
                spans.append((start, addr))
    spans = sorted(set(spans), key=lambda s: (s[0], -s[1]))
    by_addr = dict(bundles)
    loops: list[Loop] = []
    for start, end in spans:
        depth = 1 + sum(1 for s, e in spans if s <= start and end <= e and (s, e) != (start, end))
        inner = [(s, e) for s, e in spans if start <= s and e <= end and (s, e) != (start, end)]
        trips: int | None = None
        for addr in range(end, start - 1, -1):  # the exit test nearest the branch, outside inner loops
            if any(s <= addr <= e for s, e in inner):
                continue
            m = _EXIT.search(by_addr.get(addr, ""))
            if m:
                trips = int(m.group(1)) if not m.group(1).startswith("%") else None
                break
        loops.append(Loop(start, end, depth, trips))
    return len(bundles), loops


def parse_utilisation(text: str) -> tuple[dict[str, int], list[list[int]]]:
    """(unit -> slot capacity, per bundle the slots used per unit in capacity order)."""
    lines = [ln.strip() for ln in text.splitlines()]
    try:
        head = lines.index("== CAPACTIY:") if "== CAPACTIY:" in lines else lines.index("== CAPACITY:")
        names = [n.strip() for n in lines[head + 1].split(",")]
        caps = [int(c) for c in lines[head + 2].split()]
        rows_at = lines.index("== UTILIZATION:") + 1
    except (ValueError, IndexError):
        return {}, []
    rows = []
    for ln in lines[rows_at:]:
        if not ln:
            continue
        values = [int(v) for v in ln.split() if v.lstrip("-").isdigit()]
        rows.append((values + [0] * len(names))[: len(names)])
    return dict(zip(names, caps, strict=False)), rows


def multiplicities(n_bundles: int, loops: list[Loop]) -> list[float]:
    """How many times each bundle runs: the product of the trip counts of the loops around it."""
    mult = [1.0] * n_bundles
    for lp in loops:
        for addr in range(lp.start, min(lp.end + 1, n_bundles)):
            mult[addr] *= lp.trips if lp.trips is not None else 1
    return mult


def kernel_schedule(name: str, bundles_text: str, utilisation_text: str = "") -> KernelSchedule:
    """What one kernel's dumps say: loops, bundles executed, per grid step, slot utilisation."""
    n, loops = parse_loops(bundles_text)
    mult = multiplicities(n, loops)
    executed = sum(mult)
    outer = [lp for lp in loops if lp.depth == 1]
    grid = max(outer, key=lambda lp: (lp.trips or 0, lp.bundles), default=None)
    if grid is not None and grid.trips:
        inside = sum(mult[grid.start : grid.end + 1])
        per_step, outside, grid_trips = inside / grid.trips, executed - inside, grid.trips
    else:
        per_step, outside, grid_trips = executed, 0.0, None
    caps, rows = parse_utilisation(utilisation_text)
    utilisation: dict[str, float] = {}
    if caps and rows:
        names = list(caps)
        weights = mult + [1.0] * max(0, len(rows) - len(mult))
        total = sum(weights[: len(rows)])
        for label, units in UNIT_GROUPS:
            idx = [names.index(u) for u in units if u in names]
            cap = sum(caps[names[i]] for i in idx)
            if not idx or cap <= 0 or total <= 0:
                continue
            used = sum(w * sum(row[i] for i in idx) for w, row in zip(weights, rows, strict=False))
            utilisation[label] = used / (cap * total)
    unknown = sum(1 for lp in loops if lp.trips is None)
    return KernelSchedule(name, n, tuple(loops), executed, per_step, outside, grid_trips, utilisation, unknown)


def read_schedules(dump_dir: Path) -> list[KernelSchedule]:
    """The schedule of every Mosaic kernel in a `--xla_jf_dump_to` directory (XLA's own top-level
    program and its initialisation/finalisation steps are left out)."""
    files: dict[str, dict[str, Path]] = {}
    for path in sorted(Path(dump_dir).glob("*.txt")):
        m = _FILE.match(path.name)
        if m and m.group(1) != "TLP" and not m.group(1).startswith("<"):
            files.setdefault(m.group(1), {})[m.group(2)] = path
    out = []
    for name, parts in sorted(files.items()):
        if "final_bundles" not in parts:
            continue
        util = parts.get("final_hlo-static-per-bundle-utilization")
        out.append(
            kernel_schedule(
                name,
                parts["final_bundles"].read_text(errors="replace"),
                util.read_text(errors="replace") if util else "",
            )
        )
    return out


def custom_call_names(hlo_text: str) -> list[str]:
    """Names of the Mosaic kernels (tpu_custom_call instructions) of a compiled HLO module, in program order:
    the dumps also hold XLA's own ops around them (a pad, a transpose in the host code)."""
    return _CUSTOM_CALL.findall(hlo_text)


def read_cycles(profile_dir: Path) -> dict[str, int]:
    """kernel name -> simulated `estimated_cycles` from a `--xla_jf_dump_static_llo_profile_to` directory."""
    out: dict[str, int] = {}
    for path in sorted(Path(profile_dir).glob("*_static_llo_profile.textproto")):
        for m in _CYCLES.finditer(path.read_text(errors="replace")):
            out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2))
    return out


def issue_seconds(executed: float, clock_hz: float) -> float:
    """Seconds to issue `executed` bundles at one bundle per cycle."""
    return executed / clock_hz if clock_hz > 0 and math.isfinite(executed) else math.inf
