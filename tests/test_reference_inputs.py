"""compiler.reference.make_inputs: random kernel inputs from argument specs."""

from __future__ import annotations

import torch

from compiler.ir.specs import TensorSpec, parse_args_text
from compiler.reference import make_inputs


def test_shapes_dtypes_and_scalars() -> None:
    specs = parse_args_text("x=bf16[4, 8], idx=i32[16], flags=bool[3], n=7, eps=1e-5")
    x, idx, flags, n, eps = make_inputs(specs)
    assert (x.dtype, tuple(x.shape)) == (torch.bfloat16, (4, 8))
    assert idx.dtype == torch.int32 and idx.min() >= -8 and idx.max() <= 8
    assert flags.dtype == torch.bool and tuple(flags.shape) == (3,)
    assert (n, eps) == (7, 1e-5)


def test_floats_are_normal_and_seeded() -> None:
    specs = {"a": TensorSpec(torch.float32, (64, 64))}
    (a,) = make_inputs(specs, seed=3)
    (again,) = make_inputs(specs, seed=3)
    (other,) = make_inputs(specs, seed=4)
    assert torch.equal(a, again) and not torch.equal(a, other)
    assert abs(a.mean().item()) < 0.1 and 0.9 < a.std().item() < 1.1
    assert (a < 0).any()


def test_rstd_and_named_parameters_are_positive() -> None:
    specs = parse_args_text("x=f32[32, 32], rstd=f32[32, 1], scale=f32[32], count=i32[64]")
    x, rstd, scale, count = make_inputs(specs, positive=["scale", "count"])
    assert (x < 0).any()
    assert rstd.min() >= 0.5 and scale.min() >= 0.5 and count.min() >= 1


def test_the_reference_process_draws_the_callers_inputs_and_sends_back_only_what_is_asked() -> None:
    """A correctness check sends the reference process specs and a seed (`Drawn`), not tens of MB of
    tensors: the values it draws — one torch thread, another process — must be the caller's own, and only
    the arguments asked for come back."""
    from compiler.reference import ReferenceProcess
    from compiler.reference.inputs import Drawn

    source = (
        "import helion\nimport helion.language as hl\nimport torch\n\n\n"
        "@helion.kernel(static_shapes=True)\n"
        "def scale_into(x: torch.Tensor, out: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:\n"
        "    for tile in hl.tile(x.size(0)):\n"
        "        out[tile] = x[tile] * 2.0\n"
        "    return x + idx.float().sum()\n"
    )
    specs = parse_args_text("x=bf16[40000], out=bf16[40000], idx=i32[300]")
    x, out, idx = make_inputs(specs, seed=5, positive=["idx"])
    with ReferenceProcess(threads=1) as reference:
        result, args = reference.run(source, "scale_into", Drawn(specs, 5, ("idx",)), block_sizes=[1024],
                                     send_back=[1])
    assert args[0] is None and args[2] is None
    assert torch.equal(args[1], x * 2.0)
    assert torch.equal(result, x + idx.float().sum())
