"""Body of the libtpu compile worker process: `python -m compiler.tpu._libtpu_worker`.

Started by `libtpu_compile.TpuCompiler` with the environment libtpu needs (see that module). Protocol: one
JSON request per line on stdin, one JSON reply per line on the original stdout; everything else the process
prints (libtpu logs, stray prints) goes to stderr, so C-level writes cannot corrupt the replies.

Request: {"source", "entry", "filename", "args": [{"shape", "dtype"} | {"static": value} | {"value": list}], "chip",
"dump"} (a static list is a tuple; a "value" is passed as it is, not static).
Reply: the fields of `TpuCompileResult` as JSON (see `libtpu_compile.TpuCompileResult.from_json`).
A schedule worker (SCHEDULE_DIR_ENV set) also replies with each kernel's schedule and simulated cycles; its
address-space limit (MEMORY_LIMIT_ENV) is set before jax is imported.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import resource
import shutil
import sys
import tempfile
import time
from functools import cache
from pathlib import Path
from typing import Any

if os.environ.get("HELION_LIBTPU_MEMORY_LIMIT"):  # before jax and libtpu map anything
    _limit = int(os.environ["HELION_LIBTPU_MEMORY_LIMIT"])
    resource.setrlimit(resource.RLIMIT_AS, (_limit, _limit))

import jax  # noqa: E402
from jax.experimental import topologies  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

from compiler.ir.chips import get_chip  # noqa: E402
from compiler.tpu.libtpu_compile import (
    DUMP_DIR_ENV,
    PROFILE_DIR_ENV,
    READY_LINE,
    SCHEDULE_DIR_ENV,
    classify_compile_error,
    kernel_vmem,
)
from compiler.tpu.llo_dump import custom_call_names, read_cycles, read_schedules  # noqa: E402
from compiler.tpu.mlir_text import SourceLoc, trim_error  # noqa: E402
from compiler.tpu.mosaic_dump import failure_location, read_dumps  # noqa: E402

_MOSAIC_OP = re.compile(
    r'The MLIR operation involved:\s*\n\s*(?:%[\w#:]+ = )?"([\w.]+)"\(.*?(?:-> (\S+))?\s*$', re.M
)


@cache
def _mesh(chip_name: str) -> Mesh:
    chip = get_chip(chip_name)
    topology = topologies.get_topology_desc(chip.topology_name, "tpu", **chip.topology_kwargs)
    return Mesh(topology.devices[:1], ("x",))


def _load(source: str, path: Path) -> Any:
    """Import the generated module from a real file, so jax's source locations point at its lines."""
    path.write_text(source)
    name = f"_helion_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def _rename(loc: SourceLoc | None, path: str, filename: str) -> dict | None:
    """The location with the worker's temporary copy of the module renamed to the caller's filename."""
    if loc is None:
        return None
    return SourceLoc(filename if loc.file == path else loc.file, loc.line, loc.column).to_json()


def _clear(dump_dir: Path) -> None:
    for child in dump_dir.iterdir():
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def _schedule_dirs() -> list[Path]:
    return [Path(os.environ[k]) for k in (SCHEDULE_DIR_ENV, PROFILE_DIR_ENV) if os.environ.get(k)]


def handle(request: dict, workdir: Path, dump_dir: Path, serial: int) -> dict:
    chip = request["chip"]
    reply: dict[str, Any] = {"ok": False, "chip": chip, "stage": "load", "seconds": 0.0}
    for directory in (dump_dir, *_schedule_dirs()):
        _clear(directory)
    path = workdir / f"generated_{serial}.py"
    start = time.perf_counter()
    try:
        module = _load(request["source"], path)
        fn = getattr(module, request["entry"])
        mesh = _mesh(chip)
        sharding = NamedSharding(mesh, PartitionSpec())
        args = [
            (tuple(a["static"]) if isinstance(a["static"], list) else a["static"])
            if "static" in a
            else a["value"]
            if "value" in a
            else jax.ShapeDtypeStruct(tuple(a["shape"]), a["dtype"], sharding=sharding)
            for a in request["args"]
        ]
        static = tuple(i for i, a in enumerate(request["args"]) if "static" in a)
        reply["stage"] = "lowering"
        start = time.perf_counter()
        with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
            lowered = jax.jit(fn, out_shardings=sharding, static_argnums=static).trace(*args).lower()
            reply["stage"] = "compile"
            compiled = lowered.compile()
    except Exception as exc:  # every failure is reported to the parent
        reply["seconds"] = time.perf_counter() - start
        message = str(exc) or type(exc).__name__
        reply["error"] = trim_error(message)
        reply["exception_type"] = type(exc).__name__
        kernels = read_dumps(dump_dir, with_text=request["dump"])
        failed_pass = next((k.failed_pass for k in kernels if k.failed_pass), None)
        if reply["stage"] == "compile":
            reply.update(classify_compile_error(message, failed_pass))
        else:
            reply["kind"] = "other"
        if m := _MOSAIC_OP.search(message):
            reply["mosaic_op"] = m.group(1)
            loc = failure_location(dump_dir, m.group(1), m.group(2))
            reply["location"] = _rename(loc, str(path), request["filename"])
    else:
        reply["seconds"] = time.perf_counter() - start
        reply["ok"] = True
        hlo = compiled.as_text()
        reply.update(kernel_vmem(hlo))
        reply["custom_calls"] = custom_call_names(hlo)
        kernels = read_dumps(dump_dir, with_text=request["dump"])
        if os.environ.get(SCHEDULE_DIR_ENV):
            reply["schedules"] = [k.to_json() for k in read_schedules(Path(os.environ[SCHEDULE_DIR_ENV]))]
        if os.environ.get(PROFILE_DIR_ENV):
            reply["cycles"] = read_cycles(Path(os.environ[PROFILE_DIR_ENV]))
    finally:
        path.unlink(missing_ok=True)
    reply["kernels"] = [k.to_json(with_text=request["dump"]) for k in kernels]
    return reply


def main() -> None:
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    dump_dir = Path(os.environ[DUMP_DIR_ENV])
    workdir = Path(tempfile.mkdtemp(prefix="helion-libtpu-src-"))
    replies.write(READY_LINE)  # imports done: from here a request's time limit counts only its compile
    replies.flush()
    try:
        for serial, line in enumerate(sys.stdin):
            reply = handle(json.loads(line), workdir, dump_dir, serial)
            replies.write(json.dumps(reply) + "\n")
            replies.flush()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
