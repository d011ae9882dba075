"""When a document's analysis runs (see `analysis.py`): `schedule` (re)starts it for the document's current
text, after a delay if asked (the debounce), dropping a pending run for an older text.

Every feature that changes what a document's analysis should see calls it: document and notebook events,
a configuration change, an applied config, a file changed on disk (disk_changes.py).
"""

from __future__ import annotations

import asyncio
import logging

from .host import Host

log = logging.getLogger(__name__)


def schedule(ls: Host, uri: str, compile: bool, delay: float = 0.0) -> None:
    """(Re)start the analysis of `uri`'s current text; a pending one for an older text is dropped."""
    state = ls.analyzer.docs.get(uri)
    if state is None:
        return
    if not state.mentions_helion and not state.published and state.loaded is None:
        return
    if state.pending is not None and not state.pending.done():
        state.pending.cancel()
    state.pending = asyncio.create_task(_run(ls, uri, compile or state.force_compile, delay))


async def _run(ls: Host, uri: str, compile: bool, delay: float) -> None:
    if delay > 0:
        await asyncio.sleep(delay)
    state = ls.analyzer.docs.get(uri)
    if state is None:
        return
    settings = ls.settings.for_uri(uri)
    try:
        if compile:
            state.force_compile = False
            await ls.analyzer.analyze(uri, settings.chip, settings.libtpu)
        else:
            await ls.analyzer.load(uri, settings.chip)
    except asyncio.CancelledError:
        raise
    except Exception:  # a bug here must cost one document's diagnostics, not the server
        log.exception("analysis of %s failed", uri)
    ls.monitor.collect_soon()
