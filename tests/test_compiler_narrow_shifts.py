"""Shifts of 8- and 16-bit integers (upstream int4_gemm's `b_tile >> 4` on packed int8 nibbles): Mosaic legalizes
no shift of a narrow integer vector ("failed to legalize operation 'arith.shrsi'", on a TPU v5e and in libtpu's
deviceless compile alike), so the generated code shifts in int32 and wraps back to the narrow type, which is
what torch's narrow shift gives: arithmetic for signed types, logical for unsigned, high bits dropped on the left."""

import textwrap

import pytest
import torch
from test_checks_libtpu import libtpu

import compiler

SHIFTS = """
    import torch
    import helion
    import helion.language as hl


    @helion.kernel(static_shapes=True)
    def shifts(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty([3, x.size(0), x.size(1)], dtype=x.dtype, device=x.device)
        for tm, tn in hl.tile([x.size(0), x.size(1)]):
            v = x[tm, tn]
            out[0, tm, tn] = v >> 4
            out[1, tm, tn] = v << 3
            out[2, tm, tn] = (v & 0xF) >> 1
        return out
"""

DTYPES = {"i8": torch.int8, "u8": torch.uint8, "i16": torch.int16}


def kernel():
    return next(iter(compiler.load(textwrap.dedent(SHIFTS)).kernels.values()))


@pytest.mark.parametrize("name", DTYPES)
def test_narrow_shifts_match_torch(name):
    dtype = DTYPES[name]
    info = torch.iinfo(dtype)
    x = torch.randint(info.min, info.max + 1, (16, 256), generator=torch.Generator().manual_seed(5), dtype=torch.int32)
    x = x.to(dtype)
    ck = kernel().compile(args=f"x={name}[16, 256]")
    assert ".astype(jnp.int32) >> 4).astype(" in ck.source, ck.source
    want = torch.stack([x >> 4, x << 3, (x & 0xF) >> 1])
    assert torch.equal(ck(x), want)


@libtpu
@pytest.mark.parametrize("name", DTYPES)
def test_narrow_shifts_compile_for_the_chip(name):
    ck = kernel().compile(args=f"x={name}[16, 256]", chip="v5e")
    assert [d.message for d in ck.check_tpu_compile() if d.is_error] == [], ck.source
