"""A kernel whose bf16 intermediate feeds another dot differs from torch by summation order alone: `check`
allows what an exact-sum evaluation of the same program measures, and no more (compiler/check.py)."""

from __future__ import annotations

import torch

from compiler.check import compare, summation_slack
from compiler.reference.matmul_mode import MixedPrecisionMatmul
from compiler.reference.runner import load_module

SOURCE = '''
import torch
import helion
import helion.language as hl


@helion.kernel()
def gated(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    k = a.size(1)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    c = torch.empty([m, k], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        for tile_k in hl.tile(k):
            c[tile_m, tile_k] = torch.relu(x[tile_m, :] @ a[:, tile_k])
        for tile_n in hl.tile(n):
            acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
            for tile_k in hl.tile(k):
                acc = torch.addmm(acc, c[tile_m, tile_k], b[tile_k, tile_n])
            out[tile_m, tile_n] = x[tile_m, tile_n] * torch.sigmoid(acc)
    return out
'''


def _inputs() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(1024, 1024, generator=gen).to(torch.bfloat16) for _ in range(3)]


def _summed_in_blocks(p: torch.Tensor, q: torch.Tensor, block: int) -> torch.Tensor:
    """p @ q in f32, summed block by block along k: another order than torch's, as a TPU's MXU passes are."""
    acc = torch.zeros(p.shape[0], q.shape[1])
    for i in range(0, p.shape[1], block):
        acc += p[:, i : i + block].float() @ q[i : i + block].float()
    return acc


def _another_order(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c = torch.relu(_summed_in_blocks(x, a, 128)).to(torch.bfloat16)
    return (x * torch.sigmoid(_summed_in_blocks(c, b, 256))).to(torch.bfloat16)


def test_summation_order_alone_is_allowed_and_a_wrong_answer_is_not() -> None:
    module = load_module(SOURCE)
    x, a, b = _inputs()
    expected = module.run("gated", [x, a, b], [64, 128, 128])
    exact = module.run("gated", [x, a, b], [64, 128, 128], exact_dots=True)
    other = _another_order(x, a, b)
    assert compare(other, expected, same_program=True) is not None  # a rounding flip of c, amplified
    slack = summation_slack(expected, exact)
    assert 0 < slack[0] < 0.5
    assert compare(other, expected, same_program=True, slack=slack) is None
    wrong = other.clone()
    wrong[:8, :128] = _another_order(x, a, b.flip(0))[:8, :128]  # one tile computed from the wrong rows of b
    assert compare(wrong, expected, same_program=True, slack=slack) is not None


def test_a_program_without_products_has_no_slack() -> None:
    t = torch.randn(64, 64).to(torch.bfloat16)
    assert summation_slack((t, torch.arange(3)), (t.clone(), torch.arange(3))) == (0.0, 0.0)


def test_exact_mode_sums_every_float_product_in_f64() -> None:
    gen = torch.Generator().manual_seed(1)
    p, q = (torch.randn(256, 512, generator=gen), torch.randn(512, 128, generator=gen))
    want = (p.double() @ q.double()).float()
    with MixedPrecisionMatmul(exact=True):
        products = [p @ q, torch.matmul(p, q), torch.mm(p, q), p.mm(q), torch.bmm(p[None], q[None])[0],
                    torch.addmm(torch.zeros(256, 128), p, q), torch.einsum("ik,kj->ij", p, q)]
        bf16 = p.to(torch.bfloat16) @ q.to(torch.bfloat16)
    for got in products:
        assert got.dtype == torch.float32 and torch.equal(got, want)
    assert bf16.dtype == torch.bfloat16
    assert torch.equal(bf16, (p.to(torch.bfloat16).double() @ q.to(torch.bfloat16).double()).to(torch.bfloat16))
    with MixedPrecisionMatmul():
        assert not torch.equal(p @ q, want)  # f32 sums: the first evaluation is not the exact one


def test_the_isolated_reference_runs_the_exact_evaluation() -> None:
    from compiler.reference import ReferenceProcess

    x, a, b = (t[:128, :128].contiguous() for t in _inputs())
    local = load_module(SOURCE).run("gated", [x, a, b], [64, 128, 128], exact_dots=True)
    with ReferenceProcess() as reference:
        exact, _ = reference.run(SOURCE, "gated", [x, a, b], [64, 128, 128], exact_dots=True)
        plain, _ = reference.run(SOURCE, "gated", [x, a, b], [64, 128, 128])
    assert torch.equal(exact, local)
    assert torch.equal(plain, load_module(SOURCE).run("gated", [x, a, b], [64, 128, 128]))
