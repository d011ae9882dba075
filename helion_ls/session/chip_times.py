"""Per-call times measured on this machine's TPU by `helion-pallas measure`, remembered for the session: one
per (kernel source, shapes, chip, config), so an edit of the kernel, a new shape line or another config finds
none (the hover then offers to measure it) and going back to an earlier text finds its time again.

Kept apart from the tuning store on purpose: a lone measurement of the current config is not a tuning, and in
the store it would become the Best lens of a kernel nobody tuned.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from compiler.ir.config import Config

from .lru import LruCache

ChipTimeKey = tuple[str, str, str, Config]  # (source hash, shape key, chip, config)


@dataclass(frozen=True)
class ChipTime:
    """One `measure` result: seconds per call (the best loop), how many calls were timed, the spread of the
    loops (worst over best, minus one) and the TPU it ran on; or, when not measured, why (`verdict`, `why`)."""

    verdict: str
    seconds: float | None = None
    repeats: int | None = None
    spread: float | None = None
    device_kind: str = ""
    why: str = ""
    at: float = field(default_factory=time.time)

    @classmethod
    def of(cls, result: dict[str, Any] | None, message: str | None) -> ChipTime:
        """From the command's JSON (None: it ended without one, `message` says how)."""
        if not result:
            return cls("error", why=message or "the measurement ended without a result")
        seconds, repeats, spread = result.get("seconds"), result.get("repeats"), result.get("spread")
        return cls(
            str(result.get("verdict", "error")),
            float(seconds) if isinstance(seconds, int | float) else None,
            repeats if isinstance(repeats, int) else None,
            float(spread) if isinstance(spread, int | float) else None,
            str(result.get("device_kind") or ""),
            str(result.get("why") or ""),
        )

    @property
    def measured(self) -> bool:
        return self.verdict == "measured" and bool(self.seconds)


class ChipTimes:
    def __init__(self, size: int = 512) -> None:
        self._items: LruCache[ChipTime] = LruCache(size)

    def get(self, key: ChipTimeKey) -> ChipTime | None:
        return self._items.get(key)

    def put(self, key: ChipTimeKey, found: ChipTime) -> None:
        self._items.put(key, found)

    def __len__(self) -> int:
        return len(self._items)
