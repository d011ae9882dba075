"""Custom requests: the generated module of a kernel + shape set, the kernel under the cursor, tuning results.

helion/generatedCode {uri, kernel, shapeSet} -> {uri: "helion-pallas:...", source, sourceMap, kernel, shapeSet,
config, chip, vmem}; a unit not compiled yet is compiled first (off the event loop), one that does not compile
is an error carrying its first diagnostic. Each source map entry {line, range, uri} names the document its range
is in (the file, or a notebook's cell).
helion/kernelAt {uri, position} -> {kernel, shapeSet, uri: the document the kernel belongs to (a notebook for
a cell)} or null. `uri` may be a notebook cell's everywhere: the kernel is the notebook's.
"""

from __future__ import annotations

import logging
import urllib.parse
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path

from ..session.documents import KernelView
from ..wire.transport import Refusal
from .host import Host
from .kernels import current_config, find_kernel, trial_key

log = logging.getLogger(__name__)

SCHEME = "helion-pallas"


class NotCompiled(Refusal):
    MESSAGE = "not compiled"


def _field(params: Any, name: str, default: Any = None) -> Any:
    if isinstance(params, dict):
        return params.get(name, default)
    return getattr(params, name, default)


def generated_uri(uri: str, kernel: str, shape_set: int) -> str:
    path = to_fs_path(uri) or urllib.parse.urlparse(uri).path or "untitled"
    if not path.startswith("/"):
        path = "/" + path
    query = urllib.parse.urlencode({"uri": uri, "kernel": kernel, "shapeSet": str(shape_set)})
    return f"{SCHEME}:{urllib.parse.quote(path)}.{kernel}.{shape_set}.pallas.py?{query}"


def _shape_set(params: Any, view: KernelView) -> int:
    index = _field(params, "shapeSet", 0)
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(view.units):
        raise JsonRpcInvalidParams(f"shapeSet must be 0..{len(view.units) - 1} for {view.name}")
    return index


async def generated_code(ls: Host, params: Any) -> dict[str, Any]:
    uri, kernel = _field(params, "uri"), _field(params, "kernel")
    loaded, view = await find_kernel(ls, uri, kernel)
    index = _shape_set(params, view)
    unit = view.units[index]
    await ls.analyzer.ensure_front(loaded, view, unit)
    hit = ls.analyzer.cache.get("front", unit.key, view)
    if hit is None:
        raise NotCompiled(f"{kernel} (shape set {index}) has not been compiled")
    result, pmap = hit
    ck = result.compiled
    if ck is None:
        first = next((d for d in result.diagnostics if d.is_error), None) or (result.diagnostics or [None])[0]
        detail = f": {first.code}: {first.message}" if first is not None else ""
        raise NotCompiled(f"{kernel} (shape set {index}) does not compile{detail}")
    enc = ls.encoding()
    source_map = []
    for line, rng in ck.source_map:
        shown_in, shown = loaded.layout.range_json(pmap.forward_range(rng), enc)
        source_map.append({"line": line, "range": shown, "uri": shown_in})
    return {
        "uri": generated_uri(loaded.uri, kernel, index),
        "source": ck.source,
        "sourceMap": source_map,
        "kernel": kernel,
        "shapeSet": index,
        "config": ck.config.to_json(),
        "chip": ck.chip.name,
        "vmem": ck.vmem.to_json(),
    }


def kernel_at(ls: Host, params: Any) -> dict[str, Any] | None:
    uri = _field(params, "uri")
    state = ls.analyzer.state(uri) if isinstance(uri, str) else None
    position = _field(params, "position")
    if state is None or state.loaded is None or position is None:
        return None
    loaded = state.loaded
    lsp_pos = types.Position(line=_field(position, "line", 0), character=_field(position, "character", 0))
    pos = loaded.layout.position(uri, lsp_pos, ls.encoding())
    view = loaded.kernel_at(pos) if pos is not None else None
    if view is None:
        return None
    shape_set = next(
        (i for i, r in enumerate(view.shape_set_ranges) if r.start.line <= pos.line <= r.end.line), 0
    )
    return {"kernel": view.name, "shapeSet": shape_set, "uri": loaded.uri}


async def tuning_results(ls: Host, params: Any) -> dict[str, Any]:
    uri, kernel = _field(params, "uri"), _field(params, "kernel")
    loaded, view = await find_kernel(ls, uri, kernel)
    unit = view.units[_shape_set(params, view)]
    store = ls.store_for(ls.settings.for_uri(loaded.uri))
    key = trial_key(unit)
    trials = await ls.pool.call(store.trials, key)
    summaries = await ls.pool.call(store.summaries, [(key, None)])
    _, compiled = current_config(ls, view, unit)

    def rates(seconds: float | None, metrics: dict) -> dict[str, Any]:
        if not seconds or compiled is None:
            return {"tflops": metrics.get("tflops"), "gbps": metrics.get("gbps")}
        plan = compiled.plan
        return {
            "tflops": metrics.get("tflops", plan.flops / seconds / 1e12),
            "gbps": metrics.get("gbps", plan.hbm_bytes / seconds / 1e9),
        }

    out = [
        {
            "config": t.config,
            "seconds": t.seconds,
            **rates(t.seconds, t.metrics),
            "verdict": t.verdict,
            "evaluator": t.evaluator,
            "timestamp": t.timestamp,
        }
        for t in trials
    ]
    summary = summaries.get((key, None))
    best = None
    if summary is not None:
        b = summary.best
        best = {
            "config": b.config,
            "seconds": b.seconds,
            **rates(b.seconds, b.metrics),
            "evaluator": b.evaluator,
        }
    check = summary.check if summary is not None else None
    return {"trials": out, "best": best, "compilerCheck": check.to_json() if check is not None else None}


def register(ls: Host) -> None:
    @ls.feature("helion/generatedCode")
    async def _generated(ls: Host, params: Any) -> dict[str, Any]:
        return await generated_code(ls, params)

    @ls.feature("helion/kernelAt")
    def _kernel_at(ls: Host, params: Any) -> dict[str, Any] | None:
        return kernel_at(ls, params)

    @ls.feature("helion/tuningResults")
    async def _results(ls: Host, params: Any) -> dict[str, Any]:
        return await tuning_results(ls, params)
