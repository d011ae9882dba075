"""Files changed outside the editor, as the watcher (watch.py) reports them.

A Python file in the workspace is reanalysed: an open one from its buffer (the client reloads it, so its
didChange is waited for), a closed one from the file; a closed file that never mentions helion is not even
parsed. A tuning store written by another process refreshes the code lenses when its results changed.
"""

from __future__ import annotations

import asyncio
import logging
import os

from pygls.uris import from_fs_path

from ..session.documents import HELION_HINT
from .host import Host
from .scheduling import schedule

log = logging.getLogger(__name__)

EXTERNAL_DELAY = 0.3  # let the client's reload (didChange) arrive first


def external_change(ls: Host, path: str) -> None:
    """A Python file in the workspace changed outside the editor: what it is now is read from the disk."""
    uri = from_fs_path(path)
    if uri is None:
        return
    state = ls.analyzer.docs.get(uri)
    if state is not None and state.open:
        state.force_compile = True
        schedule(ls, uri, compile=True, delay=EXTERNAL_DELAY)
        return
    if not os.path.exists(path):
        ls.analyzer.close(uri)
        return
    asyncio.create_task(_external_closed(ls, uri, path))


async def _external_closed(ls: Host, uri: str, path: str) -> None:
    try:
        text = await ls.pool.call(_read, path)
    except FileNotFoundError:  # deleted since the event
        ls.analyzer.close(uri)
        return
    except OSError as exc:
        log.info("cannot read %s after it changed: %s", path, exc)
        return
    state = ls.analyzer.docs.get(uri)
    if state is not None and state.open:
        return  # opened meanwhile: the editor's text wins
    if state is None and not HELION_HINT.search(text):
        return
    ls.analyzer.update(uri, None, text, is_open=False)
    schedule(ls, uri, compile=True)


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def store_changed(ls: Host, path: str) -> None:
    """The watcher saw the store at `path` change (possibly written by another process)."""
    store = ls.stores.get(path)
    if store is None:
        return

    async def check() -> None:
        if await ls.pool.call(store.changed):
            log.info("tuning store %s changed; refreshing code lenses", path)
            ls.lenses.changed()

    asyncio.create_task(check())
