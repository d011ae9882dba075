"""The compile worker process: the first analysis stage (front end, codegen, VMEM) away from the server.

A compile evaluates the kernel's host code; however bounded that is (compiler/frontend/limits.py), a
process is what can always be stopped: the server kills a worker that outlives its time limit and starts
another, so a pathological file costs one worker, never the server's event loop. Requests and answers are
pickles (see worker_process.py and worker_loop.py):
  {"source", "kernel", "args": {name: spec} | None, "config": {...} | None, "chip", "file": name for headers,
   "notebook": compiler.frontend.notebook.NotebookModule | None (the cells `source` is made of, for line labels)}
  -> {"diagnostics": [Diagnostic], "compiled": compiler.results.CompiledSnapshot | None, "seconds"}
Requests with "kind": "vmem_fixes" ask for verified quick fixes instead (see vmem_fixes.py); "kind":
"call_shapes" ({"source", "file", "notebook"}) for the shape sets the file's calls give kernels without a
shape line (`compiler.frontend.call_shapes.InferredShapes`, which the server passes back to `compiler.load`).
The parsed module of the last few texts is kept, so the kernels of one file are parsed once. Imports only
`compiler` and the server's pure helpers (vmem_fixes, edits); never runs the user's file. The
heavy ones (torch, through the compiler's front end) are imported by `warm_up`, with the
garbage collector off: collections scanning torch's objects mid-import cost ~0.2 s of a cold start.
Run as `python -m helion_ls.workers.compile_worker`.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import time
import traceback
from collections import OrderedDict
from typing import Any

import compiler
from compiler.results import CompiledSnapshot
from compiler.support.diagnostics import Range, error

from .warmup import compile_warm_up
from .worker_loop import serve

log = logging.getLogger(__name__)
MODULES = 4  # parsed texts kept


class Compiler:
    def __init__(self) -> None:
        self._modules: OrderedDict[str, Any] = OrderedDict()

    def module(self, source: str, file: str | None = None, notebook: Any = None, where: str | None = None) -> Any:
        digest = hashlib.sha256(source.encode()).hexdigest() + (file or "") + repr(notebook.cells if notebook else "")
        digest += "\0" + (where or "")
        found = self._modules.get(digest)
        if found is None:
            found = self._modules[digest] = compiler.load(notebook if notebook is not None else source, file,
                                                          where=where)
            while len(self._modules) > MODULES:
                self._modules.popitem(last=False)
        self._modules.move_to_end(digest)
        return found

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        if req.get("kind") == "vmem_fixes":
            return self.fixes(req)
        if req.get("kind") == "call_shapes":
            return self.call_shapes(req)
        start = time.perf_counter()
        compiled = None
        try:
            kernel = self.module(req["source"], req.get("file"), req.get("notebook"), req.get("where")).kernels[req["kernel"]]
            ck = kernel.compile(args=req["args"], config=req["config"], chip=req["chip"])
            diagnostics = list(ck.diagnostics)
            compiled = CompiledSnapshot.of(ck)
            del ck
        except compiler.CompileError as exc:
            diagnostics = list(exc.diagnostics) or [error("HPL900", f"compile failed: {exc}", Range.lines(0))]
        except Exception as exc:  # a compiler bug: one diagnostic, never a dead worker
            log.error("compiler crashed on %s:\n%s", req.get("kernel"), traceback.format_exc())
            diagnostics = [error("HPL900", f"internal compiler error: {type(exc).__name__}: {str(exc)[:300]}",
                                 req.get("decorator_range") or Range.lines(0))]
        gc.collect(1)  # the compile's cyclic garbage is still young: free it now, cheaply
        return {"diagnostics": diagnostics, "compiled": compiled, "seconds": time.perf_counter() - start}


    def call_shapes(self, req: dict[str, Any]) -> dict[str, Any]:
        """The shapes a file's own calls give its kernels without a shape line (for the server, which has no
        torch); the parsed module keeps them for the compiles of the same text that follow."""
        start = time.perf_counter()
        module = self.module(req["source"], req.get("file"), req.get("notebook"), req.get("where"))
        return {"call_shapes": module.call_shapes, "seconds": time.perf_counter() - start}

    def fixes(self, req: dict[str, Any]) -> dict[str, Any]:
        from ..rewrite.vmem_fixes import verified_fixes  # imported by warm_up already: a lookup

        try:
            return verified_fixes(self.module, req)
        except Exception:  # a bug costs the quick fixes, never the worker
            log.error("quick fixes for %s failed:\n%s", req.get("kernel"), traceback.format_exc())
            return {"fixes": [], "seconds": 0.0}
        finally:
            gc.collect(1)


def warm_up() -> None:
    """Pay the imports (the collector is off, see main), then exclude everything alive from garbage
    collection: with torch's millions of objects, each full collection (many per large parse) would
    otherwise cost ~0.3 s."""
    from ..rewrite import vmem_fixes  # noqa: F401  (for fixes)

    compile_warm_up("v7x")
    gc.freeze()
    gc.enable()


def main() -> None:
    gc.disable()  # until warm_up has imported everything and frozen it
    logging.basicConfig(level=logging.WARNING)
    worker = Compiler()
    serve(worker.handle, warm_up)


if __name__ == "__main__":
    main()
