"""The workspace watcher (helion_ls/session/watch.py) with real files and a real watchdog observer: a change made
before the folder is watched is still reported, and what a path is now is read from the disk."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from helion_ls.session.watch import Watcher, python_files_changed_since


async def _collect(
    folder: Path, since: float, act=None, delay: float = 0.05, settle: float = 1.5
) -> list[str]:
    seen: list[str] = []
    watcher = Watcher(
        asyncio.get_running_loop(), on_store=lambda _p: None, on_python=seen.append, since=since, delay=delay
    )
    watcher.start()
    try:
        watcher.watch_folder(str(folder))
        if act is not None:
            act()
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        watcher.stop()
    return seen


def test_the_scan_finds_files_changed_since_and_skips_ignored_folders(tmp_path: Path):
    old = tmp_path / "old.py"
    old.write_text("import helion\n")
    os.utime(old, (1_000_000, 1_000_000))
    new = tmp_path / "pkg" / "new.py"
    new.parent.mkdir()
    new.write_text("import helion\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "site.py").write_text("import helion\n")
    (tmp_path / "notes.txt").write_text("helion\n")
    assert list(python_files_changed_since(str(tmp_path), 2_000_000)) == [str(new)]


async def test_a_file_written_before_the_watch_began_is_reported(tmp_path: Path):
    since = time.time() - 2.0
    early = tmp_path / "early_kernel.py"
    early.write_text("import helion\n")  # before the folder is watched: no event will ever say so
    older = tmp_path / "older.py"
    older.write_text("import helion\n")
    os.utime(older, (since - 100, since - 100))
    seen = await _collect(tmp_path, since)
    assert seen == [str(early)]


async def test_a_burst_on_one_path_is_reported_once(tmp_path: Path):
    path = tmp_path / "k.py"

    def burst() -> None:
        for i in range(5):
            path.write_text(f"# {i}\n")
        path.unlink()
        path.write_text("import helion\n")

    seen = await _collect(tmp_path, since=time.time() + 3600, act=burst, delay=0.5, settle=3.0)
    assert seen == [str(path)]
