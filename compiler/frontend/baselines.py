"""A kernel's own reference when the file names one in `helion.Settings(autotune_baseline_fn=...)`, and whether it
can run here: a baseline that calls a CUDA-only op (a custom op outside aten, torch.cuda, triton, vLLM's
_custom_ops) is said once and the eager reference is what the kernel is checked against. Static (ast)."""

from __future__ import annotations

import ast
from typing import Any


def baseline_of(info: Any, definition: Any) -> tuple[str | None, str | None]:
    """The kernel's `helion.Settings(autotune_baseline_fn=...)` when it can run here: (its name, None); a
    baseline that needs a CUDA-only op is (None, a note saying so: the eager reference is what the kernel is
    checked against); (None, None) for none."""
    name = getattr(definition, "baseline", None)
    fn = info.functions.get(name) if name else None
    if fn is None:
        return None, None
    why = cuda_only(fn, info.functions)
    if why is None:
        return name, None
    return None, (f"{definition.name}: its autotune_baseline_fn `{name}` needs {why}, which runs only on a GPU; "
                  f"checked against the eager reference instead")


_CUDA_MODULES = ("triton", "_custom_ops", "cuda", "deep_gemm", "flashinfer", "cutlass")


def cuda_only(fn: Any, functions: dict[str, Any]) -> str | None:
    """What CUDA-only op `fn` (or a same-file function it calls) uses: `torch.ops._C.x` (a custom op outside
    aten), `torch.cuda.x`, an import of a GPU library (triton, vllm._custom_ops); None when nothing is."""
    seen: set[str] = set()
    todo = [fn]
    while todo:
        node = todo.pop()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute):
                text = ast.unparse(sub)
                if text.startswith("torch.ops.") and not text.startswith(("torch.ops.aten", "torch.ops.prims")) \
                        and text.count(".") >= 3:
                    return f"`{text}`"
                if text.startswith("torch.cuda."):
                    return f"`{text}`"
            elif isinstance(sub, ast.ImportFrom | ast.Import):
                names = [sub.module or ""] if isinstance(sub, ast.ImportFrom) else [a.name for a in sub.names]
                for mod in names:
                    if any(part in mod.split(".")[-1] or part in mod for part in _CUDA_MODULES):
                        return f"`{mod}`"
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in functions \
                    and sub.func.id not in seen:
                seen.add(sub.func.id)
                todo.append(functions[sub.func.id])
    return None
