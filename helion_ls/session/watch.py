"""File watching with watchdog: the tuning results store and the workspace's Python files.

The observer runs in its own thread; every event is handed to the event loop and debounced per path, so
a burst of writes (SQLite touches the file, its -wal and -shm) becomes one callback. The store is watched
through its directory, which also catches the file being deleted, replaced or recovered.

An event only says *that* a path changed: what it is now is read from the disk when the debounced callback
runs, so events coalesced or reordered within a burst cannot leave a stale answer. The server answers
`initialize` before it is built (handshake.py), so a file can be written before its folder is watched: once
the watch is in place, a scan reports every Python file changed since then (`since`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Iterator

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

log = logging.getLogger(__name__)

IGNORED_DIRS = {".git", "__pycache__", "node_modules", ".venv", "venv", ".mypy_cache", ".ruff_cache", ".tox"}


class _Forward(FileSystemEventHandler):
    def __init__(self, on_path: Callable[[str], None]):
        self.on_path = on_path

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type in ("opened", "closed_no_write"):
            return
        try:
            self.on_path(os.fsdecode(event.src_path))
            dest = getattr(event, "dest_path", "")
            if dest:
                self.on_path(os.fsdecode(dest))
        except Exception:  # an exception here would end the observer's thread, and every later event with it
            log.exception("watch event %s", event)


def python_files_changed_since(folder: str, since: float) -> Iterator[str]:
    """The Python files under `folder` (ignored directories skipped) modified at or after `since`."""
    for top, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in IGNORED_DIRS]
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(top, name)
                try:
                    if os.stat(path).st_mtime >= since:
                        yield path
                except OSError:  # gone meanwhile
                    continue


class Watcher:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_store: Callable[[str], None],
        on_python: Callable[[str], None],
        since: float,
        delay: float = 0.25,
    ):
        """`since`: when the client was told the server is ready; files changed from then on are reported."""
        self.loop = loop
        self.since = since
        self.on_store = on_store
        self.on_python = on_python
        self.delay = delay
        self._observer = Observer()
        self._observer.daemon = True
        self._stores: dict[str, object] = {}  # store path -> watch
        self._folders: dict[str, object] = {}
        self._timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._started = False

    def start(self) -> None:
        if not self._started:
            self._observer.start()
            self._started = True

    def watch_store(self, path: str) -> None:
        if path in self._stores:
            return
        directory = os.path.dirname(path) or "."
        try:
            os.makedirs(directory, exist_ok=True)
            handler = _Forward(lambda p, store=path: self._store_event(store, p))
            self._stores[path] = self._observer.schedule(handler, directory, recursive=False)
        except OSError as exc:
            log.warning("cannot watch the tuning store at %s: %s", path, exc)

    def watch_folder(self, folder: str) -> None:
        if folder in self._folders or not os.path.isdir(folder):
            return
        try:
            self._folders[folder] = self._observer.schedule(
                _Forward(self._python_event), folder, recursive=True
            )
        except OSError as exc:  # e.g. the inotify watch limit
            log.warning("cannot watch %s for external changes: %s", folder, exc)
            return
        threading.Thread(target=self._catch_up, args=(folder,), name="helion-watch-scan", daemon=True).start()

    def _catch_up(self, folder: str) -> None:
        """Report the files changed between the server's start and the watch (a later event coalesces)."""
        for path in python_files_changed_since(folder, self.since):
            self._python_event(path)

    def stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        if self._started:
            self._observer.stop()  # its threads are daemons: not joined, so `shutdown` never waits on them

    # -- observer thread -> loop -------------------------------------------------------------------
    def _store_event(self, store: str, path: str) -> None:
        if path == store or path.startswith(store + "-") or path.startswith(store + "."):
            self.loop.call_soon_threadsafe(self._debounce, "store", store, lambda: self.on_store(store))

    def _python_event(self, path: str) -> None:
        if not path.endswith(".py") or any(part in IGNORED_DIRS for part in path.split(os.sep)):
            return
        self.loop.call_soon_threadsafe(self._debounce, "python", path, lambda: self.on_python(path))

    def _debounce(self, kind: str, path: str, fire: Callable[[], None]) -> None:
        key = (kind, path)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

        def run() -> None:
            self._timers.pop(key, None)
            try:
                fire()
            except Exception:
                log.exception("watch callback for %s failed", path)

        self._timers[key] = self.loop.call_later(self.delay, run)
