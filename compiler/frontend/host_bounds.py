"""What the integer tensors of the module-level evaluation (host_eval.py) can hold: bounds `(lo, hi)`.

Meta tensors carry no data, but a size an upstream file computes from random integers (`int(offsets[-1])`
of a `randint` + `cumsum`, `counts.max()` of a `bincount`) is needed as a number. Integer tensors therefore
keep the bounds of what they may hold, from the op that made them (`randint(1, 65, (32,))` holds 1..64,
`torch.tensor([0])` 0..0) and from every op and write that changes them; `int()` of one reads the upper
bound (host_torch.py marks it Approx). A tensor whose values this module cannot follow loses its bounds,
so a size is never read from stale ones.
"""

from __future__ import annotations

from typing import Any

import torch

MAX_BINS = 2**40  # a bincount longer than any kernel argument can be

_KEEP = frozenset({"max", "amax", "min", "amin", "clone", "flatten", "reshape", "view", "contiguous", "squeeze",
                   "unsqueeze", "to", "long", "int", "detach", "requires_grad_", "expand", "expand_as", "flip",
                   "repeat", "permute", "transpose", "t"})


def bounds_of(t: Any) -> tuple[int, int] | None:
    return getattr(t, "_hls_bounds", None) if isinstance(t, torch.Tensor) else None


def set_bounds(t: Any, lo: int, hi: int) -> None:
    if isinstance(t, torch.Tensor) and not t.dtype.is_floating_point:
        t._hls_bounds = (int(lo), int(hi))


def _forget(t: torch.Tensor) -> None:
    if hasattr(t, "_hls_bounds"):
        del t._hls_bounds


def bounds_after(name: str, result: Any, args: list, kwargs: dict) -> None:
    """Bounds of `result`, made by torch function or tensor method `name` (a method's tensor is args[0])."""
    if not isinstance(result, torch.Tensor):
        return
    ints = [a for a in args if _is_int(a)]
    if name == "randint" and ints:
        lo, hi = (0, ints[0]) if len(ints) == 1 or isinstance(args[1], tuple | list | torch.Size) else ints[:2]
        set_bounds(result, lo, hi - 1)
    elif name in ("zeros", "zeros_like", "empty", "empty_like"):
        set_bounds(result, 0, 0)
    elif name in ("ones", "ones_like"):
        set_bounds(result, 1, 1)
    elif name in ("full", "full_like") and len(args) > 1 and _is_int(args[1]):
        set_bounds(result, args[1], args[1])
    elif name in ("tensor", "as_tensor") and args:
        values = _ints_in(args[0], 0)
        if values:
            set_bounds(result, min(values), max(values))
    elif name == "arange" and ints:
        lo, hi = (0, ints[0]) if len(ints) == 1 else ints[:2]
        set_bounds(result, lo, hi - 1)
    elif name in ("cat", "concat", "concatenate", "stack") and args and isinstance(args[0], tuple | list):
        bounds = [bounds_of(t) for t in args[0]]
        if bounds and all(b is not None for b in bounds):
            set_bounds(result, min(b[0] for b in bounds), max(b[1] for b in bounds))
    elif name in ("cumsum", "sum") and args and bounds_of(args[0]) is not None:
        lo, hi = bounds_of(args[0])
        t = args[0]
        n = t.numel() // max(1, result.numel()) if name == "sum" else _dim_size(t, args[1:], kwargs)
        if n is not None:
            set_bounds(result, min(lo, lo * n), max(hi, hi * n))
    elif name in _KEEP and args and bounds_of(args[0]) is not None:
        set_bounds(result, *bounds_of(args[0]))
    elif name.endswith("_") and args and isinstance(args[0], torch.Tensor):
        written(args[0], None)  # an in-place op this module does not follow (`add_`, `random_`)


def written(t: torch.Tensor, value: Any) -> None:
    """`t[i] = value` (or an in-place op, `value` None): `t`, and the tensor it is a view of, may now hold
    `value`'s bounds too; with `value` of unknown bounds they hold what this module cannot say."""
    new = bounds_of(value) if isinstance(value, torch.Tensor) else (value, value) if _is_int(value) else None
    for target in (t, t._base) if t._base is not None else (t,):
        old = bounds_of(target)
        if old is None:
            continue
        if new is None:
            _forget(target)
        else:
            set_bounds(target, min(old[0], new[0]), max(old[1], new[1]))


def bincount(args: list, kwargs: dict, line: int) -> torch.Tensor | None:
    """`torch.bincount(x, minlength=n)` (at `line`, 1-based) of integers with known bounds 0..hi: `max(n, hi + 1)`
    counts, each 0..len(x) (an upper bound when hi + 1 > n: the real length is the largest value + 1); None
    when that is not known."""
    x = args[0] if args else kwargs.get("input")
    minlength = kwargs.get("minlength", args[2] if len(args) > 2 else 0)
    weights = kwargs.get("weights", args[1] if len(args) > 1 else None)
    bounds = bounds_of(x)
    if bounds is None or bounds[0] < 0 or weights is not None or not _is_int(minlength) or x.dim() != 1:
        return None
    length = max(minlength, bounds[1] + 1)
    if length > MAX_BINS:
        return None
    out = torch.zeros(length, dtype=torch.int64, device="meta")
    if length > minlength:
        out._hls_notes = (f"{length} is the upper bound of a bincount's length of random data at line {line}",)
    set_bounds(out, 0, x.numel())
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints_in(data: Any, depth: int) -> list[int]:
    """The integers of `torch.tensor(data)`'s data, or [] unless all of it is integers (at most 4 levels)."""
    if _is_int(data):
        return [int(data)]
    if depth > 4 or not isinstance(data, tuple | list) or not data:
        return []
    out: list[int] = []
    for item in data:
        values = _ints_in(item, depth + 1)
        if not values:
            return []
        out.extend(values)
    return out


def _dim_size(t: torch.Tensor, args: list, kwargs: dict) -> int | None:
    dim = kwargs.get("dim", args[0] if args else None)
    if not isinstance(dim, int) or not -t.dim() <= dim < max(t.dim(), 1):
        return None
    return t.shape[dim] if t.dim() else 1
