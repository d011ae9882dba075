"""What library calls and Python's objects mean to the module-level evaluation (host_eval.py): attributes,
calls, `math`, `functools.partial`, helion's own test helpers (`run_example`, `DEVICE`, `HALF_DTYPE`), the
process (host_process.py: no command-line arguments, the file's environment variables unset);
`Models` mixes in Python's builtins (host_builtins.py), operators, subscripts and iteration
(host_operators.py) and torch (host_torch.py).

Only an allowlist ever runs: pure builtins and `math`, torch on meta tensors. Anything else — a
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
from typing import TYPE_CHECKING, Any

import torch

from ..support.diagnostics import Range
from .dispatch import _MATH, _MATH_CONST
from .host_builtins import BoundBuiltin, Builtin, BuiltinModels, pure
from .host_operators import OperatorModels
from .host_process import PARSER_METHODS, ArgParser, ParserMethod, env_default, parser_call
from .host_torch import (
    LINALG,
    NN_FUNCTIONAL,
    TORCH_FUNCTIONS,
    AutogradApply,
    BoundTensor,
    Ctx,
    LinearModel,
    TorchModels,
    has_unknown,
)
from .host_values import (
    UNKNOWN,
    Bound,
    ClassValue,
    Closure,
    DeviceLoop,
    FakeDevice,
    Instance,
    KernelChoice,
    KernelMethod,
    KernelRef,
    Partial,
    Super,
)
from .limits import check_count, check_product
from .values import Module
from .vllm_platform import TpuPlatform

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


def _given(names: tuple[str, ...], args: list, kwargs: dict) -> dict[str, Any]:
    """The arguments of a harness call by parameter name (positional first, then keywords), of `names` only."""
    given = dict(zip(names, args, strict=False))
    given.update({k: v for k, v in kwargs.items() if k in names})
    return given


class Models(TorchModels, BuiltinModels, OperatorModels):
    """Attribute reads, calls, subscripts and operators on values host_eval.py does not define itself."""

    def __init__(self, ev: HostEvaluator):
        self.ev = ev
        self.main_called = False
        self.functions: dict[str, Callable[[list, dict, Range], Any]] = {
            "helion._testing.run_example": self.run_example,
            "helion._testing.code_and_output": self.code_and_output,
            "_bench.run_sweep": self.run_sweep,
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
            "os.environ.get": lambda a, k, r: env_default(a, k, ev.assumed, r),
            "os.getenv": lambda a, k, r: env_default(a, k, ev.assumed, r),
            "argparse.ArgumentParser": lambda a, k, r: ArgParser(),
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
        if isinstance(obj, ArgParser):
            return ParserMethod(obj, attr) if attr in PARSER_METHODS else UNKNOWN
        if isinstance(obj, KernelChoice):
            return self.attribute(obj.taken, attr, rng)
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
        if isinstance(obj, TpuPlatform):
            found = obj.attribute(attr)
            return UNKNOWN if found is None else found
        if isinstance(obj, Builtin) and (obj.name, attr) == ("dict", "fromkeys"):  # ordered de-duplication
            return BoundBuiltin(dict, attr)
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
        if isinstance(func, ParserMethod):
            return parser_call(func, args, kwargs, self.ev.assumed, rng)
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
            return pure(fn, args)
        name = q.rsplit(".", 1)[1]
        if q == f"torch.{name}" and name in TORCH_FUNCTIONS:
            return self.torch_call(getattr(torch, name), args, kwargs, rng, name)
        if q == f"torch.nn.functional.{name}" and name in NN_FUNCTIONAL:
            return self.torch_call(getattr(torch.nn.functional, name), args, kwargs, rng, name)
        if q == f"torch.linalg.{name}" and name in LINALG:
            return self.torch_call(getattr(torch.linalg, name), args, kwargs, rng, name)
        if q in ("torch.testing.assert_close", "torch.manual_seed"):
            return None
        if q == "torch.cuda.is_available":  # the kernels run on a TPU: no CUDA there (vLLM's nvfp4 generators ask)
            return False
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
        given = _given(("kernel_fn", "baseline_fn", "args"), args, kwargs)
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

    def run_sweep(self, args: list, kwargs: dict, rng: Range) -> Any:
        """upstream's pretuned kernels' harness, `run_sweep(shapes, make_calls, ...)` (pretuned_kernels/_bench.py,
        which their `main()` imports): for each shape, `make_calls(shape)` builds the inputs and returns
        `(helion_call, baselines, cells)`; the zero-argument `helion_call` calls the kernel. Baselines are plain
        torch and are not followed."""
        given = _given(("shapes", "make_calls"), args, kwargs)
        shapes, make_calls = self.items_of(given.get("shapes")), given.get("make_calls")
        if shapes is None or make_calls is None:
            return UNKNOWN
        for shape in shapes:
            calls = self.ev.call_value(make_calls, [shape], {}, rng, None)
            if isinstance(calls, tuple) and calls:
                self.ev.call_value(calls[0], [], {}, rng, None)
        return UNKNOWN

    def code_and_output(self, args: list, kwargs: dict, rng: Range) -> Any:
        call_args = self.items_of(args[1]) if len(args) > 1 else None
        if call_args is None:
            return UNKNOWN
        return (UNKNOWN, self.ev.call_value(args[0], list(call_args), {}, rng, None))
