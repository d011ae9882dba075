"""Directly worked-out result types (compiler/frontend/fast_types.py) against torch's meta kernels: every
operation of the front end's OpBuilder, typed both ways over a grid of shapes, strides, dtypes and scalar
operands, must give the same shape, strides and dtype — or the same error, which only torch reports."""

import itertools
import sys

import pytest
import torch

from compiler.frontend import fast_types, meta_cache
from compiler.frontend.ops import OpBuilder
from compiler.ir.tile_ir import Value
from compiler.support.diagnostics import Position, Range, UserError

RNG = Range(Position(0, 0), Position(0, 1))
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.bool, torch.int64]
SHAPES = [(), (8,), (1, 128), (16, 1), (16, 128), (2, 16, 128), (3, 16, 128)]


def _value(shape, dtype, transposed=False):
    meta = torch.empty(shape, dtype=dtype, device="meta")
    if transposed and len(shape) >= 2:
        meta = torch.empty((*shape[:-2], shape[-1], shape[-2]), dtype=dtype, device="meta").transpose(-1, -2)
    return Value(meta, "device")


def _both(build):
    """(torch's typing, the fast typing) of one OpBuilder call: each a (shape, strides, dtype) or an error."""
    outcomes = []
    for bypass in (True, False):
        ops = OpBuilder(lambda op: None)
        meta_cache.clear()
        try:
            if bypass:
                with meta_cache.bypassed():
                    out = build(ops)
            else:
                out = build(ops)
        except UserError as exc:
            outcomes.append(("error", exc.code, exc.message))
            continue
        outs = out if isinstance(out, tuple) else (out,)
        outcomes.append(tuple((o.shape, o.meta.stride(), o.dtype) for o in outs))
    return outcomes


def _operands():
    for shape, dtype in itertools.product(SHAPES, DTYPES):
        yield _value(shape, dtype)
    yield _value((16, 128), torch.float32, transposed=True)
    yield _value((2, 16, 128), torch.bfloat16, transposed=True)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "minimum", "eq", "lt", "ge"])
def test_binary_operations_type_like_torch(name):
    operands = list(_operands())
    scalars = [2, 0.5, True]
    checked = 0
    for a in operands:
        for b in [*operands, *scalars]:
            torch_typed, fast_typed = _both(lambda ops, a=a, b=b: ops.binary(name, a, b, RNG))
            assert fast_typed == torch_typed, (name, a.shape, a.dtype, getattr(b, "shape", b), getattr(b, "dtype", b))
            checked += 1
    assert checked > 1000


@pytest.mark.parametrize("name", sorted(fast_types._FLOAT_UNARY))
def test_unary_functions_type_like_torch(name):
    for a in _operands():
        torch_typed, fast_typed = _both(lambda ops, a=a: ops.unary(name, a, RNG))
        assert fast_typed == torch_typed, (name, a.shape, a.dtype)


def test_casts_reductions_and_softmax_type_like_torch():
    for a in _operands():
        for dtype in DTYPES:
            assert _same(lambda ops, a=a, dtype=dtype: ops.cast(a, dtype, RNG))
        dims = [None, 0, -1, (0, -1)] if a.shape else [None]
        for name, dim, keepdim in itertools.product(["sum", "mean", "amax", "amin", "max"], dims, [False, True]):
            if name == "max" and dim is None:
                continue
            assert _same(lambda ops, a=a, n=name, d=dim, k=keepdim: ops.reduce(n, a, d, k, RNG))
        for name, dtype in itertools.product(["softmax", "log_softmax"], [None, torch.float32]):
            if a.shape:
                assert _same(lambda ops, a=a, n=name, t=dtype: ops.softmax(n, a, -1, t, RNG))


def test_where_and_clamp_type_like_torch():
    conds = [_value(shape, torch.bool) for shape in [(), (16, 1), (1, 128), (16, 128), (3, 16, 128)]]
    conds.append(_value((16, 128), torch.float32))  # not a bool: torch's error, not ours
    branches = [*_operands(), 0, 1.5, True]
    for cond in conds:
        for x in branches:
            for y in [branches[i] for i in range(0, len(branches), 5)] + [0, 2.5]:
                assert _same(lambda ops, c=cond, x=x, y=y: ops.where(c, x, y, RNG))
    for a in _operands():
        for lo, hi in [(0.0, 6.0), (None, 1), (-1, None), (None, None), (2, 0.5)]:
            assert _same(lambda ops, a=a, lo=lo, hi=hi: ops.clamp(a, lo, hi, RNG))


def _same(build) -> bool:
    torch_typed, fast_typed = _both(build)
    assert fast_typed == torch_typed
    return True


def test_dots_type_like_torch():
    shapes = [((16, 128), (128, 64)), ((2, 16, 128), (2, 128, 64)), ((16, 128), (64, 64)), ((2, 16, 128), (3, 128, 64)),
              ((16, 128), (2, 128, 64))]
    for (sa, sb), da, db, t_a, t_b in itertools.product(shapes, DTYPES[:4], DTYPES[:4], [False, True], [False, True]):
        a, b = _value(sa, da, t_a), _value(sb, db, t_b)
        for out_dtype, acc_dtype in itertools.product([None, torch.float32, torch.bfloat16], [None, torch.float32]):
            acc = None
            if acc_dtype is not None and len(sa) == len(sb):
                acc = _value((*sa[:-1], sb[-1]), acc_dtype)
            assert _same(lambda ops, a=a, b=b, acc=acc, o=out_dtype: ops.dot(a, b, acc, o, RNG))


def test_broadcast_shapes_agrees_with_torch():
    sizes = [(), (1,), (4,), (1, 4), (3, 1), (3, 4), (2, 3, 4), (5, 4)]
    for shapes in itertools.chain(itertools.product(sizes, repeat=2), itertools.product(sizes, repeat=3)):
        try:
            want = tuple(torch.broadcast_shapes(*shapes))
        except RuntimeError:
            want = None
        assert fast_types.broadcast_shapes(*shapes) == want, shapes


def test_a_plain_kernel_compiles_without_importing_sympy():
    """torch's meta kernels import sympy on their first `torch._check` (~0.2 s of a cold compile); the
    examples' operations are typed directly, so a fresh process compiling one never imports it."""
    import subprocess
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "attention.py"
    code = (f"import sys, compiler; compiler.skip_dynamo_import(); m = compiler.load({str(path)!r}); "
            "k = m.kernels['attention']; k.compile(args=k.shape_sets[0], chip='v7x'); "
            "print('sympy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == "False"
