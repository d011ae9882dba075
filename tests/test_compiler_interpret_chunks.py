"""A chunked gather or scatter (`_gather_chunked`, `_chunked_write`) loops over small chunks of its block so that
libtpu compiles it in seconds, but Pallas's TPU interpret mode on a CPU pays for every step of that loop (upstream
jagged_layer_norm: 72.8 CPU s with 20 steps, over 327 s with 390) and for every element of a one-hot (its whole-block
scatters: 47.6 CPU s a call). The kernel takes `interpret` from the host: in interpret mode the whole block goes at
once, with no loop and no one-hot, by the helpers' direct paths (jnp's gather and scatters: the same values); the
compiled path keeps its small chunks and one-hots."""

import jax
import jax.numpy as jnp
import pytest
import torch
from jax.experimental.pallas import tpu as pltpu
from test_compiler_gather_chunks import PICK
from test_compiler_one_hot_chunks import ADD, PUT

import compiler
from compiler.codegen.emit_index import HELPERS
from compiler.tpu.runtime import chip_context, load_entry


def _compiled(source: str, name: str):
    kernel = compiler.load(source, f"{name}.py").kernels[name]
    return kernel.compile(config={"block_sizes": [8], "pallas_loop_type": "unroll"}, chip="v5e")


def _loops(ck, arrays: list, interpret) -> int:
    """The loops in the traced program (the unrolled strategy has none of its own: only the chunks')."""
    fn = load_entry(ck.source, ck.entry)
    text = str(jax.make_jaxpr(lambda *a: fn(*a, interpret=interpret))(*arrays))
    assert text.count("pallas_call[") == 1
    return text.count("scan[") + text.count("while[")


@pytest.mark.parametrize(("source", "name", "helper"), [
    (PICK, "pick", "_gather_chunked(table_ref, idx_ref[...], None if interpret else 256)"),
    (PUT, "put", "_chunked_write(_scatter, out_out_ref, idx_ref[...], vals_ref[...], None if interpret else 128)"),
    (ADD, "add", "_chunked_write(_scatter_add, out_out_ref, idx_ref[...], vals_ref[...], None if interpret else 128)"),
])
def test_interpret_mode_takes_the_whole_block_and_the_tpu_path_its_chunks(source, name, helper):
    ck = _compiled(source, name)
    assert helper in ck.source, ck.source
    assert "interpret=bool(interpret)" in ck.source and "*, interpret: bool):" in ck.source, ck.source
    if name == "pick":
        arrays = [jnp.zeros(16384, jnp.float32), jnp.zeros((64, 128), jnp.int32)]
    else:
        arrays = [jnp.zeros((64, 128), jnp.float32), jnp.zeros((64, 128), jnp.int32), jnp.zeros(16384, jnp.float32)]
    assert _loops(ck, arrays, False) == 1  # the TPU path (check's deviceless compile, the chip): chunks in a loop
    assert _loops(ck, arrays, pltpu.InterpretParams()) == 0  # interpret mode: at once


def _by_chunks(ck, *args: torch.Tensor):
    """The chunked path's values, run in interpret mode with the flag held off (what the TPU runs)."""
    source = ck.source.replace("interpret=bool(interpret)", "interpret=False")
    assert source != ck.source
    fn = load_entry(source, ck.entry)
    with chip_context(ck.chip):
        got = fn(*(jnp.asarray(a.numpy()) for a in args), interpret=pltpu.InterpretParams())
    got = got[-1] if isinstance(got, tuple) else got
    return torch.from_numpy(jax.device_get(got).copy())


def test_at_once_in_interpret_mode_gives_torchs_values_and_the_chunks():
    """`ck(...)` on this CPU machine runs interpret mode, so these are the one-chunk paths' values; the chunked
    ones must be the same, bit for bit."""
    pick = _compiled(PICK, "pick")
    table = torch.randn(16384)
    table[5], table[6], table[16383] = float("inf"), float("nan"), float("-inf")
    idx = torch.randint(-16384, 16384, (64, 128), dtype=torch.int32)
    idx[0, :4] = torch.tensor([5, 6, -1, 16383], dtype=torch.int32)
    got, expected = pick(table, idx), table[idx.long()]
    assert torch.equal(got.isnan(), expected.isnan())
    assert torch.equal(torch.nan_to_num(got), torch.nan_to_num(expected))
    chunked = _by_chunks(pick, table, idx)
    assert torch.equal(got.view(torch.int32), chunked.view(torch.int32))

    put = _compiled(PUT, "put")
    vals, out = torch.randn(64, 128), torch.randn(16384)
    idx = torch.randperm(16384)[:8192].reshape(64, 128).to(torch.int32)
    idx[1] -= 16384  # the same positions counted from the end
    got = put(vals, idx, out.clone())
    got = got[-1] if isinstance(got, tuple) else got
    expected = out.clone()
    expected[idx.long()] = vals
    assert torch.equal(got, expected)
    assert torch.equal(_by_chunks(put, vals, idx, out.clone()), got)

    add = _compiled(ADD, "add")
    vals = torch.randint(-8, 8, (64, 128)).float()  # small integers: every sum exact in any order
    idx = torch.randint(-16384, 16384, (64, 128), dtype=torch.int32)  # duplicates, within and across steps
    out = torch.randint(-8, 8, (16384,)).float()
    got = add(vals, idx, out.clone())
    got = got[-1] if isinstance(got, tuple) else got
    assert torch.equal(got, out.clone().index_put_((idx.long().reshape(-1) % 16384,), vals.reshape(-1), accumulate=True))
    assert torch.equal(_by_chunks(add, vals, idx, out.clone()), got)


def _helpers() -> dict:
    """The generated code's one-hot helpers, as functions of plain jax (no kernel around them)."""
    import functools

    from jax.experimental import pallas as pl

    space = {"jax": jax, "jnp": jnp, "functools": functools, "pl": pl}
    for name in ("one_hot_rows", "gather", "scatter", "scatter_add"):
        exec(HELPERS[name], space)
    return space


def _same(a, b) -> bool:
    """Equal values, NaN where NaN (a one-hot's pick of -0.0 is +0.0, which compares equal)."""
    a, b = jax.device_get(a), jax.device_get(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if jnp.issubdtype(a.dtype, jnp.floating):
        a, b = a.astype("float32"), b.astype("float32")
        return bool(((a == b) | (jnp.isnan(a) & jnp.isnan(b))).all())
    return bool((a == b).all())


def _table(key, shape, dtype):
    if jnp.issubdtype(dtype, jnp.integer):
        return jax.random.randint(key, shape, -2**31, 2**31 - 1, jnp.int32).astype(dtype)
    t = jax.random.normal(key, shape, jnp.float32)
    t = t.reshape(-1).at[:4].set(jnp.array([jnp.inf, -jnp.inf, jnp.nan, -0.0])).reshape(shape)
    return t.astype(dtype)


@pytest.mark.parametrize(("dtype", "table_shape", "axis"), [  # every dtype kind, and each layout of the table
    (jnp.float32, (640,), 0), (jnp.float32, (3, 200), 1), (jnp.bfloat16, (96, 5), 0), (jnp.int32, (3, 200), 1),
    (jnp.int8, (640,), 0)])
def test_the_direct_paths_give_the_one_hots_values(dtype, table_shape, axis):
    """What interpret mode now runs (`direct=True`) against what the TPU runs, on positions past both ends,
    counted from the end, repeated (a scatter's later writer wins, a rewrite of the old value does not undo a
    write), on non-finite values and on masked-off padding."""
    h = _helpers()
    keys = jax.random.split(jax.random.PRNGKey(0), 6)
    rows = table_shape[axis]
    block = _table(keys[0], table_shape, dtype)
    idx = jax.random.randint(keys[1], (8, 16), -rows - 40, rows + 40, jnp.int32)
    idx = idx.at[0, :6].set(jnp.array([0, 0, 1, rows - 1, -1, 3]))  # duplicates among the first
    got = h["_gather"](block, idx, axis, direct=True)
    assert _same(got, h["_gather"](block, idx, axis)), (got, h["_gather"](block, idx, axis))
    value_shape = table_shape[:axis] + idx.shape + table_shape[axis + 1:]
    values = _table(keys[2], value_shape, dtype)
    old = jnp.take(block, jnp.clip(jnp.where(idx < 0, idx + rows, idx), 0, rows - 1), axis=axis)
    values = jnp.where(jax.random.bernoulli(keys[3], 0.3, value_shape), old, values)  # rewrites of the old value
    valid = jax.random.bernoulli(keys[4], 0.8, idx.shape)
    for mask in (None, valid):
        direct = h["_scatter"](block, idx, values, axis, mask, direct=True)
        assert _same(direct, h["_scatter"](block, idx, values, axis, mask)), mask
    small = (jnp.round(values.astype(jnp.float32) * 4) if jnp.issubdtype(dtype, jnp.floating) else values).astype(dtype)
    for mask in (None, valid):  # small integers in floats: every sum exact in any order; integers wrap alike
        direct = h["_scatter_add"](block, idx, small, axis, mask, direct=True)
        assert _same(direct, h["_scatter_add"](block, idx, small, axis, mask)), mask


def test_interpret_mode_builds_no_one_hot():
    """The interpreted program holds nothing of positions x rows elements (put: 1,024 positions of a 16,384-row
    block, a 16M-element one-hot a step before), while the TPU path's one-hots stay."""
    import re

    put = _compiled(PUT, "put")
    fn = load_entry(put.source, put.entry)
    arrays = [jnp.zeros((64, 128), jnp.float32), jnp.zeros((64, 128), jnp.int32), jnp.zeros(16384, jnp.float32)]

    def largest(interpret) -> int:
        text = str(jax.make_jaxpr(lambda *a: fn(*a, interpret=interpret))(*arrays))
        dims = re.findall(r"\b(?:f32|i32|bool|bf16)\[([0-9,]+)\]", text)
        return max(int(jnp.prod(jnp.array([int(d) for d in shape.split(",")]))) for shape in dims)

    assert largest(pltpu.InterpretParams()) <= 16384
    assert largest(False) >= 128 * 1024  # a chunk of 128 rows x 1,024 positions on the TPU path
