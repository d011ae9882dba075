"""Default configs (what a kernel compiles with before anyone tunes it): every block the decorator does not
give is legal on the trace it makes, and the defaults fit the default scoped VMEM when a legal config does."""

import textwrap

import torch

import compiler

HEADER = "import torch\nimport helion\nimport helion.language as hl\n\n"


def kernel(source: str):
    return next(iter(compiler.load(HEADER + textwrap.dedent(source)).kernels.values()))


def errors(ck) -> list[str]:
    return [f"{d.code} {d.message}" for d in ck.diagnostics if d.is_error]


# a grid block of rows, walked inside by sub-tiles that also tile a 1-D bf16 tensor: the sub-tile's extent is
# the grid block, so its default can only be chosen once the grid block's default is known
WEIGHTED_COLUMN_SUMS = """
    @helion.kernel
    def weighted_column_sums(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rows = hl.register_block_size(x.size(0))
        n = hl.specialize(x.size(1))
        y = torch.empty_like(x)
        parts = x.new_empty([(x.size(0) + rows - 1) // rows, n], dtype=torch.float32)
        for cta in hl.tile(x.size(0), block_size=rows):
            acc = hl.zeros([n], dtype=torch.float32)
            for sub in hl.tile(cta.begin, cta.end):
                scaled = x[sub, :].to(torch.float32) * w[sub].to(torch.float32)[:, None]
                acc += torch.sum(scaled, dim=0)
                y[sub, :] = scaled.to(x.dtype)
            parts[cta.id, :] = acc
        return y, parts.sum(0)
"""


def test_sub_tile_default_is_legal_for_the_grid_block_it_lands_in():
    """The first trace sees placeholder blocks (a 128-row grid block, so a 128-row sub-tile); the grid block's
    default is 512, where a 128-row block of the 1-D bf16 `w` is illegal (a bf16 1-D block is >= 256): the
    sub-tile's default is recomputed on the re-trace."""
    k = kernel(WEIGHTED_COLUMN_SUMS)
    args = "x=bf16[512, 128], w=bf16[512]"
    ck = k.compile(args=args)
    assert errors(ck) == [] and not [d for d in ck.diagnostics if d.code == "HPL205"]
    assert list(ck.config["block_sizes"]) == [512, 512]
    assert dict(k.default_config(args)) == dict(ck.config)
    assert ck.check_lowering() == []
    x = torch.randn(512, 128).to(torch.bfloat16)
    w = torch.randn(512).to(torch.bfloat16)
    y, sums = ck(x, w)
    scaled = x.float() * w.float()[:, None]
    torch.testing.assert_close(y, scaled.to(torch.bfloat16))
    torch.testing.assert_close(sums, scaled.sum(0), rtol=1e-3, atol=1e-3)


def test_shrunk_defaults_keep_sub_tiles_inside_their_grid_block():
    """At a size whose defaults overflow VMEM, the grid block shrinks and the sub-tile follows it (it must
    divide the grid block and stay legal for `w`): the kernel fits the default scoped VMEM, without errors."""
    k = kernel(WEIGHTED_COLUMN_SUMS)
    args = "x=bf16[4096, 8192], w=bf16[4096]"
    assert list(k.default_config(args)["block_sizes"]) == [1024, 1024]  # before shrinking: out of VMEM
    ck = k.compile(args=args)
    assert errors(ck) == []
    grid, sub = ck.config["block_sizes"]
    assert sub <= grid < 1024 and grid % sub == 0 and sub >= 256
    assert ck.vmem.verdict == "fits", ck.vmem


ROW_NORM = """
    @helion.kernel
    def row_norm(x: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        m, n = x.size()
        out = torch.empty_like(x)
        inv = torch.empty([m], dtype=torch.float32, device=x.device)
        for tm in hl.tile(m):
            row = x[tm, :].to(torch.float32)
            scale = torch.rsqrt(torch.mean(row * row, dim=-1) + 1e-6)
            out[tm, :] = (row * scale[:, None] * weight[:].to(torch.float32)).to(x.dtype)
            inv[tm] = scale
        return out, inv
"""


def test_row_block_that_also_tiles_a_vector_shrinks_to_fit():
    """The row block tiles the rows of `x` and the 1-D `inv`: its default (1024 rows of 8192 columns) needs
    more than the VMEM there is; the default shrinks it until it fits the default scoped limit."""
    k = kernel(ROW_NORM)
    ck = k.compile(args="x=bf16[2048, 8192], weight=bf16[8192]")
    assert errors(ck) == []
    assert ck.vmem.verdict == "fits", ck.vmem
    assert ck.config["block_sizes"][0] < k.default_config("x=bf16[2048, 8192], weight=bf16[8192]")["block_sizes"][0]


def test_rank1_rule_is_per_array():
    """A row block of 128 tiles bf16 rows (legal: a multiple of 8) and a 1-D f32 vector (legal: a power of two
    >= 128 for 4-byte elements): no error, not raised to the 256 a 1-D bf16 array would need, and it lowers."""
    k = kernel(ROW_NORM)
    ck = k.compile(args="x=bf16[1024, 256], weight=bf16[256]", config={"block_sizes": [128]})
    assert [d.code for d in ck.diagnostics] == []
    assert list(ck.config["block_sizes"]) == [128]
    assert ck.check_lowering() == []


def test_lane_blocks_shrink_when_no_other_block_can():
    """Column blocks of a tall matrix: the only block tiles lanes, and its default (512 lanes of 8192 rows,
    in and out, double-buffered) does not fit; it shrinks rather than leaving an error the user did not cause."""
    k = kernel("""
        @helion.kernel
        def double_columns(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tn in hl.tile(x.size(1)):
                out[:, tn] = x[:, tn] * 2
            return out
    """)
    ck = k.compile(args="x=f32[8192, 4096]")
    assert errors(ck) == []
    assert ck.vmem.verdict == "fits", ck.vmem
    assert ck.config["block_sizes"][0] % 128 == 0 and ck.config["block_sizes"][0] < 512


def test_defaults_keep_their_blocks_where_shrinking_saves_almost_nothing():
    """Experts' rows gathered from a table that interpret mode and the chip keep whole (its copies are most of the
    VMEM, whatever the row block): over the default limit at every row block, the 128-row default stays, rather
    than shrinking step by step to 8 rows for 0.75 % less VMEM, which multiplies the unrolled loop's bodies by 16
    (upstream moe_matmul_ogs: 125 bodies, a check of 112-128 CPU seconds)."""
    k = kernel("""
        @helion.kernel(static_shapes=False)
        def routed(x: torch.Tensor, w: torch.Tensor, counts: torch.Tensor, starts: torch.Tensor, order: torch.Tensor,
                   most: int) -> torch.Tensor:
            out = torch.zeros([x.size(0), w.size(2)], dtype=x.dtype, device=x.device)
            for e in hl.grid(w.size(0)):
                first = starts[e]
                count = counts[e]
                for t, n in hl.tile([most, w.size(2)]):
                    valid = t.index < count
                    src = order[(first + torch.where(valid, t.index, 0)).squeeze(0)]
                    y = hl.zeros([t, n], dtype=torch.float32)
                    for k in hl.tile(x.size(1)):
                        y = torch.addmm(y, x[src, k], w[e, k, n])
                    old = out[src, n]
                    out[src, n] = torch.where(valid.view(-1, 1), y.to(out.dtype), old)
            return out
    """)
    ck = k.compile(args="x=bf16[1000, 500], w=bf16[30, 500, 200], counts=i32[30], starts=i32[31], order=i32[1000], "
                        "most=1000", chip="v5e")
    assert errors(ck) == []
    assert ck.vmem.verdict == "over_default_limit", ck.vmem
    assert list(ck.config["block_sizes"]) == [128, 200, 500]
