"""`hl.register_tunable(name, fragment)`: a kernel's own tunable value, read from the config key `name`
(`helion.Config(split_k=8)`) or else the fragment's default, the way upstream Helion's config spec does.

The fragments are upstream's `helion.autotuner` ones: PowerOfTwoFragment / IntegerFragment(low, high,
default=low), EnumFragment(choices) (default: the first), BooleanFragment() (default False). The value is a
compile-time constant of the trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..support.diagnostics import Range, UserError

FRAGMENTS = ("PowerOfTwoFragment", "IntegerFragment", "EnumFragment", "BooleanFragment")


@dataclass(frozen=True)
class Fragment:
    kind: str
    low: int = 0
    high: int = 0
    default: Any = None
    choices: tuple = ()

    def check(self, value: Any) -> str | None:
        """None when `value` is one this fragment allows, else why not."""
        if self.kind == "BooleanFragment":
            return None if isinstance(value, bool) else "must be True or False"
        if self.kind == "EnumFragment":
            return None if value in self.choices else f"must be one of {list(self.choices)}"
        if not isinstance(value, int) or isinstance(value, bool) or not self.low <= value <= self.high:
            return f"must be an integer from {self.low} to {self.high}"
        if self.kind == "PowerOfTwoFragment" and value & (value - 1):
            return "must be a power of two"
        return None


def make_fragment(kind: str, args: list, kwargs: dict, rng: Range) -> Fragment:
    """`PowerOfTwoFragment(1, 256)` and friends, evaluated statically."""
    if kind == "BooleanFragment":
        return Fragment(kind, default=False)
    if kind == "EnumFragment":
        choices = kwargs.get("choices", args[0] if args else None)
        if not isinstance(choices, tuple | list) or not choices:
            raise UserError("HPL103", "EnumFragment(choices) needs a non-empty tuple of choices", rng)
        return Fragment(kind, default=choices[0], choices=tuple(choices))
    values = [*args, *(kwargs[k] for k in ("low", "high", "default_val") if k in kwargs)]
    if len(values) not in (2, 3) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise UserError("HPL103", f"{kind}(low, high, default=low) takes integers", rng)
    low, high = values[0], values[1]
    default = values[2] if len(values) == 3 else low
    return Fragment(kind, low, high, max(low, min(high, default)))


def tunable_value(name: Any, fragment: Any, config: dict[str, Any], rng: Range) -> Any:
    """The value of tunable `name`: the config's, checked against the fragment, else the default."""
    if not isinstance(name, str) or not isinstance(fragment, Fragment):
        raise UserError("HPL103", "hl.register_tunable(name, fragment) takes a name and a helion.autotuner "
                        f"fragment ({', '.join(FRAGMENTS)})", rng)
    if name not in config:
        return fragment.default
    value = config[name]
    problem = fragment.check(value)
    if problem:
        raise UserError("HPL109", f"config {name}={value!r}: {problem}", rng)
    return value
