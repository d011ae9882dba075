"""Wiring: the server object, the long-lived parts it owns, and the registration of every feature.

Feature logic lives in `features/`; this module only builds the parts (compile pool, check worker,
analyzer, tuner, store views, watcher, loop monitor, lens refresh pacing) and connects their callbacks to
LSP messages.
"""

from __future__ import annotations

import asyncio
import logging

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from .session.analysis import Analyzer
from .session.chip_times import ChipTimes
from .session.documents import Loaded
from .session.remembered import Remembered
from .session.settings import Settings, SettingsRegistry
from .session.store import StoreView
from .session.trust import refusal
from .session.watch import Watcher
from .wire.lsp import UTF16
from .wire.monitor import LoopMonitor
from .wire.pacing import RefreshPacer
from .wire.transport import Protocol
from .workers.check_client import CheckClient
from .workers.chip_owner import needs_chip
from .workers.compile_pool import CompilePool
from .workers.tuning import Tuner

log = logging.getLogger(__name__)

VERSION = "0.1.0"
REFRESH_TIMEOUT = 10.0  # seconds a client may take to answer workspace/codeLens/refresh
# Jupyter notebooks, every cell (features/notebooks.py): the Python cells are the module, and the others count
# when a cell is named by its number in the notebook.
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[types.NotebookDocumentFilterWithNotebook(notebook="jupyter-notebook")], save=True
)


class HelionServer(LanguageServer):
    def __init__(self, pool: CompilePool | None = None, remembered: Remembered | None = None) -> None:
        super().__init__(
            "helion-ls",
            VERSION,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=NOTEBOOK_SYNC,
            protocol_cls=Protocol,
        )
        self.settings = SettingsRegistry()
        self.pool = pool or CompilePool()  # __main__ starts it before the server's own imports
        self.checks = CheckClient()
        self.remembered = remembered or Remembered(None)  # __main__ gives the user's analysis cache
        self.analyzer = Analyzer(
            self.pool,
            self.checks,
            publish=self.publish,
            on_stage=self.stage_done,
            on_loaded=self._loaded,
            encoding=self.encoding,
            remembered=self.remembered,
        )
        # features.commands connects it to the client; while it tunes, background work waits (foreground.py)
        self.tuner = Tuner(on_change=lambda job: None, foreground=self.pool.foreground, standby=True,
                           needs_chip=lambda spec: needs_chip(spec.kind, spec.evaluator, spec.chip))
        # kernel -> (source hash, client document, diagnostics) of *Check on TPU*, per document (chip_check.py)
        self.chip_verdicts: dict[str, dict[str, tuple[str, str, list[dict]]]] = {}
        self.chip_times = ChipTimes()  # current configs measured on this machine's TPU (features/chip_time.py)
        self._published: dict[str, tuple[int | None, list[dict]]] = {}  # the last analysis publish per document
        self.checker = Tuner(on_change=lambda job: None, limit=1)  # the TPU compiler's checks (features/crosscheck.py)
        self.stores: dict[str, StoreView] = {}
        self.watcher: Watcher | None = None
        self.initialize_answered_at: float | None = None  # set by the stdio transport (handshake.py)
        self.monitor = LoopMonitor()
        self.lenses = RefreshPacer(self.refresh_lenses)  # features call `lenses.changed()`
        self.client_shows_tuning_progress = False  # initializationOptions.clientShowsTuningProgress
        self.client_shows_apply_notice = False  # initializationOptions.clientShowsApplyNotice
        self.workspace_trusted: bool | None = None  # what the editor said; None: it did not say
        self.startup_problems: list[
            str
        ] = []  # settings problems found in initialize, reported once initialized

    def _loaded(self, loaded: Loaded) -> None:
        hashes = {name: view.source_hash for name, view in loaded.kernels.items()}
        for tuner in (self.tuner, self.checker):
            tuner.check_stale(loaded.uri, hashes)
        verdicts = self.chip_verdicts.get(loaded.uri, {})
        for kernel in [k for k, (source_hash, _, _) in verdicts.items() if hashes.get(k) != source_hash]:
            del verdicts[kernel]  # the code they were for is gone: the next publish drops them

    def encoding(self) -> str:
        try:
            chosen = self.workspace.position_encoding or UTF16
        except RuntimeError:  # before initialize
            return UTF16
        return str(getattr(chosen, "value", chosen))  # "utf-8", not "PositionEncodingKind.Utf8"

    def publish(self, uri: str, version: int | None, diagnostics: list[dict]) -> None:
        """`diagnostics` are LSP JSON (compose.py); the verdicts of *Check on TPU* on this document's kernels
        are added (features/chip_check.py)."""
        self._published[uri] = (version, diagnostics)
        shown = [d for verdicts in self.chip_verdicts.values() for _, where, found in verdicts.values()
                 if where == uri for d in found]
        params = {"uri": uri, "diagnostics": diagnostics + shown} | ({"version": version} if version is not None else {})
        self.protocol.notify_json(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, params)

    def republish(self, uri: str) -> None:
        """Publish `uri`'s documents again with the check verdicts as they are now."""
        wheres = {where for _, where, _ in self.chip_verdicts.get(uri, {}).values()} | {uri}
        for where in wheres:
            if where in self._published:
                self.publish(where, *self._published[where])

    def stage_done(self, uri: str, version: int | None, stage: str, final: bool) -> None:
        self.protocol.notify(
            "helion/diagnosticsStage", {"uri": uri, "version": version, "stage": stage, "final": final}
        )
        if stage == "front" and self.analyzer.has_untunable_units(uri):
            self.lenses.changed()  # lenses asked for before the compile finished still offer Tune there
        if final and self.tuner.standby is not None and self.code_execution_refusal(uri) is None:
            self.tuner.standby.want()  # the file is analysed, Tune lenses show: keep a tuner ready (standby.py)

    async def refresh_lenses(self) -> bool:
        """Ask the client to re-request code lenses, if it can; True when it answered."""
        caps = self.client_capabilities.workspace
        if caps is None or caps.code_lens is None or not caps.code_lens.refresh_support:
            return False
        try:
            await asyncio.wait_for(self.workspace_code_lens_refresh_async(None), REFRESH_TIMEOUT)
        except Exception as exc:  # an old or busy client: lenses refresh on the next edit instead
            log.info("codeLens/refresh failed: %r", exc)
            return False
        return True

    def store_for(self, settings: Settings) -> StoreView:
        view = StoreView(settings.store_path)
        if view.path not in self.stores:
            self.stores[view.path] = view
            if self.watcher is not None:
                self.watcher.watch_store(view.path)
        return self.stores[view.path]

    def code_execution_refusal(self, uri: str) -> str | None:
        """Why work that runs the user's code (tuning) may not start for `uri`; None when it may."""
        return refusal(self.settings.for_uri(uri).allow_code_execution, self.workspace_trusted)

    def log_to_client(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        log.info("%s", message)
        self.window_log_message(types.LogMessageParams(type=kind, message=message))

    def tell_user(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        log.info("%s", message)
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    async def close_parts(self, final: bool = False) -> None:
        """Stop everything this server started (tuners, workers, watchers); safe to call twice, never slow
        unless `final` (the process is about to end): then the results still being remembered are written
        (remembered.py: a few seconds at most)."""
        self.pool.shutdown()
        await self.tuner.shutdown()
        await self.checker.shutdown()
        await self.checks.close()
        if self.watcher is not None:
            self.watcher.stop()
        for store in self.stores.values():
            store.close()
        self.monitor.stop()
        if final:
            await asyncio.get_running_loop().run_in_executor(None, self.remembered.close)


def create_server(pool: CompilePool | None = None, remembered: Remembered | None = None) -> HelionServer:
    from .features import (
        chip_check,
        chip_time,
        code_actions,
        codelens,
        commands,
        compiler_check,
        configuration,
        diagnostics,
        generated,
        hover,
        notebooks,
    )

    server = HelionServer(pool, remembered)
    features = (configuration, diagnostics, notebooks, hover, codelens, commands, chip_check, chip_time, compiler_check,
                generated, code_actions)  # chip_check, chip_time after commands: they pass tunings' changes on
    for feature in features:
        feature.register(server)
    return server
