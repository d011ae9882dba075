"""The process a file runs in, as the module-level evaluation (host_eval.py) sees it: `python file.py` in a
plain shell — no command-line arguments (an `argparse` parser gives each option its default) and none of the
file's own environment variables set (`os.environ.get(name, default)` is `default`).

Upstream's examples choose what to run from these: aot_example.py benchmarks its TPU kernels unless
`--kernel` or HELION_AOT_KERNELS names others. Each assumption made is said (`Assumptions`) on the shape sets
found after it, so a hover shows which run they describe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..support.diagnostics import Range
from .host_builtins import Builtin
from .host_values import UNKNOWN, ClassValue, Instance

PARSER_METHODS = frozenset({"add_argument", "parse_args", "parse_known_args", "add_argument_group",
                            "add_mutually_exclusive_group", "set_defaults", "add_subparsers"})

_CONVERTERS = {"int": int, "float": float, "str": str}


@dataclass(eq=False)
class ArgParser:
    """`argparse.ArgumentParser()`: the options added so far, as their defaults."""

    defaults: dict[str, Any] = field(default_factory=dict)
    required: bool = False  # an argument a plain run does not give: parse_args() exits
    unknown: bool = False  # something this module does not follow (subcommands, options it cannot name)


@dataclass(eq=False)
class ParserMethod:
    parser: ArgParser
    name: str


class Assumptions:
    """What the evaluation took the process to be, in order, for the notes of the shape sets found after it."""

    def __init__(self) -> None:
        self.made: dict[str, None] = {}

    def add(self, what: str, rng: Range) -> None:
        self.made.setdefault(f"{what} (line {rng.start.line + 1})")

    def note(self) -> str:
        return f"assuming a plain run: {', '.join(self.made)}" if self.made else ""


def env_default(args: list, kwargs: dict, assumed: Assumptions, rng: Range) -> Any:
    """`os.environ.get(name, default)` / `os.getenv(name, default)`: `default` (None when not given)."""
    name = args[0] if args else kwargs.get("key")
    if not isinstance(name, str) or len(args) > 2:
        return UNKNOWN
    assumed.add(f"environment variable {name} unset", rng)
    return args[1] if len(args) > 1 else kwargs.get("default")


def parser_call(method: ParserMethod, args: list, kwargs: dict, assumed: Assumptions, rng: Range) -> Any:
    """A method of an argparse parser: options are recorded, parse_args() gives their defaults."""
    parser = method.parser
    if method.name in ("add_argument_group", "add_mutually_exclusive_group"):
        return parser  # a group's options are the parser's
    if method.name == "add_argument":
        _add_argument(parser, args, kwargs)
        return None
    if method.name == "set_defaults":
        parser.defaults.update(kwargs)
        return None
    if method.name == "add_subparsers":
        parser.unknown = True
        return UNKNOWN
    given = args[0] if args else kwargs.get("args")
    if given is not None and given != []:
        return UNKNOWN  # parse_args(["--n", "8"]): not modelled
    if parser.required or parser.unknown:
        return UNKNOWN
    if given is None:
        assumed.add("no command-line arguments", rng)
    namespace = Instance(ClassValue("Namespace", (), {}), dict(parser.defaults))
    return (namespace, []) if method.name == "parse_known_args" else namespace


def _add_argument(parser: ArgParser, args: list, kwargs: dict) -> None:
    flags = [a for a in args if isinstance(a, str)]
    if not flags or len(flags) != len(args):
        parser.unknown = True
        return
    positional = not flags[0].startswith("-")
    long = next((f for f in flags if f.startswith("--")), flags[0])
    dest = kwargs.get("dest") or long.lstrip("-").replace("-", "_")
    action = kwargs.get("action", "store")
    nargs = kwargs.get("nargs")
    if kwargs.get("required") is True or (positional and nargs not in ("?", "*")):
        parser.required = True
    if "default" in kwargs:
        default = kwargs["default"]
    elif action in ("store_true", "store_false"):
        default = action == "store_false"
    elif positional and nargs == "*":
        default = []
    else:
        default = None
    convert = kwargs.get("type")
    if isinstance(default, str) and convert is not None:  # argparse converts a string default with `type`
        fn = _CONVERTERS.get(convert.name) if isinstance(convert, Builtin) else None
        try:
            default = fn(default) if fn is not None else UNKNOWN
        except ValueError:
            default = UNKNOWN
    if not isinstance(dest, str):
        parser.unknown = True
        return
    parser.defaults[dest] = default
