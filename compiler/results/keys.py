"""What a remembered result depends on: `UnitKey` (the unit) and `environment()` (the code computing it)."""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # compiler/
# the product's own version, and those whose versions change meta typing, lowering, libtpu
DISTRIBUTIONS = ("helion-ls", "torch", "jax", "jaxlib", "libtpu")


@dataclass(frozen=True)
class UnitKey:
    """One unit of analysis: a kernel for one shape set with the config its decorator gives that set."""

    source_hash: str  # Kernel.source_hash: the normalised kernel, its same-file helpers and the constants it reads
    shape_key: str  # format_args of the shape set; "" when the kernel has none
    config: str  # repr of the decorator's Config for the shape set; "" for the default
    chip: str
    file: str = ""  # the file's name: generated code names it (header, source comments)
    # for a shape set found in the file's calls: that call (a diagnostic may name it and point at it), so a
    # result is not shown again once the call has moved or another call gives the shapes
    origin: str = ""
    # Kernel.analysis_hash: everything else of the file the analysis may read (every import, constant and
    # module-level block, the functions they and the kernel name, its shape lines) and the other files read
    # for it (path and content hash); "" only in tests of the cache itself
    inputs: str = ""

    def digest(self, stage: str) -> str:
        """The row key of this unit's `stage` result under the current environment."""
        fields = [environment(), stage, self.source_hash, self.shape_key, self.config, self.chip, self.file, self.origin,
                  self.inputs]
        return hashlib.sha256(json.dumps(fields).encode()).hexdigest()


@functools.cache
def environment() -> str:
    """A fingerprint of everything besides the unit that a result depends on: the compiler's own source
    files (so an edited or upgraded compiler never reuses an older one's results), the Python version and
    the versions of the product itself, torch, jax, jaxlib and libtpu. Reads package metadata; imports none of them."""
    import importlib.metadata  # here: its import alone is a noticeable part of a worker's start

    h = hashlib.sha256(sys.version.encode())
    for name in DISTRIBUTIONS:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "-"
        h.update(f"\0{name}={version}".encode())
    for path in sorted(PACKAGE.rglob("*.py")):
        h.update(b"\0" + str(path.relative_to(PACKAGE)).encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()[:32]
