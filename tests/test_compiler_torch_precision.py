"""Where torch's own precision rules and jax's differ, generated code follows torch's, bit for bit where torch
is exact: a bf16 block times a Python float (torch keeps the float as it is, jnp rounds it to bf16 first)
and the `out_dtype` matmul overloads (`torch.bmm(q, k, torch.float32)`, upstream's attention example)."""

import pytest
import torch
from torch_check import assert_matches_torch, compile_for

from compiler import CompileError

SCALE = """
    @helion.kernel()
    def scale(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile, :] = x[tile, :] {op} {factor}
        return out
"""


@pytest.mark.parametrize("op", ["*", "/"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_block_and_a_python_float_compute_as_torch_does(op, dtype):
    """1/sqrt(64)*log2(e) is not a bf16 number: rounded first it would move every product by up to 0.2%."""
    x = torch.randn(64, 256).to(dtype)
    factor = 0.18033688
    ck = assert_matches_torch(SCALE.format(op=op, factor=factor), [x],
                              lambda x: x * factor if op == "*" else x / factor, {"block_sizes": [32]}, rtol=0, atol=0)
    assert ".astype(jnp.float32)" in ck.source


def test_a_float_the_dtype_holds_exactly_stays_a_plain_product():
    x = torch.randn(64, 256).to(torch.bfloat16)
    ck = assert_matches_torch(SCALE.format(op="*", factor=0.5), [x], lambda x: x * 0.5, {"block_sizes": [32]},
                              rtol=0, atol=0)
    assert ".astype(jnp.float32)" not in ck.source


BMM = """
    @helion.kernel()
    def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        out = torch.empty([q.size(0), q.size(1), k.size(1)], dtype=torch.float32, device=q.device)
        for tile_b in hl.tile(q.size(0)):
            out[tile_b, :, :] = {call}
        return out
"""


@pytest.mark.parametrize("call", [
    "torch.bmm(q[tile_b, :, :], k[tile_b, :, :].transpose(1, 2), torch.float32)",
    "torch.bmm(q[tile_b, :, :], k[tile_b, :, :].transpose(1, 2), out_dtype=torch.float32)",
])
def test_bmm_with_an_out_dtype_keeps_the_f32_product(call):
    """Ignoring out_dtype gave a bf16 product (rounded, then widened for the store): 3 significant digits."""
    q, k = torch.randn(4, 128, 64).bfloat16(), torch.randn(4, 256, 64).bfloat16()
    ck = assert_matches_torch(BMM.format(call=call), [q, k],
                              lambda q, k: q.float() @ k.float().transpose(1, 2), {"block_sizes": [2]})
    assert "preferred_element_type=jnp.float32)" in ck.source and "astype(jnp.bfloat16)" not in ck.source


@pytest.mark.parametrize("call, message", [
    ("torch.matmul(q[tile_b, :, :], k[tile_b, :, :].transpose(1, 2), torch.float32)", "extra argument"),
    ("torch.bmm(q[tile_b, :, :], k[tile_b, :, :].transpose(1, 2), out=q)", "out is not supported"),
])
def test_matmul_arguments_it_cannot_honour_are_diagnosed_not_dropped(call, message):
    q, k = torch.randn(4, 128, 64).bfloat16(), torch.randn(4, 256, 64).bfloat16()
    with pytest.raises(CompileError, match=message):
        compile_for(BMM.format(call=call), [q, k], {"block_sizes": [2]})
