"""A hostile client, continued (issue 10): many shape sets on one kernel, and Python parsing on two of the
server's threads at once. Real server subprocesses, each test under a `StatsWatch` (helion/stats answered
within a second at every moment)."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest
from conftest import child_pythonpath
from ls_wire import RawServer, StatsWatch

pytestmark = pytest.mark.asyncio(loop_scope="function")

HEADER = "import helion\nimport helion.language as hl\nimport torch\n\n\n"
ADD = """@helion.kernel(static_shapes=True)
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out
"""
SHAPE_SETS = 50
NARROW = [i for i in range(SHAPE_SETS) if i % 10 == 9]  # shape sets whose y is too narrow for x's tiles


def fifty_shape_sets() -> str:
    lines = [
        f"# helion: args(x=f32[{8 * (i + 1)}, 256], y=f32[{8 * (i + 1)}, {128 if i in NARROW else 256}])"
        for i in range(SHAPE_SETS)
    ]
    return HEADER + "\n".join(lines) + "\n" + ADD


async def test_fifty_shape_sets_each_get_their_answer(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    srv = await RawServer.start()
    try:
        await srv.initialize(ws, libtpu=False)
        path = ws / "fifty.py"
        path.write_text(fifty_shape_sets())
        async with StatsWatch(srv.stats):
            uri = srv.open(path)
            diags = await srv.final_diagnostics(uri, timeout=300)
            assert [d["code"] for d in diags] == ["HPL105"], diags
            which = ", ".join(str(i) for i in NARROW)
            assert diags[0]["message"].endswith(f"[shape sets {which}]"), diags[0]["message"]
            assert "spans 256 but dim 1 of this tensor has size 128" in diags[0]["message"]
            assert [r["message"].split(":")[0] for r in diags[0]["relatedInformation"]] == [
                f"shape set {i}" for i in NARROW
            ]
            hover = await srv.request(
                "textDocument/hover",
                {"textDocument": {"uri": uri}, "position": {"line": HEADER.count("\n") + SHAPE_SETS + 1, "character": 5}},
            )
            text = hover["result"]["contents"]["value"]
            assert "pallas_call" in text and "Shape set 0" in text, text
    finally:
        await srv.stop()


# The server parses documents in a thread and, for code actions and hovers, on its event loop. In 3.11 two
# parses at once can fail ("AST constructor recursion depth mismatch"), but only when a thread switch falls
# inside the AST constructor, which is rare. This server switches threads at every garbage collection
# (a collection runs every few thousand allocations, so several times inside each parse of a large file).
SWITCHING_SERVER = [
    sys.executable,
    "-c",
    "import gc, runpy, sys, time\n"
    "gc.callbacks.append(lambda phase, info: time.sleep(0))\n"
    "import helion_ls.workers.warmup\n"
    "helion_ls.workers.warmup.GC_THRESHOLDS = (5000, 10, 10)\n"
    "sys.argv = ['helion_ls', '--log-level', 'INFO']\n"
    "runpy.run_module('helion_ls', run_name='__main__', alter_sys=True)\n",
]
PADDING = "".join(f"def pad_{i}(v, w={i}):\n    return [v * w + k for k in range(w) if k % 3 == {i % 3}]\n\n\n" for i in range(300))


async def test_parsing_on_two_threads_at_once(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    proc = await asyncio.create_subprocess_exec(
        *SWITCHING_SERVER,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": child_pythonpath()},
        start_new_session=True,
        limit=64 * 1024 * 1024,
    )
    srv = RawServer(proc)
    try:
        await srv.initialize(ws, libtpu=False, debounceMs=0, compileOnChange=True)
        fixed = ws / "fixed.py"  # code actions on it parse it on the event loop
        fixed.write_text(HEADER + PADDING + "# helion: args(x=f32[256, 256], y=f32[256, 256])\n" + ADD)
        edited = ws / "edited.py"  # each edit is parsed again in the document thread
        edited.write_text(HEADER + "# helion: args(x=f32[64, 256], y=f32[64, 256])\n" + ADD + PADDING)
        async with StatsWatch(srv.stats):
            fixed_uri, edited_uri = srv.open(fixed), srv.open(edited)
            await srv.final_diagnostics(fixed_uri, timeout=300)
            await srv.final_diagnostics(edited_uri, timeout=300)
            line = (HEADER + PADDING).count("\n") + 2  # `def add(` in fixed.py
            fix = {
                "range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 3}},
                "message": "a block size to change",
                "source": "helion",
                "data": {"kernel": "add", "shapeSets": [0], "block_index": 0, "suggested": 128},
            }
            params = {"textDocument": {"uri": fixed_uri}, "range": fix["range"], "context": {"diagnostics": [fix]}}
            text = edited.read_text()
            answers = []
            for version in range(2, 14):
                text += f"# edit {version}\n"
                srv.notify(
                    "textDocument/didChange",
                    {"textDocument": {"uri": edited_uri, "version": version}, "contentChanges": [{"text": text}]},
                )
                for _ in range(4):
                    answers.append(await srv.request("textDocument/codeAction", params))
            final = await srv.final_diagnostics(edited_uri, version=13, timeout=300)
        assert final == [], final
        failed = [
            d["message"]
            for p in srv.of("textDocument/publishDiagnostics")
            for d in p["diagnostics"]
            if d["code"] == "HPL900" or "SystemError" in d["message"]
        ]
        assert not failed, failed[:3]
        assert all(
            [a["title"] for a in answer.get("result") or []] == ["Use block size 128 for block_sizes[0]"]
            for answer in answers
        ), [a for a in answers if "error" in a][:3]
    finally:
        await srv.stop()
