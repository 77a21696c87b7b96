"""IR → LLVM IR, the entry of lowering: each kernel becomes an exported C-ABI function of fused,
outlined loop nests.

For every function `f` of an inlined, verified module this emits

    i32 @adc_kernel_f(ptr dims, ptr inputs, ptr outputs)

(see docs/architecture.md). fusion.py decides which values get a buffer; each
such value is computed by one loop nest outlined into an internal function
with `noalias` buffers (nests.py, loops.py), and every other value is computed element
by element inside its consumer's loop through `lower_rules` (rules/):

    %0 = broadcast %delta {dims = [], shape = [N]} : f32[N]
    %1 = add %x, %0 : f32[N]                  ──▶  for i in [0, N): out[i] = sigmoid(x[i] + delta[0])
    %2 = sigmoid %1 : f32[N]
    return %2

The function itself is glue, run once per call: its dims, its block of temporaries
(temporaries.py), the calls of its nests, and the loops and branches of its control flow,
whose region functions are lowered here the same way, into internal functions.
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.native import parallel
from adc.codegen.lowering import bounds, inlining, interrupts, sizes
from adc.codegen.lowering.emitter import REGION_PREFIX, Emitter
from adc.codegen.lowering.fusion import CONTROL_FLOW
from adc.codegen.lowering.loops import I8, I32, PTR, i64
from adc.codegen.lowering.nests import compute_into, emit_loop
from adc.codegen.lowering.rules.table import lower_rules
from adc.codegen.lowering.rules.control_flow import CARRYING, in_place_scatters
from adc.codegen.lowering.schedule import as_lowered
from adc.codegen.lowering.temporaries import allocate_sized_by_scans, place_temporaries, share_scatter_buffers
from adc.errors import CompileError
from adc.ir.core import Func, Module
from adc.ir.ops import OPS
from adc.ir.shapes import constraints


def lower_module(module: Module, metadata: str, vector_bits: int, check_bounds: bool = False,
                 misindex: str = "", linalg_block: int = 0) -> ir.Module:
    """The LLVM module of an inlined, verified IR module, with its metadata and `adc_set_num_threads`
    (a shared object); `vector_bits` (Target.vector_bits) shapes the register tiles of matrix products;
    `check_bounds` and `misindex` (Target's) make a bounds-checked build (bounds.py); `linalg_block`
    (Target's test hook) sends every matrix to the blocked routines, in blocks of that order."""
    llmod = ir.Module(name=module.name)
    checks = bounds.ModuleChecks(llmod, misindex) if check_bounds else None
    regions = module.regions()
    kernels = [func.name for func in module if func.name not in regions]
    for name in kernels:
        _lower_checked(llmod, module, module[name], vector_bits, checks, linalg_block)
    if checks is not None:
        checks.export(kernels)
    _define_metadata(llmod, metadata)
    parallel.define_set_num_threads(llmod)
    interrupts.define_watch_interrupts(llmod)
    return llmod


def lower_metadata(metadata: str) -> ir.Module:
    """A module of the metadata and `adc_set_num_threads` alone, linked next to per-kernel modules."""
    llmod = ir.Module(name="metadata")
    _define_metadata(llmod, metadata)
    parallel.define_set_num_threads(llmod)
    interrupts.define_watch_interrupts(llmod)
    return llmod


def lower_kernel(module: Module, name: str, vector_bits: int, check_bounds: bool = False,
                 misindex: str = "", linalg_block: int = 0) -> ir.Module:
    """The LLVM module of kernel `name` alone: what the JIT compiles on the kernel's first call."""
    llmod = ir.Module(name=f"{module.name}:{name}")
    checks = bounds.ModuleChecks(llmod, misindex) if check_bounds else None
    _lower_checked(llmod, module, module[name], vector_bits, checks, linalg_block)
    if checks is not None:
        checks.export([name])
    return llmod


def _lower_checked(llmod: ir.Module, module: Module, func: Func, vector_bits: int,
                   checks: bounds.ModuleChecks | None, linalg_block: int, region: bool = False,
                   looped_regions: frozenset[str] = frozenset()) -> ir.Function:
    """The kernel `adc_kernel_<name>`, or the internal function of a region (`Emitter.region`)."""
    for op in func.ops:
        if op.name not in lower_rules:
            raise CompileError(f"codegen has no lowering for op '{op.name}' in @{func.name}"
                               + (" (run the inliner first)" if op.name == "call" else ""), op.loc)
    return _lower_kernel(llmod, module, func, vector_bits, checks, linalg_block, region, looped_regions)


def _define_metadata(llmod: ir.Module, metadata: str) -> None:
    data = bytearray(metadata.encode("utf-8") + b"\0")
    text = ir.GlobalVariable(llmod, ir.ArrayType(I8, len(data)), "adc.metadata")
    text.global_constant, text.linkage = True, "private"
    text.initializer = ir.Constant(ir.ArrayType(I8, len(data)), data)
    fn = ir.Function(llmod, ir.FunctionType(PTR, []), "adc_module_metadata")
    ir.IRBuilder(fn.append_basic_block("entry")).ret(text)


def _lower_kernel(llmod: ir.Module, module: Module, func: Func, vector_bits: int,
                  checks: bounds.ModuleChecks | None, linalg_block: int, region: bool,
                  looped_regions: frozenset[str]) -> ir.Function:
    """A kernel, or a region function: internal, its dims Module.region_symbols, and its block of
    temporaries passed by its parent after its outputs (a loop allocates nothing per iteration).
    `looped_regions` (Module.looped_regions) is found once, by the kernel, for all it runs."""
    symbol, symbols = ((REGION_PREFIX + func.name, module.region_symbols(func.name)) if region
                       else (f"adc_kernel_{func.name}", func.dim_symbols))
    if not region:
        looped_regions = frozenset(module.looped_regions())

    def lower_region(name: str) -> ir.Function:
        return llmod.globals.get(REGION_PREFIX + name) or _lower_checked(
            llmod, module, module[name], vector_bits, checks, linalg_block, region=True, looped_regions=looped_regions)
    # The entry is glue (dims, allocations, calls of the outlined nests, once per call): LLVM skips
    # optimizing a kernel's, which took 35 of the mlp_loss VJP's ~95 ms of optimization; a call of
    # an 8-element kernel measured no slower (paired runs, within noise). A region's runs once per
    # iteration: optimized, its layout and pointer arrays shrink and its small nests are inlined
    # (the RK4 gradient, 10,000 iterations of a reverse body: ~10% faster, paired runs); a small
    # loop body is inlined into its loop, whose kernel's glue is then optimized (inlining.py).
    looped = [] if region else [lower_region(str(op.attrs[key])) for op in func.ops if op.name in CARRYING
                                for key in OPS[op.name].regions]
    fn = ir.Function(llmod, bounds.region_type(checks) if region else ir.FunctionType(I32, [PTR, PTR, PTR]), symbol)
    if not region:
        inlining.settle_kernel(fn, looped)
    dims, inputs, outputs = fn.args[:3]
    func, fusion = as_lowered(func)
    em = Emitter(llmod, module, func, fusion, fn, dims, symbols, {}, vector_bits, linalg_block)
    em.bounds = bounds.function_frame(em, checks)
    em.watch = interrupts.Watch(em.head, dims, len(symbols) if region else None)
    em.lower_region = lower_region
    em.per_iteration = func.name in looped_regions
    em.pass_bound_symbols(func.bound_symbols)
    # A loop body's nests run once per iteration, over a loop's state, mostly small: the bookkeeping
    # of strips there cost the RK4 gradient (a state of one) 10-30% (paired runs).
    # A checked build runs each nest alone: a strip's scratch rows are no buffer of their own.
    em.strip.enabled = not region and checks is None
    em.late = frozenset(s for f in module for s in f.bound_symbols)
    em.unchecked = list(constraints(func))
    em.unsized = sizes.symbolic_shapes(module, func, region)
    em.check_shapes()
    for k, p in enumerate(func.params):
        em.buffers[p] = _load_pointer(em.head, inputs, k)
    destinations = [_load_pointer(em.head, outputs, k) for k in range(len(func.returns))]
    given = _load_pointer(em.head, outputs, len(func.returns)) if region else None
    bounds.track_arguments(em, fn, [em.buffers[p] for p in func.params], destinations, given)
    for v, dest in zip(func.returns, destinations):
        em.buffers.setdefault(v, dest)
    for value, returned in fusion.into.items():
        em.buffers[value] = em.buffers[returned]
    place_temporaries(em, given)
    share_scatter_buffers(em)
    filled = set(fusion.into.values())          # returned reshapes whose operand wrote their buffer
    last = list(in_place_scatters(func).values()) if region else []     # may write a param's buffer
    deferred = {id(op) for op in last}
    for op in func.ops:
        if id(op) in deferred:
            continue
        em.op = op
        if op.name in CONTROL_FLOW:
            em.run_queued()
            allocate_sized_by_scans(em, op.results[:op.attrs.get("carried", len(op.results))], spares=op.name in CARRYING)
            lower_rules[op.name](em, op, [em.buffers.get(r) for r in op.results])     # a scan allocates its stacks
        elif len(op.results) > 1:          # a factorization of several results (qr, eigh, svd, lu_factor)
            em.run_queued()
            allocate_sized_by_scans(em, op.results)
            lower_rules[op.name](em, op, [em.buffers[r] for r in op.results])
        elif op.result in fusion.views:
            em.buffers[op.result] = em.buffers[fusion.views[op.result]]
        elif (op.result in fusion.materialized and op.result not in func.params and op.result not in filled
              and fusion.has_own_loop(op.result)):
            allocate_sized_by_scans(em, [op.result, *fusion.stored_by.get(op.result, ())])
            compute_into(em, op.result, em.buffers[op.result])
    for v, dest in zip(func.returns, destinations):
        if em.buffers[v] is not dest:
            emit_loop(em, v, dest, copy=True)
    for scatter in last:
        compute_into(em, scatter.result, em.buffers[scatter.result])
    em.run_queued()
    if region:
        fn.linkage = "internal"
        inlining.settle_region(fn)
    em.leave(ir.Constant(I32, 0))
    em.close()
    return fn


def _load_pointer(b: ir.IRBuilder, array: ir.Value, k: int) -> ir.Value:
    return b.load(b.gep(array, [i64(k)], source_etype=PTR), typ=PTR)
