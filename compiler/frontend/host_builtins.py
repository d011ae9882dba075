"""Python's builtins in the module-level evaluation (host_eval.py): `len`, `range`, `min`, `sorted`, `zip`,
`isinstance`, `super`, `getattr`, `map`, ... and the methods of builtin containers (`append`, `items`, ...),
each run only on values the evaluation knows, on sizes limits.py allows.

`BuiltinModels` is mixed into `Models` (host_models.py); it needs from it: ev, attribute, to_int and
module_method (host_torch.py), binop and items_of (host_operators.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..support.diagnostics import Range
from .host_torch import Ctx, LinearModel, has_unknown, opaque
from .host_values import UNKNOWN, Approx, ClassValue, Frame, Instance, Super
from .limits import check_count, check_range, check_round


@dataclass(frozen=True)
class Builtin:
    name: str


BUILTINS: dict[str, Any] = {n: Builtin(n) for n in (
    "len", "range", "min", "max", "sum", "abs", "round", "divmod", "int", "float", "bool", "str", "tuple", "list",
    "dict", "set", "sorted", "reversed", "enumerate", "zip", "any", "all", "isinstance", "print", "getattr",
    "hasattr", "map", "filter", "super", "repr", "iter", "next", "object", "type", "id", "frozenset", "globals",
)}


_TYPES = {"int": int, "float": float, "bool": bool, "str": str, "tuple": tuple, "list": list, "dict": dict,
          "set": set, "frozenset": frozenset, "object": object}


@dataclass(eq=False)
class BoundBuiltin:
    obj: Any
    name: str


class BuiltinModels:
    """`len(x)`, `x.append(v)`, ..."""

    def builtin(self, name: str, args: list, kwargs: dict, rng: Range) -> Any:
        if name == "print":
            return None
        if name == "super":
            return self._super()
        if name == "globals":
            return self.ev.globals  # the module's names, as functions read them
        if name == "isinstance":
            return self._isinstance(*args[:2]) if len(args) == 2 else UNKNOWN
        if name == "int" and len(args) == 1 and isinstance(args[0], Approx):
            return args[0]  # `int(t.item())`: still an upper bound, and says so
        if name in ("int", "float") and args and isinstance(args[0], torch.Tensor):
            value = self.to_int(args[0], rng)
            return value if name == "int" or value is UNKNOWN else float(value)
        if name in ("getattr", "hasattr") and len(args) >= 2 and isinstance(args[1], str):
            found = self.attribute(args[0], args[1], rng)
            if name == "hasattr":
                return UNKNOWN if found is UNKNOWN else True
            return args[2] if found is UNKNOWN and len(args) > 2 else found
        if name in ("map", "filter") and len(args) >= 2:
            return self._map(name, args, rng)
        if name == "sum" and args:
            items = self.items_of(args[0])
            if items is None:
                return UNKNOWN
            total = args[1] if len(args) > 1 else 0
            for item in items:
                total = self.binop("add", total, item, rng, None)
            return total
        if name == "range":
            if has_unknown(args) or not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
                return UNKNOWN
            r = range(*args)
            check_range(r, rng)
            return r
        if name == "round":
            check_round(args, rng)
        if name in ("len", "sorted", "reversed", "enumerate", "zip", "list", "tuple", "set", "frozenset", "dict",
                    "min", "max", "any", "all"):
            return self._sequence_builtin(name, args, kwargs, rng)
        if name in ("id", "iter", "next", "type", "object"):
            return UNKNOWN
        if has_unknown(args) or any(opaque(a) or isinstance(a, torch.Tensor) for a in args):
            return UNKNOWN
        fn = {"abs": abs, "round": round, "divmod": divmod, "int": int, "float": float, "bool": bool, "str": str,
              "repr": repr}.get(name)
        return UNKNOWN if fn is None else pure(fn, args, kwargs)

    def _sequence_builtin(self, name: str, args: list, kwargs: dict, rng: Range) -> Any:
        if name == "dict" and not args:
            return dict(kwargs)
        if name in ("list", "tuple", "set", "frozenset") and not args:
            return _TYPES[name]()
        if name in ("min", "max") and len(args) > 1:
            pool: list | None = list(args)
        else:
            pool = [self.items_of(a) for a in args] if name == "zip" else self.items_of(args[0]) if args else None
        if pool is None or (name == "zip" and any(p is None for p in pool)):
            return UNKNOWN
        if name == "len":
            return len(pool)
        if name == "zip":
            return list(zip(*pool, strict=False))
        if name == "enumerate":
            return list(enumerate(pool, args[1] if len(args) > 1 and isinstance(args[1], int) else 0))
        if name == "reversed":
            return list(reversed(pool))
        if has_unknown(pool) or any(opaque(v) or isinstance(v, torch.Tensor) for v in pool):
            return UNKNOWN if name in ("sorted", "set", "frozenset", "min", "max", "any", "all") else \
                _TYPES.get(name, list)(pool)
        if name == "dict":
            return pure(dict, [pool])
        fn = {"sorted": sorted, "min": min, "max": max, "any": any, "all": all}.get(name) or _TYPES[name]
        return pure(fn, [pool], {k: v for k, v in kwargs.items() if k == "reverse"})

    def _map(self, name: str, args: list, rng: Range) -> Any:
        items = self.items_of(args[1])
        if items is None:
            return UNKNOWN
        out = []
        for item in items:
            value = self.ev.call_value(args[0], [item], {}, rng, None) if args[0] is not None else item
            if name == "map":
                out.append(value)
            elif value is UNKNOWN:
                return UNKNOWN
            elif value:
                out.append(item)
        return out

    def _isinstance(self, obj: Any, cls: Any) -> Any:
        if obj is UNKNOWN or cls is UNKNOWN:
            return UNKNOWN
        if isinstance(cls, tuple):
            results = [self._isinstance(obj, c) for c in cls]
            return True if True in results else UNKNOWN if UNKNOWN in results else False
        if isinstance(cls, Builtin) and cls.name in _TYPES:
            return isinstance(obj, _TYPES[cls.name])
        if cls is torch.Tensor:
            return isinstance(obj, torch.Tensor)
        if isinstance(cls, ClassValue):
            return isinstance(obj, Instance) and (obj.cls is cls or _subclass(obj.cls, cls))
        return UNKNOWN

    def _super(self) -> Any:
        frame: Frame | None = self.ev.frame
        obj = next(iter(frame.vars.values()), None) if frame is not None else None
        return Super(obj.cls, obj) if isinstance(obj, Instance) else BoundBuiltin(None, "noop")


    def builtin_method(self, obj: Any, name: str, args: list, kwargs: dict, rng: Range) -> Any:
        if name == "noop":
            return None
        if isinstance(obj, Ctx):
            if name == "save_for_backward":
                obj.saved = tuple(args)
            return None
        if isinstance(obj, Instance | LinearModel):
            return self.module_method(obj, name, args)
        if isinstance(obj, dict | list | set) and name in ("append", "extend", "insert", "update", "add"):
            more = len(self.items_of(args[-1]) or ()) if name in ("extend", "update") and args else 1
            check_count(len(obj) + more, rng)
        if has_unknown(args) and name not in ("append", "get", "setdefault", "pop", "insert"):
            return UNKNOWN
        try:
            result = getattr(obj, name)(*args, **kwargs)
        except Exception:  # noqa: BLE001 - the method does not apply to these values
            return UNKNOWN
        if isinstance(result, type({}.items()) | type({}.keys()) | type({}.values())):
            result = list(result)
            check_count(len(result), rng)
        return result


def _subclass(cls: ClassValue, base: ClassValue) -> bool:
    return any(b is base or (isinstance(b, ClassValue) and _subclass(b, base)) for b in cls.bases)


def pure(fn: Callable, args: list, kwargs: dict | None = None) -> Any:
    try:
        return fn(*args, **(kwargs or {}))
    except Exception:  # noqa: BLE001 - the code would raise here
        return UNKNOWN
