"""Whether the server may start work that runs the user's code, and if not, why — in words for the user.

Compiling, checking and hovering never run the user's file. Tuning does: its correctness check runs the
kernel eagerly (the kernel, its helpers and the imports and constants they use) to compare it with the
generated code. So tuning starts only when the user allows it, where the user trusts the code:
  helion.allowCodeExecution = false   never;
  helion.allowCodeExecution = true    unless the editor says the workspace is not trusted;
  helion.allowCodeExecution unset     only when the editor says the workspace is trusted.
The editor says so in initializationOptions.workspaceTrusted and helion/didChangeWorkspaceTrust; an editor
that says nothing about trust gets the setting's answer, so unset means no.
"""

from __future__ import annotations

WHY_TUNING_RUNS_CODE = (
    "Tuning checks its best config against the eager reference, which runs this file's kernel, its helpers "
    "and the imports and constants they use (not the rest of the module)."
)


def refusal(allow_setting: bool | None, workspace_trusted: bool | None) -> str | None:
    """None when code may run; else a sentence saying why not and what would allow it."""
    if allow_setting is False:
        return "running kernel code is switched off (helion.allowCodeExecution is false)"
    if workspace_trusted is False:
        return "the workspace is not trusted (Restricted Mode); trust it to tune"
    if workspace_trusted is None and allow_setting is not True:
        return (
            "the editor did not say that the workspace is trusted; set helion.allowCodeExecution to true "
            "to allow tuning, which runs kernel code"
        )
    return None
