"""One row picked at a launch-grid position on a tensor's second-to-last dim (`x[b, tokens, h.begin, :]` of a
[batch, tokens, heads, dim] tensor, a scalar `y[b, h.begin, last]`): the block is the aligned group of rows
holding it (16 heads of bf16, 8 of f32, 32 of int8) chosen by the index map, not every head, and a row of a
value narrower than 32 bits (or one element) is masked out of the group: libtpu for v5e refuses the direct
read (E2003, "Only 32-bit scalar vector.extracts", "dynamic load with unaligned indices"). Upstream's
mamba2 and gated-delta-net kernels read their inputs this way."""

import pytest
import torch
from test_checks_libtpu import libtpu

import compiler
from compiler.tpu.libtpu_compile import libtpu_available

SRC = '''
import torch
import helion
import helion.language as hl


@helion.kernel(static_shapes=True)
def head_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    b, t, h, d = x.shape
    out = torch.empty([b, h, t, d], dtype=torch.float32, device=x.device)
    for tile_b, tile_h, tile_t in hl.tile([b, h, t], block_size=[1, 1, None]):
        last = y[tile_b.begin, tile_h.begin, y.size(2) - 1].to(torch.float32)
        rows = x[tile_b.begin, tile_t, tile_h.begin, :].to(torch.float32)
        out[tile_b.begin, tile_h.begin, tile_t, :] = rows * last
    return out
'''
CASES = [  # dtype, dim, heads, group of rows; y is large enough to stay in VMEM (not SMEM)
    (torch.bfloat16, 64, 32, 16),
    (torch.int8, 128, 64, 32),
    (torch.float32, 64, 16, 8),
]
NAMES = {torch.bfloat16: "bf16", torch.int8: "i8", torch.float32: "f32"}


def _compiled(dtype: torch.dtype, dim: int, heads: int):
    kernel = compiler.load(SRC).kernels["head_rows"]
    n = NAMES[dtype]
    return kernel.compile(args=f"x={n}[2, 256, {heads}, {dim}], y={n}[2, {heads}, 2048]", chip="v5e")


def _inputs(dtype: torch.dtype, dim: int, heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    if dtype == torch.int8:
        return (torch.randint(-100, 100, (2, 256, heads, dim), generator=g, dtype=dtype),
                torch.randint(-5, 5, (2, heads, 2048), generator=g, dtype=dtype))
    return (torch.randn(2, 256, heads, dim, generator=g).to(dtype), torch.randn(2, heads, 2048, generator=g).to(dtype))


@pytest.mark.parametrize(("dtype", "dim", "heads", "group"), CASES, ids=[NAMES[c[0]] for c in CASES])
def test_a_head_per_step_reads_its_group_and_matches_torch(dtype, dim, heads, group):
    ck = _compiled(dtype, dim, heads)
    x, y = _inputs(dtype, dim, heads)
    want = x.float().permute(0, 2, 1, 3) * y[:, :, -1].float()[:, :, None, None]
    torch.testing.assert_close(ck(x, y), want, rtol=0, atol=0)
    assert f"(pl.Squeezed(), 256, {group}, {dim}), lambda tile_b, tile_h, tile_t: (tile_b, tile_t, tile_h // {group}, 0)" \
        in ck.source, ck.source
    assert f"% {group}" in ck.source


@libtpu
@pytest.mark.parametrize(("dtype", "dim", "heads", "group"), CASES, ids=[NAMES[c[0]] for c in CASES])
def test_the_tpu_compiler_accepts_the_picks(dtype, dim, heads, group):
    errors = [d for d in _compiled(dtype, dim, heads).check_tpu_compile() if d.is_error]
    assert errors == [], [d.message for d in errors]


def _large(dtype: torch.dtype):
    kernel = compiler.load(SRC).kernels["head_rows"]
    n = NAMES[dtype]
    heads = 32 if dtype == torch.bfloat16 else 16
    return kernel.compile(args=f"x={n}[2, 2048, {heads}, 128], y={n}[2, {heads}, 2048]", config={"block_sizes": [1024]},
                          chip="v5e")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
def test_the_vmem_report_counts_the_group_a_row_is_read_from(dtype):
    """Taking one head out of 1024 rows of its group holds the group's 4 MiB as a value (the block is 8 MiB)."""
    temporaries = [r for r in _large(dtype).vmem.rows if r.name == "(temporaries)"]
    assert temporaries and temporaries[0].bytes >= 4 << 20, temporaries


@libtpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
def test_the_vmem_report_is_near_what_libtpu_needs(dtype):
    from compiler.ir.chips import get_chip
    from compiler.tpu.libtpu_compile import tpu_compile

    ck = _large(dtype)
    result = tpu_compile(ck.source, ck.entry, ck.arg_structs(), get_chip("v5e"))
    assert result.ok, result.error
    assert 0.8 <= ck.vmem.total_bytes / result.vmem_used_bytes <= 1.25, (ck.vmem.total_bytes, result.vmem_used_bytes)


STORE_SRC = '''
import torch
import helion
import helion.language as hl


@helion.kernel(static_shapes=True)
def head_rows_out(x: torch.Tensor) -> torch.Tensor:
    b, h, t, d = x.shape
    out = torch.empty([b, t, h, d], dtype=x.dtype, device=x.device)
    for tile_b, tile_h, tile_t in hl.tile([b, h, t], block_size=[1, 1, None]):
        out[tile_b.begin, tile_t, tile_h.begin, :] = x[tile_b.begin, tile_h.begin, tile_t, :] * 2
    return out
'''


def _store_compiled():
    kernel = compiler.load(STORE_SRC).kernels["head_rows_out"]
    return kernel.compile(args="x=bf16[2, 32, 256, 64]", chip="v5e")


def test_a_head_per_step_is_merged_into_its_rows_and_matches_torch():
    """A bf16 row stored at a device-known head goes into the block's heads under a mask (Mosaic stores no
    unaligned bf16 row)."""
    ck = _store_compiled()
    x = torch.randn(2, 32, 256, 64, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    torch.testing.assert_close(ck(x), (x * 2).permute(0, 2, 1, 3), rtol=0, atol=0)
    assert "# one row of the block" in ck.source, ck.source


@libtpu
def test_the_tpu_compiler_accepts_the_merged_rows():
    errors = [d for d in _store_compiled().check_tpu_compile() if d.is_error]
    assert errors == [], [d.message for d in errors]


RMW_SRC = '''
import torch
import helion
import helion.language as hl


@helion.kernel(static_shapes=True)
def rmw_heads(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    b, t, h, d = x.shape
    for tile_b, tile_h, tile_t in hl.tile([b, h, t], block_size=[1, 1, None]):
        x[tile_b.begin, tile_t, tile_h.begin, :] = x[tile_b.begin, tile_t, tile_h.begin, :] + y[tile_b.begin, tile_t, tile_h.begin, :]
        y[tile_b.begin, tile_t, tile_h.begin, :] = x[tile_b.begin, tile_t, tile_h.begin, :] * 2
    return x
'''


def test_a_head_written_in_place_is_read_back_as_written():
    """The head just written is what the next read sees (the write's block, not the group read from HBM)."""
    kernel = compiler.load(RMW_SRC).kernels["rmw_heads"]
    ck = kernel.compile(args="x=bf16[2, 64, 32, 128], y=bf16[2, 64, 32, 128]", chip="v5e")
    g = torch.Generator().manual_seed(2)
    x, y = (torch.randn(2, 64, 32, 128, generator=g).to(torch.bfloat16) for _ in range(2))
    want_x = x + y
    out = ck(x, y)
    torch.testing.assert_close(out, want_x, rtol=0, atol=0)
    torch.testing.assert_close(y, want_x * 2, rtol=0, atol=0)
    if libtpu_available():
        assert [d.message for d in ck.check_tpu_compile() if d.is_error] == []
