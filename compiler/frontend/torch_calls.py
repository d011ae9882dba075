"""Calls of `torch.*` functions and tensor methods in a kernel: allocations (host buffers, or device blocks
inside a loop), shape queries, casts, views, reductions, scans, matmuls and the elementwise ops of ops.py
and composites.py. `torch.fn(x, ...)` is `x.fn(...)` unless torch has it as a function only.

`TorchCalls` is mixed into `Dispatcher` (dispatch.py); it needs from it: t (the tracer), ops.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..ir.tile_ir import GridLoop, Load, TileDim, Value
from ..support.diagnostics import Range, UserError
from . import composites, pairs
from .ops import BINARY_FUNCS, CASTS, REDUCTIONS, UNARY
from .static_args import as_int, shape_arg, shape_tiles, unwrap
from .values import DEVICE_SENTINEL


def _load_tiles(value: Value) -> tuple | None:
    """For a block loaded straight from a tensor, which tile each of its dims spans (None for whole dims):
    what `zeros_like(x[tile_m, 0])` needs to know of it, so the block itself need not be loaded. None when
    `value` is no such block."""
    load = value.producer
    if not isinstance(load, Load):
        return None
    tiles: list[TileDim | None] = []
    for item in load.index:
        if item[0] == "tile":
            tiles.append(item[1])
        elif item[0] in ("full", "newaxis", "window"):
            tiles.append(None)
        elif item[0] not in ("int", "scalar", "grid", "id"):  # those take one position: no dim
            return None
    return tuple(tiles) if len(tiles) == len(value.shape) else None


class TorchCalls:
    """`torch.<name>(...)` and `x.<name>(...)`."""

    def torch_fn(self, name: str, args: list, kwargs: dict, rng: Range) -> Any:
        if name in ("empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like"):
            return self.alloc(name, args, kwargs, rng)
        if name == "empty_strided":
            return self.empty_strided(args, kwargs, rng)
        if name == "broadcast_tensors":
            tensors = [a for a in args if isinstance(a, Value)]
            if len(tensors) != len(args):
                raise UserError("HPL103", "torch.broadcast_tensors takes tensors", rng)
            try:
                shape = tuple(torch.broadcast_shapes(*(t.shape for t in tensors)))
            except RuntimeError as exc:
                raise UserError("HPL105", f"broadcast_tensors: {exc}", rng) from None
            return tuple(t if t.shape == shape else self.ops.broadcast_to(t, shape, rng) for t in tensors)
        if name == "promote_types":
            if len(args) != 2 or not all(isinstance(a, torch.dtype) for a in args):
                raise UserError("HPL103", "torch.promote_types(dtype, dtype)", rng)
            return torch.promote_types(*args)
        if name == "result_type":
            metas = [a.meta if isinstance(a, Value) else unwrap(a) for a in args]
            return torch.result_type(*metas)
        if name in ("cat", "concat", "concatenate", "stack"):
            tensors = unwrap(args[0] if args else kwargs.get("tensors"))
            if not isinstance(tensors, tuple | list):
                raise UserError("HPL103", f"torch.{name} takes a tuple or list of tensors", rng)
            dim = as_int(args[1] if len(args) > 1 else kwargs.get("dim", 0), "dim", rng)
            return self.ops.cat("stack" if name == "stack" else "cat", tuple(tensors), dim, rng)
        if not args:
            raise UserError("HPL103", f"torch.{name} needs arguments", rng)
        return self.method(args[0], name, list(args[1:]), kwargs, rng, from_function=True)

    def alloc(self, name: str, args: list, kwargs: dict, rng: Range) -> Value:
        if self.t.in_device:
            like = name.endswith("_like")
            if like and isinstance(args[0], Value):
                base = args[0]
                fill = {"zeros_like": 0.0, "ones_like": 1.0, "empty_like": 0.0}.get(name)
                if fill is None:
                    fill = unwrap(args[1] if len(args) > 1 else kwargs.get("fill_value"))
                tiles = _load_tiles(base)
                if tiles is not None:  # only its shape and dtype are used: the block is never loaded
                    return self.ops.full(base.shape, fill, kwargs.get("dtype", base.dtype), rng, tiles=tiles)
                return self.ops.full(base.shape, fill, kwargs.get("dtype", base.dtype), rng, like=base)
            raise UserError("HPL101", f"torch.{name} inside a device loop: use hl.zeros / hl.full", rng)
        if name.endswith("_like"):
            if not args or not isinstance(args[0], Value):
                raise UserError("HPL103", f"torch.{name} needs a tensor", rng)
            shape, dtype = args[0].shape, kwargs.get("dtype", args[0].dtype)
            rest = args[1:]
        else:
            shape_args = args[:1] if name == "full" else args
            shape = shape_arg(shape_args, rng)
            dtype = kwargs.get("dtype", torch.float32)
            rest = args[1:] if name == "full" else []
        init = {"empty": "empty", "zeros": "zeros", "ones": "ones", "full": "full"}[name.removesuffix("_like")]
        fill = unwrap(rest[0] if rest else kwargs.get("fill_value", 0.0)) if init == "full" else (1.0 if init == "ones" else 0.0)
        return self.host_alloc(shape, dtype, init, fill, rng)

    def empty_strided(self, args: list, kwargs: dict, rng: Range) -> Value:
        """`torch.empty_strided(size, stride, dtype=...)`: an allocation like `torch.empty(size)`. The strides
        choose a memory order, which a TPU array does not have (the values, all the kernel can read, are the
        same); strides that make elements overlap are refused, as the values would then differ."""
        if self.t.in_device:
            raise UserError("HPL101", "torch.empty_strided inside a device loop: use hl.zeros / hl.full", rng)
        size = args[0] if args else kwargs.get("size")
        stride = args[1] if len(args) > 1 else kwargs.get("stride")
        if size is None or stride is None:
            raise UserError("HPL103", "torch.empty_strided(size, stride, ...) needs both", rng)
        shape = shape_arg([size], rng)
        strides = shape_arg([stride], rng)
        if len(strides) != len(shape):
            raise UserError("HPL105", f"empty_strided: {len(shape)} sizes but {len(strides)} strides", rng)
        span = 1
        for n, st in sorted(((n, st) for n, st in zip(shape, strides, strict=True) if n > 1), key=lambda p: p[1]):
            if st < span:
                raise UserError("HPL105", f"empty_strided: strides {list(strides)} make elements of size {list(shape)} "
                                          "overlap", rng)
            span = st * n
        out = self.host_alloc(shape, kwargs.get("dtype", torch.float32), "empty", 0.0, rng)
        out.meta = torch.empty_strided(shape, strides, dtype=out.dtype, device="meta")  # what .stride() says
        return out

    def host_fill(self, x: Value, fill: Any, rng: Range) -> Value:
        """`t.zero_()` / `t.fill_(v)` in host code. An allocation no device loop has written yet is allocated
        with that fill instead; an argument gets a filled array under its own name before the next grid loop
        (and is given back as updated, as vLLM's in-place kernels expect)."""
        if not isinstance(fill, bool | int | float) or isinstance(fill, Value):
            raise UserError("HPL106", "fill_: the value must be a number known at compile time", rng)
        ht = self.t.host_tensor(x, rng)
        init = "zeros" if fill == 0 else "full"
        if ht.origin == "alloc" and ht.init in ("empty", "zeros", "ones", "full"):
            prod = ht.value.producer
            after = self.t.host[self.t.host.index(prod) + 1:] if prod in self.t.host else [None]
            if any(isinstance(n, GridLoop) for n in after) or prod not in self.t.host:
                raise UserError("HPL101", "filling an allocation after a device loop used it is not supported: "
                                          "allocate it filled (torch.zeros / torch.full)", rng)
            prod.kwargs["init"], prod.kwargs["value"] = init, fill
            ht.init, ht.fill = init, fill
            return x
        if ht.origin != "arg" or ht.value.shape != x.shape:
            raise UserError("HPL101", f"`{'zero_' if fill == 0 else 'fill_'}()` of a view or computed tensor in host "
                                      "code is not supported; fill the argument or allocation itself", rng)
        filled = self.host_alloc(tuple(x.shape), x.dtype, init, fill, rng)
        filled.producer.kwargs["param"] = ht.name  # named as the argument (emit_host.py), given back updated
        ht.value = filled
        self.t.tensors[filled.id] = ht
        return x

    def host_alloc(self, shape: tuple[int, ...], dtype: Any, init: str, fill: Any, rng: Range) -> Value:
        if not isinstance(dtype, torch.dtype):
            raise UserError("HPL103", "dtype must be a torch dtype", rng)
        if any(s < 0 for s in shape):
            raise UserError("HPL105", f"negative size in shape {list(shape)}", rng)
        numel = math.prod(shape)
        if numel > 2**40:
            raise UserError("HPL105", f"allocation of {numel:.3g} elements is too large", rng)
        return self.ops.make("alloc", (), {"shape": tuple(shape), "dtype": dtype, "init": init, "value": fill},
                             lambda shape, dtype, init, value: torch.empty(shape, dtype=dtype, device="meta"), rng,
                             space="host")

    def method(self, obj: Any, name: str, args: list, kwargs: dict, rng: Range, from_function: bool = False) -> Any:
        if isinstance(obj, tuple | list) and name in ("index", "count"):
            return getattr(obj, name)(*[unwrap(a) for a in args])
        if isinstance(obj, torch.dtype):
            return obj.is_floating_point
        ops = self.ops
        x = obj
        if name in BINARY_FUNCS:
            other = args[0] if args else kwargs.get("other")
            if "alpha" in kwargs:
                other = ops.binary("mul", other, unwrap(kwargs["alpha"]), rng)
            return ops.binary(BINARY_FUNCS[name], x, unwrap(other) if not isinstance(other, Value) else other, rng)
        if not isinstance(x, Value):
            if name in UNARY and isinstance(unwrap(x), int | float):
                raise UserError("HPL101", f"torch.{name} of a Python number: use math.{name}", rng)
            raise UserError("HPL105", f"`{name}` needs a tensor, got {type(x).__name__}", rng)
        if name in ("zero_", "fill_") and not self.t.in_device:
            fill = 0.0 if name == "zero_" else unwrap(args[0] if args else kwargs.get("value"))
            return self.host_fill(x, fill, rng)
        if name in ("size",):
            if args:
                d = as_int(args[0], "size() dim", rng)
                if not -len(x.shape) <= d < len(x.shape):
                    raise UserError("HPL105", f"dim {d} out of range for a {len(x.shape)}-d tensor", rng)
                return x.shape[d]
            return tuple(x.shape)
        if name in ("dim", "ndimension"):
            return len(x.shape)
        if name == "numel":
            return math.prod(x.shape)
        if name == "stride":  # torch's strides: an argument's as its shape set says (`f32[N, K].t()`), a view's
            strides = tuple(x.meta.stride())  # as torch makes them; the kernel itself reads values, not memory
            if not args:
                return strides
            d = as_int(args[0], "stride() dim", rng)
            if not -len(x.shape) <= d < len(x.shape):
                raise UserError("HPL105", f"dim {d} out of range for a {len(x.shape)}-d tensor", rng)
            return strides[d]
        if name == "clone" and not self.t.in_device:  # a new tensor with x's contents (contiguous/detach alias x)
            return self.ops.make("clone", (x,), {}, lambda t: t.clone(), rng, space="host")
        if name == "contiguous" and not self.t.in_device and not x.meta.is_contiguous():
            return self.ops.make("clone", (x,), {}, lambda t: t.contiguous(), rng, space="host")  # torch copies
        if name in ("contiguous", "clone", "detach"):
            return x
        if name == "is_floating_point":
            return x.dtype.is_floating_point
        if name == "is_contiguous":  # as torch says for the layout the shape set gives (`b.t()` is not)
            return x.meta.is_contiguous()
        approximate = unwrap(args[0] if args else kwargs.get("approximate", "none")) if name == "gelu" else None
        if name in composites.UNARY_COMPOSITES or approximate == "tanh":
            return composites.unary(ops, name, x, list(args), kwargs, rng)
        if name in composites.BINARY_COMPOSITES:
            other = args[0] if args else kwargs.get("other")
            return composites.binary(ops, name, x, other if isinstance(other, Value) else unwrap(other), rng)
        if name == "gelu" and approximate not in (None, "none"):
            raise UserError("HPL103", f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}", rng)
        if name in UNARY:
            return ops.unary(name, x, rng)
        if name == "where" and from_function:
            return ops.where(x, args[0], args[1], rng)
        if name in ("clamp", "clip"):
            lo = unwrap(args[0] if args else kwargs.get("min"))
            hi = unwrap(args[1] if len(args) > 1 else kwargs.get("max"))
            return ops.clamp(x, lo, hi, rng)
        if name in ("max", "min") and args and isinstance(args[0], Value):
            return ops.binary("maximum" if name == "max" else "minimum", x, args[0], rng)
        if name in REDUCTIONS:
            dim = unwrap(args[0] if args else kwargs.get("dim"))
            keepdim = bool(unwrap(args[1] if len(args) > 1 else kwargs.get("keepdim", False)))
            if isinstance(dim, Value):
                raise UserError("HPL106", f"{name}: dim must be a constant", rng)
            result = ops.reduce(name, x, dim, keepdim, rng)
            if "dtype" in kwargs:
                result = ops.cast(result, kwargs["dtype"], rng)
            return result
        if name in ("cumsum", "cumprod"):
            dim = unwrap(args[0] if args else kwargs.get("dim"))
            if dim is None or isinstance(dim, Value):
                raise UserError("HPL103", f"{name} needs a constant dim=", rng)
            if kwargs.get("dtype") is not None:
                x = ops.cast(x, kwargs["dtype"], rng)
            return ops.scan(name, x, as_int(dim, "dim", rng), rng)
        if name in ("softmax", "log_softmax"):
            dim = unwrap(args[0] if args else kwargs.get("dim"))
            if dim is None:
                raise UserError("HPL103", f"{name} needs dim=", rng)
            return ops.softmax(name, x, as_int(dim, "dim", rng), kwargs.get("dtype"), rng)
        if name in ("matmul", "mm", "bmm"):
            out_dtype = _out_dtype(name, args[1:], kwargs, rng)
            return ops.dot(x, args[0], None, out_dtype, rng)
        if name in ("addmm", "baddbmm"):
            a, b = args[0], args[1]
            out_dtype = _out_dtype(name, args[2:], {k: v for k, v in kwargs.items() if k not in ("beta", "alpha")}, rng)
            beta, alpha = unwrap(kwargs.get("beta", 1)), unwrap(kwargs.get("alpha", 1))
            if beta != 1 or alpha != 1:
                raise UserError("HPL101", f"{name} with alpha/beta other than 1 is not supported", rng)
            if x.dtype == torch.float32 and out_dtype in (None, torch.float32):
                return ops.dot(a, b, x, None, rng)
            prod = ops.dot(a, b, None, torch.float32, rng)
            return ops.cast(ops.binary("add", prod, x, rng), out_dtype or x.dtype, rng)
        if name in ("to", "type"):
            dtype = args[0] if args else kwargs.get("dtype")
            if isinstance(dtype, Value):
                dtype = dtype.dtype
            if dtype is DEVICE_SENTINEL or dtype is None:
                return x
            if not isinstance(dtype, torch.dtype):
                raise UserError("HPL103", f".{name}() needs a dtype", rng)
            return x if dtype == x.dtype else ops.cast(x, dtype, rng)
        if name in CASTS:
            return ops.cast(x, CASTS[name], rng) if CASTS[name] != x.dtype else x
        if name == "type_as":
            return ops.cast(x, args[0].dtype, rng)
        if name in ("reshape", "view"):
            shape = shape_arg(args, rng)
            if shape.count(-1) > 1:
                raise UserError("HPL105", "only one -1 is allowed in a shape", rng)
            halves = pairs.joined_halves(x, shape) if x.space == "device" else None
            if halves is not None:  # hl.join(a, b).permute(..., -1, -2).reshape([..., d]): the halves side by side
                self.t.used_pairs = True
                return ops.cat("cat", halves, -1, rng)
            return ops.reshape(x, shape, rng)
        if name in ("transpose", "swapaxes"):
            if len(args) != 2:
                raise UserError("HPL103", f"{name}(dim0, dim1)", rng)
            return ops.transpose(x, as_int(args[0], "dim", rng), as_int(args[1], "dim", rng), rng)
        if name == "t":
            return ops.transpose(x, 0, 1, rng)
        if name == "permute":
            dims = shape_arg(args, rng) if args else ()
            return ops.permute(x, dims, rng)
        if name == "unsqueeze":
            d = as_int(args[0], "dim", rng)
            d = d % (len(x.shape) + 1)
            items = (slice(None),) * d + (None,)
            return ops.index(x, items, rng)
        if name == "squeeze":
            if args:
                d = as_int(args[0], "dim", rng) % max(1, len(x.shape))
                shape = tuple(s for i, s in enumerate(x.shape) if i != d or s != 1)
            else:
                shape = tuple(s for s in x.shape if s != 1)
            return ops.reshape(x, shape, rng)
        if name in ("expand", "broadcast_to", "expand_as"):
            if name == "expand_as":
                shape = args[0].shape
            else:
                shape = shape_arg(args, rng)
                shape = tuple(x.shape[i - (len(shape) - len(x.shape))] if s == -1 else s for i, s in enumerate(shape))
            return ops.broadcast_to(x, shape, rng)
        if name in ("new_empty", "new_zeros", "new_ones", "new_full"):
            init = name[4:]
            # new_full(size, fill); the others take the size as one sequence or as several ints
            sizes = args[:1] if init == "full" or (args and isinstance(unwrap(args[0]), tuple | list)) else args
            shape = shape_arg(sizes, rng)
            dtype = kwargs.get("dtype", x.dtype)
            fill = unwrap(args[1] if len(args) > 1 else kwargs.get("fill_value", 0.0)) if init == "full" else (
                1.0 if init == "ones" else 0.0)
            if self.t.in_device:
                return ops.full(shape, fill, dtype, rng, tiles=shape_tiles(sizes))
            return self.host_alloc(shape, dtype, init, fill, rng)
        if name == "flatten":
            return ops.reshape(x, (-1,), rng)
        if name in ("view_as", "reshape_as"):
            if not args or not isinstance(args[0], Value):
                raise UserError("HPL103", f".{name}() needs a tensor", rng)
            return ops.reshape(x, tuple(args[0].shape), rng)
        if name == "pad":
            widths = unwrap(args[0] if args else kwargs.get("pad"))
            mode = unwrap(args[1] if len(args) > 1 else kwargs.get("mode", "constant"))
            value = unwrap(args[2] if len(args) > 2 else kwargs.get("value"))
            if mode != "constant":
                raise UserError("HPL101", f"pad mode {mode!r} is not supported; use mode='constant'", rng)
            if not isinstance(widths, tuple | list):
                raise UserError("HPL103", "pad needs a tuple of widths", rng)
            value = 0 if value is None else value
            if not isinstance(value, int | float | bool):
                raise UserError("HPL106", "pad: the fill value must be a number known at compile time", rng)
            return ops.pad(x, tuple(as_int(w, "a pad width", rng) for w in widths), value, rng)
        if name == "gather":
            dim = args[0] if args else kwargs.get("dim")
            index = args[1] if len(args) > 1 else kwargs.get("index")
            return ops.gather(x, as_int(dim, "gather dim", rng), index, rng)
        if name == "topk":
            k = as_int(args[0] if args else kwargs.get("k"), "topk k", rng)
            dim = as_int(args[1] if len(args) > 1 else kwargs.get("dim", -1), "topk dim", rng)
            largest = unwrap(args[2] if len(args) > 2 else kwargs.get("largest", True))
            if not isinstance(largest, bool):
                raise UserError("HPL106", "topk: largest must be True or False", rng)
            return ops.topk(x, k, dim, largest, rng)
        if name in ("item", "tolist", "numpy", "cpu", "cuda"):
            raise UserError("HPL101", f".{name}() is not supported in a kernel", rng)
        raise UserError("HPL102", f"`{name}` is not supported by the Pallas backend", rng)


def _out_dtype(name: str, extra: tuple[Any, ...], kwargs: dict[str, Any], rng: Range) -> torch.dtype | None:
    """The `out_dtype` of `torch.mm/bmm/addmm/baddbmm(..., out_dtype)` (the product in that dtype, accumulated
    in f32): positional after the tensors or by keyword. Anything else after the tensors is refused rather
    than dropped (`out=`, or arguments `matmul` does not take)."""
    unknown = [k for k in kwargs if k != "out_dtype"]
    if unknown or len(extra) > 1 or (name == "matmul" and (extra or kwargs)):
        what = ", ".join(unknown) or "an extra argument"
        raise UserError("HPL103", f"{name}: {what} is not supported here (only out_dtype, for mm/bmm/addmm/baddbmm)", rng)
    given = extra[0] if extra else kwargs.get("out_dtype")
    if given is not None and not isinstance(given, torch.dtype):
        raise UserError("HPL103", f"{name}: out_dtype must be a torch dtype", rng)
    return given
