"""Values of the module-level abstract evaluation (host_eval.py): what a name can stand for when a file's
own code is followed, without running it, to find the arguments its kernels are called with.

Python numbers, strings, containers and torch meta tensors stand for themselves; everything the evaluation
cannot know (a file read, a random value, a call into a library it does not model) is `UNKNOWN`, which
every operation propagates.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any


class _Unknown:
    """A value the evaluation cannot know statically."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unknown>"


UNKNOWN = _Unknown()


class Frame:
    """Variables of one module, function, class body or comprehension. `parent` is the enclosing function
    scope (closures read through it); `entry` marks the module frame and `main()`'s: calls made from an
    entry frame are where a shape set's label comes from."""

    __slots__ = ("vars", "parent", "entry", "is_class", "globals_declared")

    def __init__(self, variables: dict[str, Any], parent: Frame | None, entry: bool = False, is_class: bool = False):
        self.vars = variables
        self.parent = parent
        self.entry = entry
        self.is_class = is_class
        self.globals_declared: set[str] = set()


@dataclass(eq=False)
class Closure:
    """A same-file function or lambda with the scope it was defined in and its evaluated defaults."""

    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    scope: Frame | None
    defaults: list[Any]
    kw_defaults: dict[str, Any]
    static: bool = False  # @staticmethod: no bound `self` when read from a class or instance

    @property
    def name(self) -> str:
        return getattr(self.node, "name", "<lambda>")


@dataclass(eq=False)
class KernelRef:
    """A `@helion.kernel` function of the module: calling it records a shape set (with `note` among its notes:
    why the call reaches this kernel only on another path)."""

    name: str
    closure: Closure
    note: str = ""


@dataclass(eq=False)
class KernelChoice:
    """`k = fast if cond else plain`, two kernels and a known `cond` (`_get_backend() == "pallas"`): a call
    goes to `taken`; `other` gets the same arguments, as it would where `cond` goes the other way (on another
    backend), with a note that says so."""

    taken: KernelRef
    other: KernelRef


@dataclass(eq=False)
class KernelMethod:
    """`kernel.autotune(args)` / `kernel.bind(args)`: the kernel will be called with `args`."""

    kernel: KernelRef
    method: str


@dataclass(eq=False)
class Partial:
    """`functools.partial(func, *args, **kwargs)`."""

    func: Any
    args: tuple
    kwargs: dict


@dataclass(eq=False)
class Bound:
    """A method bound to its object (`obj.method`)."""

    func: Any
    obj: Any


@dataclass(eq=False)
class ClassValue:
    """A class defined in the file: its bases (evaluated) and the names its body defined."""

    name: str
    bases: tuple
    namespace: dict[str, Any]

    def find(self, name: str) -> Any:
        """`name` in the class or its same-file bases (method resolution order, depth first)."""
        if name in self.namespace:
            return self.namespace[name]
        for base in self.bases:
            if isinstance(base, ClassValue):
                found = base.find(name)
                if found is not None:
                    return found
        return None

    def derives(self, qualname: str) -> bool:
        """The class derives, directly or through same-file classes, from the library class `qualname`."""
        from .values import Module

        for base in self.bases:
            if isinstance(base, Module) and base.qualname == qualname:
                return True
            if isinstance(base, ClassValue) and base.derives(qualname):
                return True
        return False


@dataclass(eq=False)
class Instance:
    """An object of a same-file class."""

    cls: ClassValue
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class Super:
    """`super()` inside a method: attribute reads look in the bases."""

    cls: ClassValue
    obj: Any


@dataclass(frozen=True)
class FakeDevice:
    """A device as user code sees it (`DEVICE`, `x.device`); tensors here are always meta tensors."""

    type: str = "tpu"
    index: int | None = None


@dataclass(eq=False)
class Site:
    """A call as evaluated: the call expression (None for calls a library model makes), its argument
    values and the frame it was made in."""

    node: ast.Call | None
    args: list
    kwargs: dict
    frame: Frame | None


class Approx(int):
    """A size the code computes from random data (`int(offsets[-1])`): its upper bound, with a note that
    says so. Integer arithmetic keeps the note; tensors built from it carry it (`approx_notes`)."""

    notes: tuple[str, ...]

    def __new__(cls, value: int, notes: tuple[str, ...]) -> Approx:
        obj = super().__new__(cls, value)
        obj.notes = notes
        return obj

    def _wrap(self, other: Any, result: Any) -> Any:
        if not isinstance(result, int) or isinstance(result, bool):
            return result
        notes = self.notes + (other.notes if isinstance(other, Approx) else ())
        return Approx(result, tuple(dict.fromkeys(notes)))


def _approx_op(name: str) -> Any:
    def op(self: Approx, other: Any = None) -> Any:
        result = getattr(int, name)(int(self), *(() if other is None else (int(other) if isinstance(other, Approx)
                                                                          else other,)))
        return self._wrap(other, result)

    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__", "__rfloordiv__",
              "__mod__", "__neg__", "__pos__", "__abs__"):
    setattr(Approx, _name, _approx_op(_name))


@dataclass(frozen=True)
class DeviceLoop:
    """What `hl.tile(...)` / `hl.grid(...)` evaluates to outside a kernel trace: a loop that runs on the
    device, whose body host evaluation skips."""

    api: str
