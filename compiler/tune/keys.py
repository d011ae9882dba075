"""What identifies a tuning problem: kernel source (normalised), argument shapes, chip, compiler version (code
generation and the performance model).

Stored results are looked up by these keys, so they must change exactly when a result could change:
editing code changes the hash, reformatting or commenting does not, and neither does rewriting the
`config=` of the decorator (which is what applying a tuned config does).
"""

from __future__ import annotations

import hashlib
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..support.syntax import parse

if TYPE_CHECKING:  # compiler.ir.specs imports torch; the store (and its worker processes) must stay light
    from ..ir.specs import ArgSpec

# Bump whenever code generation changes in a way that can change a kernel's speed or validity:
# every stored result keyed with an older version is then ignored.
CODEGEN_VERSION = "helion-ls-0.1.0/3"  # 2: pallas_load_buffer_count is per tensor argument; 3: an
# emit_pipeline's carried values count in its VMEM temporaries (the VMEM limit it asks for, pruning, verdicts)


def model_fingerprint(folder: Path = Path(__file__).parent) -> str:
    """The performance model's code and constants, hashed: a stored estimate of another model is not this one's
    (the editor would put an old model's best beside the current config's estimate by this one). Read as bytes,
    so the store's light processes import nothing for it."""
    digest = hashlib.sha256()
    for name in ("model.py", "constants.py"):
        digest.update((folder / name).read_bytes())
    return digest.hexdigest()[:10]


COMPILER_VERSION = f"{CODEGEN_VERSION}+model.{model_fingerprint()}"

@dataclass(frozen=True)
class TrialKey:
    """The tuning problem a trial belongs to.

    `evaluator` ("model" | "compile" | "tpu") is None in a query key that means "any evaluator".
    """

    source_hash: str
    shape_key: str
    chip: str
    evaluator: str | None = None
    compiler_version: str = COMPILER_VERSION

    def with_evaluator(self, evaluator: str | None) -> TrialKey:
        return replace(self, evaluator=evaluator)


def normalized_source_hash(function_sources: Sequence[str]) -> str:
    """Hash of a kernel function and the same-file helpers it uses, given as source texts.

    The same normalisation as `Kernel.source_hash` (compiler.frontend.module): whitespace, comments,
    docstrings, positions, the decorator's `config=`/`configs=` and the order of the functions do not
    matter. Raises SyntaxError for a source that does not parse.
    """
    from ..frontend.module import normalized_hash

    nodes = []
    for src in function_sources:
        nodes.extend(parse(textwrap.dedent(src)).body)
    return normalized_hash(nodes, {})


def shape_key(args: dict[str, ArgSpec]) -> str:
    """Canonical text of a shape set, e.g. `q=bf16[8, 32, 8192, 256], eps=1e-05` (argument order kept)."""
    from ..ir.specs import format_args

    return format_args(args)
