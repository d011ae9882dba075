"""Gathers at an index of two or more dims (conformance cases jagged_tile_offsets_gather,
`values[starts[:, None] + k.index[None, :]]`, and gather_middle_dim_2d_index, `table[ta, idx[tb, ts], tc]`):
Mosaic cannot flatten such an index to one dim ("infer-vector-layout: unsupported shape cast", on a TPU v5e and in
libtpu's deviceless compile alike), so `_gather` builds its one-hot rows at the index's own shape and stacks
those. Results match the cases' plain-torch references in interpret mode, and the TPU compiler accepts them."""

import pytest
import torch
from conformance.case import KERNELS_DIR, load_case
from test_checks_libtpu import libtpu

STRATEGIES = ("unroll", "fori_loop", "emit_pipeline")
CASES = ("jagged_tile_offsets_gather", "gather_middle_dim_2d_index")


def compiled(name: str, strategy: str, chip: str = "v7x"):
    case = load_case(KERNELS_DIR / f"{name}.py")
    args = case.make_args()
    config = {**(case.configs[0] if case.configs else {}), "pallas_loop_type": strategy}
    return case, args, case.kernel.compile(args=dict(zip(case.kernel.params, args, strict=False)), config=config,
                                           chip=chip)


@pytest.mark.parametrize("name", CASES)
def test_a_gather_at_a_multi_dim_index_matches_torch(name):
    for strategy in STRATEGIES:
        case, args, ck = compiled(name, strategy)
        assert "_gather(" in ck.source and "one_hot.astype(jnp.float32).reshape(-1, rows)" in ck.source
        torch.testing.assert_close(ck(*[a.clone() for a in args]), case.reference(*args), rtol=1e-5, atol=1e-5)


@libtpu
@pytest.mark.parametrize("name", CASES)
def test_a_gather_at_a_multi_dim_index_compiles_for_the_chip(name):
    """The chip refused both before (HPL401, unsupported shape cast: `idx.reshape(-1)` of a 2-D index)."""
    for strategy in STRATEGIES:
        _, _, ck = compiled(name, strategy, chip="v5e")
        assert [d.message for d in ck.check_tpu_compile() if d.is_error] == [], ck.source
