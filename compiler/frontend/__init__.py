"""Front end: Helion source text -> typed tile IR, statically (the user's file is never imported or run).

module.py finds kernels, imports and `# helion: args(...)` lines; kernel_forms.py the kernels declared through a wrapper
that applies helion.kernel (vLLM's register_kernel), their helion.Settings, input generators and baselines. tracer.py traces a kernel body: expressions
(expressions.py), statements and inlined helpers (kernel_statements.py), device loops into IR loops
(device_loops.py), subscripts of host tensors into loads/stores (tensor_access.py), whose index items
indexing.py builds on the position arithmetic of positions.py (value_indexing.py and composed_reads.py
index computed values). dispatch.py resolves calls and attributes (tiles, modules, math, builtins) and
hands hl.* to hl_calls.py (loops: loop_specs.py; scans and combine-function reductions: scans.py) and torch.* and tensor
methods to torch_calls.py, which
read compile-time arguments through static_args.py.
ops.py types torch operations — the plain cases directly (fast_types.py), the rest on meta tensors,
memoised by input types in meta_cache.py (the tuner re-traces a kernel for each choice of block sizes);
values.py holds the tracer's non-tensor values; dynamo_free.py lets a compile-only process run torch's
meta kernels without importing torch._dynamo.
call_recorder.py finds the shapes kernels without a shape line are called with (call_shapes.py holds
them, torch-free), by a bounded abstract evaluation of the module's own code (host_eval.py,
host_statements.py, host_models.py, host_builtins.py, host_operators.py, host_torch.py, host_values.py);
generator_shapes.py gives the shape sets of a kernel with an input generator (vLLM's generate_inputs), one per case key,
of which case_choice.py picks a few for the editor; baselines.py finds a kernel's autotune_baseline_fn. shape_hint.py is the hint for a kernel with no shape set at all. Functions passed as kernel arguments (flex attention's `score_mod`):
callable_args.py traces a spec's body inline where the kernel calls it, callable_specs.py makes specs of
the functions the file's own calls pass.
After the trace, masks.py keeps padding of partial tiles out of results, index_exprs.py reads the facts
placement needs off computed indices, and table_roles.py says what each integer tensor argument is to the
kernel. notebook.py reads a Jupyter notebook as one module.
Two hubs, on purpose: the `Tracer` (tracer.py) and the host evaluator (host_eval.py) are the state of one
trace / one abstract evaluation, and the modules that do parts of that work (dispatch, hl_calls, scans,
indexing, tensor_access, row_views, split_index, branches, kernel_statements, module_constants; the host_*
modules) take the hub as their first argument. At run time the imports go one way (the hub imports its
parts; tests/test_import_direction.py holds that); the parts name the hub only under `TYPE_CHECKING`, for
their annotations, so at type level these modules form one circle through tracer.py and host_eval.py.
A protocol per part would repeat the hub's wide surface in a dozen places for no change in behaviour.
May import `compiler.support` and `compiler.ir`; nothing from codegen, vmem, tpu, tune or helion_ls.
"""
