"""int64 on a TPU (no 64-bit vector types): tensors the device only reads are passed as int32 after a check
that every value fits; 64-bit outputs and arithmetic that needs 64 bits are refused (HPL108)."""

import textwrap

import pytest
import torch

import compiler
from compiler import CompileError

HEADER = "import torch\nimport helion\nimport helion.language as hl\n\n"

SEGMENT_SUMS = """
    @helion.kernel(static_shapes=True)
    def segment_sums(offsets: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        out = torch.zeros([offsets.size(0) - 1, values.size(1)], dtype=values.dtype, device=values.device)
        for g in hl.grid(offsets.size(0) - 1):
            lo = offsets[g]
            hi = offsets[g + 1]
            for dt in hl.tile(values.size(1)):
                acc = hl.zeros([dt], dtype=torch.float32)
                for st in hl.tile(lo, hi):
                    acc = acc + values[st, dt].sum(0)
                out[g, dt] = acc
        return out
"""


def kernel(source: str):
    return next(iter(compiler.load(HEADER + textwrap.dedent(source)).kernels.values()))


@pytest.fixture(scope="module")
def segment_sums():
    return kernel(SEGMENT_SUMS).compile(args="offsets=i64[4], values=f32[24, 128]", config={"block_sizes": [128, 8]})


def test_int64_offsets_are_read_as_int32(segment_sums):
    ck = segment_sums
    assert ck.diagnostics == [] and ck.plan.narrowed == ("offsets",)
    assert "`offsets` is read as int32" in ck.plan.narrowed_note()
    assert "Pass offsets (int64 in the kernel's signature) as int32, after checking every value fits" in ck.source
    offsets = torch.tensor([0, 5, 5, 24], dtype=torch.int64)
    values = torch.randn(24, 128)
    want = torch.stack([values[a:b].sum(0) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)])
    torch.testing.assert_close(ck(offsets, values), want, rtol=1e-5, atol=1e-5)


def test_int64_values_beyond_int32_raise_instead_of_wrapping(segment_sums):
    """jax without x64 would turn 2**32 into 0 silently; the call says which argument and value."""
    offsets = torch.tensor([0, 5, 2**32, 24], dtype=torch.int64)
    with pytest.raises(OverflowError, match=r"`offsets` is int64 .* value 4294967296 at \[2\] does not fit in int32"):
        segment_sums(offsets, torch.randn(24, 128))


def test_int64_outputs_are_refused_where_they_are_written():
    source = """
        @helion.kernel(static_shapes=True)
        def row_argmax(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty([x.size(0)], dtype=torch.int64, device=x.device)
            for t in hl.tile(x.size(0)):
                out[t] = torch.argmax(x[t, :], dim=-1)
            return out
    """
    with pytest.raises(CompileError) as info:
        kernel(source).compile(args="x=f32[64, 128]")
    (d,) = info.value.diagnostics
    assert d.code == "HPL108" and "`out` is int64 and written on the device" in d.message
    lines = (HEADER + textwrap.dedent(source)).splitlines()
    assert lines[d.range.start.line].strip().startswith("out[t] = torch.argmax")


def test_int64_argument_written_in_place_is_refused():
    k = kernel("""
        @helion.kernel(static_shapes=True)
        def bump(counts: torch.Tensor) -> torch.Tensor:
            for t in hl.tile(counts.size(0)):
                counts[t] = counts[t] + 1
            return counts
    """)
    with pytest.raises(CompileError, match=r"HPL108: `counts` is int64 and written on the device.*before the call"):
        k.compile(args="counts=i64[256]")


def test_arithmetic_needing_64_bits_is_refused():
    k = kernel("""
        @helion.kernel(static_shapes=True)
        def shifted(idx: torch.Tensor) -> torch.Tensor:
            out = torch.empty([idx.size(0)], dtype=torch.float32, device=idx.device)
            for t in hl.tile(idx.size(0)):
                out[t] = (idx[t] + 2**40).to(torch.float32)
            return out
    """)
    with pytest.raises(CompileError, match=r"HPL108: add with the integer constant 1099511627776 needs 64-bit integers"):
        k.compile(args="idx=i64[256]")


def test_float64_reads_stay_refused():
    k = kernel("""
        @helion.kernel(static_shapes=True)
        def halve(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
            for t in hl.tile(x.size(0)):
                out[t] = x[t].to(torch.float32) * 0.5
            return out
    """)
    with pytest.raises(CompileError, match=r"HPL108: `x` is float64 and read on the device"):
        k.compile(args="x=f64[256]")


def test_products_of_int64_values_serve_as_indices():
    """`* stride` on int64 offsets wraps the same in 32 and 64 bits modulo 2**32: as an index it is exact."""
    ck = kernel("""
        @helion.kernel(static_shapes=True)
        def strided_rows(idx: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
            out = torch.empty([idx.size(0), 128], dtype=flat.dtype, device=flat.device)
            for t in hl.tile(idx.size(0)):
                at = idx[t][:, None] * 128 + hl.arange(128)[None, :]
                out[t, :] = hl.load(flat, [at])
            return out
    """).compile(args="idx=i64[16], flat=f32[1024]")
    assert ck.diagnostics == []
    idx = torch.tensor([7, 0, 3, 3, 1, 6, 2, 5, 4, 0, 7, 1, 2, 6, 5, 4], dtype=torch.int64)
    flat = torch.randn(1024)
    torch.testing.assert_close(ck(idx, flat), flat.view(8, 128)[idx])


@pytest.mark.parametrize("use", ["((idx[t] * 1000003) % 97).to(torch.float32)", "(idx[t] * 3).to(torch.float32)",
                                 "torch.where(idx[t] * 5 > 7, 1.0, 0.0)"])
def test_grown_int64_values_are_refused_where_32_bits_would_differ(use):
    """A product of int64 values passes 2**31 where torch still holds it in 64 bits: compared, divided or made a
    float it would differ from torch on the device, so it is refused at that line (HPL108)."""
    k = kernel(f"""
        @helion.kernel(static_shapes=True)
        def hashed(idx: torch.Tensor) -> torch.Tensor:
            out = torch.empty([idx.size(0)], dtype=torch.float32, device=idx.device)
            for t in hl.tile(idx.size(0)):
                out[t] = {use}
            return out
    """)
    with pytest.raises(CompileError, match=r"HPL108: .* computed with `\*`, `<<` or a sum from int64 values"):
        k.compile(args="idx=i64[256]")


def test_grown_int64_values_cast_to_int32_match_torch():
    ck = kernel("""
        @helion.kernel(static_shapes=True)
        def scaled(idx: torch.Tensor) -> torch.Tensor:
            out = torch.empty([idx.size(0)], dtype=torch.int32, device=idx.device)
            for t in hl.tile(idx.size(0)):
                out[t] = idx[t] * 1000003
            return out
    """).compile(args="idx=i64[256]")
    idx = torch.arange(256, dtype=torch.int64) * 40000
    torch.testing.assert_close(ck(idx), (idx * 1000003).to(torch.int32))
