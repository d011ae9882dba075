"""Whether a tuned best is offered for *Apply*: decided once, here, for the Best lens and for the message
after a tuning, so the message never points at a lens that is not there.

The best is offered when it is not the config the kernel compiles with now and, where the current config's
figure is known, it gains at least what tuning's objective asks over it (compiler/tune/objective.py: APPLY_GAIN,
or between two of the model's estimates its resolution on their chip where that was measured).
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.ir.config import Config
from compiler.tune import objective

from ..session.store import Summary


@dataclass(frozen=True)
class Offer:
    """What the lens shows about applying the stored best."""

    is_current: bool  # the best is the config the kernel compiles with now
    apply: bool  # an Apply lens is offered
    gain: float | None  # current time / best time - 1, where the current config's time is known
    least: float = objective.APPLY_GAIN  # the gain that would have been worth applying

    def note(self) -> str:
        """The Best lens's words on the current config: "(current)", "(1.25× vs current)" or why no Apply."""
        if self.is_current:
            return " (current)"
        if self.gain is None:
            return ""
        if self.apply:
            return f" ({1 + self.gain:.2f}× vs current)"
        # said in percent: "1.02×" could be 1.9 %
        return f" ({100 * self.gain:.1f} % faster than current, under the {self.least:.0%} worth applying)"

    def short_note(self) -> str:
        """The same for the Best lens's title, which must fit a window: the reason goes to its tooltip."""
        if self.apply or self.is_current or self.gain is None:
            return self.note()
        return f" (+{100 * self.gain:.1f} %: too little to apply)"


def apply_offer(summary: Summary, current: Config | None) -> Offer:
    """The one decision: is the best the current config, is it offered for Apply, by how much is it faster."""
    best, now = summary.best, summary.current
    if current is not None and Config(best.config) == current:
        return Offer(True, False, None)
    if now is None or not now.seconds or not best.seconds:
        return Offer(False, True, None)
    gain = now.seconds / best.seconds - 1
    least = objective.least_gain(best.metrics, now.metrics)
    worth = objective.worth_applying(
        objective.objective(best.seconds, best.metrics), objective.objective(now.seconds, now.metrics), least
    )
    return Offer(False, worth, gain, least)


def tuned_message(head: str, best: str, offer: Offer | None, destination: str = "put it in the decorator") -> str:
    """The message after a tuning: `head` ("Tuned k (shape set 0) [model estimate for v7x]"), the best (`best`: its
    short config and time), then what the lenses show about applying it (`offer` None: nothing is known of
    the current config, as for a kernel edited since); `destination`: what *Apply* does with it."""
    text = f"{head}: best {best}"
    if offer is None:
        return text + "."
    if offer.is_current:
        return text + ", the config it compiles with now: nothing to apply."
    if not offer.apply:
        return (text + f", {100 * (offer.gain or 0.0):.1f} % faster than the current config, under the "
                f"{offer.least:.0%} worth applying: no Apply lens is offered (the Best lens shows it).")
    faster = f" ({1 + offer.gain:.2f}× vs current)" if offer.gain is not None else ""
    return text + f"{faster}. Click *Apply* on its Best lens to {destination}."
