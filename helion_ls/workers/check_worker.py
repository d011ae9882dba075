"""The check worker process: Mosaic lowering and libtpu compile, away from the server.

These stages import jax, may take seconds and may crash or hang inside native code, so they run here,
one request at a time, and the server treats a dead or silent worker as a diagnostic, not a failure.
Protocol: one JSON object per line on stdin -> one per line on the original stdout:
  {"id", "stage": "lower"|"tpu", "source", "path", "kernel", "args": str|null, "config": {...}|null, "chip"}
  -> {"id", "diagnostics": [Diagnostic.to_json(), ...]} | {"id", "error": "traceback"}
Anything jax or libtpu prints goes to stderr (the server's log). Run as `python -m helion_ls.workers.check_worker`.
Imports only `compiler` and `helion_ls.workers.warmup` (never the server), and never executes the user's kernel file.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sys
import traceback
from collections import OrderedDict
from typing import Any

CACHE_SIZE = 16  # compiled kernels kept, so "tpu" after "lower" for the same unit does not recompile
_MODULES: OrderedDict[str, Any] = OrderedDict()  # parsed texts by digest


def _compile(cache: OrderedDict, req: dict[str, Any]) -> Any:
    import compiler

    digest = hashlib.sha256(req["source"].encode()).hexdigest() + "\0" + (req.get("where") or "")
    key = (digest, req["kernel"], req.get("args"), json.dumps(req.get("config"), sort_keys=True), req["chip"])
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    module = _MODULES.get(digest)
    if module is None:  # the kernels of one file arrive one by one: parse the file once
        module = _MODULES[digest] = compiler.load(req["source"], where=req.get("where"))
        while len(_MODULES) > 2:
            _MODULES.popitem(last=False)
    kernel = module.kernels[req["kernel"]]
    compiled = kernel.compile(args=req.get("args"), config=req.get("config"), chip=req["chip"])
    cache[key] = compiled
    if len(cache) > CACHE_SIZE:
        cache.popitem(last=False)
    return compiled


def handle(cache: OrderedDict, req: dict[str, Any]) -> dict[str, Any]:
    import compiler

    try:
        compiled = _compile(cache, req)
    except compiler.CompileError:  # the front stage reports these; nothing to lower
        return {"id": req["id"], "diagnostics": []}
    if req["stage"] == "lower":
        diags = compiled.check_lowering()
    else:
        diags = compiled.check_tpu_compile()
    return {"id": req["id"], "diagnostics": [d.to_json() for d in diags]}


def main() -> None:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # before jax loads: never claim a TPU from here
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints from jax/libtpu must not corrupt the protocol
    sys.stdout = sys.stderr
    from helion_ls.workers.warmup import compile_warm_up

    gc.disable()  # collections scanning torch's and jax's objects mid-import would only slow the imports
    warm = compile_warm_up("v7x")  # pay the imports before the first request, not during it
    if warm is not None:
        warm.check_lowering()
    gc.freeze()  # torch and jax are millions of long-lived objects: keep them out of every collection
    gc.enable()
    cache: OrderedDict = OrderedDict()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            resp = handle(cache, req)
        except Exception:
            resp = {"id": req.get("id"), "error": traceback.format_exc(limit=20)}
        out.write(json.dumps(resp) + "\n")


if __name__ == "__main__":
    main()
