"""Session set-up and settings: initialize, initialized, configuration changes, shutdown, helion/stats."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

from ..session.file_clock import files_clock
from ..session.settings import CLIENT_ANNOUNCEMENTS
from ..session.watch import Watcher
from ..workers.machine_tpu import FALLBACK_CHIP, machine_tpu
from . import disk_changes, scheduling
from .host import Host

log = logging.getLogger(__name__)


def folder_path(uri: str) -> str | None:
    path = to_fs_path(uri)
    return path if path and os.path.isabs(path) else None


def _report(ls: Host, problems: list[str]) -> None:
    for problem in problems:
        ls.tell_user(f"Helion settings: {problem}", types.MessageType.Warning)


async def pull_configuration(ls: Host) -> None:
    """Ask the client for the "helion" section of every workspace folder (and the global one)."""
    caps = ls.client_capabilities.workspace
    if caps is None or not caps.configuration:
        return
    folders = list(ls.workspace.folders.values())
    items = [types.ConfigurationItem(section="helion")]
    items += [types.ConfigurationItem(section="helion", scope_uri=f.uri) for f in folders]
    try:
        values = await ls.workspace_configuration_async(types.ConfigurationParams(items=items))
    except Exception as exc:  # a client that fails this request keeps the initialization options
        log.warning("workspace/configuration failed: %s", exc)
        return
    problems: list[str] = []
    if values and isinstance(values[0], dict):
        problems += ls.settings.set_initial({**ls.settings.initial_raw, **values[0]}, _root(ls))
    for folder, value in zip(folders, values[1:], strict=False):
        problems += ls.settings.set_folder(folder.uri, value, folder_path(folder.uri))
    ls.tuner.set_limit(max(s.max_concurrent_tunings for s in ls.settings.all()))
    for settings in ls.settings.all():
        ls.store_for(settings)
    _report(ls, problems)


def _root(ls: Host) -> str | None:
    root = ls.workspace.root_uri
    return folder_path(root) if root else None


def _start_watching(ls: Host) -> None:
    """Watch the workspace's folders and the tuning stores known so far (store_for adds later ones); files
    written since `initialize` was answered, before the watch was in place, are reported too."""
    if ls.watcher is not None:
        return
    ls.watcher = Watcher(
        asyncio.get_running_loop(),
        on_store=lambda path: disk_changes.store_changed(ls, path),
        on_python=lambda path: disk_changes.external_change(ls, path),
        since=ls.initialize_answered_at or files_clock(),
    )
    ls.watcher.start()
    for store in ls.stores.values():
        ls.watcher.watch_store(store.path)
    folders = [folder_path(folder.uri) for folder in ls.workspace.folders.values()]
    for path in folders or [_root(ls)]:
        if path:
            ls.watcher.watch_folder(path)


def machine_json() -> dict[str, Any]:
    """helion/machine: {chip, deviceKind, count, source, deviceFiles, whyNone, fallbackChip}; chip is None
    on a machine without a TPU, and `auto` then compiles for fallbackChip."""
    return {**machine_tpu().to_json(), "fallbackChip": FALLBACK_CHIP}


def register(ls: Host) -> None:
    @ls.feature(types.INITIALIZE)
    def initialize(ls: Host, params: types.InitializeParams) -> None:
        base = folder_path(params.root_uri) if params.root_uri else None
        options = params.initialization_options
        if isinstance(options, dict):
            ls.client_shows_tuning_progress = options.get("clientShowsTuningProgress") is True
            ls.client_shows_apply_notice = options.get("clientShowsApplyNotice") is True
            trusted = options.get("workspaceTrusted")
            ls.workspace_trusted = trusted if isinstance(trusted, bool) else None
            options = {k: v for k, v in options.items() if k not in CLIENT_ANNOUNCEMENTS}
        ls.startup_problems = ls.settings.set_initial(options, base)
        ls.tuner.set_limit(ls.settings.default.max_concurrent_tunings)
        _start_watching(ls)  # before the answer: a file written once the client is told "ready" is seen

    @ls.feature(types.INITIALIZED)
    async def initialized(ls: Host, params: types.InitializedParams) -> None:
        ls.monitor.start()
        ls.pool.start()  # the compile workers import and warm up meanwhile
        _report(ls, ls.startup_problems)
        ls.store_for(ls.settings.default)
        ls.protocol.notify("helion/machine", machine_json())
        await pull_configuration(ls)

    @ls.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: Host, params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if isinstance(settings, dict) and isinstance(settings.get("helion"), dict):
            _report(ls, ls.settings.set_initial({**ls.settings.initial_raw, **settings["helion"]}, _root(ls)))
        await pull_configuration(ls)
        for uri in list(ls.analyzer.docs):
            scheduling.schedule(ls, uri, compile=True)
        ls.lenses.changed()

    @ls.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def folders_changed(ls: Host, params: types.DidChangeWorkspaceFoldersParams) -> None:
        if ls.watcher is not None:
            for folder in params.event.added:
                path = folder_path(folder.uri)
                if path:
                    ls.watcher.watch_folder(path)
        await pull_configuration(ls)

    @ls.feature("helion/didChangeWorkspaceTrust")
    def trust_changed(ls: Host, params: Any) -> None:
        """{trusted: bool}: the user trusted (or the editor distrusted) the workspace."""
        trusted = getattr(params, "trusted", None)
        if isinstance(trusted, bool) and trusted != ls.workspace_trusted:
            log.info("workspace trust is now %s", trusted)
            ls.workspace_trusted = trusted
            ls.lenses.changed()

    @ls.feature(types.SHUTDOWN)
    async def shutdown(ls: Host, params: Any) -> None:
        await ls.close_parts()

    @ls.feature("helion/machine")
    def machine(ls: Host, params: Any) -> dict:
        """This machine's TPU as the server found it (machine_tpu.py): what `helion.chip: auto` means."""
        return machine_json()

    @ls.feature("helion/stats")
    def stats(ls: Host, params: Any) -> dict:
        """Loop lag, memory and cache sizes; `{"reset": true}` clears the lag record after answering."""
        out = ls.monitor.stats()
        if params is not None and getattr(params, "reset", False):
            ls.monitor.reset()
        out["compiledUnits"] = len(ls.analyzer.cache.stages["front"])
        out["counts"] = {**ls.analyzer.counts, "compiles": ls.pool.submitted, "compileFailures": ls.pool.failures}
        out["compileWorkerPids"] = ls.pool.pids
        out["openDocuments"] = sum(1 for d in ls.analyzer.docs.values() if d.open)
        out["finalVersions"] = {uri: d.final_version for uri, d in ls.analyzer.docs.items()}
        out["torchImported"] = "torch" in sys.modules  # the server never needs it: its workers compile
        out["checkWorkerPid"] = ls.checks.pid
        out["checkWorkerRestarts"] = ls.checks.restarts
        out["checkWorkerBusy"] = ls.checks.busy
        out["foreground"] = {"jobs": ls.pool.foreground.jobs, "waiting": list(ls.pool.foreground.waiting)}
        if (standby := ls.tuner.standby) is not None:
            out["standbyTuner"] = {"pid": standby.pid, "served": standby.served}
        cache = ls.remembered.cache
        out["remembered"] = {"path": str(cache.path) if cache is not None and cache.path else None,
                             "problem": cache.problem if cache is not None else None,
                             "written": ls.remembered.written}
        out["tuners"] = [
            {"uri": j.spec.uri, "kernel": j.spec.kernel, "shapeSet": j.spec.shape_set, "pid": j.proc.pid}
            for j in ls.tuner.active()
            if j.proc is not None
        ]
        return out
