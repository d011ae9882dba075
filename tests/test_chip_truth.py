"""A CPU verdict predicts the chip's: every row a real TPU recorded (tests/chip_truth/, written by
`python -m tests.chip_truth.record` on the chip) gets the same verdict here, on a machine without a TPU, from
interpret mode plus the deviceless libtpu compile for that chip.

A unit whose generated code changed after the chip answered (a codegen fix) is listed under "awaiting" with why and
the CPU's new verdicts: CI holds the CPU to those until `python -m tests.chip_truth.record` asks the chip again
(the unit is left out of "done", so that run records just the awaiting units, and drops them from the list).

Conformance rows compare (loop strategy, outcome, diagnostic code) run by run — a kernel the chip's compiler
refused must be refused here with the same code, one the chip ran must run and match here; tests/test_conformance.py
holds them, in the one pass it runs each case (`verdicts`). Check rows compare each kernel x loop strategy's
verdict of `helion-pallas check`, here. A row whose verdict changes fails until the
chip is asked again and the file re-recorded.
"""

import json
from pathlib import Path

import pytest
from conformance.case import KERNELS_DIR
from test_checks_libtpu import libtpu

from compiler.check import check_rows

REPO = Path(__file__).resolve().parents[1]
TRUTH = json.loads((REPO / "tests/chip_truth/v5e.json").read_text())
CHIP = TRUTH["chip"]
LOOP_TYPES = ["unroll", "emit_pipeline", "fori_loop"]


def _by_unit(suite: str) -> dict[str, list[dict]]:
    units: dict[str, list[dict]] = {}
    for row in TRUTH["rows"]:
        if row["suite"] == suite:
            units.setdefault(row["unit"].split(":", 1)[1], []).append(row)
    return units


CONFORMANCE = _by_unit("conformance")
CHECK = _by_unit("check")
AWAITING = TRUTH.get("awaiting", {})


def expected_verdicts(unit: str) -> tuple[list[tuple], str]:
    """The verdicts a conformance unit must get here, and whose they are: the chip's, or for a unit awaiting the
    chip, the CPU's verdicts since its code changed."""
    if unit in AWAITING:
        return [tuple(v) for v in AWAITING[unit]["cpu"]], f"awaiting the chip ({AWAITING[unit]['why']})"
    return verdicts(CONFORMANCE[unit]), "on the chip"


def test_the_record_covers_every_case_and_example():
    """A case or example added since the chip was asked is not yet held to it: record again on a TPU."""
    cases = {str(p.relative_to(REPO)) for p in KERNELS_DIR.glob("*.py")}
    examples = {str(p.relative_to(REPO)) for p in (REPO / "examples").glob("*.py")}
    assert cases <= set(CONFORMANCE), sorted(cases - set(CONFORMANCE))
    assert examples <= set(CHECK), sorted(examples - set(CHECK))
    assert TRUTH["machine"].startswith("TPU"), "recorded in interpret mode, not on a chip"


def test_awaiting_units_say_why_and_are_recorded_next():
    for unit, entry in AWAITING.items():
        assert entry.get("why") and entry.get("since") and entry.get("cpu"), unit
        assert f"conformance:{unit}" not in TRUTH["done"], f"{unit}: a record run on the chip must ask it again"
        assert unit in CONFORMANCE, f"{unit}: the chip's earlier rows stay until it answers again"


def verdicts(rows: list[dict]) -> list[tuple]:
    return [(r.get("strategy"), r["outcome"], r.get("code")) for r in rows]


@libtpu
@pytest.mark.parametrize("unit", sorted(CHECK), ids=[Path(u).stem for u in sorted(CHECK)])
def test_check_verdict_on_the_cpu_is_the_chips(unit):
    report = check_rows(str(REPO / unit), None, CHIP, LOOP_TYPES)
    here = {(r.kernel, r.loop_type): (r.verdict, r.eager) for r in report.rows}
    chip = {(r["kernel"], r["loop_type"]): (r["verdict"], r["detail"]) for r in CHECK[unit]}
    assert {k: v[0] for k, v in here.items()} == {k: v[0] for k, v in chip.items()}, f"here: {here}\nchip: {chip}"
