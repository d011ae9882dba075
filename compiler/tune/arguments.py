"""The `tune` subcommand's arguments (command.py runs it). Light on purpose: `helion-pallas` builds its whole
parser for every command, and `compile` of a remembered result imports no torch."""

from __future__ import annotations

import argparse

from ..ir.chips import CHIP_NAMES

EVALUATOR_NAMES = ["compile", "model", "schedule", "tpu"]  # evaluators.EVALUATORS' names (a test keeps them equal)


CASES_HELP = ("for a kernel whose shapes come from its input generator (vLLM's generate_inputs): which cases are its "
              "shape sets: 'all', or comma-separated case indices and parts of case labels ('num_tokens=128'); "
              "default: the smallest, a middle and the largest")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `tune` subcommand's arguments."""
    parser.add_argument("file", help="a Python file (or a Jupyter notebook) with @helion.kernel functions")
    parser.add_argument("-k", "--kernel", help="tune only this kernel (default: every kernel in the file)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--shape-set", type=int, metavar="N", help="tune only the N-th '# helion: args(...)' line"
    )
    which.add_argument("--args", metavar="SPECS", help='argument specs, e.g. "x=bf16[4096, 2560]"')
    parser.add_argument(
        "--chip", default="v7x", help=f"TPU to tune for: {', '.join(CHIP_NAMES)} (default v7x)"
    )
    parser.add_argument(
        "--evaluator",
        choices=[*EVALUATOR_NAMES, "auto"],
        default="model",
        help="model: analytic estimate (default); compile: + libtpu compile of the best; "
        "schedule: + the TPU compiler's own estimate of the best (libtpu's simulated cycles on v5e/v5p/v6e, "
        "bundles issued elsewhere); tpu: + wall-clock on a TPU; auto: tpu when this machine has a TPU of the "
        "chip tuned for that this command may use, else model",
    )
    parser.add_argument(
        "--executor",
        default="local",
        help="where evaluations run: local (process pool, default), local:N, inline, ray, ray:ADDRESS; the tpu "
        "evaluator measures with one worker per TPU chip of this machine (local, at most N with local:N) or one per "
        "TPU of the Ray cluster",
    )
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument(
        "--budget", type=float, metavar="SECONDS",
        help="at most this search time per shape set, the tpu evaluator's climb included (it usually converges sooner)"
    )
    budget.add_argument("--max-evals", type=int, metavar="N", help="at most this many search evaluations per shape set")
    parser.add_argument("--cases", metavar="SEL", help=CASES_HELP)
    parser.add_argument("--store", metavar="PATH", help="results store (default: the user cache directory)")
    parser.add_argument("--jobs", type=int, metavar="N",
                        help="search this many shape sets at once with the model evaluator (default: one per CPU)")
    parser.add_argument("--seed", type=int, default=0, help="search seed (results are deterministic for it)")
    parser.add_argument("--top", type=int, default=5, help="configs to list per shape set (default 5)")
    parser.add_argument("--json", action="store_true", help="print results as JSON on stdout")
    parser.add_argument("--progress", choices=["jsonl"], help="progress events as JSON lines on stderr")
    parser.add_argument(
        "--write-configs", nargs="?", const="", metavar="DIR",
        help="write each best where vLLM reads it: the shape set's case-key entry (else the default entry) of "
        "configs/<kernel>/<platform>.json for the chip (tpu_v5e.json, ...), in the kernel's configs/ folder "
        "(beside the file or above it) or in DIR",
    )


def add_crosscheck_arguments(parser: argparse.ArgumentParser) -> None:
    """The `crosscheck` subcommand's arguments (crosscheck_command.py runs it)."""
    from .crosscheck import TOP

    parser.add_argument("file", help="a Python file with @helion.kernel functions")
    parser.add_argument("-k", "--kernel", help="only this kernel (default: every kernel in the file)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--shape-set", type=int, metavar="N", help="only the N-th '# helion: args(...)' line")
    which.add_argument("--args", metavar="SPECS", help='argument specs, e.g. "x=bf16[4096, 2560]"')
    parser.add_argument("--chip", default="v7x", help=f"TPU: {', '.join(CHIP_NAMES)} (default v7x)")
    parser.add_argument("--top", type=int, default=TOP, help=f"model picks to check (default {TOP})")
    parser.add_argument("--store", metavar="PATH", help="results store (default: the user cache directory)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON on stdout")
    parser.add_argument("--progress", choices=["jsonl"], help="progress events as JSON lines on stderr")
