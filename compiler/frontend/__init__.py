"""Front end: Helion source text -> typed tile IR, statically (the user's file is never imported or run).

module.py finds kernels, imports and `# helion: args(...)` lines; tracer.py runs statements and loops
(device loops become IR, subscripts of host tensors become loads/stores) on top of expressions.py, which
evaluates expressions; dispatch.py resolves calls and attributes (hl.*, torch.*, tensor methods, tiles);
ops.py types torch operations on meta tensors, memoised by input types in meta_cache.py (the tuner
re-traces a kernel for each choice of block sizes); values.py holds the tracer's non-tensor values;
dynamo_free.py lets a compile-only process run torch's meta kernels without importing torch._dynamo.
call_shapes.py finds the shapes kernels without a shape line are called with, by a bounded abstract
evaluation of the module's own code (host_eval.py, host_statements.py, host_models.py, host_torch.py,
host_values.py); shape_hint.py is the hint for a kernel with no shape set at all. Functions passed as
kernel arguments (flex attention's `score_mod`): callable_args.py traces a spec's body inline where the
kernel calls it, callable_specs.py makes specs of the functions the file's own calls pass.
May import compiler.ir, compiler.diagnostics, compiler.config, compiler.specs, compiler.callables; nothing
from codegen, checks, tune or helion_ls.
"""
