"""The tuning results store: keys, best() ordering, several writer processes, recovery from damaged files."""

from __future__ import annotations

import ast
import copy
import fcntl
import logging
import multiprocessing
import multiprocessing.connection
import multiprocessing.synchronize
import os
import pickle
import sqlite3
import threading
from pathlib import Path

import pytest
from conftest import kernel_files

from compiler.frontend.module import normal_dump
from compiler.tune.keys import COMPILER_VERSION, TrialKey, normalized_source_hash, shape_key
from compiler.tune.store import StoreError, TuningStore, default_store_path

KEY = TrialKey("abc123", "x=f32[1024, 1024]", "v7x", "model")


def corrupt_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if ".corrupt-" in p.name)


# ---- keys -------------------------------------------------------------------------------------------------

KERNEL = '''
@helion.kernel(config=helion.Config(block_sizes=[64]), static_shapes=True)
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Adds."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] + y[tile]
    return out
'''

HELPER = """
def helper(a):
    return a * 2
"""


def test_source_hash_ignores_layout_comments_docstrings_and_decorator_config():
    base = normalized_source_hash([KERNEL, HELPER])
    reformatted = (
        KERNEL.replace('    """Adds."""\n', "")
        .replace("x[tile] + y[tile]", "x[tile]  +  y[tile]   # sum")
        .replace("config=helion.Config(block_sizes=[64]), ", "config=helion.Config(block_sizes=[128]), ")
    )
    indented = "\n".join("    " + line for line in HELPER.splitlines())
    assert normalized_source_hash([indented, "\n\n" + reformatted]) == base


def test_source_hash_is_the_same_for_a_bare_decorator_and_one_given_a_config():
    """Apply turns `@helion.kernel` into `@helion.kernel(config=...)`: the tuned results must stay attached."""
    bare = KERNEL.replace("@helion.kernel(config=helion.Config(block_sizes=[64]), static_shapes=True)", "@helion.kernel")
    called = bare.replace("@helion.kernel", "@helion.kernel()")
    applied = bare.replace("@helion.kernel", "@helion.kernel(config=helion.Config(block_sizes=[128]))")
    per_set = bare.replace("@helion.kernel", "@helion.kernel(configs=[helion.Config(block_sizes=[128])])")
    base = normalized_source_hash([bare])
    assert normalized_source_hash([called]) == normalized_source_hash([applied]) == base
    assert normalized_source_hash([per_set]) == base
    assert normalized_source_hash([bare.replace("@helion.kernel", "@helion.kernel(static_shapes=True)")]) != base


def test_source_hash_changes_with_semantics():
    base = normalized_source_hash([KERNEL, HELPER])
    assert normalized_source_hash([KERNEL.replace("x[tile] + y[tile]", "x[tile] - y[tile]"), HELPER]) != base
    assert normalized_source_hash([KERNEL, HELPER.replace("2", "3")]) != base
    assert (
        normalized_source_hash([KERNEL.replace("static_shapes=True", "static_shapes=False"), HELPER]) != base
    )
    assert normalized_source_hash([KERNEL]) != base


class _CopyingNormaliser(ast.NodeTransformer):
    """The normalisation spelt out on a copy of the tree: the oracle for the in-place `normal_dump`."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(
                body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        decorators = []
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call):
                deco.keywords = [kw for kw in deco.keywords if kw.arg not in ("config", "configs")]
                if not deco.args and not deco.keywords:
                    deco = deco.func
            decorators.append(deco)
        node.decorator_list = decorators
        self.generic_visit(node)
        return node


def test_the_normal_dump_restores_the_tree_and_matches_a_copy():
    checked = 0
    for path in kernel_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                before = ast.dump(node, include_attributes=True)
                expected = ast.dump(_CopyingNormaliser().visit(copy.deepcopy(node)), annotate_fields=False)
                assert normal_dump(node) == expected, f"{path}: {node.name}"
                assert ast.dump(node, include_attributes=True) == before
                checked += 1
    assert checked >= 40


def test_shape_key_is_canonical_text():
    from compiler.ir.specs import TensorSpec, parse_args_text  # torch: kept out of the writer processes

    args = parse_args_text("q=bf16[8, 32, 8192,256],  eps=1e-5")
    assert shape_key(args) == "q=bf16[8, 32, 8192, 256], eps=1e-05"
    assert shape_key({"x": TensorSpec(args["q"].dtype, (8, 32))}) == "x=bf16[8, 32]"


# ---- basic use and best() -----------------------------------------------------------------------------


def test_default_path_is_in_the_user_cache_dir():
    path = default_store_path()
    assert path.name == "tuning.sqlite" and path.parent.name == "helion-ls"


def test_best_needs_a_margin_to_go_over_the_default_scoped_vmem(tmp_path):
    """Tuning's objective (objective.py): a config over the default scoped VMEM wins only when it is at least
    VMEM_MARGIN faster than the best config within the limit."""
    from compiler.tune.objective import VMEM_MARGIN

    store = TuningStore(tmp_path / "t.sqlite")
    over = {"vmem_verdict": "over_default_limit"}
    store.record_trial(KEY, {"block_sizes": [128]}, 1.0e-3, "ok", {"vmem_verdict": "fits"})
    store.record_trial(KEY, {"block_sizes": [512]}, 1.0e-3 / (1 + VMEM_MARGIN / 2), "ok", over)  # not enough
    assert store.best(KEY).config == {"block_sizes": [128]}
    assert [t.config["block_sizes"] for t in store.top(KEY, 2)] == [[128], [512]]
    store.record_trial(KEY, {"block_sizes": [1024]}, 1.0e-3 / (1 + 2 * VMEM_MARGIN), "ok", over)  # worth it
    assert store.best(KEY).config == {"block_sizes": [1024]}


def test_a_time_measured_on_the_chip_ranks_without_the_margin(tmp_path):
    """The margin is for estimates: attention 8k on v5e measured 97.6 ms over the default limit and 100.7 ms
    within it, and the tpu evaluator must keep the faster."""
    from compiler.tune.objective import VMEM_MARGIN, objective

    store = TuningStore(tmp_path / "t.sqlite")
    key = KEY.with_evaluator("tpu")
    over = {"vmem_verdict": "over_default_limit", "estimate": False}
    store.record_trial(key, {"block_sizes": [128]}, 1.0e-3, "ok", {"vmem_verdict": "fits", "estimate": False})
    store.record_trial(key, {"block_sizes": [512]}, 1.0e-3 / (1 + VMEM_MARGIN / 2), "ok", over)
    assert [t.config["block_sizes"] for t in store.top(key, 2)] == [[512], [128]]
    assert objective(1.0, over) == 1.0
    assert objective(1.0, {**over, "estimate": True}) == 1.0 + VMEM_MARGIN


def test_best_prefers_trusted_evaluators_then_speed(tmp_path):
    store = TuningStore(tmp_path / "t.sqlite")
    anykey = KEY.with_evaluator(None)
    assert store.best(anykey) is None
    store.record_trial(KEY, {"block_sizes": [64]}, 2e-3, "ok", {"tflops": 1.0})
    store.record_trial(KEY, {"block_sizes": [128]}, 1e-3, "ok", {"tflops": 2.0})
    store.record_trial(KEY, {"block_sizes": [256]}, 1e-4, "wrong")  # fast but wrong never wins
    store.record_trial(KEY, {"block_sizes": [512]}, None, "failed", {"error": "boom"})
    store.record_trial(KEY, {"block_sizes": [1024]}, None, "pruned", {"reason": "out of VMEM"})
    best = store.best(anykey)
    assert best is not None and best.config == {"block_sizes": [128]} and best.evaluator == "model"
    assert best.metrics == {"tflops": 2.0}

    # a slower compile-evaluator figure outranks any model estimate; a tpu measurement outranks both
    store.record_trial(KEY.with_evaluator("compile"), {"block_sizes": [64]}, 5e-3, "ok")
    assert store.best(anykey).evaluator == "compile"
    store.record_trial(KEY.with_evaluator("tpu"), {"block_sizes": [64]}, 9e-3, "ok")
    store.record_trial(KEY.with_evaluator("tpu"), {"block_sizes": [256]}, 7e-3, "ok")
    assert store.best(anykey).config == {"block_sizes": [256]}
    assert store.best(anykey, evaluator="model").config == {"block_sizes": [128]}
    assert store.best(KEY).evaluator == "model"  # the key's own evaluator
    # an evaluator this store does not rank counts only when no ranked one has a result
    other = TrialKey("other", KEY.shape_key, "v7x", "simulator")
    store.record_trial(other, {"block_sizes": [8]}, 1e-6, "ok")
    assert store.best(other.with_evaluator(None)).evaluator == "simulator"
    store.record_trial(other.with_evaluator("model"), {"block_sizes": [8]}, 1.0, "ok")
    assert store.best(other.with_evaluator(None)).evaluator == "model"
    # other shapes / chips / compiler versions are other problems
    assert store.best(TrialKey("abc123", "x=f32[8, 8]", "v7x")) is None
    assert store.best(TrialKey("abc123", KEY.shape_key, "v5e")) is None
    assert store.best(TrialKey("abc123", KEY.shape_key, "v7x", compiler_version="old")) is None


def test_top_lists_each_config_once(tmp_path):
    store = TuningStore(tmp_path / "t.sqlite")
    for seconds in (3.0, 1.0, 2.0):
        store.record_trial(KEY, {"b": 1}, seconds, "ok")
    store.record_trial(KEY, {"b": 2}, 1.5, "ok")
    top = store.top(KEY, 5)
    assert [(t.config, t.seconds) for t in top] == [({"b": 1}, 1.0), ({"b": 2}, 1.5)]


def test_trials_and_runs_in_time_order(tmp_path):
    store = TuningStore(tmp_path / "t.sqlite")
    run = store.start_run(KEY, {"budget": 10})
    other = store.start_run(KEY.with_evaluator("tpu"), {})
    for i in range(5):
        store.record_trial(KEY, {"i": i}, float(5 - i), "ok", run_id=run)
    store.record_trial(KEY.with_evaluator("tpu"), {"i": 9}, 1.0, "ok", run_id=other)
    store.finish_run(run, "done")
    assert [t.config["i"] for t in store.trials(KEY)] == [0, 1, 2, 3, 4]
    assert [t.config["i"] for t in store.trials(KEY, limit=2)] == [3, 4]
    assert [t.config["i"] for t in store.trials(KEY.with_evaluator(None))] == [0, 1, 2, 3, 4, 9]
    assert [t.config["i"] for t in store.trials(KEY.with_evaluator(None), run_id=other)] == [9]
    runs = store.runs(KEY.with_evaluator(None))
    assert [(r.run_id, r.status, r.meta) for r in runs] == [
        (run, "done", {"budget": 10}),
        (other, "running", {}),
    ]
    assert runs[0].finished is not None and runs[1].finished is None
    assert runs[0].key == KEY and runs[0].key.compiler_version == COMPILER_VERSION
    assert [r.run_id for r in store.runs(limit=1)] == [other]


def test_bad_arguments_are_rejected(tmp_path):
    store = TuningStore(tmp_path / "t.sqlite")
    with pytest.raises(ValueError, match="verdict"):
        store.record_trial(KEY, {}, 1.0, "great")
    with pytest.raises(ValueError, match="evaluator"):
        store.record_trial(KEY.with_evaluator(None), {}, 1.0, "ok")


def test_data_version_changes_on_own_and_other_writes(tmp_path):
    path = tmp_path / "t.sqlite"
    watcher, writer = TuningStore(path), TuningStore(path)
    v0 = watcher.data_version()
    assert watcher.data_version() == v0
    writer.record_trial(KEY, {}, 1.0, "ok")
    v1 = watcher.data_version()
    assert v1 != v0
    watcher.record_trial(KEY, {}, 2.0, "ok")
    assert watcher.data_version() != v1


def test_store_pickles_as_its_path(tmp_path):
    store = TuningStore(tmp_path / "t.sqlite", busy_timeout=3.0)
    store.record_trial(KEY, {"b": 1}, 1.0, "ok")
    copy = pickle.loads(pickle.dumps(store))
    assert copy.path == store.path and copy.busy_timeout == 3.0
    assert copy.best(KEY).config == {"b": 1}


# ---- several processes at once ------------------------------------------------------------------------


def _writer(path: str, worker: int, count: int, start: multiprocessing.synchronize.Barrier) -> None:
    start.wait(60)  # all processes import first, then open the file and write at the same moment
    store = TuningStore(path)
    run = store.start_run(KEY, {"worker": worker})
    for i in range(count):
        store.record_trial(KEY, {"worker": worker, "i": i}, 1.0 + i, "ok", {"tflops": i}, run)
        store.best(KEY)  # interleave reads with the other writers
    store.finish_run(run, "done")


def test_concurrent_processes_recover_once_and_lose_nothing(tmp_path):
    # The processes race to notice the damaged file, to replace it and to create the schema, then write.
    path = tmp_path / "shared.sqlite"
    path.write_bytes(os.urandom(8192))
    ctx = multiprocessing.get_context("spawn")
    workers, count = 4, 100
    start = ctx.Barrier(workers)
    procs = [
        ctx.Process(target=_writer, args=(str(path), w, count, start), daemon=True) for w in range(workers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        p.kill()  # no-op for a process that ended; a hung one must not outlive the test
    assert [p.exitcode for p in procs] == [0] * workers
    assert len(corrupt_files(path)) == 1
    store = TuningStore(path)
    rows = store.trials(KEY)
    assert sorted((t.config["worker"], t.config["i"]) for t in rows) == [
        (w, i) for w in range(workers) for i in range(count)
    ]
    assert sorted(r.meta["worker"] for r in store.runs()) == list(range(workers))
    assert all(r.status == "done" for r in store.runs())


# ---- damaged files ------------------------------------------------------------------------------------


def _foreign_db(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (text TEXT)")
    conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.commit()
    conn.close()


def _other_schema_version(path: Path) -> None:
    TuningStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda p: p.write_bytes(os.urandom(4096)), id="random-bytes"),
        pytest.param(lambda p: p.write_bytes(b"SQLite"), id="short-garbage"),
        pytest.param(_foreign_db, id="foreign-sqlite"),
        pytest.param(_other_schema_version, id="other-schema-version"),
    ],
)
def test_unusable_file_is_moved_aside(tmp_path, caplog, damage):
    path = tmp_path / "t.sqlite"
    damage(path)
    original = path.read_bytes()
    with caplog.at_level(logging.WARNING, logger="compiler.tune.store"):
        store = TuningStore(path)
    assert "moved it to" in caplog.text
    assert store.best(KEY) is None
    store.record_trial(KEY, {"b": 1}, 1.0, "ok")
    assert store.best(KEY).config == {"b": 1}
    (aside,) = corrupt_files(path)
    assert (tmp_path / aside).read_bytes() == original  # kept for inspection, untouched


def test_zero_length_file_becomes_a_store(tmp_path):
    # SQLite creates databases as empty files, so an empty file is a new store, not damage: moving it aside
    # could rename a store another process is creating at this moment.
    path = tmp_path / "t.sqlite"
    path.touch()
    store = TuningStore(path)
    store.record_trial(KEY, {"b": 1}, 1.0, "ok")
    assert store.best(KEY).seconds == 1.0
    assert corrupt_files(path) == []


def test_file_corrupted_while_open_is_replaced(tmp_path, caplog):
    path = tmp_path / "t.sqlite"
    store = TuningStore(path)
    for i in range(300):  # several pages of rows and index
        store.record_trial(KEY, {"i": i, "pad": "x" * 200}, float(i), "ok")
    store.close()  # checkpoints the WAL into the main file
    size = path.stat().st_size
    with open(path, "r+b") as f:  # keep the header, smash every page after the first
        f.seek(4096)
        f.write(os.urandom(size - 4096))
    with caplog.at_level(logging.WARNING, logger="compiler.tune.store"):
        store = TuningStore(path)
        assert store.trials(KEY) == []
        store.record_trial(KEY, {"i": 0}, 1.0, "ok")
    assert "moved it to" in caplog.text
    assert len(store.trials(KEY)) == 1
    assert len(corrupt_files(path)) == 1


def test_file_deleted_while_open_is_recreated(tmp_path, caplog):
    path = tmp_path / "t.sqlite"
    store = TuningStore(path)
    store.record_trial(KEY, {"b": 1}, 1.0, "ok")
    version = store.data_version()
    path.unlink()
    with caplog.at_level(logging.WARNING, logger="compiler.tune.store"):
        store.record_trial(KEY, {"b": 2}, 2.0, "ok")
    assert "deleted or replaced" in caplog.text
    assert path.exists()
    assert [t.config for t in TuningStore(path).trials(KEY)] == [{"b": 2}]
    assert store.data_version() != version


def test_file_replaced_while_open_is_followed(tmp_path):
    path = tmp_path / "t.sqlite"
    store = TuningStore(path)
    store.record_trial(KEY, {"b": 1}, 1.0, "ok")
    other = tmp_path / "other.sqlite"
    TuningStore(other).record_trial(KEY, {"b": 7}, 7.0, "ok")
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{other}{suffix}").exists():
            os.replace(f"{other}{suffix}", f"{path}{suffix}")
    assert store.best(KEY).config == {"b": 7}


def test_recovery_waits_for_the_interprocess_lock(tmp_path):
    # Another process opening or recovering the store holds <name>.lock; nothing is renamed meanwhile.
    path = tmp_path / "t.sqlite"
    path.write_bytes(os.urandom(4096))
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    opened = []
    thread = threading.Thread(target=lambda: opened.append(TuningStore(path)))
    thread.start()
    thread.join(0.5)
    assert thread.is_alive() and corrupt_files(path) == []
    os.close(fd)
    thread.join(10)
    assert len(opened) == 1 and len(corrupt_files(path)) == 1


def test_a_lock_held_past_the_busy_timeout_is_an_error_not_a_wait_for_ever(tmp_path):
    # e.g. a process stopped (SIGSTOP, a debugger) while it opens the store: the others say so and go on
    path = tmp_path / "t.sqlite"
    TuningStore(path).close()
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(StoreError, match=r"t\.sqlite\.lock is held by another process for more than 0\.3 s"):
            TuningStore(path, busy_timeout=0.3)
    finally:
        os.close(fd)
    TuningStore(path, busy_timeout=0.3).close()  # free again


def _hold_open(path: str, conn: multiprocessing.connection.Connection) -> None:
    store = TuningStore(path)
    for i in range(20):
        store.record_trial(KEY, {"old": i}, 1.0, "ok")
    conn.send("written")
    conn.recv()  # the parent deleted the file meanwhile
    store.record_trial(KEY, {"late": 1}, 1.0, "ok")
    conn.send(sorted(str(t.config) for t in store.trials(KEY)))


def test_file_deleted_while_another_process_has_it_open(tmp_path):
    # The deleted database's -wal and -shm stay behind (the other process still uses them); a new store
    # must not adopt them, and the other process must follow to the new file.
    path = tmp_path / "t.sqlite"
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_hold_open, args=(str(path), child), daemon=True)
    proc.start()
    try:
        assert parent.poll(60) and parent.recv() == "written"
        path.unlink()
        assert Path(f"{path}-wal").exists()
        store = TuningStore(path)
        store.record_trial(KEY, {"new": 1}, 1.0, "ok")
        assert [t.config for t in store.trials(KEY)] == [{"new": 1}]
        parent.send("go")
        assert parent.poll(60) and parent.recv() == ["{'late': 1}", "{'new': 1}"]
        proc.join(30)
        assert proc.exitcode == 0
    finally:
        proc.kill()
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_many_trials_in_one_transaction(tmp_path):
    with TuningStore(tmp_path / "s.sqlite") as store:
        run = store.start_run(KEY)
        rows = [({"block_sizes": [b]}, b * 1e-6, "ok", {"tflops": 1.0}) for b in (64, 128, 256)]
        rows.append(({"block_sizes": [4096]}, None, "pruned", {"reason": "out of VMEM"}))
        before = store.data_version()
        store.record_trials(KEY, rows, run)
        assert store.data_version() != before
        assert [t.verdict for t in store.trials(KEY, run_id=run)].count("ok") == 3
        assert store.best(KEY).config == {"block_sizes": [64]}
        with pytest.raises(ValueError, match="verdict"):
            store.record_trials(KEY, [({"block_sizes": [8]}, None, "bogus", None)], run)
        assert len(store.trials(KEY)) == 4  # the bad batch wrote nothing


def test_results_of_another_performance_model_are_not_this_one_s(tmp_path) -> None:
    """The key's compiler version covers the model's code and constants: after a refit, the editor must not put
    the old model's stored best beside the current config's estimate by the new one."""
    from pathlib import Path

    import compiler.tune.keys as keys

    here = Path(keys.__file__).parent
    for name in ("model.py", "constants.py"):
        (tmp_path / name).write_bytes((here / name).read_bytes())
    assert COMPILER_VERSION.endswith(f"+model.{keys.model_fingerprint(tmp_path)}")
    constants = tmp_path / "constants.py"
    constants.write_text(constants.read_text() + "\nV5E = with_values(V5E, '[fit] again', dma_efficiency=0.86)\n")
    assert keys.model_fingerprint(tmp_path) != keys.model_fingerprint(here)
