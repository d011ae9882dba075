"""Each example beside what a user would otherwise run, on a TPU: XLA's version of the same computation (jnp)
and, where JAX ships one, JAX's own Pallas TPU kernel (`jax.experimental.pallas.ops.tpu`: flash and splash
attention, matmul). Same inputs; each result is checked against ours before any time is printed.

Our kernel runs with the config the model-only tuner picks for the chip, or with `--config NAME=JSON`. Every
function is timed as the tpu evaluator times a config (warm-up, then the best of five loops of calls issued back to
back with one wait each, ~0.5 s), printed as ms, as a ratio to ours (> 1: ours is faster) and, for ours, as a
fraction of the chip's roofline.

    python bench/vs_xla.py [--only attention bmm ...] [--config attention='{"block_sizes": [1, 256, 256]}']
    python bench/vs_xla.py --interpret --tiny      # the same logic on a CPU at tiny shapes (times mean nothing)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


@dataclass(frozen=True)
class Case:
    name: str
    file: str
    kernel: str
    args: str  # full size, as on a shape line
    tiny: str  # the same computation, small enough to interpret
    xla: Callable[..., Any]  # jnp version of the kernel (same arguments, same outputs)


def _attention(q, k, v):
    import jax
    import jax.numpy as jnp

    s = jnp.einsum("bhqd,bhkd->bhqk", q, k, preferred_element_type=jnp.float32) / math.sqrt(q.shape[-1])
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1).astype(v.dtype), v).astype(q.dtype)


def _softmax(x):
    import jax

    return jax.nn.softmax(x.astype("float32"), axis=-1).astype(x.dtype)


def _rms_norm_bwd(grad_out, x, weight, rstd):
    import jax.numpy as jnp

    x_hat = x * rstd
    wg = grad_out * weight
    grad_x = rstd * (wg - x_hat * jnp.mean(wg * x_hat, axis=-1, keepdims=True))
    return grad_x, jnp.sum(grad_out * x_hat, axis=0)


def _matmul(x, y):
    import jax.numpy as jnp

    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


def _bmm(a, b):
    import jax.numpy as jnp

    return jnp.einsum("bmk,bkn->bmn", a, b, preferred_element_type=jnp.float32).astype(a.dtype)


CASES = (
    Case("attention", "examples/attention.py", "attention", "q=bf16[8, 32, 8192, 256], k=bf16[8, 32, 8192, 256], "
         "v=bf16[8, 32, 8192, 256]", "q=f32[1, 2, 256, 128], k=f32[1, 2, 256, 128], v=f32[1, 2, 256, 128]", _attention),
    Case("bmm", "examples/bmm.py", "bmm", "a=bf16[64, 2048, 2048], b=bf16[64, 2048, 2048]",
         "a=bf16[2, 256, 256], b=bf16[2, 256, 256]", _bmm),
    Case("matmul", "bench/kernels/matmul.py", "matmul", "x=bf16[8192, 8192], y=bf16[8192, 8192]",
         "x=bf16[256, 256], y=bf16[256, 256]", _matmul),
    Case("softmax", "examples/softmax.py", "softmax", "x=bf16[65536, 2560]", "x=bf16[256, 256]", _softmax),
    Case("batch_softmax", "examples/batch_softmax.py", "batch_softmax", "x=bf16[64, 2048, 4096]",
         "x=bf16[2, 64, 256]", _softmax),
    Case("rms_norm_bwd", "examples/rms_norm_bwd.py", "rms_norm_bwd", "grad_out=f32[8192, 8192], x=f32[8192, 8192], "
         "weight=f32[8192], rstd=f32[8192, 1]", "grad_out=f32[256, 256], x=f32[256, 256], weight=f32[256], "
         "rstd=f32[256, 1]", _rms_norm_bwd),
    Case("add", "examples/add.py", "add", "x=bf16[16384, 16384], y=bf16[16384, 16384]", "x=bf16[256, 256], "
         "y=bf16[256, 256]", lambda x, y: x + y),
)


def jax_kernels(name: str, interpret: bool) -> dict[str, Callable[..., Any]]:
    """JAX's own Pallas TPU kernels for the same computation, by label (block sizes in the label)."""
    import jax

    out: dict[str, Callable[..., Any]] = {}
    if interpret:  # they run on a TPU only (matmul has no interpret mode; the others' is not TPU interpret mode)
        return out
    if name == "matmul":
        from jax.experimental.pallas.ops.tpu import matmul as pallas_matmul

        for block in (512, 1024):
            out[f"ops.tpu.matmul ({block}, {block})"] = jax.jit(
                lambda x, y, b=block: pallas_matmul.matmul(x, y, block_shape=(b, b), block_k=b))
    if name == "attention":
        from jax.experimental.pallas.ops.tpu import flash_attention as fa
        from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk
        from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sm

        def flash(q, k, v, bq=1024, bk=512):
            sizes = fa.BlockSizes(block_q=bq, block_k_major=bq, block_k=bk, block_b=1)
            return fa.flash_attention(q, k, v, sm_scale=1 / math.sqrt(q.shape[-1]), block_sizes=sizes)

        def splash(q, k, v, block=1024, compute=512):
            heads, length = q.shape[1], q.shape[2]
            mask = sm.MultiHeadMask([sm.FullMask((length, length)) for _ in range(heads)])
            sizes = sk.BlockSizes(block_q=block, block_kv=block, block_kv_compute=compute, block_q_dkv=block,
                                  block_kv_dkv=block, block_kv_dkv_compute=compute)
            kernel = sk.make_splash_mha(mask, head_shards=1, q_seq_shards=1, block_sizes=sizes)
            return jax.vmap(kernel)(q / math.sqrt(q.shape[-1]), k, v)

        out["flash_attention (1024/1024/512)"] = jax.jit(flash)
        # splash's block sizes, the best first (2026-12-05 on the v5e: 108.1, 110.2 and 128.3 ms; larger blocks
        # run out of the scoped VMEM JAX's kernels keep)
        for block, compute in ((1024, 512), (1024, 1024), (512, 512)):
            out[f"splash_attention ({block}, compute {compute})"] = jax.jit(
                lambda q, k, v, b=block, c=compute: splash(q, k, v, b, c))
    return out


def our_config(case: Case, kernel: Any, specs: dict, chip: str, given: dict[str, str], evals: int) -> dict:
    if case.name in given:
        return json.loads(given[case.name])
    from compiler.tune.driver import TuneOptions, tune
    from compiler.tune.evaluators import Problem

    source = (REPO / case.file).read_text()
    result = tune(Problem(source, case.kernel, specs, chip, str(REPO / case.file), None),
                  TuneOptions(max_evals=evals, verify=False))
    return dict(result.best.config)


def run(case: Case, chip: str, interpret: bool, tiny: bool, given: dict[str, str], evals: int) -> list[str]:
    import jax
    import torch

    import compiler
    from compiler.reference import make_inputs
    from compiler.tpu.runtime import to_jax, to_torch, tpu_device
    from compiler.tune.evaluators import time_on_device

    kernel = compiler.load((REPO / case.file).read_text()).kernels[case.kernel]
    specs = kernel.resolve_args(case.tiny if tiny else case.args)
    config = our_config(case, kernel, specs, chip, given, evals)
    ck = kernel.compile(args=specs, config=config, chip=chip)
    device = None if interpret else tpu_device()
    inputs = make_inputs(ck.call_specs, seed=0)
    arrays = [to_jax(t, n, device) for n, t in zip(ck.call_specs, inputs, strict=True)]

    def timed(fn: Callable[..., Any]) -> float:
        """As the tpu evaluator times: warm, then the best of loops of pipelined calls with one wait each."""
        return min(time_on_device(lambda: fn(*arrays))[0])

    ours_fn = compiler.tpu.runtime.load_entry(ck.source, ck.entry)
    if interpret:
        from jax.experimental.pallas import tpu as pltpu

        from compiler.tpu.runtime import chip_context

        with chip_context(ck.chip):
            ours_fn = jax.jit(ours_fn, static_argnames=("interpret",)).lower(
                *arrays, interpret=pltpu.InterpretParams()).compile()
    ours = ours_fn(*arrays)
    ours_s = timed(ours_fn)
    bound = max(ck.plan.flops / ck.chip.bf16_flops, ck.plan.hbm_bytes / ck.chip.hbm_bandwidth)
    lines = [f"{case.name} {case.tiny if tiny else case.args} — ours {ck.config.short()}: {ours_s * 1e3:.3f} ms "
             f"({bound / ours_s:.0%} of the {chip} roofline)"]
    others = {"XLA (jnp)": jax.jit(case.xla)} | jax_kernels(case.name, interpret)
    want = [to_torch(o).float() for o in (ours if isinstance(ours, tuple) else (ours,))]
    for label, fn in others.items():
        try:
            got = fn(*arrays)
            got = [to_torch(o).float() for o in (got if isinstance(got, tuple) else (got,))]
            worst = max(float((g - w).abs().max() / (w.abs().max() + 1e-30)) for g, w in zip(got, want, strict=True))
            if not worst <= (3e-2 if ck.args[next(iter(ck.args))].dtype == torch.bfloat16 else 1e-3):
                lines.append(f"  {label}: DISAGREES with ours (error {worst:.3g} of the largest value); not timed")
                continue
            seconds = timed(fn)
        except Exception as exc:  # noqa: BLE001 - out of HBM / VMEM is a result
            lines.append(f"  {label}: did not run: {type(exc).__name__}: {str(exc).splitlines()[0][:150]}")
            continue
        lines.append(f"  {label}: {seconds * 1e3:.3f} ms — ours is {seconds / ours_s:.2f}x as fast "
                     f"(agree within {worst:.2g})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=[c.name for c in CASES])
    parser.add_argument("--config", action="append", default=[], help="NAME=JSON: our config for that kernel")
    parser.add_argument("--evals", type=int, default=300, help="model evaluations when the tuner picks ours")
    parser.add_argument("--interpret", action="store_true", help="CPU, TPU interpret mode: logic only")
    parser.add_argument("--tiny", action="store_true", help="small shapes")
    parser.add_argument("--chip", help="the chip (default: the TPU jax sees; required with --interpret)")
    ns = parser.parse_args(argv)
    if ns.interpret:
        os.environ["JAX_PLATFORMS"] = "cpu"
        if not ns.chip:
            parser.error("--interpret needs --chip")
    from compiler.tpu.runtime import claim_tpu, machine_chip, tpu_device

    if not ns.interpret and not claim_tpu():
        sys.exit("vs_xla: no TPU here (use --interpret --chip NAME --tiny to exercise the script)")
    chip = ns.chip or machine_chip()
    given = dict(c.split("=", 1) for c in ns.config)
    where = "interpret mode on this CPU (times mean nothing)" if ns.interpret else tpu_device().device_kind
    print(f"{where}; {chip}")
    for case in CASES:
        if ns.only and case.name not in ns.only:
            continue
        for line in run(case, chip, ns.interpret, ns.tiny, given, ns.evals):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
