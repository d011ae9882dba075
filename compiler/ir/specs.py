"""Argument specs: `bf16[8, 32, 8192, 256]` for tensors, literals for every other argument kind.

A kernel argument is a tensor (`bf16[8, 128]`; a 0-d tensor, such as a scale, is `f32[]`; one that is not
contiguous says its layout: `bf16[256, 128].t()`, `.transpose(0, 1)`, `.permute(...)`, `.strides(1, 8)`), a number or bool (`1e-5`, `7`, `True`), `None` (an optional
tensor left out), a list or tuple of ints (`normalized_shape=[8192]`) or a dtype (`torch.bfloat16`, or
`bf16`). The same text appears in `# helion: args(...)` lines above a kernel, in `--args` on the command
line and in `compile(args=...)`; shapes inferred from a file's own calls (frontend/call_shapes.py) are
the same values. Parsing is static (ast), never `eval`. Live values (tensors, dtypes, functions) become
specs, and specs the values a kernel is called with, in callables.py (`coerce_args`, `runtime_value`).

Imports no torch: a spec keeps its dtype by name and `TensorSpec.dtype` gives the torch dtype on first
use, so files can be parsed and their results' keys computed before torch is loaded (the language
server's start).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..support.syntax import parse

if TYPE_CHECKING:
    import torch

DTYPES: dict[str, str] = {  # spec name -> torch's name for the dtype
    "f32": "float32",
    "float32": "float32",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "f16": "float16",
    "float16": "float16",
    "i32": "int32",
    "int32": "int32",
    "i16": "int16",
    "int16": "int16",
    "i8": "int8",
    "int8": "int8",
    "i64": "int64",
    "int64": "int64",
    "f64": "float64",
    "float64": "float64",
    "u8": "uint8",
    "uint8": "uint8",
    "bool": "bool",
    "f8e4m3": "float8_e4m3fn",
    "f8e5m2": "float8_e5m2",
}

SHORT_NAMES: dict[str, str] = {  # torch's name -> the short spec name specs are printed with
    "float32": "f32",
    "bfloat16": "bf16",
    "float16": "f16",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "int64": "i64",
    "float64": "f64",
    "uint8": "u8",
    "bool": "bool",
    "float8_e4m3fn": "f8e4m3",
    "float8_e5m2": "f8e5m2",
}

MAX_ELEMENTS = 2**40  # beyond this a shape is a typo, not a kernel input


class SpecError(ValueError):
    """A malformed spec; `col` is the character offset inside the parsed text when known."""

    def __init__(self, message: str, col: int | None = None, end_col: int | None = None, param: str | None = None):
        super().__init__(message)
        self.col = col
        self.end_col = end_col
        self.param = param  # the kernel parameter whose argument is bad, when known


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides of a contiguous tensor of `shape`, as torch gives them."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))


@dataclass(frozen=True, init=False)
class TensorSpec:
    """A tensor argument: dtype (kept as torch's name, e.g. "bfloat16"), shape and, for a tensor that is not
    contiguous (`b.t()`, `torch.empty_strided(...)`), its strides as `x.stride()` gives them (None: row-major).

    Built from a torch dtype or its name; `dtype` is the torch dtype (imports torch on first use). The strides
    are what the kernel's host code sees (`assert b.stride(0) == 1`); the kernel itself reads the values."""

    dtype_name: str
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None = None  # a default: specs pickled before strides existed read as row-major

    def __init__(self, dtype: torch.dtype | str, shape: tuple[int, ...], strides: tuple[int, ...] | None = None):
        name = str(dtype).removeprefix("torch.")
        object.__setattr__(self, "dtype_name", DTYPES.get(name, name))
        object.__setattr__(self, "shape", tuple(int(d) for d in shape))
        if strides is not None:
            strides = tuple(int(s) for s in strides)
            if len(strides) != len(self.shape):
                raise SpecError(f"{len(self.shape)} dimensions but {len(strides)} strides")
            if strides == row_major(self.shape):
                strides = None
        object.__setattr__(self, "strides", strides)

    @property
    def dtype(self) -> torch.dtype:
        import torch

        return getattr(torch, self.dtype_name)

    def __str__(self) -> str:
        name = SHORT_NAMES.get(self.dtype_name, "torch." + self.dtype_name)
        if self.strides is None:
            return f"{name}[{', '.join(map(str, self.shape))}]"
        return _strided_text(name, self.shape, self.strides)

    def resized(self, shape: tuple[int, ...]) -> TensorSpec:
        """The same dtype and memory order (a transposed tensor stays transposed) at another shape."""
        if self.strides is None:
            return TensorSpec(self.dtype_name, shape)
        order = sorted(range(len(shape)), key=lambda d: (-self.strides[d], d))  # type: ignore[index]
        dense = dict(zip(order, row_major(tuple(shape[d] for d in order)), strict=True))
        return TensorSpec(self.dtype_name, shape, tuple(dense[d] for d in range(len(shape))))

    def meta(self) -> torch.Tensor:
        import torch

        if self.strides is not None:
            return torch.empty_strided(self.shape, self.strides, dtype=self.dtype, device="meta")
        return torch.empty(self.shape, dtype=self.dtype, device="meta")


def _strided_text(name: str, shape: tuple[int, ...], strides: tuple[int, ...]) -> str:
    """A strided tensor as a shape line says it: `f32[N, K].t()` (a transposed contiguous tensor, as users make
    it), `f32[A, B, C].permute(2, 0, 1)` (a permuted one), else `i32[4, 16].strides(1, 4)`."""
    for tie in (1, -1):  # dims from outermost to innermost in memory; equal strides (size-1 dims) either way
        order = sorted(range(len(shape)), key=lambda d: (-strides[d], tie * d))
        base = tuple(shape[d] for d in order)
        dense = dict(zip(order, row_major(base), strict=True))
        if all(dense[d] == strides[d] for d in range(len(shape))):
            dims = tuple(order.index(d) for d in range(len(shape)))
            text = f"{name}[{', '.join(map(str, base))}]"
            return f"{text}.t()" if dims == (1, 0) else f"{text}.permute({', '.join(map(str, dims))})"
    return f"{name}[{', '.join(map(str, shape))}].strides({', '.join(map(str, strides))})"


@dataclass(frozen=True)
class DtypeSpec:
    """A dtype argument (`torch.bfloat16`), kept by torch's name; `dtype` is the torch dtype."""

    name: str

    @property
    def dtype(self) -> torch.dtype:
        import torch

        return getattr(torch, self.name)

    def __str__(self) -> str:
        return f"torch.{self.name}"


@dataclass(frozen=True)
class CallableSpec:
    """A Python function passed to a kernel (flex attention's `score_mod`): a compile-time specialization, like
    a constant. `source` is one `def` or `lambda` (its text, as written); `names` the free names its body reads,
    each resolved to ("value", number or bool), ("dtype", torch name) or ("module", qualified name); `origin`
    the (line, column) of `source` in the kernel's own file (0-based), None for a function from elsewhere,
    which is traced at its call site. Two specs are the same kernel only when all three agree."""

    source: str
    name: str = "<lambda>"
    names: tuple[tuple[str, str, Any], ...] = ()
    origin: tuple[int, int] | None = None

    def same_code(self, other: CallableSpec) -> bool:
        """The same function: source and the constants it reads (modules are named the same everywhere)."""
        consts = lambda spec: {(n, k, v) for n, k, v in spec.names if k != "module"}  # noqa: E731
        return self.source.strip() == other.source.strip() and consts(self) == consts(other)

    def __str__(self) -> str:
        if self.name == "<lambda>":
            text = " ".join(self.source.split())
        else:
            import hashlib

            digest = hashlib.sha256(repr((self.source, self.names)).encode()).hexdigest()[:8]
            text = f"{self.name}<{digest}>"
        bound = ", ".join(f"{n}={v}" for n, _, v in self.names if _ != "module")
        where = f"@{self.origin[0] + 1}:{self.origin[1]}" if self.origin else ""
        return f"{text}{where}" + (f" [{bound}]" if bound else "")


# str: a constant the kernel branches on (reduction="sum"), given to compile(args={...}); shape lines take none
ArgSpec = TensorSpec | int | float | bool | None | tuple[int, ...] | list[int] | DtypeSpec | str | CallableSpec
SCALAR_KINDS = (bool, int, float, type(None), DtypeSpec)  # arguments that are not tensors or sequences


def format_spec(spec: ArgSpec) -> str:
    return str(spec) if isinstance(spec, TensorSpec | DtypeSpec | CallableSpec) else repr(spec)


def is_spec(value: object) -> bool:
    """`value` is an argument spec this module can write and read back."""
    if isinstance(value, (TensorSpec, CallableSpec, *SCALAR_KINDS)):
        return True
    return isinstance(value, tuple | list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def format_args(args: dict[str, ArgSpec]) -> str:
    return ", ".join(f"{k}={format_spec(v)}" for k, v in args.items())


def parse_spec(node: ast.expr | str) -> ArgSpec:
    """One spec, from text or from an ast expression (`bf16[1, 2]`, `1e-5`, `-3`)."""
    if isinstance(node, str):
        text, _ = _empty_shapes(node.strip())
        try:
            node = parse(text, mode="eval").body
        except SyntaxError as exc:
            raise SpecError(f"cannot parse spec {node!r}: {exc.msg}") from None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        dtype = DTYPES.get(node.value.id)
        if dtype is None:
            raise SpecError(
                f"unknown dtype {node.value.id!r}; use one of {', '.join(sorted(set(SHORT_NAMES.values())))}",
                node.value.col_offset,
                node.value.end_col_offset,
            )
        dims_node = node.slice
        elts = dims_node.elts if isinstance(dims_node, ast.Tuple) else [dims_node]
        dims = []
        for elt in elts:
            try:
                dim = ast.literal_eval(elt)
            except ValueError:
                raise SpecError("shape dimensions must be integer literals", elt.col_offset, elt.end_col_offset) from None
            if not isinstance(dim, int) or isinstance(dim, bool):
                raise SpecError(f"dimension {dim!r} is not an integer", elt.col_offset, elt.end_col_offset)
            if dim < 0:
                raise SpecError(f"dimension {dim} must not be negative", elt.col_offset, elt.end_col_offset)
            dims.append(dim)
        numel = 1
        for d in dims:
            numel *= d
        if numel > MAX_ELEMENTS:
            raise SpecError(f"shape {dims} has {numel:.3g} elements; the limit is 2**40", node.col_offset, node.end_col_offset)
        return TensorSpec(dtype, tuple(dims))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LAYOUTS:
        return _laid_out(node)
    if isinstance(node, ast.Lambda):  # a function argument (score_mod=lambda score, *_: score)
        return CallableSpec(ast.unparse(node))
    dtype = _dtype_of(node)
    if dtype is not None:
        return dtype
    if isinstance(node, ast.List | ast.Tuple):
        items = []
        for elt in node.elts:
            value = _literal(elt)
            if not isinstance(value, int) or isinstance(value, bool):
                raise SpecError(f"list and tuple arguments hold integers (like normalized_shape=[8192]), not "
                                f"{value!r}", elt.col_offset, elt.end_col_offset)
            items.append(value)
        return items if isinstance(node, ast.List) else tuple(items)
    value = _literal(node)
    if value is None or isinstance(value, bool | int | float):
        return value
    raise SpecError(f"unsupported argument value {value!r}: use a tensor (bf16[8, 128]), a number, True/False, "
                    "None, a list of ints, a dtype or a lambda", node.col_offset, node.end_col_offset)


LAYOUTS = ("t", "transpose", "permute", "strides")  # what a shape line may say after a tensor's shape


def _laid_out(node: ast.Call) -> TensorSpec:
    """`f32[N, K].t()`, `.transpose(0, 1)`, `.permute(2, 0, 1)` (what torch's methods of those names give)
    or `.strides(1, 4)` (the strides as `x.stride()` gives them, as `torch.empty_strided` takes them)."""
    assert isinstance(node.func, ast.Attribute)
    inner = parse_spec(node.func.value)
    where = (node.col_offset, node.end_col_offset)
    if not isinstance(inner, TensorSpec):
        raise SpecError(f".{node.func.attr}() applies to a tensor spec like f32[8, 128]", *where)
    if node.keywords:
        raise SpecError(f".{node.func.attr}() takes plain integers", *where)
    items = [_literal(a) for a in node.args]
    if len(items) == 1 and isinstance(items[0], tuple | list):
        items = list(items[0])
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        raise SpecError(f".{node.func.attr}() takes integers", *where)
    shape, strides = inner.shape, inner.strides or row_major(inner.shape)
    n = len(shape)
    attr = node.func.attr
    if attr == "strides":
        if len(items) != n or any(i < 0 for i in items):
            raise SpecError(f".strides() needs {n} non-negative strides, one per dimension", *where)
        if _overlaps(shape, tuple(items)):
            raise SpecError(f"strides {tuple(items)} make elements of {list(shape)} share memory", *where)
        return TensorSpec(inner.dtype_name, shape, tuple(items))
    if attr == "t":
        if items or n > 2:
            raise SpecError(".t() takes no arguments and a tensor of at most 2 dimensions", *where)
        dims = list(range(n))[::-1]
    elif attr == "transpose":
        if len(items) != 2 or not all(-n <= i < n for i in items):
            raise SpecError(f".transpose(dim0, dim1) of a {n}-d tensor", *where)
        dims = list(range(n))
        a, b = items[0] % n, items[1] % n
        dims[a], dims[b] = dims[b], dims[a]
    else:
        dims = [i % n if -n <= i < n else -1 for i in items]
        if sorted(dims) != list(range(n)):
            raise SpecError(f".permute{tuple(items)} is not a permutation of {n} dimensions", *where)
    return TensorSpec(inner.dtype_name, tuple(shape[d] for d in dims), tuple(strides[d] for d in dims))


def _overlaps(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Two positions of `shape` address one element (torch refuses to write such a tensor)."""
    span = 1
    for size, step in sorted(((n, st) for n, st in zip(shape, strides, strict=True) if n > 1), key=lambda p: p[1]):
        if step < span:
            return True
        span = step * size
    return False


def _literal(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        raise SpecError(
            "expected a tensor spec like bf16[8, 128], a number, True/False, None, a list of ints or a dtype",
            getattr(node, "col_offset", None),
            getattr(node, "end_col_offset", None),
        ) from None


TORCH_DTYPE_NAMES = frozenset({*DTYPES.values(), "float", "double", "half", "int", "long", "short", "complex64",
                               "complex128", "cfloat", "cdouble", "int64", "uint16", "uint32", "uint64"})


def _dtype_of(node: ast.expr) -> DtypeSpec | None:
    """`torch.bfloat16` or a short name (`bf16`) used as a value."""
    if isinstance(node, ast.Name) and node.id in DTYPES:
        return DtypeSpec(DTYPES[node.id])
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        if node.attr in TORCH_DTYPE_NAMES:
            return DtypeSpec(node.attr)
        raise SpecError(f"torch.{node.attr} is not a dtype", node.col_offset, node.end_col_offset)
    return None


_EMPTY_SHAPE = re.compile(r"(?<=[A-Za-z0-9_])\[\s*\]")


def _empty_shapes(text: str) -> tuple[str, list[tuple[int, int]]]:
    """`f32[]` (a 0-d tensor, written like torch prints its shape) is not Python: read it as `f32[()]`. Also
    (offset in the new text, how many characters it added) for each replacement, to map columns back."""
    shifts: list[tuple[int, int]] = []

    def sub(m: re.Match) -> str:
        added = 4 - len(m.group())
        shifts.append((m.start() + sum(a for _, a in shifts) + 4, added))
        return "[()]"

    return _EMPTY_SHAPE.sub(sub, text), shifts


def parse_args_text(text: str) -> dict[str, ArgSpec]:
    """`q=bf16[1, 2], eps=1e-5` (the inside of `args(...)`) to an ordered dict."""
    expanded, shifts = _empty_shapes(text)
    back = lambda col: None if col is None else col - sum(a for end, a in shifts if col >= end)  # noqa: E731
    try:
        call = parse(f"args({expanded})", mode="eval").body
    except SyntaxError as exc:
        col = max(0, (exc.offset or 1) - 6)
        raise SpecError(f"cannot parse args: {exc.msg}", back(col)) from None
    try:
        return _call_to_specs(call, col_shift=-5)
    except SpecError as exc:
        raise SpecError(str(exc), back(exc.col), back(exc.end_col), exc.param) from None


def _call_to_specs(call: ast.expr, col_shift: int) -> dict[str, ArgSpec]:
    assert isinstance(call, ast.Call)
    if call.args:
        first = call.args[0]
        raise SpecError("arguments must be named: name=dtype[shape]", first.col_offset + col_shift)
    out: dict[str, ArgSpec] = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise SpecError("** is not allowed in args", kw.value.col_offset + col_shift)
        try:
            out[kw.arg] = parse_spec(kw.value)
        except SpecError as exc:
            col = None if exc.col is None else exc.col + col_shift
            end = None if exc.end_col is None else exc.end_col + col_shift
            raise SpecError(f"{kw.arg}: {exc}", col, end) from None
    return out
