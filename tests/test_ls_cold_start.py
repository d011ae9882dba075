"""What keeps a cold compile worker fast: its warm-up and first compiles import neither torch._dynamo nor
jax (together ~1.5 s of a cold start's 2.5 s budget), and skipping dynamo changes no generated code.

Each check runs in a fresh interpreter, since one import anywhere in the test process would hide it."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import EXAMPLES, MORE_KERNELS, REPO

# Warm up as the compile worker does, then compile every kernel of the given files through its handler.
WORKER_COMPILES = """
import json, sys
from pathlib import Path
import compiler
from helion_ls import compile_worker

if sys.argv[1] == "worker":
    compile_worker.warm_up()
compiled = {}
handler = compile_worker.Compiler()
for path in sys.argv[2:]:
    source = Path(path).read_text()
    for name in compiler.load(source, Path(path).name).kernels:
        answer = handler.handle({"source": source, "kernel": name, "args": None, "config": None,
                                 "chip": "v7x", "file": Path(path).name})
        got = answer["compiled"]
        compiled[f"{Path(path).name}:{name}"] = [None if got is None else got.source,
                                                 [d.message for d in answer["diagnostics"]]]
print(json.dumps({"modules": sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "jax")),
                  "compiled": compiled}))
"""


def _compile_in_fresh_process(mode: str, files: list[str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", WORKER_COMPILES, mode, *files],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


FILES = [str(p) for p in sorted(EXAMPLES.glob("*.py")) + sorted(MORE_KERNELS.glob("*.py"))]


def test_worker_warm_up_and_compiles_import_neither_dynamo_nor_jax():
    got = _compile_in_fresh_process("worker", FILES)
    assert "torch" in got["modules"]  # the front end types operations with torch's meta tensors
    assert "torch._dynamo" not in got["modules"]
    assert not [m for m in got["modules"] if m.split(".")[0] == "jax"]
    assert sum(code is not None for code, _ in got["compiled"].values()) >= 20


def test_skipping_dynamo_changes_no_generated_code():
    files = FILES[:: max(1, len(FILES) // 8)]  # a spread of kernels: two fresh interpreters each
    skipped = _compile_in_fresh_process("worker", files)
    plain = _compile_in_fresh_process("plain", files)
    assert "torch._dynamo" in plain["modules"]  # without the skip torch does import it (else this proves nothing)
    assert skipped["compiled"] == plain["compiled"]
    assert sum(code is not None for code, _ in plain["compiled"].values()) >= 5
