"""What library calls and Python's objects mean to the module-level evaluation (host_eval.py): builtins,
`math`, `functools.partial`, helion's own test helpers (`run_example`, `DEVICE`, `HALF_DTYPE`), attributes,
operators, subscripts and iteration; torch lives in host_torch.py.

Only an allowlist ever runs: pure builtins and `math` here, torch on meta tensors there. Anything else — a
file, the network, `torch.compile`, a library the file imports — is UNKNOWN. Sizes and sequences are
checked against limits.py before they are built.

What helion._testing's names mean on a TPU (upstream decides them from the backend at import): `DEVICE` is
the TPU, `HALF_DTYPE` is bfloat16 (TPUs have no float16; upstream picks bfloat16 for the Pallas backend on a
real TPU) and `LONG_INT_TYPE` int32 (upstream: 64-bit types are not supported on TPU); `_get_backend()`
is "pallas".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..diagnostics import Range
from .dispatch import _MATH, _MATH_CONST
from .expressions import _PYBINOPS
from .host_torch import (
    NN_FUNCTIONAL,
    TORCH_FUNCTIONS,
    AutogradApply,
    BoundTensor,
    Ctx,
    LinearModel,
    TorchModels,
    bounds_of,
    has_unknown,
    inherit,
    opaque,
    set_bounds,
    tensors_in,
)
from .host_values import (
    UNKNOWN,
    Bound,
    ClassValue,
    Closure,
    DeviceLoop,
    FakeDevice,
    Frame,
    Instance,
    KernelMethod,
    KernelRef,
    Partial,
    Super,
)
from .limits import MAX_SEQUENCE, check_binary, check_count, check_product, check_range, check_round
from .values import Module

if TYPE_CHECKING:
    from .host_eval import HostEvaluator

KNOWN: dict[str, Any] = {
    "helion._testing.DEVICE": FakeDevice("tpu"),
    "helion._testing.HALF_DTYPE": torch.bfloat16,
    "helion._testing.LONG_INT_TYPE": torch.int32,
    "typing.TYPE_CHECKING": False,
    "torch.Tensor": torch.Tensor,
    "torch.inf": math.inf,
    "torch.nan": math.nan,
    **{f"math.{k}": v for k, v in _MATH_CONST.items()},
}


def resolve(qualname: str) -> Any:
    """The value of an imported name: a constant the models know, a dtype, else the name itself."""
    if qualname in KNOWN:
        return KNOWN[qualname]
    if qualname.startswith("torch.") and qualname.count(".") == 1:
        value = getattr(torch, qualname[6:], None)
        if isinstance(value, torch.dtype):
            return value
    return Module(qualname)


@dataclass(frozen=True)
class Builtin:
    name: str


BUILTINS: dict[str, Any] = {n: Builtin(n) for n in (
    "len", "range", "min", "max", "sum", "abs", "round", "divmod", "int", "float", "bool", "str", "tuple", "list",
    "dict", "set", "sorted", "reversed", "enumerate", "zip", "any", "all", "isinstance", "print", "getattr",
    "hasattr", "map", "filter", "super", "repr", "iter", "next", "object", "type", "id", "frozenset",
)}


_TYPES = {"int": int, "float": float, "bool": bool, "str": str, "tuple": tuple, "list": list, "dict": dict,
          "set": set, "frozenset": frozenset, "object": object}


_TYPE_INFO_ATTRS = frozenset({"min", "max", "eps", "tiny", "smallest_normal", "resolution", "bits"})


def _type_info(kind: type, args: list, kwargs: dict) -> Any:
    """`torch.finfo(dtype)` / `torch.iinfo(dtype)` (finfo() is float32's): the numeric limits of a dtype."""
    dtype = args[0] if args else kwargs.get("type", torch.float32 if kind is torch.finfo and not kwargs else None)
    if not isinstance(dtype, torch.dtype) or len(args) > 1:
        return UNKNOWN
    try:
        return kind(dtype)
    except TypeError:  # iinfo of a float dtype, finfo of an integer one
        return UNKNOWN


@dataclass(eq=False)
class BoundBuiltin:
    obj: Any
    name: str


class Models(TorchModels):
    """Attribute reads, calls, subscripts and operators on values host_eval.py does not define itself."""

    def __init__(self, ev: HostEvaluator):
        self.ev = ev
        self.main_called = False
        self.functions: dict[str, Callable[[list, dict, Range], Any]] = {
            "helion._testing.run_example": self.run_example,
            "helion._testing.code_and_output": self.code_and_output,
            "helion.runtime.settings._get_backend": lambda a, k, r: "pallas",
            "helion._compat.use_tileir_tunables": lambda a, k, r: False,
            "functools.partial": lambda a, k, r: Partial(a[0], tuple(a[1:]), dict(k)) if a else UNKNOWN,
            "typing.cast": lambda a, k, r: a[1] if len(a) == 2 else UNKNOWN,
            "torch.device": lambda a, k, r: FakeDevice(str(a[0]).split(":")[0]) if a else FakeDevice(),
            "torch.Size": lambda a, k, r: torch.Size(a[0]) if a and isinstance(a[0], tuple | list) else UNKNOWN,
            "torch.nn.Linear": self.linear,
            "torch.nn.attention.flex_attention._create_empty_block_mask": self.empty_block_mask,
            "itertools.product": self.product,
            "torch.finfo": lambda a, k, r: _type_info(torch.finfo, a, k),
            "torch.iinfo": lambda a, k, r: _type_info(torch.iinfo, a, k),
        }

    # -- attributes ----------------------------------------------------------------------------------
    def attribute(self, obj: Any, attr: str, rng: Range) -> Any:
        if obj is UNKNOWN:
            return UNKNOWN
        if isinstance(obj, Module):
            return resolve(f"{obj.qualname}.{attr}")
        if isinstance(obj, torch.Tensor):
            return self._tensor_attr(obj, attr)
        if isinstance(obj, Instance):
            if attr in obj.attrs:
                return obj.attrs[attr]
            found = obj.cls.find(attr)
            if isinstance(found, Closure) and not found.static:
                return Bound(found, obj)
            if found is not None:
                return found
            if obj.cls.derives("torch.nn.Module") and attr in ("to", "half", "float", "bfloat16", "eval", "train",
                                                                "cuda", "cpu", "requires_grad_"):
                return BoundBuiltin(obj, attr)
            return UNKNOWN
        if isinstance(obj, ClassValue):
            if attr == "apply" and obj.derives("torch.autograd.Function"):
                return AutogradApply(obj)
            found = obj.find(attr)
            return UNKNOWN if found is None else found
        if isinstance(obj, Super):
            for base in obj.cls.bases:
                if isinstance(base, ClassValue) and base.find(attr) is not None:
                    found = base.find(attr)
                    return Bound(found, obj.obj) if isinstance(found, Closure) and not found.static else found
            return BoundBuiltin(None, "noop")
        if isinstance(obj, KernelRef):
            return KernelMethod(obj, attr) if attr in ("autotune", "bind") else UNKNOWN
        if isinstance(obj, Ctx):
            if attr == "saved_tensors":
                return obj.saved
            if attr == "needs_input_grad":
                return tuple(isinstance(a, torch.Tensor) and a.requires_grad for a in obj.inputs)
            if attr in obj.attrs:
                return obj.attrs[attr]
            return BoundBuiltin(obj, attr) if attr in ("save_for_backward", "mark_dirty", "mark_non_differentiable",
                                                       "set_materialize_grads") else UNKNOWN
        if isinstance(obj, LinearModel):
            if attr in ("weight", "bias"):
                return getattr(obj, attr)
            return BoundBuiltin(obj, attr) if attr in ("to", "half", "float", "bfloat16") else UNKNOWN
        if isinstance(obj, FakeDevice):
            return getattr(obj, attr) if attr in ("type", "index") else UNKNOWN
        if isinstance(obj, torch.dtype):
            return getattr(obj, attr) if attr in ("itemsize", "is_floating_point", "is_signed") else UNKNOWN
        if isinstance(obj, torch.finfo | torch.iinfo):
            return getattr(obj, attr) if attr in _TYPE_INFO_ATTRS else UNKNOWN
        if isinstance(obj, dict | list | tuple | str | set | torch.Size):
            return BoundBuiltin(obj, attr) if hasattr(obj, attr) and not attr.startswith("_") else UNKNOWN
        return UNKNOWN

    def setattr(self, obj: Any, attr: str, value: Any) -> None:
        if isinstance(obj, Instance | Ctx):
            obj.attrs[attr] = value
        elif isinstance(obj, torch.Tensor) and attr == "requires_grad" and isinstance(value, bool):
            obj.requires_grad_(value)

    # -- calls ---------------------------------------------------------------------------------------
    def call(self, func: Any, args: list, kwargs: dict, rng: Range) -> Any:
        if isinstance(func, Builtin):
            return self.builtin(func.name, args, kwargs, rng)
        if isinstance(func, Module):
            return self.function(func.qualname, args, kwargs, rng)
        if isinstance(func, BoundTensor):
            return self.method(func.tensor, func.name, args, kwargs, rng)
        if isinstance(func, BoundBuiltin):
            return self.builtin_method(func.obj, func.name, args, kwargs, rng)
        if isinstance(func, Partial):
            return self.ev.call_value(func.func, [*func.args, *args], {**func.kwargs, **kwargs}, rng, None)
        if isinstance(func, AutogradApply):
            return self.autograd_apply(func.cls, args, kwargs, rng)
        if isinstance(func, KernelMethod):
            items = self.items_of(args[0]) if args else None
            if items is not None:
                self.ev.call_value(func.kernel, list(items), {}, rng, None)
            return func.kernel if func.method == "bind" else UNKNOWN
        if isinstance(func, LinearModel):
            if not args or not isinstance(args[0], torch.Tensor):
                return UNKNOWN
            return self.torch_call(torch.nn.functional.linear, [args[0], func.weight, func.bias], {}, rng)
        return UNKNOWN

    def function(self, q: str, args: list, kwargs: dict, rng: Range) -> Any:
        model = self.functions.get(q)
        if model is not None:
            return model(args, kwargs, rng)
        if q.startswith("helion.language.") or q in ("helion.cdiv", "helion.next_power_of_2"):
            return self.helion_language(q.rsplit(".", 1)[1], args)
        if q.startswith("math."):
            fn = _MATH.get(q[5:])
            if fn is None or has_unknown(args) or not all(isinstance(a, int | float) for a in args):
                return UNKNOWN
            if q == "math.prod":
                check_product(args[0], rng)
            return _pure(fn, args)
        name = q.rsplit(".", 1)[1]
        if q == f"torch.{name}" and name in TORCH_FUNCTIONS:
            return self.torch_call(getattr(torch, name), args, kwargs, rng, name)
        if q == f"torch.nn.functional.{name}" and name in NN_FUNCTIONAL:
            return self.torch_call(getattr(torch.nn.functional, name), args, kwargs, rng, name)
        if q in ("torch.testing.assert_close", "torch.manual_seed"):
            return None
        return UNKNOWN

    def helion_language(self, name: str, args: list) -> Any:
        if name in ("tile", "grid", "jagged_tile", "static_range"):
            return DeviceLoop(name)
        if name in ("specialize", "register_reduction_dim") and args:
            return args[0]
        if name in ("cdiv", "next_power_of_2") and all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            if name == "cdiv" and len(args) == 2 and args[1]:
                return -(-args[0] // args[1])
            if name == "next_power_of_2" and len(args) == 1:
                return 1 if args[0] <= 1 else 1 << (args[0] - 1).bit_length()
        return UNKNOWN  # block sizes and device values depend on the config

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

    def product(self, args: list, kwargs: dict, rng: Range) -> Any:
        pools = [self.items_of(a) for a in args]
        if any(p is None for p in pools) or kwargs:
            return UNKNOWN
        total = math.prod(len(p) for p in pools)
        check_count(total, rng)
        out: list[tuple] = [()]
        for pool in pools:
            out = [(*prefix, item) for prefix in out for item in pool]
        return out

    # -- helion._testing -----------------------------------------------------------------------------
    def run_example(self, args: list, kwargs: dict, rng: Range) -> Any:
        """upstream's `run_example(kernels, baselines, args, ..., bwd=False)`: each kernel (one, or a dict of
        them) is called with `args`; with `bwd=True` its output's backward runs too. Baselines are plain
        torch references and are not followed."""
        names = ("kernel_fn", "baseline_fn", "args")
        given = dict(zip(names, args, strict=False))
        given.update({k: v for k, v in kwargs.items() if k in names})
        call_args = self.items_of(given.get("args"))
        kernels = given.get("kernel_fn")
        if call_args is None or kernels is None:
            return UNKNOWN
        fns = list(kernels.values()) if isinstance(kernels, dict) else [kernels]
        bwd = kwargs.get("bwd", args[9] if len(args) > 9 else False)
        for fn in fns:
            out = self.ev.call_value(fn, list(call_args), {}, rng, None)
            if bwd is True:
                self.backward(out, rng)
        return UNKNOWN

    def code_and_output(self, args: list, kwargs: dict, rng: Range) -> Any:
        call_args = self.items_of(args[1]) if len(args) > 1 else None
        if call_args is None:
            return UNKNOWN
        return (UNKNOWN, self.ev.call_value(args[0], list(call_args), {}, rng, None))

    # -- builtins ------------------------------------------------------------------------------------
    def builtin(self, name: str, args: list, kwargs: dict, rng: Range) -> Any:
        if name == "print":
            return None
        if name == "super":
            return self._super()
        if name == "isinstance":
            return self._isinstance(*args[:2]) if len(args) == 2 else UNKNOWN
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
        return UNKNOWN if fn is None else _pure(fn, args, kwargs)

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
            return _pure(dict, [pool])
        fn = {"sorted": sorted, "min": min, "max": max, "any": any, "all": all}.get(name) or _TYPES[name]
        return _pure(fn, [pool], {k: v for k, v in kwargs.items() if k == "reverse"})

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

    # -- operators, subscripts, iteration ------------------------------------------------------------
    def binop(self, op: str, a: Any, b: Any, rng: Range, fallback: Any) -> Any:
        if has_unknown(a) or has_unknown(b) or opaque(a) or opaque(b):
            return UNKNOWN
        fn = _PYBINOPS.get(op)
        if fn is None:
            return UNKNOWN
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            try:
                result = fn(a, b) if op != "matmul" else a @ b
            except Exception:  # noqa: BLE001 - shapes or dtypes that do not combine
                return UNKNOWN
            t = a if isinstance(a, torch.Tensor) else b
            other = b if t is a else a
            if bounds_of(t) is not None and isinstance(other, int) and op in ("add", "sub") and t is a:
                lo, hi = bounds_of(t)
                set_bounds(result, lo + other if op == "add" else lo - other, hi + other if op == "add" else hi - other)
            return inherit(result, tensors_in([a, b]))
        check_binary(op, a, b, rng)
        try:
            return self.charge(fn(a, b))
        except Exception:  # noqa: BLE001 - the code would raise here (division by zero, bad types)
            return UNKNOWN

    def charge(self, value: Any) -> Any:
        """Building a sequence costs evaluation steps by its length (one per 16 items), so that no loop
        can fill memory with large lists before the step budget ends it."""
        if isinstance(value, list | tuple | str | dict | set | frozenset):
            self.ev.budget.steps += len(value) // 16
        return value

    def getitem(self, base: Any, index: Any, rng: Range) -> Any:
        if has_unknown(base) or has_unknown(index) or isinstance(base, Module | ClassValue | Builtin):
            return UNKNOWN
        if isinstance(base, dict):
            try:
                return base.get(index, UNKNOWN)
            except TypeError:
                return UNKNOWN
        if isinstance(base, Instance):
            method = base.cls.find("__getitem__")
            return self.ev.call_value(method, [base, index], {}, rng, None) if isinstance(method, Closure) else UNKNOWN
        if isinstance(base, torch.Tensor | tuple | list | str | torch.Size | range):
            if opaque(index) or (isinstance(index, tuple) and any(opaque(i) for i in index)):
                return UNKNOWN
            try:
                result = base[index]
            except Exception:  # noqa: BLE001 - out of range, or an index torch does not take on meta
                return UNKNOWN
            if isinstance(base, torch.Tensor):
                if bounds_of(base) is not None:
                    set_bounds(result, *bounds_of(base))
                return inherit(result, [base])
            return result
        return UNKNOWN

    def setitem(self, base: Any, index: Any, value: Any) -> None:
        if isinstance(base, dict) and index is not UNKNOWN:
            check_count(len(base) + 1, Range.lines(0))
            try:
                base[index] = value
            except TypeError:
                pass
        elif isinstance(base, list) and isinstance(index, int):
            try:
                base[index] = value
            except IndexError:
                pass

    def delitem(self, base: Any, index: Any) -> None:
        if isinstance(base, dict):
            try:
                base.pop(index, None)
            except TypeError:
                pass
        elif isinstance(base, list) and isinstance(index, int) and -len(base) <= index < len(base):
            del base[index]

    def contains(self, container: Any, item: Any, rng: Range) -> Any:
        if has_unknown(item) or not isinstance(container, dict | list | tuple | set | str | range | frozenset):
            return UNKNOWN
        if isinstance(container, list | tuple) and has_unknown(container):
            return UNKNOWN
        try:
            return item in container
        except Exception:  # noqa: BLE001 - unhashable, or a tensor compared elementwise
            return UNKNOWN

    def items_of(self, value: Any) -> list | None:
        """The items of an iterable the evaluation knows (in a deterministic order), else None."""
        if isinstance(value, tuple | list | range | torch.Size | str):
            check_count(len(value), Range.lines(0), "this sequence")
            return self.charge(list(value))
        if isinstance(value, dict):
            return list(value)
        if isinstance(value, set | frozenset):
            return sorted(value, key=repr)
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] <= MAX_SEQUENCE:
            return [inherit(value[i], [value]) for i in range(value.shape[0])]
        return None


def _subclass(cls: ClassValue, base: ClassValue) -> bool:
    return any(b is base or (isinstance(b, ClassValue) and _subclass(b, base)) for b in cls.bases)


def _pure(fn: Callable, args: list, kwargs: dict | None = None) -> Any:
    try:
        return fn(*args, **(kwargs or {}))
    except Exception:  # noqa: BLE001 - the code would raise here
        return UNKNOWN
