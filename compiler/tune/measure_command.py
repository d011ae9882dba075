"""`helion-pallas measure`: the per-call time of one config of one kernel and shape set, measured on this
machine's TPU by the tpu evaluator (evaluators.TpuEvaluator: five loops of pipelined calls, the best loop is
the figure, the spread beside it, and the config checked against the eager reference on the chip).

The language server runs it for the config a kernel compiles with now (the hover's "measured on TPU v5 lite"),
in the chip's line. It never falls back to a model: where no TPU of the chip is visible, or another program
holds it, it says why. --json prints one object:

  {"verdict": "measured", "seconds", "spread", "repeats", "median_seconds", "device_kind", "chip", "config"}
  {"verdict": "unavailable" | "rejected" | "wrong" | "error", "why", "chip", "config"}

Exit status: 0 measured, 1 not measured (the verdict says why), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..ir.chips import canonical_name
from ..ir.config import Config, ConfigError, check_keys
from ..support.diagnostics import CompileError
from .command import USAGE, UsageError, _problems, exit_now

MEASURED, NOT_MEASURED = 0, 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `measure` subcommand's arguments (light: no torch)."""
    parser.add_argument("file", help="a Python file (or a Jupyter notebook) with @helion.kernel functions")
    parser.add_argument("-k", "--kernel", required=True, help="the kernel to measure")
    parser.add_argument("--shape-set", type=int, default=0, metavar="N",
                        help="the N-th shape set (0-based: its '# helion: args(...)' line, else the file's calls)")
    parser.add_argument("--chip", required=True, help="the chip compiled for: must be this machine's TPU")
    parser.add_argument("--config", default="", help="JSON or helion.Config(...) text (default: the decorator's "
                                                     "config of the shape set); missing keys take their defaults")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(ns: argparse.Namespace) -> int:
    try:
        out = _measure(ns)
    except UsageError as exc:
        print(f"helion-pallas measure: error: {exc}", file=sys.stderr)
        status = USAGE
    else:
        if ns.json:
            print(json.dumps(out))
        elif out["verdict"] == "measured":
            print(f"{out['seconds'] * 1e6:.1f} µs per call on {out['device_kind']} (best of {out['repeats']} "
                  f"runs, slowest loop {100 * out['spread']:.1f} % over)")
        else:
            print(f"helion-pallas measure: not measured ({out['verdict']}): {out['why']}", file=sys.stderr)
        status = MEASURED if out["verdict"] == "measured" else NOT_MEASURED
    if getattr(ns, "exit_when_done", False):
        exit_now(status)
    return status


def _measure(ns: argparse.Namespace) -> dict[str, Any]:
    try:
        chip = canonical_name(ns.chip)
        config = Config.parse(ns.config) if ns.config.strip() else None
        if config is not None:
            check_keys(config)
    except (ValueError, ConfigError) as exc:
        raise UsageError(str(exc)) from None
    ns.args, ns.cases = None, None
    head: dict[str, Any] = {"chip": chip, "config": dict(config or {})}
    why = _chip_here(chip)
    if why is not None:
        return head | {"verdict": "unavailable", "why": why}
    problems, _ = _problems(ns, chip)
    if not problems:
        return head | {"verdict": "error", "why": f"{ns.kernel} has no shape set {ns.shape_set} that compiles"}
    from .evaluators import EvaluatorUnavailable, get_evaluator

    if config is None:  # the decorator's config of this shape set, as `compile` uses it, else the default
        config = problems[0].load_kernel().config_for(ns.shape_set) or Config()
    try:
        ck = problems[0].compile(config)
    except CompileError as exc:
        return head | {"verdict": "error", "why": "; ".join(d.message for d in exc.diagnostics) or "compile error"}
    head["config"] = dict(ck.config)
    try:
        found = get_evaluator("tpu").measure(ck)
    except EvaluatorUnavailable as exc:
        return head | {"verdict": "unavailable", "why": str(exc)}
    metrics = found.metrics
    if found.seconds is None:
        verdict = "wrong" if "chip_correctness" in metrics else "rejected"
        return head | {"verdict": verdict, "why": found.error or "not measured"}
    return head | {
        "verdict": "measured", "seconds": found.seconds, "spread": metrics.get("spread"),
        "repeats": metrics.get("repeats"), "median_seconds": metrics.get("median_seconds"),
        "device_kind": metrics.get("device_kind"),
        "correctness": (metrics.get("chip_correctness") or {}).get("verdict"),
    }


def _chip_here(chip: str) -> str | None:
    """None when this process may run kernels on a TPU of `chip`, else why not (before any compile or user
    code: a machine without the chip answers at once)."""
    from ..ir.chips import get_chip
    from ..tpu.runtime import ChipBusy, claim_tpu, tpu_device, tpu_device_files

    if not tpu_device_files():
        return "no TPU on this machine (no /dev/accel* or /dev/vfio/N device)"
    try:
        if not claim_tpu():
            return "this machine has TPU device nodes but jax sees no TPU"
        kind = tpu_device().device_kind
    except ChipBusy as exc:
        return str(exc)
    wanted = get_chip(chip).device_kind
    if kind != wanted:
        return f"this machine's TPU is a {kind}, not the {chip} ({wanted}) the kernel is compiled for"
    return None
