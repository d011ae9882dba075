"""The analysed kernels of open documents as features look them up: a request's kernel by name
(`find_kernel`), and per shape set (unit) the config it compiles with now and its key in the tuning store."""

from __future__ import annotations

from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from compiler.ir.config import Config
from compiler.tune.keys import TrialKey

from ..session.chip_times import ChipTimeKey
from ..session.documents import KernelView, Loaded, Unit
from .host import Host


async def find_kernel(ls: Host, uri: str, kernel: str) -> tuple[Loaded, KernelView]:
    """The kernel of the open document `uri` (a file, a notebook, or one of its cells: the notebook's)."""
    state = ls.analyzer.state(uri) if isinstance(uri, str) else None
    if state is None:
        raise JsonRpcInvalidParams(f"{uri} is not open")
    loaded = await ls.analyzer.load(state.uri, ls.settings.for_uri(state.uri).chip)
    if loaded is None or kernel not in loaded.kernels:
        raise JsonRpcInvalidParams(f"no Helion kernel {kernel!r} in {uri}")
    return loaded, loaded.kernels[kernel]


def current_config(ls: Host, view: KernelView, unit: Unit) -> tuple[Config | None, Any]:
    """The config the unit compiles with now (decorator or resolved default) and its compiled kernel."""
    hit = ls.analyzer.cache.get("front", unit.key, view)
    compiled = hit[0].compiled if hit else None
    if unit.config is not None:
        return unit.config, compiled
    return (compiled.config if compiled is not None else None), compiled


def trial_key(unit: Unit) -> TrialKey:
    return TrialKey(unit.key.source_hash, unit.key.shape_key, unit.key.chip)


def chip_time_key(unit: Unit, config: Config) -> ChipTimeKey:
    """Where a measurement of `config` on this machine's TPU is remembered (session/chip_times.py)."""
    return (unit.key.source_hash, unit.key.shape_key, unit.key.chip, Config(dict(config)))
