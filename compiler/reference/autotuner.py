"""The eager `helion.autotuner`: the fragments `hl.register_tunable(name, fragment)` takes, and their default
values (what a tunable is when the config does not set it): PowerOfTwoFragment / IntegerFragment(low, high,
default_val=low), EnumFragment(choices) (the first), BooleanFragment() (False). Written apart from the
compiler's reading of them (compiler/frontend/tunables.py), like the rest of the eager reference.
"""

from __future__ import annotations

from typing import Any


class Fragment:
    """One tunable's allowed values and default."""

    default: Any

    def allows(self, value: Any) -> bool:
        raise NotImplementedError


class IntegerFragment(Fragment):
    def __init__(self, low: int, high: int, default_val: int | None = None):
        self.low, self.high = int(low), int(high)
        self.default = min(max(self.low if default_val is None else int(default_val), self.low), self.high)

    def allows(self, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and self.low <= value <= self.high


class PowerOfTwoFragment(IntegerFragment):
    def allows(self, value: Any) -> bool:
        return super().allows(value) and value > 0 and value & (value - 1) == 0


class EnumFragment(Fragment):
    def __init__(self, choices: tuple | list):
        if not choices:
            raise ValueError("EnumFragment(choices) needs at least one choice")
        self.choices = tuple(choices)
        self.default = self.choices[0]

    def allows(self, value: Any) -> bool:
        return value in self.choices


class BooleanFragment(Fragment):
    default = False

    def allows(self, value: Any) -> bool:
        return isinstance(value, bool)


FRAGMENTS = {cls.__name__: cls for cls in (PowerOfTwoFragment, IntegerFragment, EnumFragment, BooleanFragment)}
