"""The tuning driver: search + pruning + refine + correctness gate + store, in-process (inline executor)."""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import EXAMPLES, without_tpu
from test_checks_libtpu import libtpu

import compiler
from compiler.ir.chips import get_chip
from compiler.tune.constants import SEED_UNROLL
from compiler.tune.correctness import CorrectnessResult, check_case, check_compiled, prepare_check
from compiler.tune.driver import TuneOptions, TuneRun, tune
from compiler.tune.evaluators import Problem, probe_tpu
from compiler.tune.executors import Executor, InlineExecutor
from compiler.tune.keys import TrialKey
from compiler.tune.model import estimate
from compiler.tune.shrink import reduced_args
from compiler.tune.store import TuningStore


def _problem(name: str, shape_set: int) -> Problem:
    source = (EXAMPLES / f"{name}.py").read_text()
    kernel = compiler.load(source).kernels[name]
    return Problem(source, name, kernel.shape_sets[shape_set], "v7x", str(EXAMPLES / f"{name}.py"), shape_set)


def _uses_single_buffered_resident(config: dict) -> bool:
    return config.get("pallas_loop_type") != "unroll" or 1 in config.get("pallas_load_buffer_count", [])


def test_attention_picks_unroll_at_8k_and_avoids_double_buffered_unroll_at_32k() -> None:
    options = TuneOptions(max_evals=150, verify=False)
    short = tune(_problem("attention", 0), options)
    long = tune(_problem("attention", 1), options)
    assert short.best.config["pallas_loop_type"] == "unroll"
    assert _uses_single_buffered_resident(long.best.config)
    assert short.pruned > 0 and long.pruned > 0
    assert all("out of VMEM" in reason for reason in long.pruned_reasons)
    # The best config the seed reports is `unroll` with blocks [2, 512, 2048] (892 TF/s measured): the tuned
    # config must be at least as fast by the same model.
    kernel = compiler.load(EXAMPLES / "attention.py").kernels["attention"]
    seed_best = estimate(kernel.compile(shape_set=0, config=SEED_UNROLL).plan, get_chip("v7x"))
    assert short.best.seconds <= seed_best.seconds
    assert short.best.metrics["tflops"] >= 892 * 0.99


def test_search_is_deterministic_for_a_seed() -> None:
    problem = _problem("bmm", 0)  # 18 900 configs: pattern search
    runs = [tune(problem, TuneOptions(max_evals=40, seed=seed, verify=False)) for seed in (7, 7)]
    assert runs[0].strategy == "pattern"
    assert [c.config for c in runs[0].top] == [c.config for c in runs[1].top]
    assert runs[0].evaluated == runs[1].evaluated == 40
    assert runs[0].best.config == runs[1].best.config
    assert runs[0].to_json()["top"] == runs[1].to_json()["top"]


def test_progress_is_reported_until_done() -> None:
    events = []
    tune(_problem("batch_softmax", 0), TuneOptions(verify=False), progress=events.append)
    assert events[-1].phase == "done" and events[-1].best_seconds is not None
    counts = [e.evaluated for e in events if e.phase == "search"]
    assert counts == sorted(counts) and counts[-1] == events[-1].evaluated > 0
    assert events[-1].to_json()["event"] == "done"
    assert {
        "event",
        "kernel",
        "shape_set_index",
        "evaluated",
        "pruned",
        "total",
        "best_seconds",
        "best_config",
    } <= set(events[0].to_json())


def test_gate_detects_a_corrupted_generated_module() -> None:
    kernel = compiler.load(EXAMPLES / "softmax.py").kernels["softmax"]
    config = {"block_sizes": [256]}
    small = reduced_args(kernel, kernel.shape_sets[1], config, get_chip("v7x"))
    good = kernel.compile(args=small, config=config)
    bad = kernel.compile(args=small, config=config)
    assert "axis=1)" in bad.source
    bad.source = bad.source.replace("axis=1)", "axis=0)")  # softmax over the wrong axis of each block
    assert check_compiled(good).verdict == "ok"
    result = check_compiled(bad)
    assert result.verdict == "wrong" and "exceeds" in result.message


def test_gate_rejects_an_output_of_another_dtype_even_with_close_values() -> None:
    """The kernel's output is bf16; a generated module returning f32 (values within every tolerance, and
    closer than bf16's) computes another program: wrong, not ok."""
    kernel = compiler.load(EXAMPLES / "softmax.py").kernels["softmax"]
    config = {"block_sizes": [256]}
    small = reduced_args(kernel, kernel.shape_sets[1], config, get_chip("v7x"))
    f32 = kernel.compile(args=small, config=config)
    assert f32.source.count("jnp.bfloat16") == 2
    f32.source = f32.source.replace("jnp.bfloat16", "jnp.float32")  # the store's cast and the out_shape
    result = check_compiled(f32)
    assert result.verdict == "wrong" and "dtype float32 != reference bfloat16" in result.message


def test_a_failing_generated_module_leaves_the_next_check_its_own_reference_result() -> None:
    """The reference runs while the generated code does; when the generated code raises, its reply is still
    collected, so the next check (another kernel, other shapes) compares with its own reference."""
    softmax = compiler.load(EXAMPLES / "softmax.py").kernels["softmax"]
    small = reduced_args(softmax, softmax.shape_sets[1], {"block_sizes": [256]}, get_chip("v7x"))
    bad = softmax.compile(args=small, config={"block_sizes": [256]})
    bad.source = bad.source.replace("axis=1)", "axis=no_such_name)")
    failed = check_compiled(bad)
    assert failed.verdict == "failed" and "NameError" in failed.message
    attention = compiler.load(EXAMPLES / "attention.py").kernels["attention"]
    small = {"q": "bf16[1, 1, 256, 128]", "k": "bf16[1, 1, 256, 128]", "v": "bf16[1, 1, 256, 128]"}
    assert check_compiled(attention.compile(args=small, config={"block_sizes": [1, 128, 128]})).verdict == "ok"


def test_a_wrong_best_candidate_is_disqualified_and_the_next_one_checked(tmp_path, monkeypatch) -> None:
    problem = _problem("softmax", 1)
    ranking = tune(problem, TuneOptions(verify=False)).top
    first, second = ranking[0].config, ranking[1].config
    original = compiler.api.Kernel.compile

    def miscompile(self, args=None, config=None, chip="v7x", shape_set=None, **kwargs):
        ck = original(self, args, config, chip, shape_set, **kwargs)
        if dict(ck.config) == first:  # the generated code of this one config computes the wrong thing
            ck.source = ck.source.replace("axis=1)", "axis=0)")
        return ck

    monkeypatch.setattr(compiler.api.Kernel, "compile", miscompile)
    with TuningStore(tmp_path / "store.sqlite") as store:
        result = tune(problem, TuneOptions(), executor=InlineExecutor(), store=store)
        assert result.best.config == second
        assert result.best.correctness.verdict == "ok"
        assert [r["config"] for r in result.rejected] == [first]
        assert result.rejected[0]["verdict"] == "wrong"
        key = TrialKey(problem.load_kernel().source_hash, problem.shape_key, "v7x")
        verdicts = {t.verdict for t in store.trials(key)}
        assert {"ok", "pruned", "wrong"} <= verdicts
        wrong = [t for t in store.trials(key) if t.verdict == "wrong"]
        assert [t.config for t in wrong] == [first]
        assert store.best(key.with_evaluator("model")).config == first  # the model alone still ranks it first
        assert len(store.runs(key)) == 1


def test_stored_best_seeds_the_next_run(tmp_path) -> None:
    problem = _problem("attention", 0)
    with TuningStore(tmp_path / "store.sqlite") as store:
        first = tune(problem, TuneOptions(max_evals=60, verify=False), store=store)
        second = tune(problem, TuneOptions(max_evals=3, seed=1, verify=False), store=store)
    assert second.best.seconds <= first.best.seconds


def test_the_tpu_evaluator_times_loops_of_pipelined_calls(monkeypatch) -> None:
    """Calls issued back to back, one wait per loop (jax dispatches asynchronously), so a kernel of microseconds
    is timed as itself; k makes a loop last about TIMED_SECONDS / LOOPS. Here on jax's CPU backend."""
    import jax
    import jax.numpy as jnp

    from compiler.tune.evaluators import LOOPS, SLOW_CALL, TIMED_SECONDS, time_pipelined

    x = jnp.ones((256, 256))
    f = jax.jit(lambda a: a @ a)
    outs, waits = [], []
    wait = jax.block_until_ready
    monkeypatch.setattr(jax, "block_until_ready", lambda out: waits.append(out) or wait(out))
    times, k = time_pipelined(lambda: outs.append(f(x)) or outs[-1], first=TIMED_SECONDS / LOOPS / 40)
    assert len(times) == LOOPS and k == 40 and len(outs) == LOOPS * k
    assert len(waits) == LOOPS  # one wait a loop, for its last call
    assert all(0 < t < TIMED_SECONDS for t in times)
    slow, once = time_pipelined(lambda: f(x), first=SLOW_CALL)  # a kernel of a second: two loops of one call
    assert once == 1 and len(slow) == 2
    quicker, k = time_pipelined(lambda: f(x), first=SLOW_CALL * 0.99)  # just quicker: still five loops
    assert len(quicker) == LOOPS and k == 1


def test_a_measured_config_is_checked_where_kernels_run(monkeypatch) -> None:
    """What the tpu evaluator runs after timing a config, in the process that holds the chip (here: a CPU, so
    interpret mode): the config on the gate's reduced shapes against the eager reference; wrong code is wrong."""
    from compiler.tune.evaluators import check_where_kernels_run

    problem = _problem("softmax", 1)
    ck = problem.compile({"block_sizes": [256]})
    result = check_where_kernels_run(ck)
    assert result.verdict == "ok" and result.max_error is not None
    assert result.shapes != problem.shape_key  # reduced: the same tiles, fewer of them
    original = compiler.api.Kernel.compile

    def miscompile(self, *args, **kwargs):
        compiled = original(self, *args, **kwargs)
        compiled.source = compiled.source.replace("axis=1)", "axis=0)")  # softmax over the wrong axis
        return compiled

    monkeypatch.setattr(compiler.api.Kernel, "compile", miscompile)
    assert check_where_kernels_run(ck).verdict == "wrong"


def test_the_tpu_evaluator_draws_a_problems_inputs_once() -> None:
    """The configs of one problem share their inputs: drawn and put on the device once per process (attention
    8k's take ~25 s to draw), new ones for other shapes. Here the device is the CPU; on a TPU it is the chip."""
    import jax

    from compiler.reference import make_inputs
    from compiler.tpu.runtime import to_jax
    from compiler.tune.evaluators import get_evaluator

    evaluator = get_evaluator("tpu")
    assert get_evaluator("tpu") is evaluator  # one per process, so a tuning run's candidates share it
    drawn = []

    def counting(specs, seed=0):
        drawn.append(seed)
        return make_inputs(specs, seed)

    device = jax.devices("cpu")[0]
    source = (EXAMPLES / "softmax.py").read_text()
    kernel = compiler.load(source).kernels["softmax"]
    small, other = (Problem(source, "softmax", kernel.resolve_args(f"x=f32[{n}, 256]"), "v5e") for n in (256, 512))
    first = evaluator._inputs(small.compile({"block_sizes": [256]}), device, counting, to_jax)
    again = evaluator._inputs(small.compile({"block_sizes": [128]}), device, counting, to_jax)
    assert again[0][0] is first[0][0] and drawn == [0]
    evaluator._inputs(other.compile({"block_sizes": [128]}), device, counting, to_jax)
    assert drawn == [0, 0]


def test_a_measurement_also_refines_the_kernel_s_default_config() -> None:
    """On the v5e the model's pick of attention 8k ran 104.3 ms and its default 97.6: a measuring evaluator
    measures the default beside the model's best, an estimate (compile, schedule) only the model's best."""
    from compiler.tune.refine import Candidate, refine, with_default

    problem = _problem("softmax", 1)
    default = dict(problem.load_kernel().default_config(problem.args, problem.chip))
    ranked = [Candidate({"block_sizes": [b]}, 1e-3 + i * 1e-6, {}, "model") for i, b in enumerate([8, 16, 32, 64])]
    ranked.append(Candidate(default, 2e-3, {}, "model"))
    moved, count = with_default(problem, ranked, 2)
    assert count == 3 and [c.config for c in moved[:3]] == [{"block_sizes": [8]}, {"block_sizes": [16]}, default]
    assert with_default(problem, ranked, 5) == (ranked, 5)  # already among those refined
    assert with_default(problem, ranked[:4], 2) == (ranked[:4], 2)  # the search never scored it

    measured = []

    class Recording(InlineExecutor):
        def map_unordered(self, fn, items):
            measured.extend(items)
            return [(item, (1e-3, {})) for item in items]

    key = TrialKey(problem.load_kernel().source_hash, problem.shape_key, problem.chip)
    refine(problem, "compile", 2, ranked, Recording(), key.with_evaluator("compile"), None, None, [])
    assert default not in measured and len(measured) == 2
    measured.clear()
    refine(problem, "tpu", 2, ranked, Recording(), key.with_evaluator("tpu"), None, None, [])
    assert measured[-1] == default and len(measured) == 3


def test_a_measurement_climbs_from_the_best_config_it_measured() -> None:
    """On the v5e the model's four best batch_softmax configs ran 3.27-3.30 ms and blocks one or two steps away
    3.16: after the model's best (and the default) a measuring evaluator measures the neighbours of the best it
    measured, the model's favourites first, and goes on from a better one. Here the chip's times come from a
    recording executor whose fastest block is 128 rows, three steps from the model's 16."""
    from compiler.tune.refine import CLIMB_WIDTH, Candidate, climb, refine

    problem = _problem("softmax", 1)
    rows = lambda config: config["block_sizes"][0]  # noqa: E731
    ranked = [Candidate({"block_sizes": [b]}, 1e-3 + i * 1e-6, {}, "model") for i, b in enumerate([16, 8, 32])]
    measured = []

    class Recording(InlineExecutor):
        def map_unordered(self, fn, items):
            measured.extend(rows(c) for c in items)
            return [(c, (1e-3 * (1 + abs(math.log2(rows(c) / 128))), {})) for c in items]

    key = TrialKey(problem.load_kernel().source_hash, problem.shape_key, problem.chip)
    kept = refine(problem, "tpu", 1, ranked, Recording(), key.with_evaluator("tpu"), None, None, [])
    # the model's best (the search never scored the default), then one step a round toward the chip's best
    assert measured[0] == 16 and set(measured[1:3]) == {8, 32} and measured[3:] == [64, 128]
    assert rows(kept[0].config) == 128 and kept[0].seconds == 1e-3
    measured.clear()  # a run whose --budget is spent measures the model's best and does not climb
    refine(problem, "tpu", 1, ranked, Recording(), key.with_evaluator("tpu"), None, None, [], time.monotonic() - 1)
    assert measured == [16]
    near = climb(problem, {"block_sizes": [64]}, set())
    assert {rows(c.config) for c in near} == {32, 128} and len(near) <= CLIMB_WIDTH


@without_tpu
def test_tpu_evaluator_refuses_without_a_tpu() -> None:
    why = probe_tpu("v7x")
    assert why is not None and "no TPU" in why


@pytest.mark.libtpu
def test_compile_evaluator_refines_with_libtpu() -> None:
    from compiler.tpu.libtpu_compile import libtpu_available

    if not libtpu_available():
        pytest.skip("libtpu is not installed")
    problem = _problem("add", 0)
    result = tune(problem, TuneOptions(evaluator="compile", refine=1, verify=False))
    best = result.best
    assert best.evaluator == "compile" and best.metrics["compile_seconds"] > 0
    assert best.metrics["refined_from_op_counts"] == ["add_kernel"]
    assert best.metrics["op_categories"]["vector_alu"] > 0
    assert result.to_json()["estimate"] is True


def test_search_compiles_each_config_once_and_checks_only_the_winner(monkeypatch) -> None:
    import compiler.tune.driver as driver

    problem = _problem("attention", 0)
    compiles: list[str] = []
    checks: list[dict] = []
    original = compiler.api.Kernel.compile

    too_big: list[str] = []

    def counting(self, args=None, config=None, chip="v7x", shape_set=None, **kwargs):
        compiles.append(repr(compiler.Config(dict(config))))
        ck = original(self, args, config, chip, shape_set, **kwargs)
        if ck.vmem.verdict == "out_of_vmem":
            too_big.append(compiles[-1])
        return ck

    def fake_gate_case(problem, config):
        checks.append(dict(config))
        return driver.CorrectnessResult("ok", "checked", "small")  # what a case that needs no run gives

    monkeypatch.setattr(compiler.api.Kernel, "compile", counting)
    monkeypatch.setattr(driver, "gate_case", fake_gate_case)
    result = tune(problem, TuneOptions(max_evals=120))
    assert len(compiles) == len(set(compiles))  # pruning and evaluating one config: one compile
    pruned_oom = sum(n for why, n in result.pruned_reasons.items() if why.startswith("out of VMEM"))
    assert len(too_big) < pruned_oom  # some OOM configs were pruned unseen (the last batch's configs are
    # compiled to check them even when max_evals leaves them unevaluated, so compiles are not counted)
    assert checks == [result.best.config]


def test_vmem_frontier_prunes_only_configs_that_do_not_fit() -> None:
    import random

    from compiler.tune.kernel_space import KernelSpace

    implied = 0
    for name, shape_set in (("attention", 1), ("bmm", 0)):
        problem = _problem(name, shape_set)
        kernel = problem.load_kernel()
        space = KernelSpace(problem, kernel, kernel.config_space(problem.args, "v7x"))
        rng = random.Random(1)
        for _ in range(400):
            config = space.to_config({n: rng.choice(v) for n, v in space.space.dimensions})
            if space._implied_oom(config):
                implied += 1
                assert problem.compile(config, emit=False).vmem.verdict == "out_of_vmem", dict(config)
            space.is_valid(config)
    assert implied > 100


def test_gate_gives_up_after_the_winner_and_the_runner_up(monkeypatch) -> None:
    import compiler.tune.driver as driver

    checks: list[dict] = []

    def always_wrong(case, seed=0):
        checks.append(dict(case.config))
        return driver.CorrectnessResult("wrong", "bad", "small")

    monkeypatch.setattr(driver, "verify", always_wrong)
    result = tune(_problem("softmax", 1), TuneOptions())
    assert result.best is None and len(checks) == 2
    assert [r["config"] for r in result.rejected] == checks


def test_a_vmem_rejection_passes_over_the_configs_it_shows_would_not_fit_either(monkeypatch) -> None:
    """The TPU compiler's need for the winner, against the VMEM report's total, is the report's shortfall for
    this kernel: candidates it would put over the chip's limit are passed over unchecked, and the gate goes on
    past its two attempts (a VMEM rejection is not a wrong answer) to the first that can fit."""
    import compiler.tune.driver as driver

    source = (EXAMPLES / "softmax.py").read_text()
    kernel = compiler.load(source).kernels["softmax"]
    problem = Problem(source, "softmax", kernel.shape_sets[0], "v5e", str(EXAMPLES / "softmax.py"), 0)
    limit = get_chip("v5e").max_vmem_limit_bytes
    monkeypatch.setattr(driver.TuneRun, "_current_first", lambda run, ranked: ranked)  # the model's own order
    ranking = tune(problem, TuneOptions(verify=False)).top
    first = ranking[0]
    shortfall = limit / first.metrics["vmem_bytes"]  # the compiler needed the whole limit, and a byte more
    original, asked = driver.gate_case, []

    def libtpu_says(problem, config):
        asked.append(dict(config))
        if len(asked) == 1:  # what tpu_rejects returns when libtpu runs out of VMEM at the real shapes
            return CorrectnessResult("failed", "the TPU compiler rejects it: HPL302", "real", vmem_needed_bytes=limit + 1,
                                     vmem_estimated_bytes=first.metrics["vmem_bytes"])
        return original(problem, config)

    monkeypatch.setattr(driver, "gate_case", libtpu_says)
    result = tune(problem, TuneOptions(), executor=InlineExecutor())
    over = [c.config for c in ranking[1:] if c.metrics["vmem_bytes"] * shortfall > limit]
    fits = [c.config for c in ranking[1:] if c.metrics["vmem_bytes"] * shortfall <= limit]
    assert over and fits, [c.metrics["vmem_bytes"] for c in ranking]
    assert asked == [first.config, fits[0]]  # the ones over were never checked
    assert result.best.config == fits[0] and result.best.correctness.verdict == "ok"
    assert not {repr(c) for c in over} & {repr(c.config) for c in result.top}
    assert any(f"{len(over)} configs left out unchecked" in n and "128 MiB v5e allows" in n for n in result.notes), (
        result.notes)


def test_a_check_that_asked_the_tpu_compiler_is_remembered_with_its_verdict(tmp_path) -> None:
    """The TPU compiler's rejection at the real shapes is kept with the gate's other verdicts (what it needed
    included), so a second run never compiles that config with libtpu again; a case whose real-shape module
    differs is not answered by it, nor one that did not ask the TPU compiler."""
    from dataclasses import replace

    from compiler.results import AnalysisCache
    from compiler.tune.correctness import RealCompile
    from compiler.tune.verdicts import Verdicts

    problem = _problem("softmax", 0)
    kernel = problem.load_kernel()
    config = kernel.default_config(problem.args, get_chip("v5e"))
    case = prepare_check(kernel, problem.args, config, get_chip("v5e"))
    real = RealCompile.of(kernel.compile(args=dict(problem.args), config=dict(config), chip=get_chip("v5e")))
    case = replace(case, real=real)
    rejected = CorrectnessResult("failed", "the TPU compiler rejects it at ...: HPL302 out of VMEM", real.shapes,
                                 vmem_needed_bytes=200 << 20, vmem_estimated_bytes=real.vmem_total_bytes,
                                 tpu_compiler="rejects")
    Verdicts(AnalysisCache(tmp_path / "a.sqlite")).keep(case, 0, rejected)
    again = Verdicts(AnalysisCache(tmp_path / "a.sqlite"))
    got = again.recall(case, 0)
    assert got is not None and got.verdict == "failed" and got.tpu_compiler == "rejects", got
    assert (got.vmem_needed_bytes, got.vmem_estimated_bytes) == (200 << 20, real.vmem_total_bytes)
    assert again.recall(replace(case, real=replace(real, source=real.source + "\n")), 0) is None
    assert again.recall(replace(case, real=None), 0) is None
    # a check that failed for another reason (it raised) is still tried again
    again.keep(case, 1, CorrectnessResult("failed", "the generated kernel raised", real.shapes))
    assert again.recall(case, 1) is None


def test_the_warm_up_starts_the_reference_process() -> None:
    from compiler.tune.correctness import reference_process
    from compiler.tune.warm_gate import warm_up

    reference_process().close()
    warm_up()
    assert reference_process()._proc is not None and reference_process()._proc.is_alive()


def test_a_fresh_gate_worker_forks_its_reference_process_and_a_busy_one_spawns_it(tmp_path) -> None:
    """The warm-up forks the reference worker from the fresh gate worker (torch imported, nothing run, no jax):
    it has torch without importing it; a process with jax spawns one. Either way the gate's verdicts hold."""
    import pickle
    import subprocess
    import sys

    from compiler.tune.evaluators import gate_case

    case = gate_case(_problem("softmax", 1), {"block_sizes": [256]})
    (tmp_path / "case.pkl").write_bytes(pickle.dumps(case))
    code = (
        "import pickle\n"
        "from compiler.tune.correctness import reference_process\n"
        "from compiler.tune.evaluators import verify\n"
        "from compiler.tune.warm_gate import warm_up\n"
        f"case = pickle.loads(open({str(tmp_path / 'case.pkl')!r}, 'rb').read())\n"
        "warm_up()\n"
        "print(type(reference_process()._proc._popen).__module__, verify(case).verdict)\n"
        "reference_process().close()\n"
        "reference_process().start(fork=True)\n"  # jax is imported now
        "print(type(reference_process()._proc._popen).__module__, verify(case).verdict)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.stdout.split() == ["multiprocessing.popen_fork", "ok", "multiprocessing.popen_spawn_posix", "ok"], (
        out.stderr[-2000:])


def test_the_gate_worker_runs_a_prepared_case_without_tracing(tmp_path) -> None:
    """The tuning process compiles the gate's case; the worker only runs it (no tracer, so no torch._dynamo,
    which tracing imports), and the case's verdict is the same as a check done all in one process."""
    import pickle
    import subprocess
    import sys

    from compiler.tune.evaluators import gate_case

    problem = _problem("softmax", 1)
    case = gate_case(problem, {"block_sizes": [256]})
    (tmp_path / "case.pkl").write_bytes(pickle.dumps(case))
    code = (
        "import pickle, sys\n"
        "from compiler.tune.evaluators import verify\n"
        f"case = pickle.loads(open({str(tmp_path / 'case.pkl')!r}, 'rb').read())\n"
        "print(verify(case).verdict, 'torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.stdout.split() == ["ok", "False"], out.stderr[-2000:]


def test_a_plan_only_compile_has_the_same_plan_and_no_code() -> None:
    kernel = compiler.load(EXAMPLES / "attention.py").kernels["attention"]
    full = kernel.compile(shape_set=0, config=SEED_UNROLL)
    plan_only = kernel.compile(shape_set=0, config=SEED_UNROLL, emit=False)
    assert plan_only.plan == full.plan and plan_only.vmem.total_bytes == full.vmem.total_bytes
    assert plan_only.source == "" and full.source
    with pytest.raises(RuntimeError, match="emit=False"):
        plan_only()


def test_a_time_budget_is_a_cap_not_a_target() -> None:
    # the editor passes a budget (tuneBudgetSeconds): the search still ends when it has converged
    result = tune(_problem("bmm", 0), TuneOptions(budget=3600, verify=False))
    assert result.strategy == "pattern" and result.stop_reason == "converged"


class _ThreadExecutor(Executor):
    """A real executor on one thread that notes what it is given and when (the search's last progress phase)."""

    parallelism = 1

    def __init__(self, phases: list[str]):
        self._pool = ThreadPoolExecutor(1)
        self.phases = phases
        self.submitted: list[tuple[dict, str]] = []

    def submit(self, fn, *args):
        self.submitted.append((dict(args[0].config), self.phases[-1] if self.phases else ""))
        return self._pool.submit(fn, *args)

    def shutdown(self, cancel: bool = True) -> None:
        self._pool.shutdown(wait=not cancel, cancel_futures=cancel)


@pytest.mark.parametrize("reports", ["as usual", "rare"])
def test_a_best_config_that_stands_is_checked_during_the_search_and_only_once(reports: str, monkeypatch) -> None:
    """attention 8k finds its winner well before the search ends: its check starts while the search goes on (a
    progress phase of "search" when it is submitted), the gate then waits for that check rather than starting
    another, and the winner is reported with its verdict. How long a best config has stood is counted at every
    result, not at progress reports ("rare": never during the search): those come at most every 0.25 s, and a
    search that outran them (attention 8k reported at evaluations 151, 393 and 605: its winner, found at 199, was
    never seen standing) checked its winner only after the search."""
    from compiler.tune import driver

    if reports == "rare":
        search = driver.search
        monkeypatch.setattr(driver, "search", lambda *a, **kw: search(*a, **{**kw, "progress_interval": 1e9}))
    phases: list[str] = []
    executor = _ThreadExecutor(phases)
    try:
        result = tune(_problem("attention", 0), TuneOptions(), executor=executor,
                      progress=lambda p: phases.append(p.phase))
    finally:
        executor.shutdown()
    # since the VMEM report counts a short unrolled loop's overlapping trips (docs/vmem-calibration.md, vmem-short:
    # [1, 2048, 4096] unrolled is 67.0 MiB, libtpu needs 67.3 of v7x's 64) the model's best of attention 8k on v7x
    # is [1, 1024, 8192] unrolled (52.4 MiB, libtpu 50.0), and a config of the same blocks stands first (another
    # loop order): the check started mid-search may be that one; the winner is still checked exactly once
    assert result.best.config["block_sizes"] == [1, 1024, 8192] and result.best.config["pallas_loop_type"] == "unroll"
    assert result.best.correctness.verdict == "ok"
    assert executor.submitted[0][1] == "search"
    assert [config for config, _ in executor.submitted].count(result.best.config) == 1


def test_searches_and_checks_run_with_the_collector_paused_and_restore_it(monkeypatch) -> None:
    """collector.py: no automatic garbage collection while a search or a gate check runs; the process's own
    setting is back afterwards (on, or off where it was off)."""
    import gc

    from compiler.tune import driver, evaluators

    during: list[bool] = []

    def watched(fn):
        def call(*args, **kwargs):
            during.append(gc.isenabled())
            return fn(*args, **kwargs)
        return call

    monkeypatch.setattr(driver, "search", watched(driver.search))
    monkeypatch.setattr(evaluators, "check_case", watched(evaluators.check_case))
    assert gc.isenabled()
    result = tune(_problem("softmax", 1), TuneOptions(max_evals=20))
    assert result.best is not None and during == [False, False]  # the search, then the winner's check
    assert gc.isenabled()
    gc.disable()
    try:
        tune(_problem("softmax", 1), TuneOptions(max_evals=20, verify=False))
        assert not gc.isenabled()
    finally:
        gc.enable()


SCALED_BY_TUNABLE = """
import helion
import helion.language as hl
import torch
from helion.autotuner import PowerOfTwoFragment


@helion.kernel(static_shapes=True)
def scaled(x: torch.Tensor) -> torch.Tensor:
    factor = hl.register_tunable("factor", PowerOfTwoFragment(1, 8))
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t, :] = x[t, :] * factor
    return out
"""


def test_the_gate_runs_the_eager_reference_with_the_configs_tunables():
    """A config that sets a kernel's own tunable is checked against the eager kernel with that value (with
    the fragment's default instead, every output would be off by the factor)."""
    kernel = compiler.load(SCALED_BY_TUNABLE).kernels["scaled"]
    ck = kernel.compile(args="x=f32[32, 128]", config={"block_sizes": [16], "factor": 4})
    assert "* 4" in ck.source
    verdict = check_compiled(ck)
    assert verdict.verdict == "ok", verdict.message


@libtpu
def test_gate_fails_a_config_the_tpu_compiler_rejects_at_the_real_shapes(monkeypatch) -> None:
    """Attention 8k at [1, 4096, 1024]: the tuner's v5e pick (unroll) was 117 MiB by the VMEM report (fits v5e's
    128), 168.66 MiB to the TPU compiler, and it failed on a v5e. The reduced shapes the gate runs fit; the real
    ones do not, so the gate asks libtpu at the real shapes and the runner-up is tried instead of reporting this
    one. The search's half (prepare_check) never waits on libtpu: it hands the real-shape module to the check,
    which asks while the reduced run goes on. (~50 s of libtpu.) The report now counts every unrolled iteration on
    v5e and says 168 MiB too (docs/vmem-calibration.md); the gate asks libtpu all the same."""
    import compiler.tpu.libtpu_compile as libtpu_compile

    problem = _problem("attention", 0)
    kernel = problem.load_kernel()
    config = {"block_sizes": [1, 4096, 1024], "loop_orders": [[1, 0]], "pallas_loop_type": "unroll"}
    real_compile = libtpu_compile.TpuCompiler.compile
    asked = []

    def counted(self, *args, **kwargs):
        asked.append(time.perf_counter())
        return real_compile(self, *args, **kwargs)

    monkeypatch.setattr(libtpu_compile.TpuCompiler, "compile", counted)
    case = prepare_check(kernel, problem.args, config, get_chip("v5e"))
    assert not isinstance(case, CorrectnessResult) and case.real is not None, case
    assert asked == []  # preparing the case compiled nothing with libtpu
    verdict = check_case(case)
    assert len(asked) == 1
    assert verdict.verdict == "failed" and verdict.tpu_compiler == "rejects", verdict
    assert "the TPU compiler rejects it" in verdict.message and "HPL302" in verdict.message, verdict.message
    # what it needed against the report's total, for the gate to pass over configs that would fall as short
    assert verdict.vmem_needed_bytes > get_chip("v5e").max_vmem_limit_bytes
    assert 0.9 <= verdict.vmem_estimated_bytes / verdict.vmem_needed_bytes <= 1.15, verdict


@libtpu
def test_a_dropped_early_check_stops_its_tpu_compile() -> None:
    """The search's early candidate is checked while the search goes on; when another config wins, its check is
    cancelled, and the TPU compiler's compile of it (attention 8k unrolled on v7x: ~7 CPU-seconds) is stopped
    rather than run to its end beside the winner's: its verdict comes back "unknown" (never remembered), not
    "accepts"."""
    from concurrent.futures import Future

    from compiler.tune import correctness
    from compiler.tune.driver import _both

    problem = _problem("attention", 0)
    config = {"block_sizes": [1, 1024, 8192], "pallas_loop_type": "unroll"}
    case = prepare_check(problem.load_kernel(), problem.args, config, get_chip("v7x"))
    assert not isinstance(case, CorrectnessResult) and case.real is not None, case
    asking = correctness.ask_tpu_compiler(case)
    check = _both(Future(), asking)  # the reduced run not started yet, as when the worker is busy
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # until its libtpu worker runs (jax imported, the compile sent)
        compiler_ = correctness._compiling.get(asking)
        if compiler_ is not None and compiler_._proc is not None:
            break
        time.sleep(0.01)
    else:
        pytest.fail("the ask never reached its libtpu worker")
    assert check.cancel()
    verdict = asking.result(timeout=300)
    assert verdict.tpu_compiler == "unknown" and "ended by crash" in verdict.message, verdict


def test_a_deterministic_search_is_remembered_and_a_budgeted_one_is_not(tmp_path, monkeypatch) -> None:
    """With the model and no time budget the search gives the same results every time: the second run of the same
    problem takes them from the analysis cache instead of searching (the same ranking, evaluations and trials in
    the store); a search bounded by seconds could go further next time, so it is searched again."""
    import compiler.tune.driver as driver
    from compiler.results import AnalysisCache
    from compiler.tune.verdicts import Verdicts

    problem = _problem("softmax", 0)
    cache = tmp_path / "a.sqlite"
    first = tune(problem, TuneOptions(verify=False), verdicts=Verdicts(AnalysisCache(cache)))
    searched = []
    original = driver.search
    monkeypatch.setattr(driver, "search", lambda *a, **k: searched.append(1) or original(*a, **k))
    store = TuningStore(tmp_path / "s.sqlite")
    again = tune(problem, TuneOptions(verify=False), store=store, verdicts=Verdicts(AnalysisCache(cache)))
    assert searched == []
    assert [c.config for c in again.top] == [c.config for c in first.top]
    assert [c.seconds for c in again.top] == [c.seconds for c in first.top]
    assert again.evaluated == first.evaluated and again.pruned == first.pruned
    assert any("search remembered" in n for n in again.notes), again.notes
    assert store.best(TrialKey(problem.load_kernel().source_hash, problem.shape_key, "v7x", "model")).config == (
        first.best.config)
    tune(problem, TuneOptions(verify=False, budget=30.0), verdicts=Verdicts(AnalysisCache(cache)))
    assert searched == [1]
    # another file's text (an import changed) is another search
    edited = Problem("import os\n" + problem.source, problem.kernel, problem.args, problem.chip, problem.path, 0)
    tune(edited, TuneOptions(verify=False), verdicts=Verdicts(AnalysisCache(cache)))
    assert searched == [1, 1]


def test_a_cancelled_check_is_not_remembered_and_logs_no_error(tmp_path, caplog) -> None:
    """The search's early candidate that does not win has its check cancelled; the callback that remembers a
    check's verdict must leave it alone. Before, it asked the cancelled future for its exception, which raises:
    every cold `helion-pallas tune examples/attention.py --chip v7x` printed "exception calling callback ...
    CancelledError" with a traceback on stderr."""
    import logging
    import threading
    from dataclasses import replace

    from compiler.results import AnalysisCache
    from compiler.tune.driver import submit_check
    from compiler.tune.verdicts import Verdicts

    problem = _problem("softmax", 0)
    kernel = problem.load_kernel()
    config = kernel.default_config(problem.args, get_chip("v7x"))
    case = prepare_check(kernel, problem.args, config, get_chip("v7x"))
    assert not isinstance(case, CorrectnessResult), case
    case = replace(case, real=None)  # the reduced run alone: no libtpu
    verdicts = Verdicts(AnalysisCache(tmp_path / "a.sqlite"))
    release = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as busy:
        blocker = busy.submit(release.wait, 60)  # the gate worker is busy: the check stays queued
        with caplog.at_level(logging.ERROR, logger="concurrent.futures"):
            check = submit_check(busy, case, 0, verdicts)
            assert check.cancel()
        release.set()
        blocker.result(timeout=60)
    assert not [r for r in caplog.records if "exception calling callback" in r.getMessage()], caplog.text
    assert verdicts.recall(case, 0) is None


def test_the_check_sent_during_attention_32k_s_search_is_of_its_winner() -> None:
    """A check sent during the search for a config that then does not win is wasted: its libtpu compile at the
    real shapes is stopped partway (attention 32k on v7x: [1, 256, 2048] stood for 198 evaluations before
    [1, 256, 16384] beat it; sent after 100, it cost ~6 CPU-seconds of libtpu and a worker restart in every cold
    `helion-pallas tune examples/attention.py`). A best config must stand long enough that the one sent is the
    winner, and the winner is still sent before the search ends."""
    problem = _problem("attention", 1)
    sent: list[dict] = []
    run = TuneRun(problem, TuneOptions(), executor=InlineExecutor(), early_sink=lambda config, case: sent.append(config))
    assert sent == [run.candidates[0].config], (sent, run.candidates[0].config)
