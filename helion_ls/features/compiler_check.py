"""The TPU compiler's checks of finished tunings (crosscheck.py queues them), told to the client: each state
change refreshes the lenses, a disagreement with the model is told to the user once, a failure is logged to
the client."""

from __future__ import annotations

from lsprotocol import types

from ..workers.tuning import TuneJob
from .host import Host


def register(ls: Host) -> None:
    def changed(job: TuneJob) -> None:
        ls.lenses.changed()
        name = f"{job.spec.kernel} (shape set {job.spec.shape_set}) on {job.spec.chip}"
        if job.state == "done" and (job.result or {}).get("disagrees"):
            ls.tell_user(f"{name}: {job.result['message']} (estimates: the model's and the TPU compiler's).")
        elif job.state == "failed":
            ls.log_to_client(f"TPU compiler check of {name} failed: {job.message}", types.MessageType.Warning)

    ls.checker.on_change = changed
