"""Gathers at an index of two or more dims (`values[starts[:, None] + k.index[None, :]]`, `table[:, idx[b, s]]`):
Mosaic cannot flatten such an index to one dim ("infer-vector-layout: unsupported shape cast", on a TPU v5e and
in libtpu's deviceless compile alike), so `_gather` builds its one-hot rows at the index's own shape and stacks
those. Results match plain torch in interpret mode, and the TPU compiler accepts the kernels."""

import textwrap

import pytest
import torch
from test_checks_libtpu import libtpu

import compiler

HEADER = "import torch\nimport helion\nimport helion.language as hl\n\n"
STRATEGIES = ("unroll", "fori_loop", "emit_pipeline")

JAGGED_ROW_SUMS = """
    @helion.kernel(static_shapes=True)
    def jagged_row_sums(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        rows = offsets.size(0) - 1
        out = torch.zeros([rows], dtype=values.dtype, device=values.device)
        for tr in hl.tile(rows):
            starts = offsets[tr]
            ends = offsets[tr.index + 1]
            total = hl.zeros([tr], dtype=values.dtype)
            for tk in hl.jagged_tile(ends - starts):
                total = total + values[starts[:, None] + tk.index[None, :]].sum(dim=1)
            out[tr] = total
        return out
"""

MIDDLE_DIM = """
    @helion.kernel(static_shapes=True)
    def middle_dim(idx: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        a, c = table.size(0), table.size(2)
        b, s = idx.size(0), idx.size(1)
        out = torch.empty([a, b, s, c], dtype=table.dtype, device=table.device)
        for ta, tb, ts, tc in hl.tile([a, b, s, c]):
            out[ta, tb, ts, tc] = table[ta, idx[tb, ts], tc]
        return out
"""


def cases() -> list[tuple[str, str, list, dict, torch.Tensor]]:
    """(source, args, inputs, config, expected)."""
    lengths = torch.tensor([4, 0, 11, 7, 1, 9, 3, 5], dtype=torch.int32)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int32), torch.cumsum(lengths, 0).to(torch.int32)])
    values = torch.randn(int(offsets[-1]), generator=torch.Generator().manual_seed(3))
    sums = torch.stack([values[a:b].sum() for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)])
    g = torch.Generator().manual_seed(4)
    idx = torch.randint(0, 8, (2, 8), generator=g, dtype=torch.int32)
    table = torch.randn(4, 8, 128, generator=g).to(torch.bfloat16)
    return [
        (JAGGED_ROW_SUMS, "values=f32[40], offsets=i32[9]", [values, offsets], {"block_sizes": [8, 4]}, sums),
        (MIDDLE_DIM, "idx=i32[2, 8], table=bf16[4, 8, 128]", [idx, table], {}, table[:, idx.long(), :]),
    ]


def kernel(source: str):
    return next(iter(compiler.load(HEADER + textwrap.dedent(source)).kernels.values()))


@pytest.mark.parametrize("case", range(2), ids=["jagged_rows", "middle_dim"])
def test_a_gather_at_a_multi_dim_index_matches_torch(case):
    source, args, inputs, config, want = cases()[case]
    for strategy in STRATEGIES:
        ck = kernel(source).compile(args=args, config={**config, "pallas_loop_type": strategy})
        assert "_gather(" in ck.source
        torch.testing.assert_close(ck(*[t.clone() for t in inputs]), want, rtol=1e-5, atol=1e-5)


@libtpu
@pytest.mark.parametrize("case", range(2), ids=["jagged_rows", "middle_dim"])
def test_a_gather_at_a_multi_dim_index_compiles_for_the_chip(case):
    """The chip refused both before (HPL401, unsupported shape cast: `idx.reshape(-1)` of a 2-D index)."""
    source, args, _, config, _ = cases()[case]
    for strategy in STRATEGIES:
        ck = kernel(source).compile(args=args, config={**config, "pallas_loop_type": strategy}, chip="v5e")
        assert [d.message for d in ck.check_tpu_compile() if d.is_error] == [], ck.source
