"""The conformance suite in CI: every kernel with one config and every loop strategy (a compiled kernel must
never fail when run, whichever strategy the editor or the tuner picks), plus the runner's own behaviour on small
synthetic cases. The whole suite (every config too): `python -m tests.conformance`.

The runs are compiled for the chip a real TPU answered for (tests/chip_truth/) and, where libtpu is installed,
each first asks the deviceless TPU compiler: the verdicts must be the chip's own, run by run (a CPU verdict
predicts the chip's; a case added since then fails until the chip is asked again). A run the TPU compiler
rejects is run in interpret mode all the same, so one pass answers both questions.

Each case is its own test (no session-wide run), so pytest-xdist spreads the cases over both cores; one config
per case keeps the CI time to about twice the one-strategy subset (509 runs instead of 245; all configs too
would be 576)."""

import textwrap

import pytest
from conformance.case import discover, passing
from conformance.runner import Target, exit_code, run_all, run_path, summary_line
from test_chip_truth import CHIP, CONFORMANCE, REPO, expected_verdicts, verdicts

from compiler.tpu.libtpu_compile import libtpu_available

CASES = discover()
FLOOR = passing()
ASK_LIBTPU = libtpu_available()
TARGET = Target(CHIP, tpu_compile=ASK_LIBTPU, interpret_rejected=True)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_conformance_every_strategy(path):
    """No kernel may compile and then give a wrong answer or fail when run, for any loop strategy (a
    diagnostic is fine); a kernel on the recorded floor (PASSING.txt) must still pass. A case that records a
    known compiler bug runs in full and must still show it (a fixed bug makes this fail until the marker is
    removed), then counts as an expected failure."""
    name = path.stem
    ran = run_path(path, fast=True, every_strategy=True, target=TARGET)
    if ASK_LIBTPU:
        unit = str(path.relative_to(REPO))
        assert unit in CONFORMANCE, f"{unit} was never run on a TPU: record the chip's verdicts again"
        here = [{"strategy": r.strategy, "outcome": r.outcome, "code": r.code} for r in ran.runs]
        details = "; ".join(f"{r.strategy}: {r.outcome} {r.detail[:200]}" for r in ran.runs)
        chip_said = "; ".join(f"{r.get('strategy')}: {r['outcome']} {r.get('detail', '')[:200]}"
                              for r in CONFORMANCE[unit])
        want, whose = expected_verdicts(unit)
        assert verdicts(here) == want, f"here: {details}\n{whose}: {want}; the chip said: {chip_said}"
    res = ran.interpreted()
    runs = "; ".join(f"{r.strategy or 'grid'} {r.config or ''}: {r.outcome} {r.detail}" for r in res.runs)
    assert not res.error, res.error
    if res.known:
        still = "MISMATCH" if res.known.startswith("known mismatch") else "runtime-error"
        assert res.status == still, f"{name} is marked as a known bug but now: {runs}; remove the marker"
        pytest.xfail(res.known)
    assert res.status not in ("MISMATCH", "runtime-error", "not-rejected"), runs
    if name in FLOOR:
        assert res.passed, f"{name} is on the passing floor but now: {runs}"


def test_passing_floor_names_existing_cases():
    assert FLOOR, "PASSING.txt is missing or empty"
    assert FLOOR <= {p.stem for p in CASES}, FLOOR - {p.stem for p in CASES}


# -- the runner itself, on cases written for the purpose --------------------------------------------------

KERNEL = '''
import helion
import helion.language as hl
import torch


# helion: args(x=f32[16, 128])
@helion.kernel(static_shapes=True)
def {name}(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size()):
        out[t] = {body}
    return out
'''


def _case(tmp_path, name, body, tail):
    (tmp_path / f"{name}.py").write_text(KERNEL.format(name=name, body=body) + textwrap.dedent(tail))


def test_runner_classifies_and_counts(tmp_path):
    _case(tmp_path, "right", "x[t] * 2.0", "\ndef reference(x):\n    return x * 2.0\n")
    _case(tmp_path, "wrong", "x[t] * 2.0", "\ndef reference(x):\n    return x * 3.0\n")
    _case(tmp_path, "wrong_dtype", "x[t] * 2.0", "\ndef reference(x):\n    return (x * 2.0).double()\n")
    _case(tmp_path, "writes_input", "x[t] * 2.0",
          "\ndef reference(x):\n    y = x * 2.0\n    x.zero_()\n    return y\n")
    _case(tmp_path, "refused", "hl.inline_asm_elementwise('', '', [x[t]], torch.float32, True, 1)",
          "\ndef reference(x):\n    return x\n")
    _case(tmp_path, "rejected", "hl.inline_asm_elementwise('', '', [x[t]], torch.float32, True, 1)",
          "\nREJECT = r'HPL102 .*inline_asm_elementwise'\n")
    _case(tmp_path, "accepted", "x[t] + 1.0", "\nREJECT = r'HPL102'\n")
    results = {r.name: r for r in run_all(discover(directory=tmp_path))}
    status = {name: r.status for name, r in results.items()}
    assert status == {"right": "pass", "wrong": "MISMATCH", "wrong_dtype": "MISMATCH",
                      "writes_input": "MISMATCH", "refused": "diagnosed", "rejected": "rejected",
                      "accepted": "not-rejected"}
    assert "float64" in results["wrong_dtype"].runs[0].detail
    assert "argument `x` afterwards" in results["writes_input"].runs[0].detail
    ordered = [results[n] for n in sorted(results)]
    assert summary_line(ordered) == "2/7 kernels pass; 1 diagnosed; 3 silent mismatches"
    assert exit_code(ordered) == 1
    assert exit_code([results["right"], results["refused"], results["rejected"]]) == 0


def test_command_line_ends_with_the_summary(capsys):
    from conformance.__main__ import main

    assert main(["-k", "loop_type_invalid"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "1/1 kernels pass; 0 diagnosed; 0 silent mismatches"
    assert main(["-k", "no_such_case"]) == 2
