"""The chip's line (helion_ls/workers/tuning.py with chip_owner.py): tunings that need this machine's TPU run one
after the other, each waiting one says its place, and a job that needs no chip goes ahead of them. Real
`helion-pallas tune` processes (model evaluator: CI has no chip); which jobs need the chip is the Tuner's
`needs_chip`, so the line is tested without a chip and without pretending the server has one."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from helion_ls.features.chip_verdicts import check_evaluator
from helion_ls.workers.chip_owner import fallback_reason, needs_chip, ordinal, short_reason, waiting_title
from helion_ls.workers.machine_tpu import MachineTpu
from helion_ls.workers.tuning import TuneJob, Tuner, TuneSpec

REPO = Path(__file__).resolve().parents[1]
TEXT = (REPO / "examples" / "add.py").read_text()


def spec(shape_set: int, kernel: str = "add", evaluator: str = "model") -> TuneSpec:
    return TuneSpec(uri=f"file:///ws/add{shape_set}.py", kernel=kernel, shape_set=0,
                    source_hash=hashlib.sha1(TEXT.encode()).hexdigest(), text=TEXT, file_name="add.py", chip="v5e",
                    evaluator=evaluator, executor="inline", store_path=None, budget_seconds=None, max_evals=3)


async def ended(tuner: Tuner) -> None:
    """Every tuner process of `tuner` has exited (a job is done once its result is read; its process ends
    after)."""
    for _ in range(1200):
        if not tuner._running:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("tuner processes still running after 120 s")


@pytest.mark.asyncio
async def test_jobs_that_need_the_chip_run_one_after_the_other(tmp_path):
    seen: list[tuple[str, str, str]] = []  # (uri, state, title) as each change was told

    def changed(job: TuneJob) -> None:
        job.show()
        seen.append((job.spec.uri[-7:], job.state, job.title))

    chip_jobs = {"file:///ws/add0.py", "file:///ws/add1.py", "file:///ws/add2.py"}
    tuner = Tuner(changed, limit=4, needs_chip=lambda s: s.uri in chip_jobs)
    first, second, third = (tuner.submit(spec(i, evaluator="model")) for i in range(3))
    free = tuner.submit(spec(3))  # needs no chip: runs beside the chip's holder
    assert (first.state, second.place, third.place) == ("queued", 2, 3)
    assert second.title == "Waiting for the TPU, 2nd in line…"
    assert third.title == "Waiting for the TPU, 3rd in line…"
    assert tuner.chip_holder is first and free not in tuner.waiting_for_chip()
    await asyncio.wait_for(asyncio.gather(*(j.done.wait() for j in (first, second, third, free))), 600)
    assert [j.state for j in (first, second, third, free)] == ["done"] * 4, [j.message for j in (first, second, third)]
    # the second started only after the first ended, and moved up the line when it did
    order = [(uri, state) for uri, state, _ in seen if state in ("running", "done")]
    assert order.index(("add1.py", "running")) > order.index(("add0.py", "done"))
    assert order.index(("add2.py", "running")) > order.index(("add1.py", "done"))
    assert ("add2.py", "queued", "Waiting for the TPU, 2nd in line…") in seen
    assert order.index(("add3.py", "running")) < order.index(("add0.py", "done"))  # it did not wait
    await ended(tuner)  # the last one holds the chip until its process has exited
    assert tuner.chip_holder is None and not tuner.waiting_for_chip()


@pytest.mark.asyncio
async def test_a_cancelled_job_leaves_the_line():
    tuner = Tuner(lambda job: job.show(), limit=4, needs_chip=lambda s: True)
    jobs = [tuner.submit(spec(i)) for i in range(3)]
    assert [j.place for j in jobs] == [0, 2, 3]
    tuner.cancel_job(jobs[1])
    assert jobs[2].place == 2 and jobs[2].title == "Waiting for the TPU, 2nd in line…"
    await tuner.shutdown()


def test_which_jobs_need_the_chip():
    v5e, none = MachineTpu("v5e", 1, "pci"), MachineTpu(None, why_none="no TPU here")
    assert needs_chip("tune", "auto", "v5e", v5e)
    assert not needs_chip("tune", "auto", "v7x", v5e)  # auto tunes another chip with the model
    assert not needs_chip("tune", "auto", "v5e", none)
    assert needs_chip("tune", "tpu", "v7x", none)  # it asks for the chip, and will say why it has none
    assert not needs_chip("tune", "model", "v5e", v5e)
    assert not needs_chip("crosscheck", "auto", "v5e", v5e)  # deviceless
    assert needs_chip("check", check_evaluator("v5e", v5e), "v5e", v5e)  # Check on TPU waits in the line
    assert not needs_chip("check", check_evaluator("v5e", none), "v5e", none)  # interpret mode: no chip


def test_the_tuners_reason_for_the_model_is_read():
    line = ("helion-pallas tune: model estimates, not the chip: another program holds this machine's TPU (libtpu's "
            "multi-process lockfile): only one process at a time can use it")
    why = fallback_reason(line)
    assert why is not None and why.startswith("another program holds")
    assert short_reason(why) == "the TPU was held by another program"
    assert fallback_reason("Transparent hugepages are not enabled") is None
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd"]
    assert waiting_title(2) == "Waiting for the TPU, 2nd in line…"
