"""IR → LLVM IR: each kernel becomes an exported C-ABI function of fused, outlined loop nests.

For every function `f` of an inlined, verified module this emits

    i32 @adc_kernel_f(ptr dims, ptr inputs, ptr outputs)

(see docs/architecture.md). fusion.py decides which values get a buffer; each
such value is computed by one loop nest outlined into an internal function
with `noalias` buffers (loops.py), and every other value is computed element
by element inside its consumer's loop through `lower_rules`:

    %0 = broadcast %delta {dims = [], shape = [N]} : f32[N]
    %1 = add %x, %0 : f32[N]                  ──▶  for i in [0, N): out[i] = sigmoid(x[i] + delta[0])
    %2 = sigmoid %1 : f32[N]
    return %2

Temporaries share one block, allocated at entry from the run-time dims (each at a
64-byte aligned offset) and freed at exit; the kernel returns 1 when it could not
be allocated.

A nest whose vector math has fast variants (sin, cos, tan: vecmath.call_fast)
runs them, noting any argument outside their range, and only then runs again
with the exact functions over the same range; both agree bit for bit inside
the range, so results do not depend on which ran.
"""
from __future__ import annotations

from typing import Callable, Sequence

import llvmlite.ir as ir

from adc.codegen import bounds, control_flow, division, gemm, interrupts, parallel, sizes, vecmath
from adc.codegen.control_flow import CARRYING, in_place_scatters
from adc.codegen.fusion import CONTROL_FLOW, MATERIALIZING, Plan, plan
from adc.codegen.strips import REDUCTIONS, Nest, RowStrip
from adc.codegen.summation import Elements, blocked_column_sums, blocked_sum, column_levels_bytes
from adc.codegen.loops import (I1, I8, I32, I64, NOWRAP, PTR, Index, counted_loop, evaluate_dim,
                               i64, if_then_else, loop_nest, stack_array, tiled_loop_nest)
from adc.abi import STATUS_NO_MEMORY, STATUS_SHAPES
from adc.errors import CompileError
from adc.ir.core import Func, Module, Op, Value, children_first
from adc.ir.shapes import constraints
from adc.ir.types import DType, Dim, SymDim, num_elements

ALIGNMENT = 64
# A matrix product's multiply-adds, shifted right by this, are weighed against
# parallel.THRESHOLD elements: products under ~4M multiply-adds stay on one thread.
GEMM_WORK_SHIFT = 5
TRANSPOSE_TILE = 16     # a transpose's nest walks 16 x 16 blocks: 16 cache lines read, 16 written
# A float sum, max or min over a row keeps 4 vector accumulators (loops.interleaved), so its loop is
# not bound by one chain's latency: NaN-propagating max was a compare, a blend and a max per vector
# (a row max over 4096 x 1000 f32: 0.47 -> 0.23 ms); a sum's chain is one add per vector, 3 cycles
# for 16 elements of a row in L1 (a cross-entropy's row sums: ~0.11 ms of its 0.70, ~0.03 with 4).
INTERLEAVED_REDUCTIONS = {"max": 4, "min": 4, "sum": 4}
# A float max or min also runs on ordered values first: llvm.maxnum/minnum under no-NaN, no-signed-zero flags is
# one vmaxps/vminps per vector, where NaN-propagating llvm.maximum/minimum also orders -0 < +0
# with a sign test and two blends on the accumulator's chain. A row holding a NaN, or whose
# extremum is a zero (the sign then matters), runs again exactly: same bits, 0.45 -> 0.21 ms for a
# row max over 4096 x 1000 f32 on one thread.
ORDERED_EXTREMA = {"max": "maxnum", "min": "minnum"}
ORDERED_FLAGS = ("nnan", "nsz", "reassoc")
REGISTER_TYPES = {DType.f32: ir.FloatType(), DType.f64: ir.DoubleType(), DType.i32: I32,
                  DType.i64: I64, DType.bool: I1}
MEMORY_TYPES = {**REGISTER_TYPES, DType.bool: I8}
ELEMENT_BYTES = {DType.f32: 4, DType.f64: 8, DType.i32: 4, DType.i64: 8, DType.bool: 1}
REGION_PREFIX = "adc.region."      # + a region function's name: its internal LLVM function
INT_SUFFIX = {DType.f32: "f32", DType.f64: "f64", DType.i32: "i32", DType.i64: "i64"}


def lower_module(module: Module, metadata: str, vector_bits: int, check_bounds: bool = False,
                 misindex: str = "") -> ir.Module:
    """The LLVM module of an inlined, verified IR module, with its metadata and `adc_set_num_threads`
    (a shared object); `vector_bits` (Target.vector_bits) shapes the register tiles of matrix products;
    `check_bounds` and `misindex` (Target's) make a bounds-checked build (bounds.py)."""
    llmod = ir.Module(name=module.name)
    checks = bounds.ModuleChecks(llmod, misindex) if check_bounds else None
    regions = module.regions()
    kernels = [func.name for func in module if func.name not in regions]
    for name in kernels:
        _lower_checked(llmod, module, module[name], vector_bits, checks)
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
                 misindex: str = "") -> ir.Module:
    """The LLVM module of kernel `name` alone: what the JIT compiles on the kernel's first call."""
    llmod = ir.Module(name=f"{module.name}:{name}")
    checks = bounds.ModuleChecks(llmod, misindex) if check_bounds else None
    _lower_checked(llmod, module, module[name], vector_bits, checks)
    if checks is not None:
        checks.export([name])
    return llmod


def _lower_checked(llmod: ir.Module, module: Module, func: Func, vector_bits: int,
                   checks: bounds.ModuleChecks | None, region: bool = False) -> ir.Function:
    """The kernel `adc_kernel_<name>`, or the internal function of a region (`Emitter.region`)."""
    for op in func.ops:
        if op.name not in lower_rules:
            raise CompileError(f"codegen has no lowering for op '{op.name}' in @{func.name}"
                               + (" (run the inliner first)" if op.name == "call" else ""), op.loc)
    return _lower_kernel(llmod, module, func, vector_bits, checks, region)


def _define_metadata(llmod: ir.Module, metadata: str) -> None:
    data = bytearray(metadata.encode("utf-8") + b"\0")
    text = ir.GlobalVariable(llmod, ir.ArrayType(I8, len(data)), "adc.metadata")
    text.global_constant, text.linkage = True, "private"
    text.initializer = ir.Constant(ir.ArrayType(I8, len(data)), data)
    fn = ir.Function(llmod, ir.FunctionType(PTR, []), "adc_module_metadata")
    ir.IRBuilder(fn.append_basic_block("entry")).ret(text)


class Emitter:
    """Emission state of one LLVM function: symbol values, buffers, and the elements computed so far.

    Dimension values are computed in the entry block (`self.head`) so that every
    loop of the function can use them. `dims` holds the values of `symbols`, in
    order: a kernel's dim_symbols, a region's Module.region_symbols.
    """

    def __init__(self, llmod: ir.Module, module: Module, func: Func, fusion: Plan, fn: ir.Function,
                 dims: ir.Value, symbols: tuple[str, ...], buffers: dict[Value, ir.Value], vector_bits: int):
        self.llmod, self.module, self.func, self.plan, self.buffers = llmod, module, func, fusion, buffers
        self.dims_ptr, self.symbol_order, self.vector_bits = dims, symbols, vector_bits
        entry, body = fn.append_basic_block("dims"), fn.append_basic_block("body")
        self.head = ir.IRBuilder(entry)
        self.head.position_before(self.head.branch(body))
        self.b = ir.IRBuilder(body)
        self.symbols = {name: self.head.load(self.head.gep(dims, [i64(k)], source_etype=I64), typ=I64)
                        for k, name in enumerate(symbols)}
        self._dims: dict[Dim, ir.Value] = {}
        self.memo: dict[tuple[Value, Index], ir.Value] = {}
        self.outside_fast_range: ir.Value | None = None   # an i1 slot while emitting a fast version
        self.used_fast_math = False
        self.spares: dict[Value, ir.Value] = {}     # a loop's carried result -> its second buffer
        self.levels: dict[Value, ir.Value] = {}     # a column sum's result -> its cascades' levels (summation.py)
        self.scratch: dict[str, ir.Value] = {}      # a region it runs -> the part of its block for the region's
        self.bound: set[str] = set()                # the symbols its scans have bound so far (their trip counts)
        self.owned: list[ir.Value] = []             # slots of the buffers it allocated, given back when it returns
        self.unchecked: list[SymDim] = []           # shape constraints left to check (check_shapes)
        self.unsized: list[sizes.Shape] = []        # symbolic shapes left to check for fitting int64 bytes
        self.late: frozenset[str] = frozenset()     # symbols scans bind: sizes known only once one ran
        self.strip = RowStrip()                     # nests over the same rows waiting to run strip by strip
        self.kept: dict[ir.Value, str] = {}         # slots of blocks kept for its next call -> their names (kept_blocks.py)
        self.op: Op | None = None                   # the op being lowered: what a failed bounds check names
        self.bounds: bounds.Frame | None = None     # in a bounds-checked build: the extents of its buffers
        self.watch: interrupts.Watch | None = None  # what its loops poll (a kernel's or region's, not a nest's)
        # In an outlined nest of the default build, whose operands are all computed before it is
        # called: each scalar operand, read once in the entry (None: a function whose scalars may
        # be computed later, or a checked build, whose every load is checked where it is made)
        self.scalars_ahead: dict[Value, ir.Value] | None = None

    def nested(self, fn: ir.Function, dims: ir.Value, buffers: dict[Value, ir.Value]) -> "Emitter":
        """The emitter of a function outlined from this one (a loop nest, a matmul's rows)."""
        child = Emitter(self.llmod, self.module, self.func, self.plan, fn, dims, self.symbol_order, buffers,
                        self.vector_bits)
        child.late = self.late
        child.op = self.op
        child.bounds = bounds.nest_frame(self, child, fn)
        child.scalars_ahead = {} if child.bounds is None else None
        return child

    def region(self, name: str) -> tuple[ir.Function, ir.Value, ir.Value]:
        """Region function `name`, lowered once per LLVM module; the dims to call it with, the values
        of its symbols (Module.region_symbols) from this function's, stored once per call of this
        function, then what its loops watch for interrupts (interrupts.Watch); and the block its
        temporaries are carved from, to pass after its outputs."""
        fn = self.llmod.globals.get(REGION_PREFIX + name)
        if fn is None:
            fn = _lower_checked(self.llmod, self.module, self.module[name], self.vector_bits,
                                self.bounds and self.bounds.checks, region=True)
        names = self.module.region_symbols(name)
        symbols = [self.symbols[s] for s in names] + self.watch.for_regions()
        filler = self.b if self.bound.intersection(names) else self.head     # a bound symbol: known from here on
        return fn, stack_array(self.head, filler, I64, symbols), self.scratch[name]

    def pass_bound_symbols(self, bound: tuple[str, ...]) -> None:
        """Give the nests this function outlines the symbols its scans bind (`bind` fills them in):
        they read their dims from a copy of the function's, extended with those (a nest over a scan's
        stacked result needs its length)."""
        if not bound:
            return
        extended = self.head.alloca(I64, size=len(self.symbol_order) + len(bound))
        for k, name in enumerate(self.symbol_order):
            self.head.store(self.symbols[name], self.head.gep(extended, [i64(k)], source_etype=I64))
        self.dims_ptr, self.symbol_order = extended, self.symbol_order + bound

    def bind(self, symbol: str, value: ir.Value) -> None:
        """A scan binds `symbol` to its trip count: dimensions using it are computed where used, and
        the nests called from here on read it from the dims they are passed."""
        self.symbols[symbol] = value
        self.bound.add(symbol)
        if symbol in self.symbol_order:
            self.b.store(value, self.b.gep(self.dims_ptr, [i64(self.symbol_order.index(symbol))], source_etype=I64))
        self.check_shapes()

    def check_shapes(self) -> None:
        """Return STATUS_SHAPES unless the constraints its known symbols decide hold (ir/shapes.py):
        a kernel's were checked by its caller, but not those of the kernels inlined into it or of
        a loop body or branch, which only this run reaches; and STATUS_NO_MEMORY if a shape they
        decide holds more bytes than int64 counts (sizes.py)."""
        decided = [c for c in self.unchecked if c.symbols <= self.symbols.keys()]
        self.unchecked = [c for c in self.unchecked if c not in decided]
        for constraint in decided:
            self.fail_if(self.b.icmp_signed("<", self.dim(constraint), i64(0)), STATUS_SHAPES)
        known = [s for s in self.unsized if sizes.symbols_of(s) <= self.symbols.keys()]
        self.unsized = [s for s in self.unsized if s not in known]
        if known:
            self.fail_if(sizes.too_large(self.b, known, self.symbols))

    def allocate(self, size: ir.Value) -> ir.Value:
        """A buffer of `size` bytes for this call, kept for the function's next call as its block
        of temporaries is (kept_blocks.py: a recurrence's stacks, 32 MB a call for an RNN over
        1,000 steps, came back from the system page fault by page fault: 41 -> 28 ms a call); it
        returns 1 if there is none. Zero bytes allocate nothing (a scan of no rows, as when a
        loop's reversal stores every state, runs once per iteration)."""
        slot = self.head.alloca(PTR)
        self.head.store(ir.Constant(PTR, None), slot)
        self.owned.append(slot)
        self.kept[slot] = f"{self.func.name}.{len(self.kept)}"
        free = _libc(self.llmod, "free", ir.VoidType(), [PTR])

        def fresh(bytes_: ir.Value) -> ir.Value:
            block = self.b.call(_libc(self.llmod, "aligned_alloc", PTR, [I64, I64]), [i64(ALIGNMENT), bytes_])
            self.fail_if(self.b.icmp_unsigned("==", block, ir.Constant(PTR, None)))
            return block
        with self.b.if_then(self.b.icmp_unsigned("!=", size, i64(0))):
            self.b.store(bounds.take(self, self.kept[slot], size, fresh, lambda ptr: self.b.call(free, [ptr])), slot)
        return self.b.load(slot, typ=PTR)

    def allocate_parts(self, sizes: list[ir.Value]) -> list[ir.Value]:
        """Buffers of `sizes` bytes carved from one allocation: one call to the allocator, and one
        block it can hand back on the next call (a scan's dozens of stacks, allocated apart, each
        came back from the system, page faults and all, on every call)."""
        total, offsets = _layout(self, sizes)
        block = self.allocate(total)
        return [self.b.gep(block, [offset], source_etype=I8, inbounds=True) for offset in offsets]

    def fail_if(self, failed: ir.Value, status: ir.Value | int = STATUS_NO_MEMORY) -> None:
        """Return `status` when `failed`, freeing what the function allocated."""
        with self.b.if_then(failed, likely=False):
            self.release()
            self.b.ret(status if isinstance(status, ir.Value) else ir.Constant(I32, status))

    def release(self) -> None:
        """Give back what the function allocated, kept for its next call (kept_blocks.py)."""
        free = _libc(self.llmod, "free", ir.VoidType(), [PTR])
        for slot in self.owned:
            block = self.b.load(slot, typ=PTR)
            with self.b.if_then(self.b.icmp_unsigned("!=", block, ir.Constant(PTR, None))):
                bounds.give_back(self, self.kept[slot], block, lambda ptr: self.b.call(free, [ptr]))

    def bytes_of(self, value: Value) -> ir.Value:
        return self.bytes(value.type.shape, value.type.dtype)

    def bytes(self, shape: tuple[Dim, ...], dtype: DType) -> ir.Value:
        return self.b.mul(self.dim(num_elements(shape)), i64(ELEMENT_BYTES[dtype]), flags=NOWRAP)

    def run_nest(self, nest: Nest) -> None:
        """Call an outlined nest over rows: queued, to run strip by strip with the nests around it
        that read only its rows (strips.py)."""
        self.strip.add(nest, self)

    def run_queued(self) -> None:
        """Call the queued nests: before anything else that may read or write what they do."""
        self.strip.flush(self)

    def dim(self, d: Dim) -> ir.Value:
        if self.bound and self.bound.intersection(getattr(d, "symbols", ())):
            return evaluate_dim(self.b, d, self.symbols)
        if d not in self._dims:
            self._dims[d] = evaluate_dim(self.head, d, self.symbols)
        return self._dims[d]

    def index(self, value: Value, axes=None, flat=None) -> Index:
        return Index(self.b, [self.dim(d) for d in value.type.shape], axes, flat)

    def value_at(self, value: Value, idx: Index) -> ir.Value:
        """Element `idx` of `value`: a load from its buffer, or computed by its producer's rule."""
        if self.scalars_ahead is not None and not value.type.rank and value in self.buffers:
            return self.scalar_ahead(value)
        key = (value, idx)
        if key not in self.memo:
            if value in self.buffers:
                self.memo[key] = self.load(self.buffers[value], value.type.dtype, idx)
            else:
                op = self.plan.producers[value]
                outer, self.op = self.op, op
                self.memo[key] = lower_rules[op.name](self, op, idx)
                self.op = outer
        return self.memo[key]

    def scalar_ahead(self, value: Value) -> ir.Value:
        """A scalar operand of a nest, loaded once in its entry, whatever branch first reads it: a
        scalar buffer always holds its element, so the load needs no guard. (Read inside a branch,
        a gather's index became a masked vector gather of one address, whose inactive lanes LLVM's
        AVX-512 lowering took for the index of every lane: a wild address.)"""
        if value not in self.scalars_ahead:
            dtype = value.type.dtype
            x = self.head.load(self.buffers[value], typ=MEMORY_TYPES[dtype])
            self.scalars_ahead[value] = self.head.trunc(x, I1) if dtype is DType.bool else x
        return self.scalars_ahead[value]

    def math(self, name: str, args: list[ir.Value]) -> ir.Value:
        """vecmath's `name`, or in a fast version its fast variant, noting arguments outside its range."""
        if self.outside_fast_range is None:
            return vecmath.call(self.b, name, args, self.vector_bits)
        y, exact = vecmath.call_fast(self.b, name, args, self.vector_bits)
        if exact is not None:
            slot = self.outside_fast_range
            self.b.store(self.b.or_(self.b.load(slot, typ=I1), self.b.not_(exact)), slot)
            self.used_fast_math = True
        return y

    def branch(self, cond: ir.Value, then: Callable[[], ir.Value], otherwise: Callable[[], ir.Value]) -> ir.Value:
        """cond ? then() : otherwise(); elements computed on one side are not reused after the join."""
        saved = dict(self.memo)
        merged = if_then_else(self.b, cond, then, otherwise)
        self.memo = saved
        return merged

    def element_ptr(self, base: ir.Value, dtype: DType, offset: ir.Value) -> ir.Value:
        return self.b.gep(base, [offset], source_etype=MEMORY_TYPES[dtype], inbounds=True)

    def load(self, base: ir.Value, dtype: DType, idx: Index) -> ir.Value:
        offset = bounds.access(self, base, ELEMENT_BYTES[dtype], idx.flat, store=False)
        x = self.b.load(self.element_ptr(base, dtype, offset), typ=MEMORY_TYPES[dtype])
        return self.b.trunc(x, I1) if dtype is DType.bool else x

    def store(self, base: ir.Value, dtype: DType, idx: Index, x: ir.Value) -> None:
        if dtype is DType.bool:
            x = self.b.zext(x, I8)
        offset = bounds.access(self, base, ELEMENT_BYTES[dtype], idx.flat, store=True)
        self.b.store(x, self.element_ptr(base, dtype, offset))


# ---------------------------------------------------------------- kernels

def _lower_kernel(llmod: ir.Module, module: Module, func: Func, vector_bits: int,
                  checks: bounds.ModuleChecks | None, region: bool) -> ir.Function:
    """A kernel, or a region function: internal, its dims Module.region_symbols, and its block of
    temporaries passed by its parent after its outputs (a loop allocates nothing per iteration)."""
    symbol, symbols = ((REGION_PREFIX + func.name, module.region_symbols(func.name)) if region
                       else (f"adc_kernel_{func.name}", func.dim_symbols))
    fn = ir.Function(llmod, bounds.region_type(checks) if region else ir.FunctionType(I32, [PTR, PTR, PTR]), symbol)
    # The entry is glue (dims, allocations, calls of the outlined nests, once per call): LLVM skips
    # optimizing a kernel's, which took 35 of the mlp_loss VJP's ~95 ms of optimization; a call of
    # an 8-element kernel measured no slower (paired runs, within noise). A region's runs once per
    # iteration: optimized, its layout and pointer arrays shrink and its small nests are inlined
    # (the RK4 gradient, 10,000 iterations of a reverse body: ~10% faster, paired runs).
    fn.attributes.add("noinline")
    if not region:
        fn.attributes.add("optnone")
    dims, inputs, outputs = fn.args[:3]
    func, fusion = _as_lowered(func)
    em = Emitter(llmod, module, func, fusion, fn, dims, symbols, {}, vector_bits)
    em.bounds = bounds.function_frame(em, checks)
    em.watch = interrupts.Watch(em.head, dims, len(symbols) if region else None)
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
    _place_temporaries(em, given)
    _share_scatter_buffers(em)
    filled = set(fusion.into.values())          # returned reshapes whose operand wrote their buffer
    last = list(in_place_scatters(func).values()) if region else []     # may write a param's buffer
    deferred = {id(op) for op in last}
    for op in func.ops:
        if id(op) in deferred:
            continue
        em.op = op
        if op.name in CONTROL_FLOW:
            em.run_queued()
            _allocate_sized_by_scans(em, op.results[:op.attrs.get("carried", len(op.results))], spares=op.name in CARRYING)
            lower_rules[op.name](em, op, [em.buffers.get(r) for r in op.results])     # a scan allocates its stacks
        elif op.result in fusion.views:
            em.buffers[op.result] = em.buffers[fusion.views[op.result]]
        elif (op.result in fusion.materialized and op.result not in func.params and op.result not in filled
              and fusion.has_own_loop(op.result)):
            _allocate_sized_by_scans(em, [op.result, *fusion.stored_by.get(op.result, ())])
            _compute_into(em, op.result, em.buffers[op.result])
    for v, dest in zip(func.returns, destinations):
        if em.buffers[v] is not dest:
            _emit_loop(em, v, dest, copy=True)
    for scatter in last:
        _compute_into(em, scatter.result, em.buffers[scatter.result])
    em.run_queued()
    if region:
        fn.linkage = "internal"
    em.release()
    em.b.ret(bounds.status(em))
    return fn


def _as_lowered(func: Func) -> tuple[Func, Plan]:
    """`func` in the order lowering emits it and fusion's plan of that order: what a function's
    own lowering carves its block into, and what its parent sizes the block it passes by, so the
    two cannot disagree. (The parent once planned a region in its source order: moving the ops of
    scalar results last changes what fusion materializes, and a reversed loop's body wrote
    temporaries past the end of the block it was given.)"""
    func = _scalar_results_last(func)
    return func, plan(func)


def _scalar_results_last(func: Func) -> Func:
    """`func` with the ops computing only scalars it returns (a mean loss) moved last, before
    fusion plans it: the nests over rows before and after them (a softmax's, its gradient's)
    then run strip by strip."""
    returned = set(func.returns)
    last: set[int] = set()
    users: dict[Value, list[Op]] = {}
    for op in func.ops:
        for v in op.operands:
            users.setdefault(v, []).append(op)
    for op in reversed(func.ops):
        if op.results and all(not r.type.rank and (r in returned or users.get(r)) for r in op.results) and all(
                id(user) in last for r in op.results for user in users.get(r, ())):
            last.add(id(op))
    if not last:
        return func
    ops = [op for op in func.ops if id(op) not in last] + [op for op in func.ops if id(op) in last]
    return Func(func.name, func.params, tuple(ops), func.returns, func.loc)


def _share_scatter_buffers(em: Emitter) -> None:
    """The scatter bases filled in their scatter's buffer get it (once it has one)."""
    for value, scatter in em.plan.scattered_into.items():
        if scatter in em.buffers:
            em.buffers[value] = em.buffers[scatter]


def _allocate_sized_by_scans(em: Emitter, values: Sequence[Value], spares: bool = False) -> None:
    """Buffers for those of `values` a scan's length sizes, which no block holds (its size is known
    only once the scan ran), and with `spares` (a loop's carried results) their spare buffers:
    allocated here, freed when the function returns."""
    late = [v for v in values if v.type.symbols & em.late]
    for v in late:
        scatter = em.plan.scattered_into.get(v, v)      # a scatter's base is made in the scatter's buffer
        if scatter not in em.buffers:
            size = em.bytes_of(scatter)
            em.buffers[scatter] = bounds.track(em, em.allocate(size), size, bounds.describe(em, scatter), "temporary")
        em.buffers[v] = em.buffers[scatter]
        if spares and v not in em.spares:
            size = em.bytes_of(v)
            em.spares[v] = bounds.track(em, em.allocate(size), size, "the spare of " + bounds.describe(em, v), "spare")


def _load_pointer(b: ir.IRBuilder, array: ir.Value, k: int) -> ir.Value:
    return b.load(b.gep(array, [i64(k)], source_etype=PTR), typ=PTR)


def _libc(llmod: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    existing = llmod.globals.get(name)
    return existing if existing is not None else ir.Function(llmod, ir.FunctionType(ret, args), name)


def _place_temporaries(em: Emitter, given: ir.Value | None) -> None:
    """Give each temporary, spare and region block of `em`'s function its part of one block: the
    `given` one (a region's, from its parent) or, in a kernel, its own (unless it needs none),
    kept for its next call (kept_blocks.py)."""
    temps, spares = _block_contents(em.func, em.plan, em.late)
    sizes = _block_sizes(em, em.func, em.plan)
    total, offsets = _layout(em, sizes)
    owned = None
    if given is None and sizes:
        free = _libc(em.llmod, "free", ir.VoidType(), [PTR])
        owned = bounds.take(em, em.func.name, total, lambda size: _allocate(em, size), lambda ptr: em.b.call(free, [ptr]))
    block = given if given is not None else owned
    if owned is not None:
        slot = em.head.alloca(PTR)
        em.b.store(owned, slot)
        em.owned.append(slot)
        em.kept[slot] = em.func.name
    pointers = [em.b.gep(block, [offset], source_etype=I8, inbounds=True) for offset in offsets]
    column_sums = [op.result for op in _column_sums(em.func, em.late)]
    bounds.track_block(em, pointers, sizes, offsets, temps, spares, column_sums, em.func.regions(), given)
    em.buffers.update(zip(temps, pointers))
    em.spares = dict(zip(spares, pointers[len(temps):]))
    em.levels = dict(zip(column_sums, pointers[len(temps) + len(spares):]))
    em.scratch = dict(zip(em.func.regions(), pointers[len(temps) + len(spares) + len(column_sums):]))


def _block_contents(func: Func, fusion: Plan, late: frozenset[str]) -> tuple[list[Value], list[Value]]:
    """The values a function's block of temporaries holds: the materialized ones with no buffer of
    their own (a parameter's, an output, a view, a scatter's), and its loops' carried results,
    whose spare buffers are there. Not those a scan's length sizes (`late`: the block is sized
    when the kernel starts): a scan's stacks are its own, the others are allocated where made."""
    own = set(func.returns) | set(fusion.into) | set(fusion.views) | set(fusion.scattered_into)
    temps = [r for op in func.ops for r in op.results
             if r in fusion.materialized and r not in own and not r.type.symbols & late]
    return temps, [r for op in func.ops if op.name in CARRYING for r in op.results[:op.attrs["carried"]]
                   if not r.type.symbols & late]


def _block_sizes(em: Emitter, func: Func, fusion: Plan) -> list[ir.Value]:
    """The bytes of each part of `func`'s block, from `em`'s symbols: its temporaries and spares,
    then the block of each region it runs, which that region's calls share. A region's block holds
    its regions' in turn; each region's size is computed once, its regions' first (in a nest of
    loops, a reversed loop's body runs in both of its reversals: summed path by path, the sizes
    would double per level), without recursion (a nest is as deep as the program)."""
    totals: dict[str, ir.Value] = {}
    for name in children_first(func.regions(), lambda name: em.module[name].regions()):
        region, region_plan = _as_lowered(em.module[name])
        totals[name] = _layout(em, _own_sizes(em, region, region_plan) + [totals[r] for r in region.regions()])[0]
    return _own_sizes(em, func, fusion) + [totals[name] for name in func.regions()]


def _own_sizes(em: Emitter, func: Func, fusion: Plan) -> list[ir.Value]:
    """The bytes of `func`'s temporaries and spares, then of its column sums' levels, from `em`'s symbols."""
    temps, spares = _block_contents(func, fusion, em.late)
    return [em.bytes_of(v) for v in temps + spares] + [_levels_bytes(em, op) for op in _column_sums(func, em.late)]


def _column_sums(func: Func, late: frozenset[str]) -> list[Op]:
    """Its column sums whose levels its block holds: not those a scan's length sizes (allocated where made)."""
    return [op for op in func.ops if _sums_columns(op) and not op.operands[0].type.symbols & late]


def _sums_columns(op: Op) -> bool:
    """A float sum keeping its last axis (summation.blocked_column_sums)."""
    if op.name != "reduce_sum":
        return False
    (x,), axes = op.operands, op.attrs["axes"]
    return x.type.dtype.is_float and bool(axes) and x.type.rank - 1 not in axes


def _levels_bytes(em: Emitter, op: Op) -> ir.Value:
    """The bytes of column sum `op`'s levels, from `em`'s symbols: what sizes its part of the block
    (or its allocation after a scan) and what the sum then reaches."""
    (x,) = op.operands
    rows = em.dim(num_elements(tuple(x.type.shape[k] for k in op.attrs["axes"])))
    return column_levels_bytes(em.b, rows, em.dim(x.type.shape[-1]), ELEMENT_BYTES[x.type.dtype])


def _layout(em: Emitter, sizes: list[ir.Value]) -> tuple[ir.Value, list[ir.Value]]:
    """The total size of parts of `sizes` bytes and their offsets, each aligned. A part a region
    sizes with dims its sizes break counts as 0: the region fails its shape check if it runs, and
    a negative size would move the parts after it onto those before."""
    total, offsets = i64(0), []
    for size in sizes:
        size = em.b.select(em.b.icmp_signed("<", size, i64(0)), i64(0), size)
        offsets.append(total)
        total = em.b.add(total, em.b.and_(em.b.add(size, i64(ALIGNMENT - 1)), i64(-ALIGNMENT)), flags=NOWRAP)
    return total, offsets


def _allocate(em: Emitter, total: ir.Value) -> ir.Value:
    """A kernel's one block of temporaries (its regions' included): one allocation to check and one
    to free (LLVM's time on a check and a free per temporary grows with the square of their
    number); the kernel returns 1 when it cannot be allocated."""
    block = em.b.call(_libc(em.llmod, "aligned_alloc", PTR, [I64, I64]), [i64(ALIGNMENT), total])
    failed = em.b.and_(em.b.icmp_unsigned("==", block, ir.Constant(PTR, None)), em.b.icmp_unsigned("!=", total, i64(0)))
    with em.b.if_then(failed, likely=False):
        em.b.ret(ir.Constant(I32, STATUS_NO_MEMORY))
    return block


def _compute_into(em: Emitter, value: Value, dest: ir.Value) -> None:
    op = em.op = em.plan.producers[value]
    if op.name in MATERIALIZING:
        if op.name not in REDUCTIONS:
            em.run_queued()
        lower_rules[op.name](em, op, dest)
    else:
        _emit_loop(em, value, dest, copy=False)


def _fast_then_exact(em: Emitter, emit: Callable[[], None]) -> None:
    """emit() loops with fast vector math, and again with exact vector math if an argument needed it.

    Rerunning is safe: the loops write only their destinations, which they never
    read before writing (a reduction starts again from its identity). Each result
    depends on its own arguments only: an elementwise nest is versioned whole, a
    reduction per output element (a reassociated sum's last bits follow its loop's
    vectorization, so all of one output's terms must go through the same loop).
    """
    slot = em.head.alloca(I1)
    em.b.store(ir.Constant(I1, 0), slot)
    em.outside_fast_range, em.used_fast_math = slot, False
    emit()
    em.outside_fast_range = None
    if em.used_fast_math:
        with em.b.if_then(em.b.load(slot, typ=I1), likely=False):
            emit()


def _emit_loop(kernel: Emitter, value: Value, dest: ir.Value, copy: bool) -> None:
    """One outlined loop nest storing every element of `value` into `dest`, and of the values
    it also stores (Plan.stored_by, of its shape) into theirs.

    Each outer iteration writes only its own elements of the destinations and reads
    none, so a large nest is split across threads (parallel.py).
    """
    op = kernel.plan.producers.get(value)
    stored = [] if copy else list(kernel.plan.stored_by.get(value, ()))
    leaves = [value] if copy else kernel.plan.leaves(op)
    flat = copy or not value.type.shape or kernel.plan.is_flat(op)
    written = [dest, *(kernel.buffers[v] for v in stored)]
    if (flat and not copy and value.type.shape and kernel.strip.nests
            and kernel.strip.joins(value.type.shape[0], [value, *stored], written, kernel)):
        flat = False        # a nest over rows, to run with the queued ones (a row's max, as [B, 1])
    if not value.type.shape:
        if kernel.strip.written & {kernel.buffers[v] for v in leaves}:
            kernel.run_queued()     # a scalar computed here, in order, from what they write
        _emit_scalar(kernel, value, dest, stored, leaves)
        return
    if flat:
        kernel.run_queued()
    fn = bounds.outline(kernel, "copy" if copy else op.name, 1 + len(stored) + len(leaves))
    em = kernel.nested(fn, fn.args[2], dict(zip(leaves, fn.args[4 + len(stored):])))
    start, end = fn.args[0], fn.args[1]
    outputs = list(zip([*stored, value], [*fn.args[4:4 + len(stored)], fn.args[3]]))
    extents = [em.dim(d) for d in value.type.shape]

    def body(axes: list[ir.Value]) -> None:
        idx = em.index(value, flat=axes[0]) if flat else em.index(value, axes=axes)
        for v, out in outputs:
            em.op = em.plan.producers.get(v)
            em.store(out, v.type.dtype, idx, em.value_at(v, idx))
        em.memo.clear()

    buffers = bounds.nest_arguments(kernel, [kernel.dims_ptr, dest] + [kernel.buffers[v] for v in stored + leaves])
    work = kernel.dim(num_elements(value.type.shape))
    if flat:
        _fast_then_exact(em, lambda: counted_loop(em.b, start, end, lambda i: body([i])))
        em.b.ret_void()
        parallel.call_loop(kernel.b, kernel.head, fn, work, work, parallel.FLAT_GRAIN, buffers)
    else:
        ranges = [(start, end)] + [(i64(0), e) for e in extents[1:]]
        tiled = None if copy else _rows_axis_moved(op)
        _fast_then_exact(em, lambda: loop_nest(em.b, ranges, body) if tiled is None else
                         tiled_loop_nest(em.b, ranges, tiled, TRANSPOSE_TILE, body))
        em.b.ret_void()
        kernel.run_nest(Nest(fn, value.type.shape[0], work, 1, buffers, [value, *stored], written, leaves))


def _rows_axis_moved(op: Op) -> int | None:
    """For a nest computing a transpose that moves its operand's last axis: the result axis that
    axis became (the nest then walks it and its own last axis in tiles), else None."""
    if op.name != "transpose":
        return None
    moved = list(op.attrs["perm"]).index(op.result.type.rank - 1)
    return moved if moved != op.result.type.rank - 1 else None


def _emit_scalar(kernel: Emitter, value: Value, dest: ir.Value, stored: list[Value], leaves: list[Value]) -> None:
    """A scalar `value` (and the scalars it also stores) computed where it is needed, not in an
    outlined nest of one iteration: in a loop's body, the call and its context cost more than
    the arithmetic (the reverse of an RK4 step computed a dozen scalars through such calls). As
    in a nest, only the `leaves` are read from buffers; the rest of the chain is computed."""
    outputs = [*((s, kernel.buffers[s]) for s in stored), (value, dest)]
    every_buffer = kernel.buffers

    def body() -> None:
        idx = kernel.index(value, flat=i64(0))
        kernel.memo.clear()
        kernel.buffers = {leaf: every_buffer[leaf] for leaf in leaves}
        try:
            for v, out in outputs:
                kernel.op = kernel.plan.producers.get(v)
                kernel.store(out, v.type.dtype, idx, kernel.value_at(v, idx))
        finally:
            kernel.buffers = every_buffer
            kernel.memo.clear()

    _fast_then_exact(kernel, body)


# ---------------------------------------------------------------- lower_rules
#
# Element rules `rule(em, op, idx) -> ir.Value` compute element `idx` of `op`'s
# result inside the loop of its consumer, reading operands with
# `em.value_at(operand, operand_index)`. Buffer rules, for the ops in
# fusion.MATERIALIZING, are `rule(em, op, dest) -> None` and fill the result
# buffer `dest` from the kernel function; those of the control-flow ops, which
# may have several results, take a list of buffers, one per result
# (control_flow.py).

LowerRule = Callable[..., object]
lower_rules: dict[str, LowerRule] = {}


def _intrinsic(b: ir.IRBuilder, name: str, args: list[ir.Value], dtype: DType, flags=()) -> ir.Value:
    """Call `llvm.<name>.<type>`, declaring it on first use."""
    full = f"llvm.{name}.{INT_SUFFIX[dtype]}"
    fn = b.module.globals.get(full)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(args[0].type, [a.type for a in args]), full)
    return b.call(fn, args, fastmath=flags)


def _elementwise(scalar: Callable[..., ir.Value]) -> LowerRule:
    """An element rule applying `scalar(b, dtype, *operand_elements)` at the same index."""
    def rule(em: Emitter, op: Op, idx: Index) -> ir.Value:
        args = [em.value_at(v, idx) for v in op.operands]
        return scalar(em.b, op.operands[-1].type.dtype, *args)
    rule.__name__ = scalar.__name__
    return rule


def _int_or_float(int_name: str, float_name: str) -> Callable[..., ir.Value]:
    def scalar(b: ir.IRBuilder, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
        return getattr(b, float_name if dtype.is_float else int_name)(x, y)
    return scalar


lower_rules["add"] = _elementwise(_int_or_float("add", "fadd"))
lower_rules["sub"] = _elementwise(_int_or_float("sub", "fsub"))
lower_rules["mul"] = _elementwise(_int_or_float("mul", "fmul"))
def div_lower(b: ir.IRBuilder, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
    """`div` is defined for floats only (ops.BINARY_FLOAT): integers divide with `floor_div`."""
    return b.fdiv(x, y)


lower_rules["div"] = _elementwise(div_lower)
lower_rules["floor_div"] = _elementwise(division.floor_div)
lower_rules["mod"] = _elementwise(division.mod)


def _bitwise(name: str) -> Callable[..., ir.Value]:
    # on i1 (bool) these are the logical and, or, xor
    def scalar(b: ir.IRBuilder, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
        return getattr(b, name)(x, y)
    scalar.__name__ = f"bitwise_{name.rstrip('_')}_lower"
    return scalar


for _name in ("and_", "or_", "xor"):
    lower_rules[f"bitwise_{_name.rstrip('_')}"] = _elementwise(_bitwise(_name))


def bitwise_not_lower(b: ir.IRBuilder, dtype: DType, x: ir.Value) -> ir.Value:
    # x ^ all ones: logical not of an i1, -x - 1 of an integer
    return b.not_(x)


lower_rules["bitwise_not"] = _elementwise(bitwise_not_lower)


def _extremum(float_name: str, int_name: str) -> Callable[..., ir.Value]:
    # llvm.maximum/minimum propagate NaN, as np.maximum/np.minimum do
    def scalar(b: ir.IRBuilder, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
        return _intrinsic(b, float_name if dtype.is_float else int_name, [x, y], dtype)
    return scalar


lower_rules["maximum"] = _elementwise(_extremum("maximum", "smax"))
lower_rules["minimum"] = _elementwise(_extremum("minimum", "smin"))


def _compare(predicate: str) -> Callable[..., ir.Value]:
    # ordered float compares are false on NaN, except `ne` (unordered), as in NumPy
    def scalar(b: ir.IRBuilder, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
        if dtype.is_float:
            compare = b.fcmp_unordered if predicate == "!=" else b.fcmp_ordered
            return compare(predicate, x, y)
        compare = b.icmp_unsigned if dtype is DType.bool else b.icmp_signed
        return compare(predicate, x, y)
    return scalar


for _op, _predicate in {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}.items():
    lower_rules[_op] = _elementwise(_compare(_predicate))


def _math(name: str) -> LowerRule:
    """Float functions come from vecmath: branch-free, so the loop vectorizer widens them."""
    def rule(em: Emitter, op: Op, idx: Index) -> ir.Value:
        return em.math(name, [em.value_at(v, idx) for v in op.operands])
    rule.__name__ = f"{name}_lower"
    return rule


for _name in ("exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "sigmoid", "sqrt", "rsqrt",
              "round", "floor", "pow", "log2", "log10", "exp2", "cbrt", "sinh", "cosh", "asinh", "acosh",
              "atanh", "erf", "erfc", "atan2", "hypot", "lgamma", "digamma", "trigamma"):
    lower_rules[_name] = _math(_name)


def neg_lower(b: ir.IRBuilder, dtype: DType, x: ir.Value) -> ir.Value:
    return b.fneg(x) if dtype.is_float else b.neg(x)


lower_rules["neg"] = _elementwise(neg_lower)


def abs_lower(b: ir.IRBuilder, dtype: DType, x: ir.Value) -> ir.Value:
    if dtype.is_float:
        return vecmath.call(b, "abs", [x])
    return b.select(b.icmp_signed("<", x, ir.Constant(x.type, 0)), b.neg(x), x)


lower_rules["abs"] = _elementwise(abs_lower)


def sign_lower(b: ir.IRBuilder, dtype: DType, x: ir.Value) -> ir.Value:
    if dtype.is_float:
        return vecmath.call(b, "sign", [x])
    zero = ir.Constant(x.type, 0)
    # sign(x) = (x > 0) - (x < 0)
    return b.sub(b.zext(b.icmp_signed(">", x, zero), x.type), b.zext(b.icmp_signed("<", x, zero), x.type))


lower_rules["sign"] = _elementwise(sign_lower)


def select_lower(b: ir.IRBuilder, dtype: DType, cond: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(cond, x, y)


lower_rules["select"] = _elementwise(select_lower)


def stop_gradient_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    return em.value_at(op.operands[0], idx)


lower_rules["stop_gradient"] = stop_gradient_lower


def convert_scalar(b: ir.IRBuilder, x: ir.Value, source: DType, dest: DType) -> ir.Value:
    """NumPy's astype: float→int truncates (saturating, never poison), x→bool is x != 0."""
    to = REGISTER_TYPES[dest]
    if source is dest:
        return x
    if dest is DType.bool:
        zero = ir.Constant(x.type, 0)
        return b.fcmp_unordered("!=", x, zero) if source.is_float else b.icmp_unsigned("!=", x, zero)
    if source.is_float and dest.is_float:
        return b.fpext(x, to) if dest is DType.f64 else b.fptrunc(x, to)
    if source.is_float:
        fn = b.module.globals.get(f"llvm.fptosi.sat.{INT_SUFFIX[dest]}.{INT_SUFFIX[source]}")
        fn = fn or ir.Function(b.module, ir.FunctionType(to, [x.type]),
                               f"llvm.fptosi.sat.{INT_SUFFIX[dest]}.{INT_SUFFIX[source]}")
        return b.call(fn, [x])
    if dest.is_float:
        return b.uitofp(x, to) if source is DType.bool else b.sitofp(x, to)
    if source is DType.bool:
        return b.zext(x, to)
    return b.sext(x, to) if to.width > x.type.width else b.trunc(x, to)


def convert_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    (x,) = op.operands
    return convert_scalar(em.b, em.value_at(x, idx), x.type.dtype, op.attrs["dtype"])


lower_rules["convert"] = convert_lower


def constant_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    dtype = op.attrs["dtype"]
    value = op.attrs["value"]
    return ir.Constant(REGISTER_TYPES[dtype], float(value) if dtype.is_float else int(value))


lower_rules["constant"] = constant_lower


def dim_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    return convert_scalar(em.b, em.dim(op.attrs["value"]), DType.i64, op.attrs["dtype"])


lower_rules["dim"] = dim_lower


def iota_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    return convert_scalar(em.b, idx.axes[op.attrs["axis"]], DType.i64, op.attrs["dtype"])


lower_rules["iota"] = iota_lower


# ---------------------------------------------------------------- index maps

def broadcast_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # operand axis k reads result axis dims[k], or 0 where the operand has size 1
    (x,) = op.operands
    axes = [i64(0) if size == 1 else idx.axes[d] for size, d in zip(x.type.shape, op.attrs["dims"])]
    return em.value_at(x, em.index(x, axes=axes))


lower_rules["broadcast"] = broadcast_lower


def reshape_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # same row-major position
    (x,) = op.operands
    return em.value_at(x, em.index(x, flat=idx.flat))


lower_rules["reshape"] = reshape_lower


def transpose_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # operand axis perm[k] is result axis k
    (x,) = op.operands
    axes = [None] * x.type.rank
    for k, p in enumerate(op.attrs["perm"]):
        axes[p] = idx.axes[k]
    return em.value_at(x, em.index(x, axes=axes))


lower_rules["transpose"] = transpose_lower


def slice_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # operand axis k = start[k] + step[k] * result axis k
    (x,) = op.operands
    axes = [em.b.add(em.dim(lo), em.b.mul(a, i64(st), flags=NOWRAP), flags=NOWRAP)
            for a, lo, st in zip(idx.axes, op.attrs["start"], op.attrs["step"])]
    return em.value_at(x, em.index(x, axes=axes))


lower_rules["slice"] = slice_lower


def concat_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # along `axis`, operand k covers [offset_k, offset_k + size_k); a binary search finds it, so
    # n operands cost log2(n) compares (and as many levels of recursion here)
    axis = op.attrs["axis"]
    offsets, total = [], 0
    for v in op.operands:
        offsets.append(total)
        total = total + v.type.shape[axis]

    def part(lo: int, hi: int) -> ir.Value:
        if hi - lo == 1:
            v, axes = op.operands[lo], list(idx.axes)
            axes[axis] = em.b.sub(axes[axis], em.dim(offsets[lo]), flags=NOWRAP)
            return em.value_at(v, em.index(v, axes=axes))
        mid = (lo + hi) // 2
        below = em.b.icmp_signed("<", idx.axes[axis], em.dim(offsets[mid]))
        return em.branch(below, lambda: part(lo, mid), lambda: part(mid, hi))
    return part(0, len(op.operands))


lower_rules["concat"] = concat_lower


def pad_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # inside [low, low + size) on every axis: x[idx - low]; elsewhere the padding value
    x, value = op.operands
    pad = em.value_at(value, em.index(value))
    inside, axes = ir.Constant(I1, 1), []
    for a, lo, size in zip(idx.axes, op.attrs["low"], x.type.shape):
        shifted = em.b.sub(a, i64(lo))
        inside = em.b.and_(inside, em.b.icmp_unsigned("<", shifted, em.dim(size)))
        axes.append(shifted)
    return em.branch(inside, lambda: em.value_at(x, em.index(x, axes=axes)), lambda: pad)


lower_rules["pad"] = pad_lower


# ---------------------------------------------------------------- indexing by integer tensors

def clamped_index(em: Emitter, indices: Value, axes: list[ir.Value], n: ir.Value) -> ir.Value:
    """indices[axes] as an i64 position in [0, n-1] by the index rule of adc/ir/ops.py: a negative
    index counts from the end once, then clamps; never out of bounds (n > 0 is the caller's)."""
    i = em.value_at(indices, em.index(indices, axes=axes))
    i = em.b.sext(i, I64) if indices.type.dtype is DType.i32 else i
    wrapped = em.b.select(em.b.icmp_signed("<", i, i64(0)), em.b.add(i, n), i)
    highest = em.b.sub(n, i64(1))
    return _intrinsic(em.b, "smin", [_intrinsic(em.b, "smax", [wrapped, i64(0)], DType.i64), highest], DType.i64)


def _unless_empty(em: Emitter, n: Dim, dtype: DType, read: Callable[[], ir.Value]) -> ir.Value:
    """read(), or 0 when the axis of size n is empty (then nothing may be read)."""
    zero = ir.Constant(REGISTER_TYPES[dtype], 0)
    if isinstance(n, int):
        return read() if n else zero
    return em.branch(em.b.icmp_signed("==", em.dim(n), i64(0)), lambda: zero, read)


def gather_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # result (pre, j, post) = x[pre, clamped(indices[j]), post]: a load through an index map
    x, indices = op.operands
    axis, rank = op.attrs["axis"], indices.type.rank
    n = x.type.shape[axis]

    def read() -> ir.Value:
        k = clamped_index(em, indices, list(idx.axes[axis:axis + rank]), em.dim(n))
        return em.value_at(x, em.index(x, axes=[*idx.axes[:axis], k, *idx.axes[axis + rank:]]))
    return _unless_empty(em, n, x.type.dtype, read)


lower_rules["gather"] = gather_lower


# What one update of a scatter into a large base is weighed as, in elements streamed: a cache miss
# (some 10 ns, overlapped with others) against a vector lane's share of a streamed line.
SCATTERED_UPDATE_WORK = 64


def scatter_lower(kernel: Emitter, op: Op, dest: ir.Value) -> None:
    # dest = base, then dest[pre, clamped(indices[j]), post] += updates[pre, j, post] (scatter: =) in
    # row-major order of the updates. The positions along `axis` are split between threads, each
    # thread copying its positions of the base and applying the updates that land in them (all of
    # them, scanning every index): an element's updates are applied by one thread, in order, so
    # duplicates accumulate as on one thread (scatter: the last one stays), and no two writes race
    base, indices, updates = op.operands
    leaves = kernel.plan.leaves(op)
    fn = bounds.outline(kernel, op.name, 1 + len(leaves))
    em = kernel.nested(fn, fn.args[2], dict(zip(leaves, fn.args[4:])))
    owned_start, owned_end = fn.args[0], fn.args[1]
    out, dtype, axis = fn.args[3], base.type.dtype, op.attrs["axis"]
    copying = op.result not in kernel.plan.scattered_into.values()     # else the base's own loop wrote dest
    if copying:
        ranges = [(owned_start, owned_end) if d == axis else (i64(0), em.dim(n))
                  for d, n in enumerate(base.type.shape)]
        with em.b.if_then(em.b.not_(_in_place(em, base, out))):
            loop_nest(em.b, ranges, lambda axes: _copy_element(em, base, op.result, out, axes))
    n = em.dim(base.type.shape[axis])
    add = _int_or_float("add", "fadd")

    def accumulate(axes: list[ir.Value]) -> None:
        k = clamped_index(em, indices, axes[axis:axis + indices.type.rank], n)
        owned = em.b.and_(em.b.icmp_signed(">=", k, owned_start), em.b.icmp_signed("<", k, owned_end))
        with em.b.if_then(owned):
            target = em.index(op.result, axes=[*axes[:axis], k, *axes[axis + indices.type.rank:]])
            update = em.value_at(updates, em.index(updates, axes=axes))
            if op.name == "scatter_add":
                update = add(em.b, dtype, em.load(out, dtype, target), update)
            em.store(out, dtype, target, update)
        em.memo.clear()
    loop_nest(em.b, [(i64(0), em.dim(d)) for d in updates.type.shape], accumulate)
    em.b.ret_void()
    buffers = bounds.nest_arguments(kernel, [kernel.dims_ptr, dest, *[kernel.buffers[v] for v in leaves]])
    parallel.call_loop(kernel.b, kernel.head, fn, kernel.dim(base.type.shape[axis]),
                       _scatter_work(kernel, op, dest, copying), parallel.FLAT_GRAIN, buffers)


def _scatter_work(kernel: Emitter, op: Op, dest: ir.Value, copying: bool) -> ir.Value:
    """What splitting a scatter across threads is weighed by (parallel.THRESHOLD): the base's
    elements when it is copied (not when a loop body updates its carried buffer in place: a
    step writing one slice of a stack of them costs no wake-up of the pool); and when the
    base is that large, an update is taken to cost what SCATTERED_UPDATE_WORK copied elements
    do, a cache miss each, not a vector's lane."""
    base, _, updates = op.operands
    b = kernel.b
    size = kernel.dim(num_elements(base.type.shape))
    moved = b.mul(kernel.dim(num_elements(updates.type.shape)), i64(SCATTERED_UPDATE_WORK), flags=NOWRAP)
    copied = i64(0)
    if copying:
        copied = b.select(_in_place(kernel, base, dest), i64(0), size)
    return b.add(copied, b.select(b.icmp_signed(">=", size, i64(parallel.THRESHOLD)), moved, i64(0)), flags=NOWRAP)


def _in_place(em: Emitter, base: Value, out: ir.Value) -> ir.Value:
    """Whether a loop body gave one buffer as a scatter's base and its result (control_flow.updated_in_place):
    the base is then already there, and is not copied."""
    return em.b.icmp_unsigned("==", em.buffers[base], out) if base in em.buffers else ir.Constant(I1, 0)


def _copy_element(em: Emitter, source: Value, like: Value, out: ir.Value, axes: list[ir.Value]) -> None:
    index = em.index(like, axes=axes)
    em.store(out, like.type.dtype, index, em.value_at(source, em.index(source, axes=axes)))
    em.memo.clear()


lower_rules["scatter_add"] = lower_rules["scatter"] = scatter_lower


# ---------------------------------------------------------------- reductions and matmul

def _identity(kind: str, dtype: DType) -> ir.Constant:
    """sum +0.0 (as NumPy's: an empty sum, and a sum of -0.0s, is 0.0), prod 1, max -inf / INT_MIN,
    min +inf / INT_MAX."""
    ty = REGISTER_TYPES[dtype]
    if dtype.is_float:
        return ir.Constant(ty, {"sum": 0.0, "prod": 1.0, "max": float("-inf"), "min": float("inf")}[kind])
    bits = ty.width - 1
    return ir.Constant(ty, {"sum": 0, "prod": 1, "max": -(1 << bits), "min": (1 << bits) - 1}[kind])


def _combine(b: ir.IRBuilder, kind: str, dtype: DType, acc: ir.Value, x: ir.Value) -> ir.Value:
    """One reduction step; floats carry only `reassoc`, which lets LLVM vectorize without touching NaN/inf."""
    if kind in ("max", "min"):
        name = ("maximum" if kind == "max" else "minimum") if dtype.is_float else "s" + kind
        return _intrinsic(b, name, [acc, x], dtype, ("reassoc",) if dtype.is_float else ())
    if dtype.is_float:
        return (b.fadd if kind == "sum" else b.fmul)(acc, x, flags=("reassoc",))
    return (b.add if kind == "sum" else b.mul)(acc, x)


def _reduction(kind: str) -> LowerRule:
    """A buffer rule: one outlined nest, split across threads only when each output element is
    reduced within one outer iteration (`_accumulate_scalar`); `_accumulate_rows` combines into the
    whole output on every outer iteration and stays on the calling thread."""
    def rule(kernel: Emitter, op: Op, dest: ir.Value) -> None:
        (x,) = op.operands
        fn, em, buffers = _outline_reduction(kernel, op, dest)
        if x.type.rank and x.type.rank - 1 not in op.attrs["axes"]:
            _fast_then_exact(em, lambda: _accumulate_rows(em, op, kind, fn.args[3]))
            em.b.ret_void()
            kernel.run_queued()
            kernel.b.call(fn, [i64(0), kernel.dim(x.type.shape[0]), *buffers])
            return
        _accumulate_scalar(em, op, kind, fn.args[0], fn.args[1], fn.args[3])
        em.b.ret_void()
        _call_over_kept(kernel, op, fn, buffers)
    rule.__name__ = f"reduce_{kind}_lower"
    return rule


def _outline_reduction(kernel: Emitter, op: Op, dest: ir.Value) -> tuple[ir.Function, Emitter, list[ir.Value]]:
    """The outlined function of reduction `op`, (start, end, dims, out, leaves...), its emitter, and
    the kernel's buffers to call it with (`dest` the output)."""
    leaves = _reduction_leaves(kernel.plan, op)
    levels = [_column_levels(kernel, op)] if _sums_columns(op) else []
    fn = bounds.outline(kernel, op.name, 1 + len(leaves) + len(levels))
    em = kernel.nested(fn, fn.args[2], dict(zip(leaves, fn.args[4:])))
    if levels:
        em.levels[op.result] = fn.args[4 + len(leaves)]
    return fn, em, bounds.nest_arguments(kernel, [kernel.dims_ptr, dest] + [kernel.buffers[v] for v in leaves] + levels)


def _column_levels(kernel: Emitter, op: Op) -> ir.Value:
    """Where column sum `op` keeps its levels: its part of the function's block, or, when a scan's
    length sizes them, a buffer allocated here."""
    if op.result in kernel.levels:
        return kernel.levels[op.result]
    size = _levels_bytes(kernel, op)
    return bounds.track(kernel, kernel.allocate(size), size, bounds.describe_levels(kernel, op.result), "temporary")


def _reduction_leaves(plan: Plan, op: Op) -> list[Value]:
    """The buffers the nest of reduction `op` reads: its operand's, or those it is computed from."""
    (x,) = op.operands
    return [x] if x in plan.materialized else plan.leaves(op)


def _call_over_kept(kernel: Emitter, op: Op, fn: ir.Function, buffers: list[ir.Value]) -> None:
    """Call `fn`, whose outermost loop runs over the first kept axis, split across threads (or
    once, for a full reduction); over the rows (the first axis kept), with the nests around it."""
    (x,) = op.operands
    kept = [d for k, d in enumerate(x.type.shape) if k not in op.attrs["axes"]]
    work = kernel.dim(num_elements(x.type.shape))
    if kept and 0 not in op.attrs["axes"]:
        kernel.run_nest(Nest(fn, kept[0], work, 1, buffers, [op.result], [buffers[1]],
                             _reduction_leaves(kernel.plan, op)))
        return
    kernel.run_queued()
    if kept:
        parallel.call_loop(kernel.b, kernel.head, fn, kernel.dim(kept[0]), work, 1, buffers)
    else:
        kernel.b.call(fn, [i64(0), i64(1), *buffers])


def _accumulate_scalar(em: Emitter, op: Op, kind: str, start: ir.Value, end: ir.Value, out: ir.Value) -> None:
    """Last axis reduced: per output element, a scalar accumulator over the reduced axes (innermost contiguous);
    a float sum's is a cascade of block sums (summation.blocked_sum), so its error grows like log n.

    The outermost loop runs over the first kept axis in [start, end) (or once, for a full reduction).
    """
    (x,) = op.operands
    axes, dtype = op.attrs["axes"], x.type.dtype
    kept = [k for k in range(x.type.rank) if k not in axes]
    extents = [em.dim(d) for d in x.type.shape]
    acc = em.head.alloca(REGISTER_TYPES[dtype])

    ordered = ORDERED_EXTREMA.get(kind) if dtype.is_float else None
    unordered = em.head.alloca(I1) if ordered else None

    def reduce_at(kept_axes: list[ir.Value]) -> None:
        def element_at(reduced_axes: list[ir.Value]) -> ir.Value:
            position = dict(zip(kept, kept_axes)) | dict(zip(axes, reduced_axes))
            return em.value_at(x, em.index(x, axes=[position[k] for k in range(x.type.rank)]))

        def step(reduced_axes: list[ir.Value]) -> None:
            em.b.store(_combine(em.b, kind, dtype, em.b.load(acc), element_at(reduced_axes)), acc)
            em.memo.clear()

        def ordered_step(reduced_axes: list[ir.Value]) -> None:
            element = element_at(reduced_axes)
            em.b.store(_intrinsic(em.b, ordered, [em.b.load(acc), element], dtype, ORDERED_FLAGS), acc)
            em.b.store(em.b.or_(em.b.load(unordered), em.b.fcmp_unordered("uno", element, element)), unordered)
            em.memo.clear()

        def loop(body: Callable[[list[ir.Value]], None]) -> None:
            em.b.store(_identity(kind, dtype), acc)
            loop_nest(em.b, [(i64(0), extents[k]) for k in axes], body,
                      interleave=INTERLEAVED_REDUCTIONS.get(kind, 1) if dtype.is_float else 1)

        def element(reduced_axes: list[ir.Value]) -> ir.Value:
            value = element_at(reduced_axes)
            em.memo.clear()
            return value

        def reduce() -> None:
            if kind == "sum" and dtype.is_float and axes:     # (no axes: a copy of a scalar)
                em.b.store(blocked_sum(em.b, em.head, REGISTER_TYPES[dtype], _identity(kind, dtype),
                                       [(i64(0), extents[k]) for k in axes], element,
                                       INTERLEAVED_REDUCTIONS[kind]), acc)
                return
            if not ordered:
                loop(step)
                return
            em.b.store(ir.Constant(I1, 0), unordered)
            loop(ordered_step)
            zero = em.b.fcmp_ordered("==", em.b.load(acc), ir.Constant(REGISTER_TYPES[dtype], 0.0))
            with em.b.if_then(em.b.select(em.b.load(unordered), ir.Constant(I1, 1), zero), likely=False):
                loop(step)
        _fast_then_exact(em, reduce)
        em.store(out, dtype, em.index(op.result, axes=kept_axes), em.b.load(acc))

    _for_kept_positions(em, kept, extents, start, end, reduce_at)


def _for_kept_positions(em: Emitter, kept: list[int], extents: list[ir.Value], start: ir.Value, end: ir.Value,
                        body: Callable[[list[ir.Value]], None]) -> None:
    """body(kept_axes) at every position of the kept axes, the first of them in [start, end)
    (a full reduction: once, for start = 0, end = 1)."""
    if kept:
        loop_nest(em.b, [(start, end)] + [(i64(0), extents[k]) for k in kept[1:]], body)
    else:
        counted_loop(em.b, start, end, lambda _: body([]))


def _accumulate_rows(em: Emitter, op: Op, kind: str, out: ir.Value) -> None:
    """Last axis kept: fill the output with the identity, then combine every input element into its
    output element in row-major order, so the inner loop is contiguous in both (not splittable)."""
    (x,) = op.operands
    axes, dtype = op.attrs["axes"], x.type.dtype
    kept = [k for k in range(x.type.rank) if k not in axes]
    if _sums_columns(op):
        _sum_columns(em, op, out)
        return
    total = em.dim(num_elements(op.result.type.shape))
    counted_loop(em.b, i64(0), total,
                 lambda i: em.store(out, dtype, em.index(op.result, flat=i), _identity(kind, dtype)))

    def step(all_axes: list[ir.Value]) -> None:
        element = em.value_at(x, em.index(x, axes=all_axes))
        target = em.index(op.result, axes=[all_axes[k] for k in kept])
        em.store(out, dtype, target, _combine(em.b, kind, dtype, em.load(out, dtype, target), element))
        em.memo.clear()
    loop_nest(em.b, [(i64(0), em.dim(d)) for d in x.type.shape], step)


def _sum_columns(em: Emitter, op: Op, out: ir.Value) -> None:
    """A float sum keeping its last axis: at each position of the other kept axes, the columns'
    sums of row blocks in row order, into the output row, their cascades' levels in the nest's
    `levels` (summation.blocked_column_sums), so its error grows like log n."""
    (x,) = op.operands
    axes, dtype = op.attrs["axes"], x.type.dtype
    kept = [k for k in range(x.type.rank) if k not in axes]
    extents = [em.dim(d) for d in x.type.shape]
    levels = _elements(em, em.levels[op.result], dtype, lambda i: Index(em.b, [i], axes=[i], flat=i))   # one axis

    def columns(outer: list[ir.Value]) -> None:
        def element(reduced: list[ir.Value], column: ir.Value) -> ir.Value:
            position = dict(zip(kept, [*outer, column])) | dict(zip(axes, reduced))
            value = em.value_at(x, em.index(x, axes=[position[k] for k in range(x.type.rank)]))
            em.memo.clear()
            return value
        sums = _elements(em, out, dtype, lambda column: em.index(op.result, axes=[*outer, column]))
        blocked_column_sums(em.b, em.head, _identity("sum", dtype), [(i64(0), extents[k]) for k in axes],
                            extents[-1], element, sums, levels)
    if kept[:-1]:
        loop_nest(em.b, [(i64(0), extents[k]) for k in kept[:-1]], columns)
    else:
        columns([])


def _elements(em: Emitter, base: ir.Value, dtype: DType, index: Callable[[ir.Value], Index]) -> Elements:
    """The elements of buffer `base`, the i-th at index(i), through the emitter's (checked) loads and stores."""
    return Elements(lambda i: em.load(base, dtype, index(i)), lambda i, value: em.store(base, dtype, index(i), value))


for _kind in ("sum", "max", "min", "prod"):
    lower_rules[f"reduce_{_kind}"] = _reduction(_kind)


# ---------------------------------------------------------------- arg-reductions

def _arg_reduction(kind: str) -> LowerRule:
    """A buffer rule: per output element, one pass along the axis carrying the best value and its
    index (the outer loop, over the kept axes, splits across threads)."""
    def rule(kernel: Emitter, op: Op, dest: ir.Value) -> None:
        fn, em, buffers = _outline_reduction(kernel, op, dest)
        _scan_for_index(em, op, kind, fn.args[0], fn.args[1], fn.args[3])
        em.b.ret_void()
        _call_over_kept(kernel, op, fn, buffers)
    rule.__name__ = f"arg{kind}_lower"
    return rule


def _replaces(b: ir.IRBuilder, kind: str, dtype: DType, x: ir.Value, best: ir.Value) -> ir.Value:
    """Whether x takes best's place: strictly better, so the first of equals stays, or the first
    nan, which nothing replaces (NumPy's argmax and argmin)."""
    predicate = ">" if kind == "max" else "<"
    if not dtype.is_float:
        return b.icmp_signed(predicate, x, best)
    # unordered: better, or x is nan; best is a number (the identity at first)
    return b.and_(b.fcmp_unordered(predicate, x, best), b.fcmp_ordered("==", best, best))


def _scan_for_index(em: Emitter, op: Op, kind: str, start: ir.Value, end: ir.Value, out: ir.Value) -> None:
    """The index of the best element along the axis, starting from the identity at index 0, so an
    empty axis gives 0 (the interpreter's choice) and an axis of identities its first index."""
    (x,), (axis,) = op.operands, op.attrs["axes"]
    dtype = x.type.dtype
    kept = [k for k in range(x.type.rank) if k != axis]
    extents = [em.dim(d) for d in x.type.shape]
    best, index = em.head.alloca(REGISTER_TYPES[dtype]), em.head.alloca(I64)

    def scan_at(kept_axes: list[ir.Value]) -> None:
        def step(k: ir.Value) -> None:
            position = dict(zip(kept, kept_axes)) | {axis: k}
            element = em.value_at(x, em.index(x, axes=[position[i] for i in range(x.type.rank)]))
            current = em.b.load(best)
            better = _replaces(em.b, kind, dtype, element, current)
            em.b.store(em.b.select(better, element, current), best)
            em.b.store(em.b.select(better, k, em.b.load(index)), index)
            em.memo.clear()

        em.b.store(_identity(kind, dtype), best)
        em.b.store(i64(0), index)
        counted_loop(em.b, i64(0), extents[axis], step)
        em.store(out, DType.i64, em.index(op.result, axes=kept_axes), em.b.load(index))
    _for_kept_positions(em, kept, extents, start, end, scan_at)


for _kind in ("max", "min"):
    lower_rules[f"arg{_kind}"] = _arg_reduction(_kind)


# ---------------------------------------------------------------- scans

def _scan(kind: str) -> LowerRule:
    """A buffer rule: one outlined nest over the other axes (the first of them split across threads),
    sequential along the scanned axis; each step combines a row of the output with the previous
    one, so when the scanned axis is not the last the innermost loop runs over contiguous
    elements and vectorizes. Steps are not reassociated: the sums are NumPy's, bit for bit."""
    combine = _int_or_float("add", "fadd") if kind == "sum" else _int_or_float("mul", "fmul")

    def rule(kernel: Emitter, op: Op, dest: ir.Value) -> None:
        (x,), axis = op.operands, op.attrs["axis"]
        fn, em, buffers = _outline_reduction(kernel, op, dest)
        _fast_then_exact(em, lambda: _scan_along(em, op, kind, combine, fn.args[0], fn.args[1], fn.args[3]))
        em.b.ret_void()
        others = [d for k, d in enumerate(x.type.shape) if k != axis]
        if others:
            parallel.call_loop(kernel.b, kernel.head, fn, kernel.dim(others[0]),
                               kernel.dim(num_elements(x.type.shape)), 1, buffers)
        else:
            kernel.b.call(fn, [i64(0), i64(1), *buffers])
    rule.__name__ = f"cum{kind}_lower"
    return rule


def _scan_along(em: Emitter, op: Op, kind: str, combine, start: ir.Value, end: ir.Value, out: ir.Value) -> None:
    """out[.., k, ..] = combine(out at the previous k, x at k (exclusive: at the previous k)), the
    first k getting x's element (exclusive: the identity); nothing runs along an empty axis."""
    (x,), axis, dtype = op.operands, op.attrs["axis"], op.operands[0].type.dtype
    extents = [em.dim(d) for d in x.type.shape]
    n = extents[axis]
    others = [k for k in range(x.type.rank) if k != axis]

    def ranges(axes: list[int]) -> list[tuple[ir.Value, ir.Value]]:
        return [(start, end) if k == others[0] else (i64(0), extents[k]) for k in axes]

    def position(j: ir.Value) -> ir.Value:     # the j-th position in scan order
        return em.b.sub(em.b.sub(n, i64(1)), j) if op.attrs["reverse"] else j

    def over_pre(pre: list[ir.Value]) -> None:
        def row(j: ir.Value, step: Callable[[ir.Value, list[ir.Value]], ir.Value]) -> None:
            def element(post: list[ir.Value]) -> None:
                em.store(out, dtype, at(position(j), post), step(j, post))
                em.memo.clear()
            loop_nest(em.b, ranges([k for k in others if k > axis]), element)

        def at(k: ir.Value, post: list[ir.Value]) -> Index:
            return em.index(x, axes=[*pre, k, *post])

        def first(j: ir.Value, post: list[ir.Value]) -> ir.Value:
            return _identity(kind, dtype) if op.attrs["exclusive"] else em.value_at(x, at(position(j), post))

        def step(j: ir.Value, post: list[ir.Value]) -> ir.Value:
            previous = position(em.b.sub(j, i64(1)))
            element = em.value_at(x, at(previous if op.attrs["exclusive"] else position(j), post))
            return combine(em.b, dtype, em.load(out, dtype, at(previous, post)), element)
        row(i64(0), first)
        counted_loop(em.b, i64(1), n, lambda j: row(j, step))

    with em.b.if_then(em.b.icmp_signed(">", n, i64(0))):
        loop_nest(em.b, ranges([k for k in others if k < axis]), over_pre)


for _kind in ("sum", "prod"):
    lower_rules[f"cum{_kind}"] = _scan(_kind)


def matmul_lower(kernel: Emitter, op: Op, dest: ir.Value) -> None:
    # C[b] = A[b] @ B[b] for every batch position b: the rows of all the C[b] together split across
    # threads, so many small products (attention's) share the threads as one large one does
    a, b_ = op.operands
    dtype, shape = a.type.dtype, a.type.shape
    m, k, n = shape[-2], shape[-1], b_.type.shape[-1]
    blk = gemm.blocking(dtype, kernel.vector_bits)
    transposed = kernel.plan.transposed
    rows = _matmul_rows(kernel, blk, m, k, n, a in transposed, b_ in transposed)
    batches = num_elements(shape[:-2])
    loop = rows if batches == 1 else _batched_rows(kernel, rows, dtype, m, k, n)
    work = kernel.b.lshr(kernel.dim(batches * m * k * n), i64(GEMM_WORK_SHIFT))
    operands = [kernel.buffers[transposed.get(v, v)] for v in (a, b_)]
    parallel.call_loop(kernel.b, kernel.head, loop, kernel.dim(batches * m), work, blk.mr,
                       bounds.nest_arguments(kernel, [kernel.dims_ptr, dest, *operands]))


def _batched_rows(kernel: Emitter, rows: ir.Function, dtype: DType, m: Dim, k: Dim, n: Dim) -> ir.Function:
    """batched(start, end, dims, C, A, B): rows [start, end) of the batches' C[b] stacked, each batch's
    share by `rows` on that batch's matrices."""
    fn = bounds.outline(kernel, "matmul_batched", 3)
    em = kernel.nested(fn, fn.args[2], {})
    start, end, dims, c, a, b_ = fn.args[:6]
    m_ = em.dim(m)
    sizes = [em.dim(d) for d in (m * n, m * k, k * n)]

    def batch(i: ir.Value) -> None:
        first = em.b.mul(i, m_, flags=NOWRAP)
        lo = em.b.sub(_intrinsic(em.b, "smax", [start, first], DType.i64), first)
        hi = em.b.sub(_intrinsic(em.b, "smin", [end, em.b.add(first, m_)], DType.i64), first)
        bases = []
        for base, size in zip((c, a, b_), sizes):
            offset = em.b.mul(i, size, flags=NOWRAP)
            bases.append(bounds.track_within(em, em.element_ptr(base, dtype, offset), base, offset, ELEMENT_BYTES[dtype]))
        em.b.call(rows, [lo, hi, *bounds.nest_arguments(em, [dims, *bases])])
    with em.b.if_then(em.b.icmp_signed("<", start, end)):     # then m > 0: the divisions are defined
        last = em.b.sdiv(em.b.add(end, em.b.sub(m_, i64(1))), m_)
        counted_loop(em.b, em.b.sdiv(start, m_), last, batch)
    em.b.ret_void()
    return fn


def _matmul_rows(kernel: Emitter, blk: gemm.Blocking, m: Dim, k: Dim, n: Dim, transposed_a: bool,
                 transposed_b: bool) -> ir.Function:
    """rows(start, end, dims, C, A, B): C[start:end] = A[start:end] @ B, by the runtime library's gemm;
    a transposed operand is its transpose's buffer, read with swapped strides."""
    fn = bounds.outline(kernel, "matmul_rows", 3)
    em = kernel.nested(fn, fn.args[2], {})
    start, end, _, c, a, b_ = fn.args[:6]
    m_, k_, n_ = em.dim(m), em.dim(k), em.dim(n)
    rsa, csa = (i64(1), m_) if transposed_a else (k_, i64(1))
    rsb, csb = (i64(1), k_) if transposed_b else (n_, i64(1))
    dtype = blk.dtype
    bounds.gemm_operands(em, ELEMENT_BYTES[dtype], start, end, (m_, k_, n_), (a, rsa, csa), (b_, rsb, csb), c)
    em.b.call(gemm.declare_gemm(kernel.llmod, dtype),
              [em.b.sub(end, start), n_, k_, em.element_ptr(a, dtype, em.b.mul(start, rsa, flags=NOWRAP)), rsa, csa,
               b_, rsb, csb, em.element_ptr(c, dtype, em.b.mul(start, n_, flags=NOWRAP))])
    em.b.ret_void()
    return fn


lower_rules["matmul"] = matmul_lower


# ---------------------------------------------------------------- external functions

def extern_call_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # symbol(x1[i], ..., xn[i]); the C function is declared here and resolved by the JIT from the
    # process or by the linker (libm is linked into every shared object)
    args = [em.value_at(v, idx) for v in op.operands]
    scalar = REGISTER_TYPES[op.result.type.dtype]
    fn = _libc(em.llmod, op.attrs["symbol"], scalar, [scalar] * len(args))
    if fn.function_type != ir.FunctionType(scalar, [scalar] * len(args)):
        raise CompileError(f"external function '{op.attrs['symbol']}' is used with two signatures in one "
                           "module, or clashes with a function adc defines", op.loc)
    return em.b.call(fn, args)


lower_rules["extern_call"] = extern_call_lower


lower_rules["for"] = control_flow.for_lower
lower_rules["scan"] = control_flow.for_lower
lower_rules["while"] = control_flow.while_lower
lower_rules["if"] = control_flow.if_lower
