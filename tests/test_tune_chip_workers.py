"""One measuring worker per TPU chip (compiler/tune/chip_workers.py, compiler/tpu/local_chips.py): the count rule
on directories shaped like sysfs and /dev, the pin each worker gets, real spawned workers on this machine (their
environment read back from them, no chip opened) and the tpu evaluator's batches; on a TPU VM, the real chips."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import EXAMPLES, MACHINE_TPU, on_tpu, without_tpu

from compiler.tpu.local_chips import LocalChips, local_chips, measured_on, pin_env
from compiler.tune.chip_workers import LocalChipPool, measuring_executor, probe
from compiler.tune.executors import ExecutorError, LocalExecutor

PIN = ("TPU_VISIBLE_CHIPS", "TPU_CHIPS_PER_PROCESS_BOUNDS", "TPU_PROCESS_BOUNDS", "TPU_CHIPS_PER_HOST_BOUNDS",
       "TPU_HOST_BOUNDS", "TPU_MESH_CONTROLLER_PORT", "TPU_PROCESS_PORT")


def pci(root: Path, slot: str, vendor: str = "0x1ae0", device: str = "0x0063") -> None:
    d = root / "sys" / "bus" / "pci" / "devices" / slot
    d.mkdir(parents=True)
    (d / "vendor").write_text(vendor + "\n")
    (d / "device").write_text(device + "\n")


def node(root: Path, *names: str) -> None:
    for name in names:
        path = root / "dev" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")


def iommu_group(root: Path, group: str, slot: str, vendor: str) -> None:
    d = root / "sys" / "kernel" / "iommu_groups" / group / "devices" / slot
    d.mkdir(parents=True)
    (d / "vendor").write_text(vendor + "\n")


# ---- the count ---------------------------------------------------------------------------------------------------


def test_four_pci_functions_and_one_vfio_group_is_one_chip(tmp_path):
    """The lent v5e (bench/chip/v5e_host_probe.txt): four TPU functions on the bus, one group passed through, no
    iommu_groups in its sandbox's sysfs; jax saw one chip."""
    for slot in ("08", "09", "0a", "0b"):
        pci(tmp_path, f"0000:00:{slot}.0")
    node(tmp_path, "vfio/1", "vfio/vfio")
    assert local_chips(str(tmp_path), env={}) == LocalChips((0,), "/dev/vfio")


def test_a_v5e_vm_of_four_counts_its_four_tpu_groups_and_not_another_device_s(tmp_path):
    for i, slot in enumerate(("04", "05", "06", "07")):
        pci(tmp_path, f"0000:00:{slot}.0")
        iommu_group(tmp_path, str(i), f"0000:00:{slot}.0", "0x1ae0")
    iommu_group(tmp_path, "96", "0000:00:1f.0", "0x15b3")  # a NIC bound to vfio-pci (not a TPU)
    node(tmp_path, "vfio/0", "vfio/1", "vfio/2", "vfio/3", "vfio/96", "vfio/vfio")
    assert local_chips(str(tmp_path), env={}) == LocalChips((0, 1, 2, 3), "/dev/vfio")


def test_accel_nodes_count_one_chip_each_and_a_directory_is_none(tmp_path):
    node(tmp_path, *(f"accel{i}" for i in range(8)))
    assert local_chips(str(tmp_path), env={}).count == 8
    other = tmp_path / "gpu"
    (other / "dev" / "accel").mkdir(parents=True)  # NVIDIA's /dev/accel/accel0 layout
    assert local_chips(str(other), env={}) == LocalChips((), "none")


def test_pci_functions_without_device_nodes_are_no_chip_and_visible_chips_win(tmp_path):
    pci(tmp_path, "0000:00:04.0")
    assert local_chips(str(tmp_path), env={}).count == 0
    node(tmp_path, *(f"accel{i}" for i in range(4)))
    assert local_chips(str(tmp_path), env={"TPU_VISIBLE_CHIPS": "2,3"}) == LocalChips((2, 3), "TPU_VISIBLE_CHIPS")
    assert local_chips(str(tmp_path), env={"TPU_VISIBLE_CHIPS": ""}).count == 0  # Ray's task given no TPU


def test_this_machine_counts_what_its_chip_detection_sees():
    found = local_chips()
    assert found.count <= max(MACHINE_TPU.count, len(MACHINE_TPU.device_files))
    if not MACHINE_TPU.device_files:
        assert found.count == 0


# ---- the pin -----------------------------------------------------------------------------------------------------


def test_each_worker_is_pinned_to_its_own_chip_alone_and_its_own_ports():
    envs = [pin_env(i) for i in range(8)]
    for i, env in enumerate(envs):
        assert env["TPU_VISIBLE_CHIPS"] == str(i)
        # per-process bounds of one chip: libtpu skips its host-wide lockfile, so the workers can run at once
        assert env["TPU_CHIPS_PER_PROCESS_BOUNDS"] == env["TPU_CHIPS_PER_HOST_BOUNDS"] == "1,1,1"
        assert env["TPU_PROCESS_BOUNDS"] == env["TPU_HOST_BOUNDS"] == "1,1,1"
        assert env["ALLOW_MULTIPLE_LIBTPU_LOAD"] == "1"
        assert env["TPU_MESH_CONTROLLER_ADDRESS"] == f"localhost:{env['TPU_MESH_CONTROLLER_PORT']}"
    ports = [int(e[k]) for e in envs for k in ("TPU_MESH_CONTROLLER_PORT", "TPU_PROCESS_PORT")]
    assert len(set(ports)) == len(ports)


def test_a_measurement_names_the_pinned_chip_and_the_host():
    assert measured_on(0, env=pin_env(3))["chip"] == 3
    assert measured_on(5, env={})["chip"] == 5  # unpinned: jax's device id
    assert measured_on(0, env={})["host"] == os.uname().nodename


# ---- the executor ------------------------------------------------------------------------------------------------


def test_one_chip_is_exactly_the_single_unpinned_worker_of_before():
    for chips in (LocalChips((0,), "/dev/vfio"), LocalChips((), "none")):
        ex = measuring_executor("local", chips)
        try:
            assert type(ex) is LocalExecutor and ex.parallelism == 1 and ex._env == {}
        finally:
            ex.shutdown()
    ex = measuring_executor("local:1", LocalChips((0, 1, 2, 3), "/dev/accel"))
    try:
        assert type(ex) is LocalExecutor and ex._env == {}
    finally:
        ex.shutdown()


def test_several_chips_get_one_worker_each_and_local_n_caps_them():
    four = LocalChips((0, 1, 2, 3), "/dev/vfio")
    with measuring_executor("local", four) as ex:
        assert isinstance(ex, LocalChipPool) and ex.parallelism == 4
        assert [p._env["TPU_VISIBLE_CHIPS"] for p in ex._pools.values()] == ["0", "1", "2", "3"]
    with measuring_executor("local:2", four) as ex:
        assert ex.parallelism == 2 and ex.labels == ["chip 0", "chip 1"]
    with pytest.raises(ExecutorError, match="positive"):
        measuring_executor("local:0", four)


def pinned(item: int) -> tuple[int, dict[str, str | None], int]:
    """What a worker was given: its pin, read back in the worker process."""
    return item, {k: os.environ.get(k) for k in PIN}, os.getpid()


@pytest.fixture(scope="module")
def two_workers():
    """Two real spawned workers pinned to chips 0 and 1 of this machine: no chip is opened (nothing here starts
    jax), so it runs on any machine."""
    with LocalChipPool((0, 1)) as pool:
        yield pool


def test_spawned_workers_hold_their_pin_before_their_first_task(two_workers):
    seen = two_workers.on_each(pinned, 0)
    assert sorted(seen) == [0, 1]
    for chip, (_, env, _) in seen.items():
        assert env == {k: v for k, v in pin_env(chip).items() if k in PIN}
    assert os.environ.get("TPU_PROCESS_PORT") != pin_env(0)["TPU_PROCESS_PORT"]  # the parent is not pinned


def test_candidates_spread_over_the_chips_and_every_result_comes_back(two_workers):
    results = dict(two_workers.map_unordered(pinned, range(8)))
    assert sorted(results) == list(range(8)) and all(isinstance(r, tuple) for r in results.values()), results
    by_chip: dict[str | None, set[int]] = {}
    for _, env, pid in results.values():
        by_chip.setdefault(env["TPU_VISIBLE_CHIPS"], set()).add(pid)
    # both chips measured, each in its one process for the whole run
    assert sorted(by_chip) == ["0", "1"] and all(len(pids) == 1 for pids in by_chip.values()), (by_chip, results)


@without_tpu
def test_a_worker_without_a_chip_says_so_and_the_evaluator_is_refused(two_workers):
    why = probe(two_workers, "v5e")
    assert why is not None and "no TPU on this machine" in why, why
    assert two_workers.parallelism == 2  # none was dropped: the refusal is the whole answer


def test_a_measurement_fills_every_chip_and_an_estimate_takes_what_it_needs():
    from compiler.tune.refine import batch_size  # (torch: not imported by the workers that unpickle `pinned`)

    assert batch_size(4, 1, estimated=False) == 1  # one chip: one at a time, as before
    assert batch_size(4, 8, estimated=False) == 8
    assert batch_size(2, 4, estimated=False) == 4
    assert batch_size(2, 4, estimated=True) == 2


def test_refine_hands_every_chip_a_candidate_at_once_and_one_chip_one():
    """The tpu evaluator's refine with four workers measures four of the model's candidates in its first batch
    (with one, one at a time, as before); the records come back merged, each candidate once."""
    import compiler
    from compiler.tune.evaluators import Problem
    from compiler.tune.executors import InlineExecutor
    from compiler.tune.keys import TrialKey
    from compiler.tune.refine import Candidate, refine

    source = (EXAMPLES / "softmax.py").read_text()
    kernel = compiler.load(source).kernels["softmax"]
    problem = Problem(source, "softmax", kernel.shape_sets[1], "v5e")
    ranked = [Candidate({"block_sizes": [b]}, 1e-3 + i * 1e-6, {}, "model") for i, b in enumerate([8, 16, 32, 64, 128])]
    key = TrialKey(kernel.source_hash, problem.shape_key, problem.chip).with_evaluator("tpu")

    def batches(parallelism: int) -> tuple[list[int], list[Candidate]]:
        sizes: list[int] = []

        class Recording(InlineExecutor):
            def map_unordered(self, fn, items):
                sizes.append(len(items))
                return [(c, (1e-3, {"measured_on": {"host": "h", "chip": i % parallelism}}))
                        for i, c in enumerate(items)]

        ex = Recording()
        ex.parallelism = parallelism
        return sizes, refine(problem, "tpu", 1, ranked, ex, key, None, None, [], 0.0)  # no climb

    sizes, kept = batches(4)
    assert sizes[0] == 4 and len(kept) == 4 and {c.metrics["measured_on"]["chip"] for c in kept} == {0, 1, 2, 3}
    assert len({str(c.config) for c in kept}) == 4
    sizes, kept = batches(1)
    assert sizes == [1] and len(kept) == 1


# ---- on a TPU VM -------------------------------------------------------------------------------------------------


@on_tpu
def test_every_local_chip_gets_a_worker_that_has_it():
    chips = local_chips()
    ex = measuring_executor("local")
    try:
        assert ex.parallelism == max(1, chips.count)
        assert probe(ex, MACHINE_TPU.chip) is None, "a worker could not open its chip"
        assert ex.parallelism == max(1, chips.count), "a chip was left out"
    finally:
        ex.shutdown()


@on_tpu
def test_tuning_measures_on_every_local_chip_and_says_which(tmp_path, capsys):
    """--evaluator tpu with the default executor: the first batch of candidates fills every chip, each measured
    candidate says its chip."""
    import json

    from compiler.cli import main

    argv = ["tune", str(EXAMPLES / "softmax.py"), "--shape-set", "0", "--chip", str(MACHINE_TPU.chip),
            "--evaluator", "tpu", "--max-evals", "40", "--top", "100", "--json", "--store", str(tmp_path / "s.sqlite")]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    where = [c["measured_on"] for c in result["top"]] + [r["measured_on"] for r in result["rejected"]
                                                          if "measured_on" in r]
    assert where and all(set(w) == {"host", "chip"} for w in where)
    assert {w["chip"] for w in where} == set(local_chips().indices or (0,))


def test_quick_tasks_take_turns_over_free_workers():
    """A task that ends before the next is sent leaves every worker as free as the others: the next goes to the
    one sent work longest ago, not always to the first (as after a warm-up, when tasks return in milliseconds)."""
    from compiler.tune.executors import InlineExecutor

    class Inline(LocalChipPool):
        def __init__(self) -> None:
            super(LocalChipPool, self).__init__()
            self._labels = {0: "chip 0", 1: "chip 1", 2: "chip 2"}
            self.ran: list[int] = []

        def _submit_to(self, worker, fn, *args):
            self.ran.append(worker)
            return InlineExecutor().submit(fn, *args)  # done before submit returns

    pool = Inline()
    assert sorted(r for _, r in pool.map_unordered(abs, [-1, -2, -3, -4, -5, -6])) == [1, 2, 3, 4, 5, 6]
    assert pool.ran == [0, 1, 2, 0, 1, 2]
