"""What library calls mean to the module-level evaluation (host_eval.py): torch on meta tensors, Python
builtins, `math`, `functools.partial`, helion's own test helpers (`run_example`, `DEVICE`, `HALF_DTYPE`),
`torch.autograd.Function.apply` and `backward()`, `nn.Linear`/`nn.Module`.

Only an allowlist ever runs: torch's ATen functions and tensor methods (always on meta tensors: shapes and
dtypes, no data, no device), a list of `torch.nn.functional` functions, pure builtins and `math`. Anything
else — a file, the network, `torch.compile`, a library the file imports — is UNKNOWN. Sizes and sequences
are checked against limits.py before they are built.

What helion._testing's names mean on a TPU (upstream decides them from the backend at import): `DEVICE` is
the TPU, `HALF_DTYPE` is bfloat16 (TPUs have no float16; upstream picks bfloat16 for the Pallas backend on a
real TPU) and `LONG_INT_TYPE` int32 (upstream: 64-bit types are not supported on TPU); `_get_backend()`
is "pallas".

Random integer tensors keep bounds (`randint(1, 65, (32,))` holds 1..64; `cumsum` and `cat` combine them),
so a size computed from them (`int(offsets[-1])`) is its upper bound, marked `Approx`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..diagnostics import Range, UserError
from .dispatch import _MATH, _MATH_CONST
from .expressions import _PYBINOPS
from .host_values import (
    UNKNOWN,
    Approx,
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

MAX_NUMEL = 2**62  # a meta tensor bigger than this is a typo (kernel arguments are limited to 2**40 elements)
_DENIED_FUNCTIONS = {"from_file"}
TORCH_FUNCTIONS = frozenset(n for n in dir(torch._C._VariableFunctions) if not n.startswith("_")) - _DENIED_FUNCTIONS | {
    "einsum", "split", "broadcast_tensors", "broadcast_shapes", "meshgrid", "norm", "tensordot", "unflatten",
    "atleast_1d", "atleast_2d", "atleast_3d", "block_diag", "cdist", "chunk",
}
NN_FUNCTIONAL = frozenset({
    "softmax", "log_softmax", "softmin", "silu", "gelu", "relu", "relu6", "sigmoid", "tanh", "linear", "bilinear",
    "layer_norm", "rms_norm", "group_norm", "batch_norm", "embedding", "cross_entropy", "nll_loss", "mse_loss",
    "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "scaled_dot_product_attention", "normalize", "pad",
    "dropout", "leaky_relu", "elu", "selu", "celu", "softplus", "softsign", "glu", "mish", "logsigmoid",
    "hardtanh", "binary_cross_entropy", "binary_cross_entropy_with_logits", "cosine_similarity", "conv1d",
    "conv2d",
})
_DENIED_METHODS = {"apply_", "map_", "map2_", "tolist", "numpy", "item", "data_ptr", "storage", "untyped_storage",
                   "record_stream", "pin_memory", "share_memory_", "set_", "backward", "register_hook", "retain_grad",
                   "cuda", "cpu", "to", "type", "from_file", "module_load", "register_post_accumulate_grad_hook"}
TENSOR_METHODS = frozenset(
    n for n in dir(torch.Tensor)
    if not n.startswith("_") and n not in _DENIED_METHODS
    and type(getattr(torch.Tensor, n)).__name__ in ("method_descriptor", "builtin_function_or_method")
) | {"split", "unflatten", "norm", "unique"}
_TENSOR_ATTRS = {"shape", "dtype", "ndim", "T", "mT", "H", "mH", "requires_grad", "is_leaf", "layout", "itemsize"}
_FACTORIES = {"empty", "zeros", "ones", "full", "rand", "randn", "randint", "randperm", "arange", "linspace",
              "logspace", "eye", "tensor", "as_tensor", "empty_strided", "normal", "scalar_tensor"}
_PLACEMENT = ("device", "pin_memory", "generator", "out", "layout", "non_blocking", "memory_format")

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


@dataclass(eq=False)
class BoundTensor:
    tensor: torch.Tensor
    name: str


@dataclass(eq=False)
class BoundBuiltin:
    obj: Any
    name: str


@dataclass(eq=False)
class AutogradApply:
    cls: ClassValue


@dataclass(eq=False)
class Ctx:
    """The `ctx` an autograd.Function's forward and backward share."""

    inputs: tuple
    attrs: dict
    saved: tuple = ()


@dataclass(eq=False)
class GradNode:
    """One `Function.apply` whose output needs a gradient: `backward()` on a tensor built from it runs
    the Function's backward once."""

    cls: ClassValue
    ctx: Ctx
    output: Any
    done: bool = False


@dataclass(eq=False)
class LinearModel:
    """`nn.Linear(in, out)`: a weight of shape [out, in] (and a bias), float32 until `.to(dtype)`."""

    weight: torch.Tensor
    bias: torch.Tensor | None


def has_unknown(value: Any, depth: int = 0) -> bool:
    """UNKNOWN anywhere in a value (containers are searched a few levels deep)."""
    if value is UNKNOWN:
        return True
    if depth > 3:
        return False
    if isinstance(value, tuple | list):
        return any(has_unknown(v, depth + 1) for v in value[:64])
    if isinstance(value, dict):
        return any(has_unknown(v, depth + 1) for v in list(value.values())[:64])
    return False


def _tensors(values: Any) -> list[torch.Tensor]:
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, tuple | list):
            out.extend(x for x in v if isinstance(x, torch.Tensor))
    return out


def inherit(result: Any, inputs: list[torch.Tensor]) -> Any:
    """Tensors computed from `inputs` keep their autograd nodes and approximation notes."""
    grads = tuple(dict.fromkeys(n for t in inputs for n in getattr(t, "_hls_grad", ())))
    notes = tuple(dict.fromkeys(n for t in inputs for n in getattr(t, "_hls_notes", ())))
    if grads or notes:
        for t in _tensors([result]):
            if grads:
                t._hls_grad = tuple(dict.fromkeys((*getattr(t, "_hls_grad", ()), *grads)))
            if notes:
                t._hls_notes = tuple(dict.fromkeys((*getattr(t, "_hls_notes", ()), *notes)))
    return result


def approx_notes(value: Any) -> tuple[str, ...]:
    """Why a value is an upper bound rather than what the code computes (empty when it is exact)."""
    if isinstance(value, Approx):
        return value.notes
    return tuple(getattr(value, "_hls_notes", ()))


def _bounds(t: Any) -> tuple[int, int] | None:
    return getattr(t, "_hls_bounds", None) if isinstance(t, torch.Tensor) else None


def _set_bounds(t: Any, lo: int, hi: int) -> None:
    if isinstance(t, torch.Tensor) and not t.dtype.is_floating_point:
        t._hls_bounds = (int(lo), int(hi))


def _shape_of(args: list, kwargs: dict) -> tuple[int, ...] | None:
    size = kwargs.get("size", args[0] if args else None)
    if isinstance(size, tuple | list | torch.Size):
        dims = list(size)
    else:
        dims = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
        if len(dims) != len(args):
            return None
    return tuple(dims) if all(isinstance(d, int) and not isinstance(d, bool) for d in dims) else None


def _check_size(shape: tuple[int, ...] | None, rng: Range) -> None:
    if shape is None:
        return
    numel = 1
    for d in shape:
        numel *= max(int(d), 0)
        if numel > MAX_NUMEL:
            raise UserError("HPL105", f"a tensor of shape {list(shape)} would have more than 2**62 elements", rng)


class Models:
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
            "itertools.product": self.product,
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
            return getattr(obj, attr, UNKNOWN)
        if isinstance(obj, torch.dtype):
            return getattr(obj, attr) if attr in ("itemsize", "is_floating_point", "is_signed") else UNKNOWN
        if isinstance(obj, dict | list | tuple | str | set | torch.Size):
            return BoundBuiltin(obj, attr) if hasattr(obj, attr) and not attr.startswith("_") else UNKNOWN
        return UNKNOWN

    def _tensor_attr(self, t: torch.Tensor, attr: str) -> Any:
        if attr in _TENSOR_ATTRS:
            return getattr(t, attr)
        if attr == "device":
            return FakeDevice()
        if attr == "data":
            return t
        if attr == "is_cuda":
            return False
        return BoundTensor(t, attr)

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

    def torch_call(self, fn: Callable, args: list, kwargs: dict, rng: Range, name: str = "") -> Any:
        if has_unknown(args) or has_unknown(kwargs) or any(_opaque(v) for v in (*args, *kwargs.values())):
            return UNKNOWN
        kwargs = {k: v for k, v in kwargs.items() if k not in _PLACEMENT}
        args = [a for a in args if not isinstance(a, FakeDevice)]
        creates = name in _FACTORIES or name.endswith("_like")
        if creates:
            kwargs["device"] = "meta"
            if name in _FACTORIES and name not in ("tensor", "as_tensor", "arange", "linspace", "logspace"):
                _check_size(_shape_of(args[1:] if name == "full" else _size_args(name, args), kwargs), rng)
        if name in ("tensor", "as_tensor") and args:
            check_count(_flat_len(args[0]), rng)
        if name == "arange":
            _check_size((_arange_len(args),), rng)
        try:
            result = fn(*args, **kwargs)
        except Exception:  # noqa: BLE001 - an op torch cannot do on these shapes: the value is unknown
            return UNKNOWN
        inputs = _tensors([*args, *kwargs.values()])
        notes = tuple(dict.fromkeys(n for a in (*args, *kwargs.values()) for n in _int_notes(a)))
        if notes:
            for t in _tensors([result]):
                t._hls_notes = notes
        self._bounds_after(name, result, args, kwargs)
        return inherit(result, inputs)

    def _bounds_after(self, name: str, result: Any, args: list, kwargs: dict) -> None:
        if not isinstance(result, torch.Tensor):
            return
        ints = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
        if name == "randint" and ints:
            lo, hi = (0, ints[0]) if len(ints) == 1 or isinstance(args[1], tuple | list | torch.Size) else ints[:2]
            _set_bounds(result, lo, hi - 1)
        elif name in ("zeros", "zeros_like", "empty", "empty_like"):
            _set_bounds(result, 0, 0)
        elif name in ("ones", "ones_like"):
            _set_bounds(result, 1, 1)
        elif name in ("full", "full_like") and len(args) > 1 and isinstance(args[1], int):
            _set_bounds(result, args[1], args[1])
        elif name == "arange" and ints:
            lo, hi = (0, ints[0]) if len(ints) == 1 else ints[:2]
            _set_bounds(result, lo, hi - 1)
        elif name in ("cat", "concat", "concatenate", "stack") and args and isinstance(args[0], tuple | list):
            bounds = [_bounds(t) for t in args[0]]
            if bounds and all(b is not None for b in bounds):
                _set_bounds(result, min(b[0] for b in bounds), max(b[1] for b in bounds))
        elif name in ("cumsum", "sum") and args and _bounds(args[0]) is not None:
            lo, hi = _bounds(args[0])
            t = args[0]
            n = t.numel() // max(1, result.numel()) if name == "sum" else _dim_size(t, args[1:], kwargs)
            if n is not None:
                _set_bounds(result, min(lo, lo * n), max(hi, hi * n))
        elif name in ("max", "amax", "min", "amin", "clone", "flatten", "reshape", "view", "contiguous", "squeeze",
                      "unsqueeze", "to", "long", "int") and args and _bounds(args[0]) is not None:
            _set_bounds(result, *_bounds(args[0]))

    def method(self, t: torch.Tensor, name: str, args: list, kwargs: dict, rng: Range) -> Any:
        if name == "backward":
            self.backward(t, rng)
            return None
        if name == "item":
            return self.to_int(t, rng)
        if name in ("to", "type", "cuda", "cpu"):
            dtype = next((a for a in (*args, kwargs.get("dtype")) if isinstance(a, torch.dtype)), None)
            other = next((a for a in args if isinstance(a, torch.Tensor)), None)
            dtype = dtype or (other.dtype if other is not None else None)
            if dtype is None or dtype == t.dtype:
                return t
            return self._after_method(t, "to", t.to(dtype), [])
        if name not in TENSOR_METHODS:
            return UNKNOWN
        if has_unknown(args) or has_unknown(kwargs) or any(_opaque(v) for v in (*args, *kwargs.values())):
            return UNKNOWN
        kwargs = {k: v for k, v in kwargs.items() if k not in _PLACEMENT}
        args = [a for a in args if not isinstance(a, FakeDevice)]
        if name.startswith("new_"):
            kwargs["device"] = "meta"
            _check_size(_shape_of(args[:1], {}) if name != "new_tensor" else None, rng)
        try:
            result = getattr(t, name)(*args, **kwargs)
        except Exception:  # noqa: BLE001 - see torch_call
            return UNKNOWN
        return self._after_method(t, name, result, args, kwargs)

    def _after_method(self, t: torch.Tensor, name: str, result: Any, args: list, kwargs: dict | None = None) -> Any:
        self._bounds_after(name, result, [t, *args], kwargs or {})
        return inherit(result, [t, *_tensors(args)])

    def to_int(self, t: torch.Tensor, rng: Range) -> Any:
        """`int(t)` / `t.item()` of a one-element tensor: its upper bound when the code built it from random
        integers with known bounds (marked Approx), else unknown."""
        bounds = _bounds(t)
        if bounds is None or t.numel() != 1:
            return UNKNOWN
        return Approx(bounds[1], (f"{bounds[1]} is the upper bound of a size computed from random data at line "
                                  f"{rng.start.line + 1}",))

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

    def module_method(self, obj: Any, name: str, args: list) -> Any:
        """`module.to(dtype)`, `.half()`, `.eval()` ...: parameters change dtype in place, like nn.Module."""
        dtype = {"half": torch.float16, "float": torch.float32, "bfloat16": torch.bfloat16}.get(name)
        if name == "to":
            dtype = next((a for a in args if isinstance(a, torch.dtype)), None)
        if dtype is not None:
            _module_to(obj, dtype, 0)
        return obj

    def linear(self, args: list, kwargs: dict, rng: Range) -> Any:
        dims = [a for a in args[:2] if isinstance(a, int) and not isinstance(a, bool)]
        if len(dims) != 2:
            return UNKNOWN
        _check_size((dims[1], dims[0]), rng)
        dtype = kwargs.get("dtype") if isinstance(kwargs.get("dtype"), torch.dtype) else torch.float32
        bias = kwargs.get("bias", args[2] if len(args) > 2 else True)
        weight = torch.empty(dims[1], dims[0], dtype=dtype, device="meta")
        return LinearModel(weight, torch.empty(dims[1], dtype=dtype, device="meta") if bias else None)

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

    # -- autograd ------------------------------------------------------------------------------------
    def autograd_apply(self, cls: ClassValue, args: list, kwargs: dict, rng: Range) -> Any:
        forward = cls.find("forward")
        if not isinstance(forward, Closure):
            return UNKNOWN
        ctx = Ctx(tuple(args), {})
        out = self.ev.call_closure(forward, [ctx, *args], kwargs, rng)
        inputs = _tensors(args)
        if isinstance(cls.find("backward"), Closure) and any(t.requires_grad or hasattr(t, "_hls_grad")
                                                             for t in inputs):
            node = GradNode(cls, ctx, out)
            for t in _tensors([out]):
                t._hls_grad = (*getattr(t, "_hls_grad", ()), node)
        return out

    def backward(self, out: Any, rng: Range) -> None:
        """`out.backward(...)`: the backward of every Function applied on the way to `out`, latest first,
        each with gradients shaped like its outputs."""
        nodes = [n for t in _tensors([out]) for n in getattr(t, "_hls_grad", ())]
        for node in reversed(list(dict.fromkeys(nodes))):
            if node.done:
                continue
            node.done = True
            outputs = node.output if isinstance(node.output, tuple | list) else (node.output,)
            grads = [torch.empty_like(o, device="meta") if isinstance(o, torch.Tensor) else None for o in outputs]
            backward = node.cls.find("backward")
            self.ev.call_closure(backward, [node.ctx, *grads], {}, rng)

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
        if has_unknown(args) or any(_opaque(a) or isinstance(a, torch.Tensor) for a in args):
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
        if has_unknown(pool) or any(_opaque(v) or isinstance(v, torch.Tensor) for v in pool):
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
        if has_unknown(a) or has_unknown(b) or _opaque(a) or _opaque(b):
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
            if _bounds(t) is not None and isinstance(other, int) and op in ("add", "sub") and t is a:
                lo, hi = _bounds(t)
                _set_bounds(result, lo + other if op == "add" else lo - other, hi + other if op == "add" else hi - other)
            return inherit(result, _tensors([a, b]))
        check_binary(op, a, b, rng)
        try:
            return fn(a, b)
        except Exception:  # noqa: BLE001 - the code would raise here (division by zero, bad types)
            return UNKNOWN

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
            if _opaque(index) or (isinstance(index, tuple) and any(_opaque(i) for i in index)):
                return UNKNOWN
            try:
                result = base[index]
            except Exception:  # noqa: BLE001 - out of range, or an index torch does not take on meta
                return UNKNOWN
            if isinstance(base, torch.Tensor):
                if _bounds(base) is not None:
                    _set_bounds(result, *_bounds(base))
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
            return list(value)
        if isinstance(value, dict):
            return list(value)
        if isinstance(value, set | frozenset):
            return sorted(value, key=repr)
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] <= MAX_SEQUENCE:
            return [inherit(value[i], [value]) for i in range(value.shape[0])]
        return None


def _subclass(cls: ClassValue, base: ClassValue) -> bool:
    return any(b is base or (isinstance(b, ClassValue) and _subclass(b, base)) for b in cls.bases)


def _module_to(obj: Any, dtype: torch.dtype, depth: int) -> None:
    if depth > 4:
        return
    if isinstance(obj, LinearModel):
        obj.weight = obj.weight.to(dtype)
        obj.bias = obj.bias.to(dtype) if obj.bias is not None else None
    elif isinstance(obj, Instance):
        for key, value in obj.attrs.items():
            if isinstance(value, torch.Tensor) and value.dtype.is_floating_point:
                obj.attrs[key] = value.to(dtype)
            else:
                _module_to(value, dtype, depth + 1)


def _opaque(value: Any) -> bool:
    """A value torch and builtins must never receive (our own objects: functions, classes, modules)."""
    return isinstance(value, Closure | KernelRef | ClassValue | Instance | Module | Partial | Bound | Builtin | Ctx |
                      BoundTensor | BoundBuiltin | LinearModel | DeviceLoop | KernelMethod | AutogradApply | Super)


def _pure(fn: Callable, args: list, kwargs: dict | None = None) -> Any:
    try:
        return fn(*args, **(kwargs or {}))
    except Exception:  # noqa: BLE001 - the code would raise here
        return UNKNOWN


def _int_notes(value: Any) -> tuple[str, ...]:
    if isinstance(value, Approx):
        return value.notes
    if isinstance(value, tuple | list | torch.Size):
        return tuple(n for v in value if isinstance(v, Approx) for n in v.notes)
    return ()


def _size_args(name: str, args: list) -> list:
    if name == "randint":
        first_seq = next((i for i, a in enumerate(args) if isinstance(a, tuple | list | torch.Size)), None)
        return args[first_seq:first_seq + 1] if first_seq is not None else []
    return args


def _flat_len(data: Any) -> int:
    if isinstance(data, tuple | list):
        return sum(_flat_len(d) for d in data[:MAX_SEQUENCE + 1]) if data else 0
    return 1


def _arange_len(args: list) -> int:
    nums = [a for a in args if isinstance(a, int | float) and not isinstance(a, bool)]
    if not nums:
        return 0
    start, end, step = (0, nums[0], 1) if len(nums) == 1 else (*nums[:2], nums[2] if len(nums) > 2 else 1)
    try:
        return max(0, math.ceil((end - start) / step))
    except (ZeroDivisionError, OverflowError, ValueError):
        return 0


def _dim_size(t: torch.Tensor, args: list, kwargs: dict) -> int | None:
    dim = kwargs.get("dim", args[0] if args else None)
    if not isinstance(dim, int) or not -t.dim() <= dim < max(t.dim(), 1):
        return None
    return t.shape[dim] if t.dim() else 1
