"""float16 kernels on a TPU: Mosaic loads no float16 vector on any chip ("Invalid vector type for load": libtpu's
deviceless compile for v4 to v7x, and a TPU v5e on upstream se_block), so float16 tensors cross into the kernel
as float32 (the jitted function converts them on the way in and its float16 results on the way out), the VMEM
report counts them at 4 bytes, and their dots are planned as f32 dots (one bf16 pass would drop float16's
mantissa bits). Results match torch's float16 ones, and the TPU compiler accepts the kernels."""

import textwrap

import pytest
import torch
from test_checks_libtpu import libtpu

import compiler

SE_BLOCK = """
    import torch
    import helion
    import helion.language as hl


    @helion.kernel(static_shapes=True)
    def gate(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        m, n = x.size()
        out = torch.empty([m, n], dtype=x.dtype, device=x.device)
        s = torch.empty([m, n], dtype=x.dtype, device=x.device)
        for tile_m in hl.tile(m):
            x_tile = x[tile_m, :]
            sig = torch.sigmoid(x_tile @ w[:, :])
            s[tile_m, :] = sig
            out[tile_m, :] = (2.0 * x_tile.to(torch.float32) * sig).to(x.dtype)
        return out, s
"""
ARGS = "x=f16[256, 128], w=f16[128, 128]"


def kernel():
    return next(iter(compiler.load(textwrap.dedent(SE_BLOCK)).kernels.values()))


def test_float16_is_carried_as_float32_and_matches_torch():
    g = torch.Generator().manual_seed(7)
    x, w = (torch.randn(s, generator=g).to(torch.float16) for s in ((256, 128), (128, 128)))
    ck = kernel().compile(args=ARGS, config={"block_sizes": [64]})
    assert "    x = x.astype(jnp.float32)" in ck.source and "return (out.astype(jnp.float16), s.astype(jnp.float16))" \
        in ck.source, ck.source
    assert "jnp.float16" not in ck.source.split("def gate(")[0], "a float16 vector inside the kernel"
    assert "_dot_bf16x3(" in ck.source  # float16 mantissas need more than one bf16 pass
    rows = {r.name: r for r in ck.vmem.rows}
    assert rows["x"].bytes == 2 * 64 * 128 * 4, rows["x"]
    out, s = ck(x, w)
    sig = torch.sigmoid((x @ w).float()).to(torch.float16)  # torch's float16 matmul: f32 accumulation
    want = (2.0 * x.float() * sig.float()).to(torch.float16)
    assert out.dtype == s.dtype == torch.float16
    torch.testing.assert_close(s, sig, rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(out, want, rtol=2e-3, atol=2e-3)


@libtpu
@pytest.mark.parametrize("chip", ["v5e", "v7x"])
def test_a_float16_kernel_compiles_for_the_chip(chip):
    """Before, every float16 kernel was HPL203 (the chip's compiler refused its float16 loads)."""
    ck = kernel().compile(args=ARGS, config={"block_sizes": [64]}, chip=chip)
    assert [d.message for d in ck.check_tpu_compile() if d.is_error] == [], ck.source
