"""Memoised meta-tensor typing: the result type of a torch operation, computed once per input types.

Why: the tuner compiles hundreds of configs of one kernel; each distinct choice of block sizes re-traces the
kernel, and most of a trace's time is torch's Python meta kernels (decompositions, broadcasting checks) for
the same ~25 operations on tiles whose shapes repeat across configs (the same block sizes reappear in other
combinations). A result's shape, strides and dtype depend only on the operation and on its inputs' shapes,
strides and dtypes and its scalar arguments, so they are kept keyed by exactly those.

The key of the operation is the meta function's code plus whatever its closure captured (torch functions,
dtypes, ints, nested functions...); anything that cannot be keyed by value (an arbitrary object) disables
the cache for that call rather than risking a wrong hit. A hit returns fresh meta tensors with the cached
shape, strides and dtype: no tensor is shared between Values. Failures are not cached (the error is raised
again by running torch). May import torch only.
"""

from __future__ import annotations

import threading
import types
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

_MAX_ENTRIES = 8192
_UNKEYABLE = object()
_SCALARS = (int, float, bool, str, complex, type(None), type(Ellipsis))

_cache: OrderedDict[tuple, Any] = OrderedDict()
_lock = threading.Lock()
stats = {"hits": 0, "misses": 0, "uncached": 0}  # for tests and profiling
_bypass = threading.local()


def typed(meta_fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    """meta_fn(*args, **kwargs) on meta tensors, from the cache when the same operation saw the same input
    types before. Raises what meta_fn raises."""
    key = _UNKEYABLE if getattr(_bypass, "on", False) else _call_key(meta_fn, args, kwargs)
    if key is _UNKEYABLE:
        stats["uncached"] += 1
        return meta_fn(*args, **kwargs)
    with _lock:
        spec = _cache.get(key)
        if spec is not None:
            _cache.move_to_end(key)
    if spec is not None:
        stats["hits"] += 1
        return _rebuild(spec)
    stats["misses"] += 1
    result = meta_fn(*args, **kwargs)
    spec = _spec(result)
    if spec is not None:
        with _lock:
            _cache[key] = spec
            while len(_cache) > _MAX_ENTRIES:
                _cache.popitem(last=False)
    return result


def clear() -> None:
    """Forget every cached result."""
    with _lock:
        _cache.clear()


def bypassing() -> bool:
    """Whether this thread is in `bypassed()`, where ops.py also leaves fast_types.py aside."""
    return getattr(_bypass, "on", False)


@contextmanager
def bypassed() -> Iterator[None]:
    """Run torch for every operation in this thread meanwhile: a fresh trace, to compare cached (and
    directly typed, fast_types.py) ones with."""
    _bypass.on = True
    try:
        yield
    finally:
        _bypass.on = False


def _call_key(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    try:
        key = (
            _fn_key(fn, 0),
            tuple(_key(a) for a in args),
            tuple(sorted((k, _key(v)) for k, v in kwargs.items())),
        )
    except _Unkeyable:
        return _UNKEYABLE
    return key


class _Unkeyable(Exception):
    pass


def _fn_key(fn: Any, depth: int) -> Any:
    """A Python function by its code, defaults and captured values; a builtin (torch.add) by itself."""
    if isinstance(fn, types.FunctionType):
        if depth > 4:
            raise _Unkeyable
        cells = tuple(_captured(c.cell_contents, depth) for c in fn.__closure__ or ())
        defaults = tuple(_key(d) for d in fn.__defaults__ or ())
        kwdefaults = tuple(sorted((k, _key(v)) for k, v in (fn.__kwdefaults__ or {}).items()))
        return ("fn", fn.__code__, cells, defaults, kwdefaults)
    if isinstance(fn, types.BuiltinFunctionType | types.MethodWrapperType | torch._ops.OpOverloadPacket):
        return ("builtin", fn)
    raise _Unkeyable


def _captured(value: Any, depth: int) -> Any:
    if isinstance(value, types.FunctionType | types.BuiltinFunctionType):
        return _fn_key(value, depth + 1)
    return _key(value)


def _key(a: Any) -> Any:
    """A value as the meta function sees it, by what its result type can depend on."""
    if isinstance(a, torch.Tensor):
        if not a.is_meta:  # (cheaper than building its device)
            raise _Unkeyable
        return ("T", tuple(a.shape), a.stride(), a.storage_offset(), a.dtype)
    if isinstance(a, _SCALARS):
        return (type(a), a)  # True and 1 are equal keys otherwise, and type promotion tells them apart
    if isinstance(a, torch.dtype):
        return a
    if isinstance(a, tuple | list):
        return (type(a), tuple(_key(x) for x in a))
    if isinstance(a, slice):
        return (slice, _key(a.start), _key(a.stop), _key(a.step))
    if isinstance(a, types.FunctionType | types.BuiltinFunctionType):
        return _fn_key(a, 1)
    raise _Unkeyable


def _spec(result: Any) -> Any:
    """What is needed to rebuild a result: (shape, strides, dtype) per tensor; None when not cacheable."""
    if isinstance(result, torch.Tensor):
        return ("T", tuple(result.shape), result.stride(), result.dtype)
    if isinstance(result, tuple | list) and result and all(isinstance(r, torch.Tensor) for r in result):
        return (type(result), tuple(_spec(r) for r in result))
    return None


def _rebuild(spec: Any) -> Any:
    if spec[0] == "T":
        _, shape, stride, dtype = spec
        return torch.empty_strided(shape, stride, dtype=dtype, device="meta")
    kind, items = spec
    return kind(_rebuild(s) for s in items)
