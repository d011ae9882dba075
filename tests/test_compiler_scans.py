"""`torch.cumsum` / `cumprod`, `hl.cumsum` / `hl.cumprod`, `hl.associative_scan` and `hl.reduce`: a log-step scan with pltpu.roll (jnp.cumsum has no
Mosaic lowering), masked where its dim holds positions outside the range (a device-bounded window starts before its
step's rows; a reverse scan's ragged last tile holds them before its valid positions)."""

import textwrap

import pytest
import torch

import compiler

HEADER = "import torch\nimport helion\nimport helion.language as hl\n\n"

SEGMENT_CUMSUM = """
    @helion.kernel()
    def segment_cumsum(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        for g in hl.grid(offsets.size(0) - 1):
            lo = offsets[g]
            hi = offsets[g + 1]
            above = hl.zeros([x.size(1)], dtype=torch.float32)
            for t in hl.tile(lo, hi):
                block = x[t, :]
                out[t, :] = torch.cumsum(block, dim=0) + above[None, :]
                above = above + block.sum(dim=0)
        return out
"""


def kernel(source: str):
    return next(iter(compiler.load(HEADER + textwrap.dedent(source)).kernels.values()))


@pytest.mark.parametrize("strategy", ["unroll", "fori_loop"])
def test_segment_cumsum_restarts_at_each_segment(strategy):
    """Segments of 5, 0, 14 and 21 rows in blocks of 8: a window clamped at the end of the 40 rows starts inside
    the previous segment, whose rows must not enter the running sum."""
    x = torch.randn(40, 128)
    offsets = torch.tensor([0, 5, 5, 19, 40], dtype=torch.int32)
    ck = kernel(SEGMENT_CUMSUM).compile(args="x=f32[40, 128], offsets=i32[5]",
                                        config={"block_sizes": [8], "pallas_loop_type": strategy})
    assert ck.check_lowering() == [], ck.source
    out = ck(x.clone(), offsets)
    want = torch.cat([x[a:b].cumsum(0) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)])
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
    assert "_prefix(jnp.where(" in ck.source and "pltpu.roll(" in ck.source


def test_cumprod_along_lanes_lowers_and_matches():
    source = """
        @helion.kernel()
        def running_product(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tm in hl.tile(x.size(0)):
                out[tm, :] = torch.cumprod(x[tm, :], dim=1)
            return out
    """
    x = 1.0 + 0.01 * torch.randn(16, 256)
    ck = kernel(source).compile(args="x=f32[16, 256]", config={"block_sizes": [8]})
    assert ck.check_lowering() == [], ck.source
    torch.testing.assert_close(ck(x.clone()), x.cumprod(1), rtol=1e-4, atol=1e-5)


HL_SCAN = """
    @helion.kernel()
    def scan(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tm, tn in hl.tile(x.size()):
            out[tm, tn] = hl.{fn}(x[tm, tn], {dim}, reverse={reverse})
        return out
"""


def _blockwise(x: torch.Tensor, fn, dim: int, block: int, reverse: bool) -> torch.Tensor:
    """Plain torch: the scan restarts at every block of `dim` (each tile scans its own block)."""
    parts = [x.narrow(dim, s, min(block, x.size(dim) - s)) for s in range(0, x.size(dim), block)]
    return torch.cat([fn(p.flip(dim), dim).flip(dim) if reverse else fn(p, dim) for p in parts], dim)


@pytest.mark.parametrize(("fn", "dim", "reverse", "dtype"), [
    ("cumsum", 1, True, torch.float32),   # lanes, from the end: the ragged last tile (300 = 2 * 128 + 44)
    ("cumsum", 0, True, torch.float32),   # sublanes, from the end: 100 rows in blocks of 64
    ("cumprod", 1, True, torch.float32),
    ("cumsum", 1, False, torch.int32),    # hl.cumsum keeps int32 (torch.cumsum would give int64)
    ("cumsum", 0, True, torch.bfloat16),
])
def test_hl_scan_matches_plain_torch_on_ragged_tiles(fn, dim, reverse, dtype):
    source = HL_SCAN.format(fn=fn, dim=dim, reverse=reverse)
    ck = kernel(source).compile(args=f"x={str(dtype).removeprefix('torch.')}[100, 300]",
                                config={"block_sizes": [64, 128]})
    assert ck.check_lowering() == [], ck.source
    if dtype == torch.int32:
        x = torch.randint(-3, 4, (100, 300), dtype=dtype)
    else:
        x = (0.9 + 0.2 * torch.rand(100, 300)).to(dtype)
    got = ck(x.clone())
    assert got.dtype == dtype
    want = _blockwise(x.double(), getattr(torch, fn), dim, 64 if dim == 0 else 128, reverse)
    tolerance = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.int32: 0}[dtype]
    torch.testing.assert_close(got.double(), want, rtol=tolerance, atol=tolerance * want.abs().max().item())
    assert ("reverse=True)" in ck.source) == reverse and "_prefix(" in ck.source


def test_hl_scan_eager_reference_matches_plain_torch():
    from compiler.reference import run_reference

    source = HEADER + textwrap.dedent(HL_SCAN.format(fn="cumsum", dim=1, reverse=True))
    x = torch.randn(100, 300)
    got = run_reference(source, "scan", [x], block_sizes=[64, 128])
    torch.testing.assert_close(got, _blockwise(x, torch.cumsum, 1, 128, True), rtol=1e-5, atol=1e-5)


COMBINES = """
def add_fn(a, b):
    return a + b


def max_fn(a, b):
    return torch.maximum(a, b)


def segment_fn(left_values, left_ids, right_values, right_ids):
    return torch.where(left_ids == right_ids, left_values + right_values, right_values), right_ids


def affine_fn(left, right):  # x -> a * x + b, `left` applied first: not commutative
    return right[0] * left[0], right[0] * left[1] + right[1]
"""

ASSOCIATIVE = COMBINES + """

@helion.kernel()
def scans(x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    total, peak, segment, affine = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        xb = x[tm, tn]
        total[tm, tn] = hl.associative_scan(add_fn, xb, {dim}, reverse={reverse})
        peak[tm, tn] = hl.associative_scan(max_fn, xb, dim={dim}, reverse={reverse})
        values, _ = hl.associative_scan(segment_fn, (xb, ids[tm, tn].float()), {dim}, {reverse})
        segment[tm, tn] = values
        _, shifted = hl.associative_scan(affine_fn, (0.5 + 0.25 * xb, xb), {dim}, reverse={reverse})
        affine[tm, tn] = shifted
    return total, peak, segment, affine
"""


def _sequential(x: torch.Tensor, ids: torch.Tensor, dim: int, reverse: bool) -> list[torch.Tensor]:
    """Plain torch, one position after another with the running value on the left (upstream's meaning)."""
    n = x.size(dim)
    rows: list[list[torch.Tensor]] = [[], [], [], []]
    acc = None
    for k in (reversed(range(n)) if reverse else range(n)):
        v, i = x.select(dim, k), ids.select(dim, k).float()
        a = 0.5 + 0.25 * v
        if acc is None:
            acc = (v, v, (v, i), (a, v))
        else:
            total, peak, (sv, si), (fa, fb) = acc
            acc = (total + v, torch.maximum(peak, v), (torch.where(si == i, sv + v, v), i), (a * fa, a * fb + v))
        rows[0].append(acc[0])
        rows[1].append(acc[1])
        rows[2].append(acc[2][0])
        rows[3].append(acc[3][1])
    if reverse:
        rows = [r[::-1] for r in rows]
    return [torch.stack(r, dim) for r in rows]


@pytest.mark.parametrize(("dim", "reverse"), [(1, False), (1, True), (0, False), (0, True)])
def test_associative_scan_matches_sequential_torch_on_ragged_tiles(dim, reverse):
    """100 x 300 in 64 x 128 blocks: ragged on both dims; the padding (NaN in interpret mode) must never enter a
    combine, in either direction, and tuple scans (unpacked and tuple-style combine functions) keep their pairs."""
    source = HEADER + textwrap.dedent(ASSOCIATIVE.format(dim=dim, reverse=reverse))
    ck = compiler.load(source).kernels["scans"].compile(args="x=f32[100, 300], ids=i32[100, 300]",
                                                        config={"block_sizes": [64, 128]})
    assert ck.check_lowering() == [], ck.source
    x = torch.randn(100, 300)
    ids = torch.randint(0, 2, (100, 300)).cumsum(dim).to(torch.int32) // 3  # runs of equal ids
    block = 64 if dim == 0 else 128
    parts = [_sequential(x.narrow(dim, s, min(block, x.size(dim) - s)), ids.narrow(dim, s, min(block, x.size(dim) - s)),
                         dim, reverse) for s in range(0, x.size(dim), block)]
    want = [torch.cat([p[j] for p in parts], dim) for j in range(4)]
    for got, expected in zip(ck(x.clone(), ids.clone()), want, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    from compiler.reference import run_reference

    eager = run_reference(source, "scans", [x.clone(), ids.clone()], block_sizes=[64, 128])
    for got, expected in zip(eager, want, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_associative_scan_in_a_device_bounded_window():
    """The window clamped at the end of the rows starts inside the previous segment: those rows are not valid
    positions of this step and must not enter the scan (there is no identity to pad them with)."""
    source = COMBINES + """

@helion.kernel()
def segment_scan(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for g in hl.grid(offsets.size(0) - 1):
        for t in hl.tile(offsets[g], offsets[g + 1]):
            out[t, :] = hl.associative_scan(max_fn, x[t, :], 0)
    return out
"""
    x = torch.randn(40, 128)
    offsets = torch.tensor([0, 5, 5, 19, 40], dtype=torch.int32)
    ck = compiler.load(HEADER + source).kernels["segment_scan"].compile(args="x=f32[40, 128], offsets=i32[5]",
                                                                      config={"block_sizes": [8]})
    assert ck.check_lowering() == [], ck.source
    want = torch.cat([torch.cat([x[s:min(s + 8, b)].cummax(0).values for s in range(a, b, 8)])
                      for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True) if b > a])
    torch.testing.assert_close(ck(x.clone(), offsets), want)


@pytest.mark.parametrize(("call", "message"), [
    ("hl.associative_scan(add_fn, (x[tm, :], x[tm, :64]), 1)", "must have one shape"),
    ("hl.associative_scan(add_fn, (x[tm, :], x[tm, :]), 1)[0]", "must return 2 tensors"),  # tuple + tuple: 4
    ("hl.associative_scan(add_fn, x[tm, :], 1, reverse=x[tm, :].sum() > 0)", "reverse must be a constant"),
    ("hl.cumsum(x[tm, :], 1, reverse=x[tm, :].sum() > 0)", "reverse must be a constant"),
])
def test_scan_misuse_is_diagnosed(call, message):
    source = COMBINES + f"""

@helion.kernel()
def bad(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in hl.tile(x.size(0)):
        out[tm, :] = {call}
    return out
"""
    with pytest.raises(compiler.CompileError, match=message):
        compiler.load(HEADER + source).kernels["bad"].compile(args="x=f32[16, 128]")


def test_torch_scan_is_helion_scan_in_a_kernel():
    """Upstream kernels call `torch._higher_order_ops.associative_scan` (upstream replaces it by
    hl.associative_scan); torch's own needs a GPU, so the eager reference stands in for it too."""
    source = COMBINES + """

@helion.kernel()
def torch_scan(x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in hl.tile(x.size(0)):
        values, _ = torch._higher_order_ops.associative_scan(segment_fn, (x[tm, :], ids[tm, :].float()), 1)
        out[tm, :] = values
    return out
"""
    x = torch.randn(16, 256)
    ids = torch.randint(0, 2, (16, 256)).cumsum(1).to(torch.int32) // 3
    want = _sequential(x, ids, 1, False)[2]
    ck = compiler.load(HEADER + source).kernels["torch_scan"].compile(args="x=f32[16, 256], ids=i32[16, 256]",
                                                                    config={"block_sizes": [8]})
    torch.testing.assert_close(ck(x.clone(), ids.clone()), want, rtol=1e-4, atol=1e-4)
    from compiler.reference import run_reference

    torch.testing.assert_close(run_reference(HEADER + source, "torch_scan", [x, ids], [8]), want, rtol=1e-5, atol=1e-5)


REDUCE = COMBINES + """

def argmax_fn(left_value, left_index, right_value, right_index):
    take = (right_value > left_value) | ((right_value == left_value) & (right_index < left_index))
    return torch.where(take, right_value, left_value), torch.where(take, right_index, left_index)


@helion.kernel(config=helion.Config(block_sizes=[64, 128]))
def reductions(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    sums = torch.zeros([x.size(1)], dtype=x.dtype, device=x.device)
    peaks = torch.full([x.size(1)], float("-inf"), dtype=x.dtype, device=x.device)
    per_block = torch.zeros([2, x.size(1)], dtype=x.dtype, device=x.device)
    where = torch.zeros([2, 1, x.size(1)], dtype=torch.int32, device=x.device)
    for tm, tn in hl.tile(x.size()):
        block = x[tm, tn]
        hl.atomic_add(sums, [tn], hl.reduce(add_fn, block, 0))
        hl.atomic_max(peaks, [tn], hl.reduce(max_fn, block, dim=0, other=float("-inf")))
        per_block[tm.id, tn] = hl.reduce(add_fn, block, dim=0)
        rows = (tm.index[:, None] + 0 * tn.index[None, :]).float()
        _, at = hl.reduce(argmax_fn, (block, rows), 0, other=(float("-inf"), -1.0), keep_dims=True)
        where[tm.id, :, tn] = at.to(torch.int32)
    return sums, peaks, per_block, where
"""


def test_reduce_with_a_combine_function_on_ragged_tiles():
    """100 x 300 in 64 x 128 blocks: the second row block holds 36 rows and 28 of padding (NaN in interpret mode),
    which must not enter any combine; a tuple reduction (argmax) keeps its pairs and its size-1 dim."""
    source = HEADER + textwrap.dedent(REDUCE)
    ck = compiler.load(source).kernels["reductions"].compile(args="x=f32[100, 300]")
    assert ck.check_lowering() == [], ck.source
    x = torch.randn(100, 300)
    halves = (x[:64], x[64:])
    want = (x.sum(0), x.amax(0), torch.stack([h.sum(0) for h in halves]),
            torch.stack([halves[0].argmax(0), 64 + halves[1].argmax(0)]).to(torch.int32)[:, None, :])
    from compiler.reference import run_reference

    for got in (ck(x), run_reference(source, "reductions", [x], block_sizes=[64, 128])):
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
