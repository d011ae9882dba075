"""Shared test set-up: jax stays on the CPU (libtpu, when installed, is only for the deviceless compile);
no analysis results are remembered unless a test asks for it."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
# Servers and commands started by the tests remember no analysis results (so no test sees another's, nor the
# user's); the tests of remembering give theirs a file of their own.
os.environ["HELION_LS_ANALYSIS_CACHE"] = "off"

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
MORE_KERNELS = REPO / "tests" / "kernels"  # kernels in the same language that the examples do not show
SHARED_KERNELS = REPO.parent / "shared" / "kernels"


def child_pythonpath(*first: Path) -> str:
    """PYTHONPATH for a process a test starts: this checkout (and `first`) ahead of what this process was given,
    never instead of it: where packages live on PYTHONPATH (a TPU VM's own jax, say), the child keeps them."""
    return os.pathsep.join([str(p) for p in (REPO, *first)] + [p for p in [os.environ.get("PYTHONPATH")] if p])


def _machine_tpu():
    from helion_ls.workers.machine_tpu import detect  # sysfs and /dev only: the chip is not claimed

    return detect()


MACHINE_TPU = _machine_tpu()
# The suite runs on a machine without a TPU (CI) and on a TPU VM: a test of what happens without a chip is
# skipped where there is one, and a test of the chip path runs only there.
without_tpu = pytest.mark.skipif(
    bool(MACHINE_TPU.device_files), reason="this machine has a TPU: the no-chip path is tested where there is none"
)
on_tpu = pytest.mark.skipif(MACHINE_TPU.chip is None, reason=f"needs a TPU VM ({MACHINE_TPU.why_none})")


def kernel_files() -> list[Path]:
    """The repo's examples, the extra test kernels and, when present beside the repo, the seed's kernels."""
    files = sorted(EXAMPLES.glob("*.py")) + sorted(MORE_KERNELS.glob("*.py"))
    if SHARED_KERNELS.is_dir():
        files += sorted(SHARED_KERNELS.glob("*.py"))
    return files


@pytest.fixture
def without_libtpu(monkeypatch):
    """As on a machine without the libtpu wheel: `check` and the gate get no TPU compiler verdict. For tests of
    interpret-mode behaviour whose kernels the TPU compiler rejects (a dynamic unaligned row offset, f16)."""
    import compiler.tpu.libtpu_compile as libtpu_compile

    monkeypatch.setattr(libtpu_compile, "libtpu_available", lambda: False)
