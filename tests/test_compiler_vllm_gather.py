"""vLLM-style kernels that stopped on two index tensors in one access (HPL202) or that the TPU compiler rejected
after a clean compile (issue 40, item 4), on kernels of our own in their style (tests/kernels/vllm_style/):
group_scaled_cast.py (vLLM's static fp8 quantizer's indexing) and half_rotary.py (its rotary embeddings'
`hl.tile([tokens, half])` over a 64-lane head)."""

import ast
from pathlib import Path

import pytest
import torch
from test_checks_libtpu import libtpu

import compiler
from compiler.check import check_rows
from compiler.reference.prune import kernel_module
from compiler.support.diagnostics import CompileError

KERNELS = Path(__file__).resolve().parent / "kernels" / "vllm_style"
GROUPS = KERNELS / "group_scaled_cast.py"
ROTARY = KERNELS / "half_rotary.py"
GROUP_CASES = ("tokens_16_width_256_gm_-1_gn_-1", "tokens_16_width_256_gm_1_gn_-1", "tokens_16_width_256_gm_-1_gn_1")


def _compiled(path: Path, kernel: str, case: str, chip: str = "v5e"):
    module = compiler.load(str(path))
    module.cases = case
    return module.kernels[kernel].compile(chip=chip, shape_set=0)


@pytest.mark.parametrize("case", GROUP_CASES)
def test_two_broadcast_index_tensors_read_and_write_plain_blocks_and_match_torch(case: str) -> None:
    """`scale[g[:, None], h[None, :]]` and `x[rows[:, None, :, None], cols[None, :, None, :]]`: each index tensor
    varies along dims of its own, so each tensor dim is indexed alone (tiles, windows); no one-hot gather, no
    VMEM copy of the whole tensor. Before: HPL202 (only one tensor-valued index per access)."""
    ck = _compiled(GROUPS, "group_scaled_cast", case)
    assert "_gather(" not in ck.source and "_scatter(" not in ck.source, ck.source
    tokens, gm, gn = 16, *(int(p) for p in case.split("_gm_")[1].split("_gn_"))
    rows, cols = (tokens if gm == -1 else gm), (256 if gn == -1 else gn)
    x = torch.randn(tokens, 256)
    scale = torch.rand(tokens // rows, 256 // cols) + 0.5
    out = torch.zeros(tokens, 256, dtype=torch.bfloat16)
    ck(out, x, scale, rows, cols)
    want = x / scale.repeat_interleave(rows, 0).repeat_interleave(cols, 1)
    torch.testing.assert_close(out.float(), want.bfloat16().float())


ZIPPED = '''
import torch
import helion
import helion.language as hl


# helion: args(x=f32[64, 64], idx=i32[8, 8])
@helion.kernel()
def zipped(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    out = torch.empty([8, 8], dtype=x.dtype, device=x.device)
    for t in hl.tile(8):
        i = idx[t, :]
        out[t, :] = x[i, i + 1]
    return out
'''


def test_index_tensors_along_the_same_dims_are_still_refused_by_name() -> None:
    """Positions zipped along one dim (`x[i, i + 1]`, both [8, 8]) are a true two-dimensional gather: still one
    HPL202 on the access's line."""
    with pytest.raises(CompileError) as err:
        compiler.load(ZIPPED).kernels["zipped"].compile(chip="v5e")
    (d,) = err.value.diagnostics
    assert d.code == "HPL202" and "vary along the same dims" in d.message and d.range.start.line == 12


FP8_CAST = '''
import torch
import helion
import helion.language as hl


# helion: args(x=f32[8, 128], s=f32[8, 1])
@helion.kernel()
def scaled_fp8(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
    for t in hl.tile(x.shape[0]):
        out[t, :] = (x[t, :] / s[t, :]).to(torch.float8_e4m3fn)
    return out
'''


def test_a_cast_to_float8_e4m3fn_saturates_like_torch() -> None:
    """vLLM's static quantizer divides by a given scale and casts without a clamp: a value past 448 is 448 in
    torch (inf too; NaN stays NaN), NaN in a plain jnp cast (the check reported a silent NaN mismatch)."""
    ck = compiler.load(FP8_CAST).kernels["scaled_fp8"].compile(chip="v5e")
    x = torch.randn(8, 128) * 300
    x[0, :4] = torch.tensor([1e4, -1e9, float("inf"), float("nan")])
    s = torch.rand(8, 1) + 0.25
    got = ck(x, s)
    want = (x / s).to(torch.float8_e4m3fn)
    torch.testing.assert_close(got.float(), want.float(), equal_nan=True)


@pytest.mark.parametrize("kernel", ["halves_rotary", "pairs_rotary"])
def test_half_a_head_per_step_reads_the_whole_head_and_matches_torch(kernel: str) -> None:
    """`hl.tile([tokens, half])` over heads of 64 lanes: a block of 32 lanes is neither 128 lanes nor the whole
    dim, so the whole head is the block and the kernel takes its half from it (was HPL401 from libtpu)."""
    ck = _compiled(ROTARY, kernel, "tokens_8")
    assert "pl.BlockSpec((16, 32)" not in ck.source and "pl.BlockSpec((16, 64)" in ck.source, ck.source
    pos = torch.randint(0, 16, (8,))
    x = torch.randn(8, 128)
    table = torch.randn(16, 64)
    got = ck(pos, x, 64, table)
    c, s = table[pos, :32][:, None, :], table[pos, 32:][:, None, :]
    if kernel == "halves_rotary":
        lo, hi = x.view(8, 2, 64)[..., :32], x.view(8, 2, 64)[..., 32:]
        want = torch.cat([lo * c - hi * s, hi * c + lo * s], dim=-1).view(8, 128)
    else:
        even, odd = x.view(8, 2, 32, 2)[..., 0], x.view(8, 2, 32, 2)[..., 1]
        want = torch.stack([even * c - odd * s, odd * c + even * s], dim=-1).view(8, 128)
    torch.testing.assert_close(got, want)


def test_the_reference_of_a_has_helion_guarded_kernel_keeps_only_the_imports_it_reads() -> None:
    """vLLM guards its rotary kernels with `if has_helion():` around `import helion.language as hl` and its
    register module (which imports parts of Helion the reference does not model): the reference keeps `hl`."""
    tree = kernel_module(ast.parse(ROTARY.read_text()), "halves_rotary")
    text = ast.unparse(tree)
    assert "import helion.language as hl" in text and "register_kernel" not in text, text


@libtpu
def test_the_vllm_style_kernels_pass_the_tpu_compile_and_match() -> None:
    """All cases of both files: the deviceless libtpu compile for v5e accepts them and interpret mode matches
    the eager reference (before: HPL202 for every group_scaled_cast case, HPL401 for every rotary one)."""
    for path in (GROUPS, ROTARY):
        report = check_rows(str(path), None, "v5e", ["unroll"], cases="all")
        assert report.rows and all(r.verdict == "ok" for r in report.rows), [(r.kernel, r.verdict) for r in report.rows]
