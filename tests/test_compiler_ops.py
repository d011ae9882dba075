"""Device ops beyond elementwise math: F.pad, torch.cat / torch.stack, torch.gather, torch.topk, hl.rand,
hl.atomic_* (hl.atomic_add also at tensor-valued positions), view_as, starred unpacking. Each matches plain torch in TPU interpret mode and lowers for TPU."""

import math

import pytest
import torch
from torch_check import HEADER, assert_matches_torch, compile_for, kernel_of, specs_of

from compiler import CompileError
from compiler.reference import run_reference
from compiler.tpu.libtpu_compile import libtpu_available

torch.manual_seed(0)

PAD = """
    @helion.kernel()
    def padded(x: torch.Tensor) -> torch.Tensor:
        rows, cols = x.shape
        out = torch.empty([rows, cols + 128], dtype=x.dtype, device=x.device)
        for tile in hl.tile(rows):
            out[tile, :] = torch.nn.functional.pad(x[tile, :], (0, 128), value=FILL)
        return out
"""


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("fill", ["0.0", "float('-inf')"])
def test_pad_lanes(dtype, fill):
    x = torch.randn(16, 128).to(dtype)
    ck = assert_matches_torch(PAD.replace("FILL", fill), [x],
                              lambda x: torch.nn.functional.pad(x, (0, 128), value=eval(fill)), {"block_sizes": [16]})
    assert "jnp.pad(" in ck.source
    assert not ck.check_lowering()


def test_pad_rows_and_columns():
    assert_matches_torch("""
        @helion.kernel()
        def framed(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty([x.size(0), 2, 8 + 4, 128], dtype=x.dtype, device=x.device)
            for t in hl.tile(x.size(0)):
                out[t, :, :, :] = torch.nn.functional.pad(x[t, :, :, :], (0, 64, 3, 1), value=2.5)
            return out
    """, [torch.randn(4, 2, 8, 64)], lambda x: torch.nn.functional.pad(x, (0, 64, 3, 1), value=2.5))


def test_negative_pad_is_diagnosed():
    with pytest.raises(CompileError) as info:
        compile_for(PAD.replace("(0, 128), value=FILL", "(0, -64)").replace("cols + 128", "cols - 64"),
                    [torch.randn(16, 128)])
    assert info.value.diagnostics[0].code == "HPL101" and "negative" in info.value.diagnostics[0].message


def test_cat_columns_of_a_tuple():
    x, y = torch.randn(32, 64).bfloat16(), torch.randn(32, 64).bfloat16()
    ck = assert_matches_torch("""
        @helion.kernel()
        def side_by_side(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            out = torch.empty([x.size(0), x.size(1) + y.size(1)], dtype=x.dtype, device=x.device)
            for rows in hl.tile(x.size(0)):
                out[rows, :] = torch.cat((x[rows, :], y[rows, :]), dim=1)
            return out
    """, [x, y], lambda x, y: torch.cat((x, y), dim=1))
    assert "jnp.concatenate((" in ck.source and not ck.check_lowering()


def test_stack_of_a_list_promotes_like_torch():
    assert_matches_torch("""
        @helion.kernel()
        def pair(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            out = torch.empty([2, x.size(0), x.size(1)], dtype=torch.float32, device=x.device)
            for t in hl.tile(x.size(0)):
                out[:, t, :] = torch.stack([x[t, :], y[t, :] * 2], dim=0)
            return out
    """, [torch.randn(16, 128), torch.randn(16, 128).bfloat16()], lambda x, y: torch.stack([x, y * 2]))


@pytest.mark.parametrize("dim", [0, 1])
def test_gather_along_a_dim(dim):
    x = torch.arange(16 * 128, dtype=torch.float32).reshape(16, 128)
    size = x.shape[dim]
    index = (torch.arange(16)[:, None] * 37 + torch.arange(128)[None, :] * 53) % size
    index[:, 0] = size - 1
    ck = assert_matches_torch(f"""
        @helion.kernel()
        def pick(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(index, dtype=x.dtype)
            for rows in hl.tile(x.size(0), block_size=16):
                out[rows, :] = torch.gather(x[rows, :], {dim}, index[rows, :])
            return out
    """, [x, index.to(torch.int32)], lambda x, i: torch.gather(x, dim, i.long()))
    assert "jnp.take_along_axis(" in ck.source and not ck.check_lowering()


def test_gather_index_of_another_shape_is_diagnosed():
    with pytest.raises(CompileError) as info:
        compile_for("""
            @helion.kernel()
            def pick(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
                out = torch.empty_like(index, dtype=x.dtype)
                for rows in hl.tile(index.size(0)):
                    out[rows, :] = x[rows, :].gather(0, index[rows, :])
                return out
        """, [torch.randn(16, 128), torch.zeros(8, 64, dtype=torch.int32)], {"block_sizes": [8]})
    assert info.value.diagnostics[0].code == "HPL101" and "gather" in info.value.diagnostics[0].message


TOPK = """
    @helion.kernel()
    def best(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values = torch.empty([x.size(0), K], dtype=x.dtype, device=x.device)
        indices = torch.empty([x.size(0), K], dtype=torch.int32, device=x.device)
        for t in hl.tile(x.size(0)):
            v, i = torch.topk(x[t, :], K, dim=-1, largest=LARGEST)
            values[t, :] = v
            indices[t, :] = i
        return values, indices
"""


@pytest.mark.parametrize("largest", [True, False])
def test_topk_values_and_indices(largest):
    x = torch.randn(16, 256)
    x[3, 17] = math.nan  # torch ranks NaN above every number
    x[5, :] = torch.arange(256.0) % 7  # ties: torch picks any of them, we pick the lowest index first
    ck = compile_for(TOPK.replace("K", "8").replace("LARGEST", str(largest)), [x])
    values, indices = ck(x.clone())
    want_values, want_indices = torch.topk(x, 8, largest=largest)
    torch.testing.assert_close(values, want_values, equal_nan=True, rtol=0, atol=0)
    untied = [r for r in range(16) if r != 5]
    assert torch.equal(indices[untied].long(), want_indices[untied])
    torch.testing.assert_close(x.gather(1, indices.long()), values, equal_nan=True, rtol=0, atol=0)
    assert indices[5].tolist() == sorted(indices[5].tolist()) and len(set(indices[5].tolist())) == 8
    assert not ck.check_lowering()
    if libtpu_available():  # a bool loop carry lowered but did not compile: the real compiler is the judge
        assert not [d for d in ck.check_tpu_compile() if d.is_error]


RAND = """
    @helion.kernel()
    def noisy(x: torch.Tensor, seed: int) -> torch.Tensor:
        out = torch.empty_like(x)
        m, n = x.size()
        for tm, tn in hl.tile([m, n]):
            out[tm, tn] = x[tm, tn] + hl.rand([tm, tn], seed=seed)
        return out
"""


def test_rand_is_uniform_and_does_not_depend_on_blocks():
    x = torch.zeros(64, 256)
    kernel = kernel_of(RAND)
    outs = [kernel.compile(args=specs_of(kernel, [x, 7]), config={"block_sizes": b})(x.clone(), 7)
            for b in ([64, 256], [16, 128])]
    assert torch.equal(outs[0], outs[1])
    u = outs[0]
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    assert abs(float(u.mean()) - 0.5) < 0.02 and abs(float(u.std()) - math.sqrt(1 / 12)) < 0.02
    assert len(torch.unique(u)) > 0.99 * u.numel()
    other = kernel.compile(args=specs_of(kernel, [x, 8]), config={"block_sizes": [64, 256]})(x.clone(), 8)
    assert not torch.equal(other, u)  # another seed, other numbers
    # the eager reference draws the same numbers, so `helion-pallas check` can compare them
    ref = run_reference(HEADER + RAND.replace("\n    ", "\n"), "noisy", [x.clone(), 7], block_sizes=[32, 128])
    assert torch.equal(ref, u)


def test_rand_lowers_for_tpu():
    x = torch.zeros(64, 256)
    ck = compile_for(RAND, [x, 3])
    assert "def _uniform(index, seed):" in ck.source and not ck.check_lowering()


def test_atomic_add_into_an_argument():
    assert_matches_torch("""
        @helion.kernel()
        def bump(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            for tile in hl.tile(x.size(0)):
                hl.atomic_add(x, [tile], y[tile])
            return x
    """, [torch.zeros(256), torch.ones(256)], lambda x, y: x.add_(y))


def test_atomic_add_accumulates_over_the_launch_grid():
    ck = assert_matches_torch("""
        @helion.kernel()
        def row_sums(x: torch.Tensor) -> torch.Tensor:
            m, n = x.size()
            out = torch.zeros([m, 128], dtype=torch.float32, device=x.device)
            for tm, tn in hl.tile([m, n], block_size=[8, 128]):
                hl.atomic_add(out, [tm, slice(None)], x[tm, tn])
            return out
    """, [torch.randn(16, 512)], lambda x: x.reshape(16, 4, 128).sum(1), rtol=1e-4, atol=1e-4)
    assert ck.plan.calls[0].dimension_semantics == ("parallel", "arbitrary")
    assert not ck.check_lowering()


def test_atomic_max_returns_the_old_values():
    def torch_fn(x, y):
        old = x.clone()
        x.copy_(torch.maximum(x, y))
        return old

    assert_matches_torch("""
        @helion.kernel()
        def raise_to(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            old = torch.empty_like(x)
            for t in hl.tile(x.size(0)):
                old[t, :] = hl.atomic_max(x, [t, slice(None)], y[t, :])
            return old
    """, [torch.randn(16, 128), torch.randn(16, 128)], torch_fn)


def test_atomic_ops_in_the_eager_reference():
    src = HEADER + """
@helion.kernel()
def swap_in(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    for t in hl.tile(x.size(0)):
        hl.atomic_cas(x, [t], 0.0, y[t])
    return x
"""
    x = torch.tensor([0.0, 1.0, 0.0, 2.0] * 32)
    y = torch.full([128], 9.0)
    want = torch.where(x == 0.0, y, x)
    assert torch.equal(run_reference(src, "swap_in", [x.clone(), y], block_sizes=[128]), want)
    ck = compile_for(src[len(HEADER):], [x, y])
    assert torch.equal(ck(x.clone(), y), want)


SCATTER_ADD = """
@helion.kernel(config=helion.Config(block_sizes=[32, 128]))
def scatter_add(idx: torch.Tensor, vals: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for te, tf in hl.tile(vals.size()):
        hl.atomic_add(out, [idx[te], tf], vals[te, tf])
    return out
"""


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_atomic_add_at_tensor_positions_sums_the_duplicates(dtype):
    """100 rows into 40 (every row given ~2.5 times) in 32 x 128 blocks, ragged on both dims; int32 wraps like
    an int32 atomic. Plain torch: index_add_."""
    idx = torch.randint(0, 40, (100,), dtype=torch.int32)
    if dtype == torch.int32:
        vals, out = (torch.randint(-2**30, 2**30, shape, dtype=dtype) for shape in ((100, 200), (40, 200)))
    else:
        vals, out = (4 * torch.randn(100, 200)).to(dtype), torch.randn(40, 200).to(dtype)
    want = out.long() if dtype == torch.int32 else out.double()
    want = want.index_add_(0, idx.long(), vals.long() if dtype == torch.int32 else vals.double())
    if dtype == torch.int32:
        want = ((want + 2**31) % 2**32 - 2**31).to(dtype)
    tolerance = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.int32: 0}[dtype] * want.double().abs().max().item()
    ck = compile_for(SCATTER_ADD, [idx, vals, out])
    assert not ck.check_lowering()
    got = ck(idx, vals, out.clone())
    torch.testing.assert_close(got.double(), want.double(), rtol=0, atol=tolerance)
    eager = run_reference(HEADER + SCATTER_ADD, "scatter_add", [idx, vals, out.clone()], block_sizes=[32, 128])
    torch.testing.assert_close(eager.double(), want.double(), rtol=0, atol=tolerance)


def test_atomic_add_at_tensor_positions_adds_non_finite_values_like_ieee():
    idx = torch.tensor([0, 1, 1, 2, 2, 3] * 16, dtype=torch.int32)
    vals = torch.tensor([1.0, math.inf, 2.0, math.inf, -math.inf, math.nan] * 16)[:, None].expand(96, 128).contiguous()
    out = torch.zeros(4, 128)
    got = compile_for(SCATTER_ADD, [idx, vals, out])(idx, vals, out.clone())
    want = out.index_add(0, idx.long(), vals)
    torch.testing.assert_close(got, want, equal_nan=True)


def test_other_atomics_at_tensor_positions_are_refused():
    source = """
@helion.kernel()
def scatter_max(idx: torch.Tensor, vals: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for te in hl.tile(vals.size(0)):
        hl.atomic_max(out, [idx[te], slice(None)], vals[te, :])
    return out
"""
    with pytest.raises(CompileError, match="HPL202.*hl.atomic_add can"):
        kernel_of(source).compile(args="idx=i32[64], vals=f32[64, 128], out=f32[8, 128]")


def test_view_as_and_starred_unpacking():
    assert_matches_torch("""
        @helion.kernel()
        def regroup(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            out = torch.empty([x.size(0), *y.shape[1:]], dtype=x.dtype, device=x.device)
            first, *rest = y.shape
            for t in hl.tile(first):
                out[t, :, :] = x[t, :].view_as(y[t, :, :]) * rest[-1]
            return out
    """, [torch.randn(8, 256), torch.randn(8, 2, 128)], lambda x, y: x.view_as(y) * 128)
