"""A chunked gather or scatter (`_gather_chunked`, `_chunked_write`) loops over small chunks of its block so that
libtpu compiles it in seconds, but Pallas's TPU interpret mode on a CPU pays for every step of that loop (upstream
jagged_layer_norm: 72.8 CPU s with 20 steps, over 327 s with 390). The kernel takes `interpret` from the host: in
interpret mode a block whose one-hot fits in memory goes at once, with no loop (the same values, bit for bit), a
larger one by the largest chunks that fit; the compiled path keeps its small chunks."""

import jax
import jax.numpy as jnp
import pytest
import torch
from jax.experimental.pallas import tpu as pltpu
from test_compiler_gather_chunks import PICK
from test_compiler_one_hot_chunks import ADD, PUT

import compiler
from compiler.codegen.chunks import interpret_chunk
from compiler.codegen.emit_index import gather_chunk
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


def test_an_interpret_chunk_is_bounded_only_by_memory():
    assert interpret_chunk((33280,), 128, torch.float32) is None  # jagged_layer_norm's (128, 1, 1) index: at once
    assert interpret_chunk((33280,), 128 * 128 * 8, torch.float32) == 256  # 2**17 positions: 2**25 elements a step
    assert interpret_chunk((33280,), 128 * 128 * 8, torch.float32) > gather_chunk((33280,), 128 * 128 * 8, torch.float32)
