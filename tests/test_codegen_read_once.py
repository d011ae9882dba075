"""Whole input blocks read inside unrolled loops are read once, before the loops, and a predicated scatter reads
its old block once: fewer copies of the same read for libtpu to compile and for interpret mode to run (upstream
moe_matmul_ogs's unrolled kernel: libtpu's compile past 200 s before, 53 s after)."""

import textwrap

import torch

import compiler

HEADER = "import torch\nimport helion\nimport helion.language as hl\n\n"

PROJECT = """
    @helion.kernel
    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        out = torch.empty([x.size(0), x.size(1), w.size(1)], dtype=x.dtype, device=x.device)
        for b in hl.grid(x.size(0)):
            for t in hl.tile(x.size(1)):
                out[b, t, :] = torch.matmul(x[b, t, :], w[:, :])
        return out
"""
ARGS = "x=f32[2, 32, 128], w=f32[128, 128]"


def compiled(loop_type: str):
    k = compiler.load(HEADER + textwrap.dedent(PROJECT)).kernels["project"]
    return k.compile(args=ARGS, config={"block_sizes": [8], "pallas_loop_type": loop_type}, chip="v5e")


def test_a_whole_input_block_is_read_once_before_an_unrolled_loop():
    ck = compiled("unroll")
    lines = ck.source.splitlines()
    reads = [i for i, line in enumerate(lines) if "w_ref[...]" in line]
    loop = next(i for i, line in enumerate(lines) if "for t in range(4):" in line)
    assert len(reads) == 1 and reads[0] < loop, "\n".join(lines[reads[0] - 2: loop + 4] if reads else lines)
    assert lines[reads[0]].strip().startswith("w_block = w_ref[...]")
    x, w = torch.randn(2, 32, 128), torch.randn(128, 128)
    torch.testing.assert_close(ck(x, w), torch.matmul(x, w), rtol=2e-2, atol=2e-2)


def test_a_rolled_loop_reads_the_block_where_it_did():
    """fori_loop's body is written once: nothing to share, and its code stays as it was."""
    src = compiled("fori_loop").source
    assert "w_block" not in src and src.count("w_ref[...]") == 1


def test_a_predicated_scatter_reads_its_old_block_once():
    k = compiler.load(HEADER + textwrap.dedent("""
        @helion.kernel(static_shapes=False)
        def routed(x: torch.Tensor, w: torch.Tensor, counts: torch.Tensor, starts: torch.Tensor, order: torch.Tensor,
                   most: int) -> torch.Tensor:
            out = torch.zeros([x.size(0), w.size(2)], dtype=x.dtype, device=x.device)
            for e in hl.grid(w.size(0)):
                first = starts[e]
                count = counts[e]
                if count != 0:
                    for t, n in hl.tile([most, w.size(2)]):
                        valid = t.index < count
                        src = order[(first + torch.where(valid, t.index, 0)).squeeze(0)]
                        y = torch.matmul(x[src, :], w[e, :, n])
                        out[src, n] = torch.where(valid.view(-1, 1), y.to(out.dtype), out[src, n])
            return out
    """)).kernels["routed"]
    ck = k.compile(args="x=bf16[64, 128], w=bf16[4, 128, 128], counts=i32[4], starts=i32[5], order=i32[64], most=64",
                   config={"block_sizes": [16, 128], "pallas_loop_type": "fori_loop"}, chip="v5e")
    store = next(line for line in ck.source.splitlines() if "= jnp.where(" in line and "_scatter(" in line)
    # the scatter's old values and those kept where the condition is false: one read, named before the statement
    assert "_scatter(out_block, " in store and store.split("  #")[0].endswith(", out_block)"), store
    assert "out_block = out_out_ref[...]" in ck.source
