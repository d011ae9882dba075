"""VMEM quick fixes: seconds to find and verify the fixes for one out-of-VMEM diagnostic, in a warm process
(what a compile worker does when the editor asks for code actions; the server allows 3 s). Each kernel
below is an example with a decorator config that does not fit in v7x VMEM at some shape set.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import compiler  # noqa: E402
from helion_ls.rewrite.vmem_fixes import verified_fixes  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DECORATOR = "@helion.kernel(static_shapes=True)"
CASES = [  # (example, kernel, config keyword)
    ("attention", "attention", 'config=helion.Config(block_sizes=[1, 512, 512], pallas_loop_type="unroll")'),
    ("attention", "attention", "config=helion.Config(block_sizes=[4, 2048, 4096], pallas_loop_type='emit_pipeline')"),
    ("bmm", "bmm", "config=helion.Config(block_sizes=[8, 2048, 2048, 2048])"),
    ("bmm", "bmm", "config=helion.Config(block_sizes=[1, 2048, 2048, 2048])"),
    ("softmax", "softmax", "config=helion.Config(block_sizes=[4096])"),
]


def failing_sets(kernel: compiler.Kernel) -> list[int]:
    out = []
    for i in range(len(kernel.shape_sets)):
        try:
            ck = kernel.compile(shape_set=i, emit=False)
        except compiler.CompileError:
            continue
        if any(d.code == "HPL300" for d in ck.diagnostics):
            out.append(i)
    return out


def main() -> None:
    compiler.load((REPO / "examples" / "add.py").read_text()).kernels["add"].compile(shape_set=0)  # warm up
    print(f"{'example':<10} {'config':<80} {'fixes':>5} {'seconds':>8}")
    for example, name, keyword in CASES:
        text = (REPO / "examples" / f"{example}.py").read_text().replace(DECORATOR, f"{DECORATOR[:-1]}, {keyword})")
        sets = failing_sets(compiler.load(text).kernels[name])
        start = time.perf_counter()
        answer = verified_fixes(compiler.load, {"source": text, "file": f"{example}.py", "kernel": name,
                                                "shape_sets": sets, "chip": "v7x", "budget": 3.0})
        seconds = time.perf_counter() - start
        print(f"{example:<10} {keyword.split('=', 1)[1]:<80} {len(answer['fixes']):>5} {seconds:>8.2f}")
        for fix in answer["fixes"]:
            print(f"{'':<10} {fix['title']}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
