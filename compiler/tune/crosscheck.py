"""Model vs the TPU compiler, per kernel: does the compiler's own estimate back the model's pick?

The model's best few configs for one (kernel, shapes, chip) are estimated again by the schedule evaluator
(the TPU compiler's estimate, schedule.py) and the two are compared on the time on the device (the model's
per-call dispatch overhead is left out: the compiler does not see it). They disagree when

- order: the compiler puts another of the checked configs ahead of the model's pick by more than
  ORDER_MARGIN (its estimates of the two differ by more than that); or
- size: the compiler's figure for the model's pick is more than MAGNITUDE_MARGIN away from the model's
  (a ratio outside 1/1.25 .. 1.25) — not judged when the model finds the pick dominated by its dispatch
  overhead (the call costs more than its work) or bound by the per-step overhead, where libtpu's simulator
  charges ~1.4x what the published v5e measurements show (bench/model_vs_schedule.py leaves these out too).

A simulated figure (libtpu's simulator: v5e, v5p, v6e) is compared with the model's time on the device; a
compute-issue bound (v7x, v4, or a kernel the simulator skips: bundles issued, no DMA or waits in it) with the
model's compute time (MXU and vector work after their overlap). Figures of the two kinds are never compared
with each other. The figures stay apart: `model` and `compiler` fields, each labelled where it is shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..ir.config import Config
from .store import Trial

ORDER_MARGIN = 0.02
MAGNITUDE_MARGIN = 0.25
TOP = 3  # model picks checked by default


@dataclass(frozen=True)
class Checked:
    """One of the model's picks, with the TPU compiler's estimate of it when known."""

    config: dict[str, Any]
    device: float  # the model's estimate of the time on the device (s)
    compiler: float | None = None  # the TPU compiler's estimate (s); None: not (yet) estimated or it failed
    method: str = ""  # "simulated" | "issue" (see schedule.py)
    error: str | None = None
    issue: float = 0.0  # the model's compute time (s): what an issue bound is compared with
    dispatch: float = 0.0  # the model's per-call dispatch overhead (s)
    bound: str = ""  # what limits the model's estimate: "mxu" | "vector" | "hbm" | "overhead"

    @property
    def sized(self) -> bool:
        """Whether the size of the two estimates is worth comparing (see the module docstring)."""
        return self.device > self.dispatch and self.bound != "overhead"

    @property
    def model(self) -> float:
        """The model's figure that compares with the compiler's (see the module docstring)."""
        return self.issue if self.method == "issue" else self.device

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "model_seconds": self.model,
            "model_device_seconds": self.device,
            "compiler_seconds": self.compiler,
            "compiler_method": self.method,
            "compiler_error": self.error,
        }


@dataclass(frozen=True)
class CompilerCheck:
    """The comparison for one tuning problem; `checked` is in the model's order (its pick first)."""

    chip: str
    checked: tuple[Checked, ...]

    @property
    def pick(self) -> Checked:
        return self.checked[0]

    @property
    def pending(self) -> int:
        """Picks without a compiler figure or error yet."""
        return sum(1 for c in self.checked if c.compiler is None and c.error is None)

    @property
    def comparable(self) -> list[Checked]:
        """The checked configs with a compiler figure of the same kind as the pick's."""
        return [c for c in self.checked if c.compiler is not None and c.method == self.pick.method]

    @property
    def compiler_pick(self) -> Checked | None:
        """The checked config the compiler finds fastest, when it beats the model's pick by ORDER_MARGIN."""
        pick = self.pick
        if pick.compiler is None:
            return None
        best = min(self.comparable, key=lambda c: c.compiler or 0.0)
        return best if best is not pick and best.compiler < pick.compiler * (1 - ORDER_MARGIN) else None

    @property
    def ratio(self) -> float | None:
        """Model over compiler for the model's pick."""
        pick = self.pick
        return pick.model / pick.compiler if pick.compiler else None

    @property
    def order_disagrees(self) -> bool:
        return self.compiler_pick is not None

    @property
    def size_disagrees(self) -> bool:
        r = self.ratio
        return r is not None and self.pick.sized and not (1 / (1 + MAGNITUDE_MARGIN) <= r <= 1 + MAGNITUDE_MARGIN)

    @property
    def disagrees(self) -> bool:
        return self.order_disagrees or self.size_disagrees

    @property
    def verdict(self) -> str:
        """"agrees" | "disagrees" | "pending" | "not comparable"."""
        if self.disagrees:
            return "disagrees"
        if self.pending:
            return "pending"
        if self.ratio is None:
            return "not comparable"
        return "agrees"

    def message(self) -> str:
        """One line for a lens, a plot or the command line."""
        verdict = self.verdict
        if verdict == "pending":
            return f"TPU compiler check: {len(self.checked) - self.pending}/{len(self.checked)} estimated"
        if verdict == "not comparable":
            return f"TPU compiler check: not compared — {(self.pick.error or 'no estimate of the pick')[:120]}"
        parts = []
        if self.order_disagrees:
            other = self.compiler_pick
            assert other is not None and other.compiler and self.pick.compiler
            parts.append(
                f"it ranks {Config(other.config).short()} first "
                f"({self.pick.compiler / other.compiler:.2f}× faster than the model's pick by its estimate)"
            )
        if self.size_disagrees:
            assert self.ratio is not None
            parts.append(f"its estimate of the pick is {1 / self.ratio:.2f}× the model's")
        kind = " (compute-issue bounds, no DMA)" if self.pick.method == "issue" else ""
        if parts:
            return "TPU compiler disagrees" + kind + ": " + "; ".join(parts)
        n = len(self.comparable)
        return f"TPU compiler agrees{kind} ({n} pick{'s' if n != 1 else ''} checked, {self._size()})"

    def _size(self) -> str:
        r = self.ratio or 1.0
        if not self.pick.sized:
            why = "dispatch-dominated" if self.pick.device <= self.pick.dispatch else "per-step-overhead-bound"
            return f"order only: the pick is {why}, the two differ {1 / r:.2f}×"
        return f"pick within {abs(1 / r - 1):.0%}"

    def to_json(self) -> dict[str, Any]:
        return {
            "chip": self.chip,
            "verdict": self.verdict,
            "disagrees": self.disagrees,
            "order_disagrees": self.order_disagrees,
            "size_disagrees": self.size_disagrees,
            "ratio": self.ratio,
            "compiler_pick": self.compiler_pick.config if self.compiler_pick else None,
            "message": self.message(),
            "margins": {"order": ORDER_MARGIN, "size": MAGNITUDE_MARGIN},
            "checked": [c.to_json() for c in self.checked],
        }


def device_seconds(trial: Trial) -> float:
    """The model's estimate without its per-call dispatch overhead (what the compiler estimates)."""
    launch = (trial.metrics.get("breakdown") or {}).get("launch", 0.0)
    return max(0.0, (trial.seconds or 0.0) - launch)


def issue_seconds(trial: Trial) -> float:
    """The model's compute time (MXU and vector work after their overlap): what a compute-issue bound,
    which sees neither DMA nor the waits of a pipeline step, compares with."""
    return (trial.metrics.get("breakdown") or {}).get("compute", 0.0)


def compare(model_top: Sequence[Trial], compiler: Mapping[Config, Trial], chip: str) -> CompilerCheck | None:
    """The check of the model's ranked picks against the compiler's trials (by config); None without picks."""
    if not model_top:
        return None
    checked = []
    for t in model_top:
        c = compiler.get(Config(t.config))
        checked.append(
            Checked(
                dict(t.config),
                device_seconds(t),
                c.seconds if c is not None and c.verdict == "ok" else None,
                (c.metrics.get("method", "") if c is not None else ""),
                (c.metrics.get("error") if c is not None and c.verdict != "ok" else None),
                issue_seconds(t),
                (t.metrics.get("breakdown") or {}).get("launch", 0.0),
                t.metrics.get("bound", ""),
            )
        )
    return CompilerCheck(chip, tuple(checked))


def latest_by_config(trials: Sequence[Trial]) -> dict[Config, Trial]:
    """The last ok/failed trial of each config (trials oldest first)."""
    return {Config(t.config): t for t in trials if t.verdict in ("ok", "failed")}
