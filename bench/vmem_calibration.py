"""VMEM report vs the real TPU compiler: the estimated total of each config next to the VMEM libtpu says the
kernel uses (or needs, when it runs out). This is where the temporaries factors in
compiler/codegen/work.py come from. Needs libtpu (pip install 'helion-ls[tpu]').

    python bench/vmem_calibration.py [CHIP]     # v7x by default; v5e takes ~10 min (attention 8k, unrolled)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

import compiler  # noqa: E402
from compiler.tpu.libtpu_compile import libtpu_available  # noqa: E402
from compiler.vmem.report import MiB  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CASES = [
    ("attention", 0, {"block_sizes": [1, 512, 512], "pallas_loop_type": "unroll"}),
    ("attention", 0, {"block_sizes": [1, 2048, 1024], "pallas_loop_type": "unroll"}),
    ("attention", 0, {"block_sizes": [1, 2048, 2048], "pallas_loop_type": "unroll"}),
    ("attention", 0, {"block_sizes": [1, 512, 512], "pallas_loop_type": "emit_pipeline"}),
    ("attention", 0, {"block_sizes": [1, 1024, 2048], "pallas_loop_type": "emit_pipeline"}),
    ("attention", 0, {"block_sizes": [1, 2048, 2048], "pallas_loop_type": "emit_pipeline"}),
    ("attention", 0, {"block_sizes": [1, 1024, 1024], "pallas_loop_type": "fori_loop"}),
    ("attention", 1, {"block_sizes": [1, 512, 512], "pallas_loop_type": "unroll", "pallas_load_buffer_count": [2, 1, 1]}),
    ("attention", 1, {"block_sizes": [1, 256, 512], "pallas_loop_type": "unroll", "pallas_load_buffer_count": [2, 1, 1]}),
    # v5e keeps more of an unrolled loop alive than v7x: every K step (trips 4, 8, 16, 32) at several query blocks
    *[("attention", 0, {"block_sizes": [1, q, k], "pallas_loop_type": "unroll"})
      for q, k in ((256, 256), (512, 256), (1024, 256), (2048, 256), (4096, 256), (512, 1024), (1024, 1024),
                   (1024, 512), (2048, 512), (4096, 512), (1024, 2048), (4096, 2048))],
    ("attention", 0, {"block_sizes": [1, 4096, 1024], "loop_orders": [[1, 0]], "pallas_loop_type": "unroll"}),
    *[("attention", 0, {"block_sizes": blocks, "pallas_loop_type": "fori_loop"})
      for blocks in ([1, 4096, 1024], [1, 8192, 512], [1, 8192, 1024], [2, 4096, 1024])],
    # emit_pipeline bodies hold half their carried values beside their largest value (codegen/work.py
    # PIPELINE_CARRY_FACTOR): batched blocks, whose row statistics are [b, q] columns, and single ones
    *[("attention", 0, {"block_sizes": blocks, "pallas_loop_type": "emit_pipeline",
                        **({"pallas_load_buffer_count": buffers} if buffers else {})})
      for blocks, buffers in (([256, 64, 128], [2, 1, 2]), ([64, 128, 128], [2, 1, 1]), ([32, 128, 256], [2, 1, 1]),
                              ([16, 256, 256], None), ([8, 128, 256], [2, 1, 2]), ([4, 512, 512], None),
                              ([2, 512, 1024], [2, 2, 1]), ([1, 1024, 2048], None), ([1, 2048, 2048], None))],
    ("softmax", 0, None),
    ("batch_softmax", 0, None),
    ("bmm", 0, None),
    ("bmm", 0, {"block_sizes": [1, 512, 512, 2048], "pallas_loop_type": "unroll"}),
    ("rms_norm_bwd", 0, None),
    ("add", 1, None),
]


def main() -> int:
    if not libtpu_available():
        print("libtpu is not installed; nothing to compare against")
        return 1
    chip = sys.argv[1] if len(sys.argv) > 1 else "v7x"
    print(f"{'kernel':<14} {'config':<46} {'estimate MiB':>12} {'libtpu MiB':>11} {'ratio':>6}")
    for name, shape_set, config in CASES:
        ck = compiler.load(REPO / "examples" / f"{name}.py").kernels[name].compile(
            shape_set=shape_set, config=config, chip=chip)
        ck.check_tpu_compile()
        truth = ck.truth["libtpu"]
        raw = truth.raw
        real = truth.facts.get("vmem_used_bytes")
        note = ""
        if raw is not None and not raw.ok and raw.kind == "vmem_oom":
            real, note = raw.numbers.get("requested_bytes"), " (OOM: needs)"
        est = ck.vmem.total_bytes / MiB
        ratio = f"{est / (real / MiB):.2f}" if real else "-"
        real_text = f"{real / MiB:.1f}" if real else "-"
        print(f"{name:<14} {ck.config.short():<46} {est:>12.1f} {real_text:>11} {ratio:>6}{note}")
    print(f"estimates for {chip}; libtpu figures from the deviceless compile (inputs it moves to VMEM excluded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
