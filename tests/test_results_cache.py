"""The analysis cache (compiler.results): records keyed by everything they depend on, read back only when
sound, bounded, shared by processes, and never a failure for its caller: damaged rows and files, a
read-only directory and concurrent writers each give correct answers (misses at worst) and a warning."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import pickle
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO
from read_only import make_read_only, make_writable

import compiler
from compiler.ir.specs import format_args
from compiler.results import AnalysisCache, CompiledSnapshot, StageRecord, UnitKey, environment
from compiler.results import keys as result_keys

SOURCE = (EXAMPLES / "attention.py").read_text()


@pytest.fixture(scope="module")
def records() -> list[StageRecord]:
    """The front records of both shape sets of the attention example, as the server makes them."""
    kernel = compiler.load(SOURCE, "attention.py").kernels["attention"]
    node = kernel.definition.node
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    basis = "".join(SOURCE.splitlines(keepends=True)[first : node.end_lineno])
    out = []
    for args in kernel.shape_sets:
        ck = kernel.compile(args=args)
        key = UnitKey(kernel.source_hash, format_args(args), "", "v7x", "attention.py")
        out.append(StageRecord("front", key, tuple(ck.diagnostics), basis, first, CompiledSnapshot.of(ck), 0.01))
    return out


def wanted(records: list[StageRecord]) -> list[tuple[str, UnitKey]]:
    return [(r.stage, r.key) for r in records]


def test_records_round_trip_across_instances(tmp_path, records):
    path = tmp_path / "a.sqlite"
    AnalysisCache(path).put_many(records)
    got = AnalysisCache(path).get_many(wanted(records))
    assert [got[w] for w in wanted(records)] == records
    assert got[wanted(records)[0]].compiled.vmem.total_bytes > 0


def test_every_part_of_the_key_and_the_environment_matter(tmp_path, records, monkeypatch):
    cache = AnalysisCache(tmp_path / "a.sqlite")
    record = records[0]
    cache.put_many([record])
    key = record.key
    for other in (
        UnitKey("0" * 20, key.shape_key, key.config, key.chip, key.file),
        UnitKey(key.source_hash, "q=bf16[8, 8]", key.config, key.chip, key.file),
        UnitKey(key.source_hash, key.shape_key, "helion.Config(block_sizes=[1, 64, 64])", key.chip, key.file),
        UnitKey(key.source_hash, key.shape_key, key.config, "v5e", key.file),
        UnitKey(key.source_hash, key.shape_key, key.config, key.chip, "other.py"),
        UnitKey(key.source_hash, key.shape_key, key.config, key.chip, key.file, "from `f(x)` at line 9 @8:4"),
    ):
        assert cache.get_many([("front", other)]) == {}
    assert cache.get_many([("lower", key)]) == {}
    assert cache.get_many([("front", key)]) == {("front", key): record}
    monkeypatch.setattr(result_keys, "environment", lambda: "another compiler, torch or libtpu")
    assert cache.get_many([("front", key)]) == {}


def test_environment_covers_the_compiler_sources_and_versions():
    env = environment()
    assert len(env) == 32 and env == environment()
    code = "import sys; from compiler.results import environment; print(environment(), 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.split() == [env, "False"]  # the same in every process, and computed without torch


def _rows(path: Path) -> list[tuple[str, bytes, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT key, body, checksum FROM records ORDER BY key").fetchall()


def _set_row(path: Path, key: str, body: bytes, checksum: str | None = None) -> None:
    from compiler.results.cache import _checksum

    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE records SET body = ?, checksum = ? WHERE key = ?", (body, checksum or _checksum(body), key))


def test_a_damaged_row_is_dropped_with_a_warning(tmp_path, records, caplog):
    path = tmp_path / "a.sqlite"
    AnalysisCache(path).put_many(records)
    first = records[0].key.digest("front")
    body = dict((k, b) for k, b, _ in _rows(path))[first]
    _set_row(path, first, body[:-7] + b"garbage", checksum=_rows(path)[0][2])  # bytes changed, checksum kept
    with caplog.at_level(logging.WARNING):
        got = AnalysisCache(path).get_many(wanted(records))
    assert list(got) == [wanted(records)[1]]  # the other record is still good
    assert "damaged" in caplog.text and "checksum" in caplog.text
    assert first not in [k for k, _, _ in _rows(path)]  # deleted, so the next compile replaces it


def test_a_row_holding_another_units_record_is_dropped(tmp_path, records, caplog):
    path = tmp_path / "a.sqlite"
    AnalysisCache(path).put_many(records)
    bodies = dict((k, b) for k, b, _ in _rows(path))
    a, b = (r.key.digest("front") for r in records)
    _set_row(path, a, bodies[b])  # a sound record, under the wrong key (valid checksum)
    with caplog.at_level(logging.WARNING):
        got = AnalysisCache(path).get_many(wanted(records))
    assert list(got) == [wanted(records)[1]] and "holds front of" in caplog.text


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_stored_bytes_never_call_anything(tmp_path, records, caplog, monkeypatch):
    path = tmp_path / "a.sqlite"
    AnalysisCache(path).put_many(records[:1])
    monkeypatch.chdir(tmp_path)
    _set_row(path, records[0].key.digest("front"), zlib.compress(pickle.dumps(_Boom())))
    with caplog.at_level(logging.WARNING):
        assert AnalysisCache(path).get_many(wanted(records)) == {}
    assert not (tmp_path / "pwned").exists() and "not allowed" in caplog.text


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_damaged_file_is_moved_aside_and_replaced(tmp_path, records, caplog, damage):
    path = tmp_path / "a.sqlite"
    AnalysisCache(path).put_many(records)
    data = path.read_bytes()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(data[:1000] if damage == "truncated" else os.urandom(len(data)))
    with caplog.at_level(logging.WARNING):
        cache = AnalysisCache(path)
        assert cache.get_many(wanted(records)) == {}  # lost with the damaged file: misses, never wrong
        cache.put_many(records)
        assert cache.get_many(wanted(records)) == dict(zip(wanted(records), records, strict=True))
    assert "analysis cache" in caplog.text
    assert any(".corrupt-" in p.name for p in tmp_path.iterdir()) or damage == "truncated"


READ_ONLY_CHECK = """
import json, logging, sys
from compiler.results import AnalysisCache, UnitKey
logging.basicConfig(level=logging.WARNING)
keys = [("front", UnitKey(*k)) for k in json.loads(sys.argv[2])]
cache = AnalysisCache(sys.argv[1])
before = sorted(i for i, k in enumerate(keys) if k in cache.get_many(keys))
cache.put_many(cache.get_many(keys[:1]).values())  # a write: dropped, never raised
missing = AnalysisCache(sys.argv[1] + ".none")
print(json.dumps([before, missing.get_many(keys) == {}, cache.problem is not None]))
"""


def test_a_read_only_directory_is_read_but_not_written(tmp_path, records):
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "a.sqlite"
    writer = AnalysisCache(path)
    writer.put_many(records[:1])
    writer.close()
    launcher = make_read_only(folder)
    try:
        keys = json.dumps([[r.key.source_hash, r.key.shape_key, r.key.config, r.key.chip, r.key.file] for r in records])
        out = subprocess.run([*launcher, sys.executable, "-c", READ_ONLY_CHECK, str(path), keys], capture_output=True,
                             text=True, cwd=REPO, check=True)
        assert json.loads(out.stdout) == [[0], True, True]  # the record is read (nothing lost), no crash
        assert "read-only" in out.stderr and "will not be remembered" in out.stderr  # and it is said
    finally:
        make_writable(folder)
    assert AnalysisCache(path).get_many(wanted(records)) == {wanted(records)[0]: records[0]}


def _write_many(path: str, worker: int, start) -> None:
    start.wait(60)
    cache = AnalysisCache(path)
    base = _unit_records()
    for i in range(40):
        cache.put_many([StageRecord(r.stage, UnitKey(f"w{worker}-{i}", r.key.shape_key, "", "v7x", "f.py"),
                                    r.diagnostics, r.basis, r.basis_line, r.compiled) for r in base])
        cache.get_many([("front", UnitKey(f"w{1 - worker}-{i}", base[0].key.shape_key, "", "v7x", "f.py"))])


def _unit_records() -> list[StageRecord]:
    from compiler.support.diagnostics import Position, Range, warning

    diag = warning("HPL301", "needs more than the default scoped VMEM", Range(Position(3, 4), Position(3, 9)))
    return [StageRecord("lower", UnitKey("x", "a=f32[8, 128]", "", "v7x", "f.py"), (diag,), "def f():\n    pass\n", 3)]


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "shared.sqlite"
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    procs = [ctx.Process(target=_write_many, args=(str(path), w, start), daemon=True) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    base = _unit_records()[0]
    keys = [("lower", UnitKey(f"w{w}-{i}", base.key.shape_key, "", "v7x", "f.py")) for w in range(2) for i in range(40)]
    got = AnalysisCache(path).get_many(keys)
    assert len(got) == 80 and all(r.diagnostics == base.diagnostics for r in got.values())


def test_the_file_stays_within_its_bound_least_recently_used_first(tmp_path, records):
    path = tmp_path / "a.sqlite"
    one = len(zlib.compress(pickle.dumps(records[0], protocol=pickle.HIGHEST_PROTOCOL), 1))
    cache = AnalysisCache(path, max_bytes=one * 10)

    def unit(i: int) -> StageRecord:
        r = records[0]
        return StageRecord("front", UnitKey(f"k{i:03d}", r.key.shape_key, "", "v7x", r.key.file), r.diagnostics,
                           r.basis, r.basis_line, r.compiled)

    for i in range(40):
        cache.put_many([unit(i)])
        if i >= 2:  # k000 is read all along, so it is never the least recently used
            with sqlite3.connect(path) as conn:
                conn.execute("UPDATE records SET used = used - 7200 WHERE key != ?", (unit(0).key.digest("front"),))
            cache.get_many([("front", unit(0).key)])
    assert cache.stats()["bytes"] <= one * 10 * 1.05
    kept = cache.get_many([("front", unit(i).key) for i in range(40)])
    assert ("front", unit(0).key) in kept and ("front", unit(39).key) in kept
    assert ("front", unit(5).key) not in kept and 5 <= len(kept) <= 11


def test_reading_needs_no_torch(tmp_path, records):
    path = tmp_path / "a.sqlite"
    AnalysisCache(path).put_many(records)
    code = f"""
import json, sys
from compiler.results import AnalysisCache, UnitKey
keys = [("front", UnitKey(*k)) for k in json.loads(sys.argv[1])]
got = AnalysisCache({str(path)!r}).get_many(keys)
print(json.dumps([len(got), got[keys[0]].compiled.vmem.total_bytes, "torch" in sys.modules]))
"""
    keys = json.dumps([[r.key.source_hash, r.key.shape_key, r.key.config, r.key.chip, r.key.file] for r in records])
    out = subprocess.run([sys.executable, "-c", code, keys], capture_output=True, text=True, cwd=REPO, check=True)
    assert json.loads(out.stdout) == [2, records[0].compiled.vmem.total_bytes, False]
