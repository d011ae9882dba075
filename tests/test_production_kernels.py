"""Upstream Helion's TPU production kernels (`causal_conv1d` decode, `gdn_decode`, `jagged_hstu_attention` forward)
and its cross-entropy example, written here from their documented behaviour (tests/kernels/production/).

At their production shapes, with their pinned configs, they compile, fit VMEM on v7x with the tensors too large
for VMEM left in HBM and copied by DMA (codegen/dma.py), and, where libtpu is installed, the real TPU compiler
for v7x accepts them. On small inputs they match plain torch in TPU interpret mode through the same DMA copies
(a chip whose default scoped VMEM is 64 KiB makes the small tensors "too large" too).
"""

import dataclasses

import pytest
import torch
from conformance.case import discover, load_case
from conformance.runner import compare
from conftest import MORE_KERNELS
from test_checks_libtpu import libtpu

from compiler.codegen.work import padded_bytes
from compiler.ir.chips import get_chip

PRODUCTION = MORE_KERNELS / "production"
CASES = {p.stem: load_case(p) for p in sorted(PRODUCTION.glob("*.py"))}
V7X = get_chip("v7x")
SMALL_VMEM = dataclasses.replace(V7X, default_scoped_vmem_bytes=64 * 1024)

# kernel, shape set -> (tensors copied by DMA, how: gather / scatter / window_load / window_store)
PRODUCTION_SHAPES = {
    ("causal_conv1d", 0): {("cache", "gather"), ("cache", "scatter")},
    ("gdn_decode", 0): {("state", "gather"), ("state", "scatter")},
    ("jagged_hstu_attention", 0): {("q", "window_load"), ("k", "window_load"), ("v", "window_load"),
                                   ("out", "window_store")},
    ("jagged_hstu_attention", 1): {("q", "window_load"), ("k", "window_load"), ("v", "window_load"),
                                   ("out", "window_store")},
    ("cross_entropy", 1): {("flat", "gather")},
}
SMALL_CONFIGS = {  # several steps per loop (the jagged sequences end inside blocks)
    "causal_conv1d": {"block_sizes": [16]},
    "gdn_decode": {"block_sizes": [8]},
    "jagged_hstu_attention": {"block_sizes": [16, 16]},
    "cross_entropy": {"block_sizes": [16]},
}


def _copies(ck) -> set[tuple[str, str]]:
    """(tensor, kind) of each access the compiled kernel carries out by DMA (from its hovers' plan)."""
    found = set()
    for a in ck.plan.accesses:
        if "by DMA" in a.indexing:
            kind = ("window_load" if "copied in" in a.indexing else "window_store" if "copied out" in a.indexing
                    else "gather" if "gathered" in a.indexing else "scatter")
            found.add((a.tensor, kind))
    return found


@pytest.mark.parametrize("name,shape_set", list(PRODUCTION_SHAPES), ids=[f"{n}-{s}" for n, s in PRODUCTION_SHAPES])
def test_production_shape_fits_v7x_with_copies(name, shape_set):
    case = CASES[name]
    ck = case.kernel.compile(shape_set=shape_set, chip="v7x")
    assert not [d for d in ck.diagnostics if d.is_error], [d.message for d in ck.diagnostics]
    assert ck.vmem.verdict == "fits", ck.vmem.table()  # within v7x's default scoped VMEM (32 MiB)
    assert _copies(ck) == PRODUCTION_SHAPES[(name, shape_set)]
    for call in ck.plan.calls:  # the VMEM those tensors take is their copies' buffers, never the whole array
        whole = [padded_bytes(o.array_shape, getattr(torch, o.dtype)) for o in call.operands if o.memory == "dma"]
        rows = [r for r in ck.vmem.rows if r.call == call.name]
        assert any(r.role.startswith("rows copied") for r in rows)
        assert whole and all(r.bytes < min(whole) for r in rows), ck.vmem.table()
    pinned = case.kernel.decorator_config
    if pinned:
        assert list(ck.config["block_sizes"]) == list(pinned["block_sizes"])


@libtpu
@pytest.mark.parametrize("name,shape_set", [("causal_conv1d", 0), ("gdn_decode", 0), ("jagged_hstu_attention", 0),
                                            ("cross_entropy", 1)])
def test_production_shape_compiles_with_libtpu_for_v7x(name, shape_set):
    ck = CASES[name].kernel.compile(shape_set=shape_set, chip="v7x")
    problems = [d for d in ck.check_tpu_compile() if d.is_error]
    assert not problems, [d.message for d in problems]
    assert ck.truth["libtpu"].facts["vmem_used_bytes"] <= V7X.default_scoped_vmem_bytes


@pytest.mark.parametrize("name", sorted(SMALL_CONFIGS))
def test_small_inputs_match_torch_through_the_copies(name):
    case = CASES[name]
    args = case.make_args()
    specs = dict(zip(case.kernel.params, args, strict=True))
    config = {**(case.kernel.decorator_config or {}), **SMALL_CONFIGS[name]}
    ck = case.kernel.compile(args=specs, config=config, chip=SMALL_VMEM)
    assert _copies(ck) == {(t, k) for (n, _), copies in PRODUCTION_SHAPES.items() if n == name for t, k in copies}
    ran = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    got = ck(*ran)
    expected = case.reference(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    problem = compare(got, expected, case.tolerance)
    assert problem is None, problem


# -- the conformance suite's DMA cases and the one-hot selections they share helpers with (their interpret-mode
# runs are in tests/test_conformance.py; interpret mode cannot see what the TPU rejects, e.g. bf16 in tpu.weird) --

DMA_CASES = {p.stem: load_case(p) for p in discover("dma_")}
ONE_HOT = ("gather_non_finite", "scatter_partial_tile", "scatter_rows_bf16", "rows_view_short_blocks")
DMA_CASES.update({name: load_case(next(p for p in discover(name) if p.stem == name)) for name in ONE_HOT})


def _dma_case_compile(name):
    case = DMA_CASES[name]
    args = case.make_args()
    ck = case.kernel.compile(args=dict(zip(case.kernel.params, args, strict=True)), config=case.configs[0],
                             chip="v7x")
    assert bool(_copies(ck)) == (name not in ONE_HOT), "the case no longer takes the path it covers"
    return ck


@pytest.mark.parametrize("name", sorted(DMA_CASES))
def test_dma_case_lowers_through_mosaic(name):
    ck = _dma_case_compile(name)
    problems = [d for d in ck.check_lowering() if d.is_error]
    assert not problems, [d.message for d in problems]


@libtpu
@pytest.mark.parametrize("name", sorted(DMA_CASES))
def test_dma_case_compiles_with_libtpu_for_v7x(name):
    ck = _dma_case_compile(name)
    problems = [d for d in ck.check_tpu_compile() if d.is_error]
    assert not problems, [d.message for d in problems]


def test_short_blocks_over_a_1d_tensor_read_its_rows_view():
    """`labels[tile_n]` with 16-row blocks (cross entropy at 128k): the 1-D tensors keep the pinned block through
    their [n / 16, 16] views instead of being raised to a 128-row rank-1 block (64 MiB of logits rows)."""
    ck = CASES["cross_entropy"].kernel.compile(shape_set=1, config={"block_sizes": [16]}, chip="v7x")
    assert list(ck.config["block_sizes"]) == [16] and not [d for d in ck.diagnostics if d.code == "HPL205"]
    blocks = {o.tensor: o.block_shape for call in ck.plan.calls for o in call.operands}
    assert blocks["labels_rows"] == (256, 16) and blocks["losses_rows"] == (256, 16)
    assert blocks["logits"] == (16, 131072)
