"""What the static evaluation of a file's calls (compiler/frontend/host_*.py) knows about the torch code that
builds a kernel's arguments: `@`, `torch.linalg`, writes into integer tensors and the sizes read back from
them (`int(offsets[-1].item())`, `bincount(...).max()`), defaults a shape line cannot say."""

from __future__ import annotations

import textwrap

import compiler
from compiler.ir.specs import format_args

KERNEL = textwrap.dedent("""\
    import torch
    import helion
    import helion.language as hl


    @helion.kernel()
    def scale(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size()):
            out[tile] = x[tile] * 2.0
        return out


    @helion.kernel()
    def rows(x: torch.Tensor, offsets: torch.Tensor, n: int, mode: str = "sum") -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size()):
            out[tile] = x[tile]
        return out

""")


def shape_sets(text: str, kernel: str) -> list[str]:
    return [format_args(s) for s in compiler.load(KERNEL + text).kernels[kernel].shape_sets]


def notes(text: str, kernel: str) -> list[tuple[str, ...]]:
    return [o.notes for o in compiler.load(KERNEL + text).kernels[kernel].shape_set_origins]


def line_of(text: str, needle: str) -> int:
    """One-based line of `needle` in the module KERNEL + text."""
    full = KERNEL + text
    return full[: full.index(needle)].count("\n") + 1


def test_matrix_products_and_linalg_give_shapes():
    text = textwrap.dedent("""\
        a = torch.randn(32, 64)
        w = torch.randn(96, 64)
        scale(a @ w.T)
        u, s, vh = torch.linalg.svd(torch.randn(4, 16, 8), full_matrices=False)
        scale(torch.einsum("bik,bkj->bij", u, vh).to(torch.bfloat16))
    """)
    assert shape_sets(text, "scale") == ["x=f32[32, 96]", "x=bf16[4, 16, 8]"]


def test_a_size_read_from_offsets_written_by_slice_assignment_is_their_upper_bound():
    # zeros, then cumsum written into [1:]: the last offset is at most 12 * 7 = 84, and the shape set says so
    text = textwrap.dedent("""\
        lengths = torch.randint(8, (12,))
        offsets = torch.zeros(13, dtype=torch.int32)
        offsets[1:] = torch.cumsum(lengths, dim=0)
        total = int(offsets[-1].item())
        rows(torch.randn(total, 128), offsets, total)
    """)
    assert shape_sets(text, "rows") == ["x=f32[84, 128], offsets=i32[13], n=84"]
    assert notes(text, "rows") == [(f"84 is the upper bound of a size computed from random data at line "
                                    f"{line_of(text, 'total = int(')}",)]
    # the same written through `out=`
    text = text.replace("offsets[1:] = torch.cumsum(lengths, dim=0)", "torch.cumsum(lengths, dim=0, out=offsets[1:])")
    assert shape_sets(text, "rows") == ["x=f32[84, 128], offsets=i32[13], n=84"]


def test_offsets_concatenated_from_a_literal_tensor_keep_bounds():
    text = textwrap.dedent("""\
        lengths = torch.randint(4, 9, (10,), dtype=torch.int32)
        offsets = torch.cat([torch.tensor([0], dtype=torch.int32), torch.cumsum(lengths, dim=0)])
        total = int(offsets[-1])
        rows(torch.randn(total, 128), offsets, total)
    """)
    # the cumsum of int32 values is int64, as in torch
    assert shape_sets(text, "rows") == ["x=f32[80, 128], offsets=i64[11], n=80"]


def test_values_written_from_something_unknown_are_no_size():
    # an in-place op or a write of unknown values: the old bounds (all 4) must not be read as the size
    for write in ("offsets.random_(0, 5)", "offsets[1:] = torch.from_numpy(counts)"):
        text = textwrap.dedent(f"""\
            offsets = torch.full((13,), 4, dtype=torch.int32)
            {write}
            total = int(offsets[-1])
            rows(torch.randn(total, 128), offsets, total)
        """)
        assert shape_sets(text, "rows") == [], write


def test_bincount_of_random_integers():
    # 40 values in 0..9 with minlength 10: exactly 10 counts, each at most 40
    text = textwrap.dedent("""\
        experts = torch.randint(10, (40,))
        counts = torch.bincount(experts, minlength=10).to(torch.int32)
        most = int(counts.max().item())
        rows(torch.randn(40, 128), counts, most)
    """)
    assert shape_sets(text, "rows") == ["x=f32[40, 128], offsets=i32[10], n=40"]
    assert notes(text, "rows") == [(f"40 is the upper bound of a size computed from random data at line "
                                    f"{line_of(text, 'most = int(')}",)]
    # without minlength the length is the largest value + 1: at most 10, said as an upper bound
    text = text.replace(", minlength=10", "")
    assert shape_sets(text, "rows") == ["x=f32[40, 128], offsets=i32[10], n=40"]
    assert f"10 is the upper bound of a bincount's length of random data at line {line_of(text, 'bincount')}" in \
        notes(text, "rows")[0]


def test_a_string_argument_equal_to_its_default_is_left_out_and_another_is_not_guessed():
    text = textwrap.dedent("""\
        x = torch.randn(16, 128)
        offsets = torch.zeros(17, dtype=torch.int32)
        rows(x, offsets, 16, "sum")
        rows(x, offsets, 8, mode="max")
    """)
    assert shape_sets(text, "rows") == ["x=f32[16, 128], offsets=i32[17], n=16"]
