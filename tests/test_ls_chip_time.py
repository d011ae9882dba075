"""The current config's time on this machine's TPU (features/chip_time.py, chip_time_shown.py, `helion-pallas
measure`): on a machine whose TPU is not the chip compiled for (CI: no TPU at all) the kernel hover says why its
time is an estimate and the command measures nothing; the measure job waits in the chip's line like a tuning and
its answer is remembered per kernel text, shapes, chip and config; on a TPU VM (`on_tpu`) the command measures the
current config on the chip and the hover shows it with its runs and spread."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import subprocess
import sys

import pytest
import pytest_lsp
from conftest import EXAMPLES, MACHINE_TPU, child_pythonpath, on_tpu
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import (
    end_session,
    final_diagnostics,
    make_workspace,
    open_doc,
    rec,
    server_config,
    start,
)

from compiler.ir.config import Config
from helion_ls.session.chip_times import ChipTime, ChipTimes
from helion_ls.workers.tuning import TuneJob, Tuner, TuneSpec, measure_index, measure_slot

ASYNC = pytest.mark.asyncio(loop_scope="module")
OTHER_CHIP = "v5e" if MACHINE_TPU.chip == "v7x" else "v7x"  # a chip this machine does not have
TEXT = (EXAMPLES / "add.py").read_text()


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("chiptime"))
    shutil.copy(EXAMPLES / "add.py", ws / "add.py")
    lsp_client.ws = ws
    await start(lsp_client, ws, libtpu=False, chip=OTHER_CHIP)
    yield
    await end_session(lsp_client)


async def kernel_hover(client: LanguageClient, uri: str, text: str) -> str:
    at = text.index("def add") + 5
    line = text[:at].count("\n")
    found = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=at - (text.rfind("\n", 0, at) + 1))))  # fmt: skip
    assert found is not None
    return found.contents.value


def why_not_here() -> str:
    return "there is no TPU" if MACHINE_TPU.chip is None else f"this machine's TPU is a {MACHINE_TPU.device_kind}"


@ASYNC
async def test_without_the_chip_the_hover_says_why_its_time_is_an_estimate(client: LanguageClient):
    uri = open_doc(client, client.ws / "add.py")
    await final_diagnostics(client, uri, 1)
    text = await kernel_hover(client, uri, TEXT)
    time_lines = [line for line in text.splitlines() if line.startswith(f"Time on {OTHER_CHIP}:")]
    assert len(time_lines) == 2, text  # one per shape set
    for line in time_lines:
        assert f"model estimate for {OTHER_CHIP}" in line
        assert f"(an estimate: {why_not_here()}" in line and "nothing is measured" in line, line
        assert "measured on" not in line and "helion-ls.measureOnChip" not in line
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="helion.measureOnChip", arguments=[{"uri": uri, "kernel": "add", "shapeSet": 1}]))  # fmt: skip
    assert why_not_here() in answer["refused"], answer
    await rec(client).wait(lambda: any(m.message.startswith("Not measuring add on a TPU: ") for m in client.messages))
    with pytest.raises(Exception, match="no shape set 5"):
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="helion.measureOnChip", arguments=[{"uri": uri, "kernel": "add", "shapeSet": 5}]))  # fmt: skip


def measure_spec(index: int, chip: str, config: dict) -> TuneSpec:
    return TuneSpec(uri="file:///ws/add.py", kernel="add", shape_set=measure_slot(index),
                    source_hash=hashlib.sha1(TEXT.encode()).hexdigest(), text=TEXT, file_name="add.py", chip=chip,
                    evaluator="tpu", executor="inline", store_path=None, budget_seconds=None, max_evals=None,
                    kind="measure", shape_key="x=bf16[1024, 1024], y=bf16[1024, 1024]", config=json.dumps(config))


def test_a_measure_job_has_a_slot_of_its_own_and_measures_the_config_it_was_given():
    spec = measure_spec(1, "v5e", {"block_sizes": [8, 1024]})
    assert spec.shape_set not in (0, 1, -1) and measure_index(spec.shape_set) == spec.index == 1
    assert spec.args("/t/add.py") == ["/t/add.py", "-k", "add", "--shape-set", "1", "--chip", "v5e",
                                      "--config", '{"block_sizes": [8, 1024]}', "--json"]
    assert spec.argv("/t/add.py")[1:4] == ["-m", "compiler.cli", "measure"]


@ASYNC
async def test_a_measure_job_waits_in_the_chips_line_and_says_why_it_measured_nothing():
    """Real `helion-pallas measure` processes for a chip this machine does not have (so on any machine they
    measure nothing and say why); the line is the Tuner's own (`needs_chip`), as for tunings."""
    seen: list[tuple[int, str, int]] = []

    def changed(job: TuneJob) -> None:
        job.show()
        seen.append((job.spec.index, job.state, job.place))

    tuner = Tuner(changed, limit=4, needs_chip=lambda spec: True)
    first = tuner.submit(measure_spec(0, OTHER_CHIP, {"block_sizes": [8, 1024]}))
    second = tuner.submit(measure_spec(1, OTHER_CHIP, {}))
    assert (first.place, second.place, second.title) == (0, 2, "Waiting for the TPU, 2nd in line…")
    await asyncio.wait_for(asyncio.gather(first.done.wait(), second.done.wait()), 300)
    assert seen.index((1, "running", 0)) > seen.index((0, "done", 0))  # one after the other
    for job in (first, second):
        assert job.state == "done", job.message
        found = ChipTime.of(job.result, job.message)
        assert found.verdict == "unavailable" and not found.measured, job.result
        assert ("no TPU on this machine" if MACHINE_TPU.chip is None else "not the") in found.why
    assert job.result["config"] == {} and first.result["config"] == {"block_sizes": [8, 1024]}
    await tuner.shutdown()


def test_measurements_are_remembered_per_kernel_text_shapes_chip_and_config():
    times = ChipTimes(size=2)
    key = ("hash", "x=bf16[8]", "v5e", Config({"block_sizes": [8]}))
    found = ChipTime.of({"verdict": "measured", "seconds": 1.2e-4, "repeats": 610, "spread": 0.08,
                         "device_kind": "TPU v5 lite"}, None)
    times.put(key, found)
    assert times.get(("hash", "x=bf16[8]", "v5e", Config({"block_sizes": [8]}))) is found
    for other in (("hash2", *key[1:]), (key[0], "x=bf16[16]", *key[2:]), (*key[:2], "v6e", key[3]),
                  (*key[:3], Config({"block_sizes": [16]}))):
        assert times.get(other) is None
    assert found.measured and (found.repeats, found.spread) == (610, 0.08)
    failed = ChipTime.of(None, "the tuner was killed by signal 9")
    assert failed.verdict == "error" and "killed" in failed.why and not failed.measured


def test_the_measure_command_says_why_it_measured_nothing():
    run = subprocess.run([sys.executable, "-m", "compiler.cli", "measure", str(EXAMPLES / "add.py"), "-k", "add",
                          "--chip", OTHER_CHIP, "--json"], capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": child_pythonpath(), "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})
    assert run.returncode == 1, run.stderr
    out = json.loads(run.stdout)
    assert out["verdict"] == "unavailable" and out["chip"] == OTHER_CHIP and out["why"], out


@pytest_lsp.fixture(config=server_config(), scope="module")
async def chip_client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("chiptime-tpu"))
    shutil.copy(EXAMPLES / "add.py", ws / "add.py")
    lsp_client.ws = ws
    await start(lsp_client, ws, libtpu=False, chip="auto")
    yield
    await end_session(lsp_client)


@on_tpu
@ASYNC
async def test_on_a_tpu_vm_the_hover_shows_the_current_configs_time_measured_on_the_chip(chip_client: LanguageClient):
    client = chip_client
    uri = open_doc(client, client.ws / "add.py")
    await final_diagnostics(client, uri, 1)
    before = await kernel_hover(client, uri, TEXT)
    assert f"[Measure on {MACHINE_TPU.device_kind}](command:helion-ls.measureOnChip" in before, before
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="helion.measureOnChip", arguments=[{"uri": uri, "kernel": "add", "shapeSet": 0}]))  # fmt: skip
    assert answer["state"] in ("queued", "running"), answer
    await rec(client).wait(lambda: any(m.message.startswith("Measured add (shape set 0) on ")
                                       for m in client.messages), 600)
    after = await kernel_hover(client, uri, TEXT)
    line = next(line for line in after.splitlines() if line.startswith(f"Time on {MACHINE_TPU.chip}:"))
    assert f"model estimate for {MACHINE_TPU.chip}" in line and f"measured on {MACHINE_TPU.device_kind} **" in line
    assert "per call (best of " in line and "slowest loop" in line, line
