"""Mosaic lowering checks on hand-written Pallas TPU kernels (jaxlib only; no TPU, no libtpu)."""

from __future__ import annotations

import functools
import inspect

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from compiler.ir.chips import CHIP_NAMES, get_chip
from compiler.tpu.lowering import classify_lowering_error, lower_check, mosaic_text
from compiler.tpu.mesh import tpu_abstract_mesh
from compiler.tpu.mlir_text import loc_aliases, op_loc, strip_locs, trim_error

CHIPS = ["v5e", "v7x"]
F32 = jax.ShapeDtypeStruct((16, 256), jnp.float32)


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y, *, interpret=False, block=(8, 128), buffers=None, semantics=None):
    mode = {} if buffers is None else {"pipeline_mode": pl.Buffered(buffers)}
    spec = pl.BlockSpec(block, lambda i, j: (i, j), **mode)
    params = None if semantics is None else pltpu.CompilerParams(dimension_semantics=semantics)
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // block[0], x.shape[1] // block[1]),
        in_specs=[spec, spec],
        out_specs=pl.BlockSpec(block, lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=params,
        interpret=interpret,
    )(x, y)


def sort_kernel(x_ref, o_ref):
    o_ref[...] = jnp.sort(x_ref[...], axis=1)


def sort_rows(x, *, interpret=False):
    return pl.pallas_call(sort_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret)(
        x
    )


def scale(x, factor, *, interpret=False):
    def scale_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * factor

    return pl.pallas_call(
        scale_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret
    )(x)


def line_of(fn, text: str) -> int:
    """1-based line in this file of the first line of `fn` containing `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


@pytest.mark.parametrize("name", CHIP_NAMES)
def test_abstract_mesh_is_the_chip(name):
    chip = get_chip(name)
    with tpu_abstract_mesh(chip):
        info = pltpu.get_tpu_info()
    assert info.generation == chip.generation
    assert info.vmem_capacity_bytes == chip.vmem_capacity_bytes


@pytest.mark.parametrize("chip", CHIPS)
def test_good_add_lowers_and_prints_mosaic(chip):
    result = lower_check(add, [F32, F32], get_chip(chip))
    assert result.ok and result.kind is None and result.error == ""
    text = mosaic_text(result.exported)
    assert "func.func @add_kernel" in text
    assert "window_bounds = array<i64: 8, 128>" in text
    assert "iteration_bounds = array<i64: 2, 2>" in text
    assert "arith.addf" in text


@pytest.mark.parametrize("chip", CHIPS)
def test_illegal_block_shape(chip):
    result = lower_check(functools.partial(add, block=(8, 100)), [F32, F32], get_chip(chip))
    assert not result.ok and result.kind == "block_shape"
    assert "divisible by 8 and 128" in result.error
    hints = result.hints
    assert (hints.operand, hints.operand_kind, hints.operand_index) == ("args[0]", "input", 0)
    assert hints.block_shape == (8, 100) and hints.array_shape == (16, 256)
    assert hints.kernel == "add_kernel"
    assert hints.location.file == __file__
    assert hints.location.line == line_of(add, "pl.pallas_call(")


@pytest.mark.parametrize("chip", CHIPS)
def test_triple_buffering_at_top_level(chip):
    result = lower_check(functools.partial(add, buffers=3), [F32, F32], get_chip(chip))
    assert result.kind == "buffering"
    assert result.hints.buffer_count == 3
    assert result.hints.operand == "args[0]"


def test_single_and_double_buffering_lower():
    for buffers in (1, 2):
        assert lower_check(functools.partial(add, buffers=buffers), [F32, F32], get_chip("v7x")).ok


def test_dimension_semantics_length_mismatch():
    result = lower_check(functools.partial(add, semantics=("parallel",)), [F32, F32], get_chip("v5e"))
    assert result.kind == "dimension_semantics"
    assert "len(grid)=2" in result.error


@pytest.mark.parametrize("chip", CHIPS)
def test_unimplemented_primitive_points_at_its_line(chip):
    result = lower_check(sort_rows, [F32], get_chip(chip))
    assert result.kind == "unimplemented"
    assert result.hints.primitive == "sort"
    assert result.hints.location.file == __file__
    assert result.hints.location.line == line_of(sort_kernel, "jnp.sort")


def test_global_interpret_mode_does_not_break_lowering():
    pltpu.set_tpu_interpret_mode()
    try:
        assert lower_check(add, [F32, F32], get_chip("v7x")).ok
    finally:
        pltpu.set_tpu_interpret_mode(None)


def test_python_scalars_are_static():
    result = lower_check(scale, [F32, 2.5], get_chip("v5e"))
    assert result.ok
    assert "2.500000e+00" in mosaic_text(result.exported)


def test_mosaic_locations_point_at_kernel_lines():
    result = lower_check(add, [F32, F32], get_chip("v7x"))
    text = mosaic_text(result.exported, debug_info=True)
    aliases = loc_aliases(text)
    addf = next(ln for ln in text.splitlines() if "arith.addf" in ln)
    loc = op_loc(addf, aliases)
    assert loc.file == __file__ and loc.line == line_of(add_kernel, "x_ref[...] + y_ref[...]")
    readable = strip_locs(text)
    assert "loc(" not in readable and "arith.addf" in readable


def test_trim_error_drops_boilerplate_and_caps_length():
    message = "\n".join(["first"] + [f"line {i}" for i in range(100)] + ["Please report a bug at: https://x"])
    trimmed = trim_error(message, max_lines=10)
    assert trimmed.startswith("first\nline 0") and "report a bug" not in trimmed
    assert trimmed.endswith("(91 more lines)")


def test_classify_falls_back_to_exception_type():
    assert classify_lowering_error("something odd", NotImplementedError("x")) == "unimplemented"
    assert classify_lowering_error("something odd", ValueError("x")) == "other"
