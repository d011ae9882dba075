"""Torch for the module-level evaluation (host_eval.py): torch functions, tensor methods, `torch.nn.functional`
and `torch.linalg` on meta tensors, `nn.Linear`, `torch.autograd.Function.apply` and `backward()`.

Only an allowlist runs: torch's ATen functions and tensor methods (on meta tensors: shapes and dtypes, no
data, no device, no file), a list of `torch.nn.functional` functions, `torch.linalg`; anything else is
UNKNOWN. Sizes are checked before a tensor is built (limits.py for integers; more than 2**62 elements is a
diagnostic).

Random integer tensors keep bounds (host_bounds.py), so a size computed from them (`int(offsets[-1])`) is its
upper bound, an `Approx` that says so; the tensors built from it carry that note (`approx_notes`). Tensors
also carry the autograd.Function applications they were computed from, so `backward()` runs those
Functions' backward.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..support.diagnostics import Range, UserError
from .host_bounds import bincount, bounds_after, bounds_of, written
from .host_values import UNKNOWN, Approx, ClassValue, Closure, FakeDevice, Instance
from .limits import MAX_SEQUENCE, check_count
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


# torch.linalg.svd, .qr, .norm ...: their ATen names are linalg_svd, ...
LINALG = frozenset(n.removeprefix("linalg_") for n in dir(torch._C._linalg)
                   if n.startswith("linalg_") and not n.startswith("linalg__"))


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


@dataclass(eq=False)
class BoundTensor:
    tensor: torch.Tensor
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


def tensors_in(values: Any) -> list[torch.Tensor]:
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
        for t in tensors_in([result]):
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


def opaque(value: Any) -> bool:
    """A value that is not plain data (numbers, strings, containers, tensors, dtypes): the evaluation's own
    objects (functions, classes, modules), which torch and builtins must never receive."""
    return not isinstance(value, torch.Tensor | torch.dtype | torch.Size | int | float | str | tuple | list | dict |
                          set | frozenset | range | slice | FakeDevice | type(None))


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


class TorchModels:
    """The torch half of `host_models.Models` (which it is mixed into)."""

    ev: HostEvaluator

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

    def empty_block_mask(self, args: list, kwargs: dict, rng: Range) -> Any:
        """torch's `_create_empty_block_mask(q, k)`: one block spanning every query and key (flex attention's
        default), with torch's `noop_mask`; what the flex-attention wrappers pass on to their kernels."""
        big = 1 << 30  # torch's _LARGE_SPARSE_BLOCK_SIZE
        table = {"kv_num_blocks": torch.ones([1, 1, 1], dtype=torch.int32, device="meta"),
                 "kv_indices": torch.zeros([1, 1, 1, 1], dtype=torch.int32, device="meta"),
                 "full_kv_num_blocks": None, "full_kv_indices": None, "q_num_blocks": None, "q_indices": None,
                 "full_q_num_blocks": None, "full_q_indices": None, "BLOCK_SIZE": (big, big),
                 "mask_mod": Module("torch.nn.attention.flex_attention.noop_mask")}
        return Instance(ClassValue("BlockMask", (), {}), table)

    def torch_call(self, fn: Callable, args: list, kwargs: dict, rng: Range, name: str = "") -> Any:
        result = self._torch_call(fn, args, kwargs, rng, name)
        out = kwargs.get("out")
        if isinstance(out, torch.Tensor):  # `torch.cumsum(x, 0, out=offsets[1:])` writes its result there
            written(out, result if isinstance(result, torch.Tensor) else None)
        return result

    def _torch_call(self, fn: Callable, args: list, kwargs: dict, rng: Range, name: str) -> Any:
        if has_unknown(args) or has_unknown(kwargs) or any(opaque(v) for v in (*args, *kwargs.values())):
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
        if name == "bincount":  # its length is data: meta tensors cannot say it
            counts = bincount(args, kwargs, rng.start.line + 1)
            return UNKNOWN if counts is None else inherit(counts, tensors_in(args))
        try:
            result = fn(*args, **kwargs)
        except Exception:  # noqa: BLE001 - an op torch cannot do on these shapes: the value is unknown
            return UNKNOWN
        inputs = tensors_in([*args, *kwargs.values()])
        notes = tuple(dict.fromkeys(n for a in (*args, *kwargs.values()) for n in _int_notes(a)))
        if notes:
            for t in tensors_in([result]):
                t._hls_notes = notes
        bounds_after(name, result, args, kwargs)
        return inherit(result, inputs)

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
        if name == "bincount":
            return self.torch_call(torch.bincount, [t, *args], kwargs, rng, name)
        if name not in TENSOR_METHODS:
            return UNKNOWN
        if has_unknown(args) or has_unknown(kwargs) or any(opaque(v) for v in (*args, *kwargs.values())):
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
        bounds_after(name, result, [t, *args], kwargs or {})
        return inherit(result, [t, *tensors_in(args)])

    def to_int(self, t: torch.Tensor, rng: Range) -> Any:
        """`int(t)` / `t.item()` of a one-element tensor: its upper bound when the code built it from random
        integers with known bounds (marked Approx), else unknown."""
        bounds = bounds_of(t)
        if bounds is None or t.numel() != 1:
            return UNKNOWN
        return Approx(bounds[1], (f"{bounds[1]} is the upper bound of a size computed from random data at line "
                                  f"{rng.start.line + 1}",))

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

    # -- autograd ------------------------------------------------------------------------------------
    def autograd_apply(self, cls: ClassValue, args: list, kwargs: dict, rng: Range) -> Any:
        forward = cls.find("forward")
        if not isinstance(forward, Closure):
            return UNKNOWN
        ctx = Ctx(tuple(args), {})
        out = self.ev.call_closure(forward, [ctx, *args], kwargs, rng)
        inputs = tensors_in(args)
        if isinstance(cls.find("backward"), Closure) and any(t.requires_grad or hasattr(t, "_hls_grad")
                                                             for t in inputs):
            node = GradNode(cls, ctx, out)
            for t in tensors_in([out]):
                t._hls_grad = (*getattr(t, "_hls_grad", ()), node)
        return out

    def backward(self, out: Any, rng: Range) -> None:
        """`out.backward(...)`: the backward of every Function applied on the way to `out`, latest first,
        each with gradients shaped like its outputs."""
        nodes = [n for t in tensors_in([out]) for n in getattr(t, "_hls_grad", ())]
        for node in reversed(list(dict.fromkeys(nodes))):
            if node.done:
                continue
            node.done = True
            outputs = node.output if isinstance(node.output, tuple | list) else (node.output,)
            grads = [torch.empty_like(o, device="meta") if isinstance(o, torch.Tensor) else None for o in outputs]
            backward = node.cls.find("backward")
            self.ev.call_closure(backward, [node.ctx, *grads], {}, rng)


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
