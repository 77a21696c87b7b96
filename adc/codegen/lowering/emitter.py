"""The emission state of one LLVM function: what every lowering rule reads and writes through.

An `Emitter` holds a function's two builders (`head`, its entry, where dims are computed
once; `b`, where code goes), the values of its symbols, the buffer of each value that has
one, the elements computed so far in the loop being emitted (`memo`), and what it allocated.
A rule reads an operand's element with `value_at` (a load from its buffer, or its producer's
element rule, rules/) and writes with `store`; `nested` gives the emitter of a nest outlined
from the function, `region` the function of a control-flow region and what to call it with.

    em.value_at(x, em.index(x, axes=[i, j]))    # x[i, j]: loaded, or computed here
"""
from __future__ import annotations

from typing import Callable

import llvmlite.ir as ir

from adc.abi import STATUS_NO_MEMORY, STATUS_SHAPES
from adc.codegen.lowering import bounds, interrupts, sizes, vecmath
from adc.codegen.lowering.declarations import libc
from adc.codegen.lowering.element_types import ELEMENT_BYTES, MEMORY_TYPES
from adc.codegen.lowering.fusion import Plan
from adc.codegen.lowering.loops import (I1, I8, I32, I64, NOWRAP, PTR, Index, evaluate_dim, i64, if_then_else,
                                        stack_array)
from adc.codegen.lowering.rules.table import lower_rules
from adc.codegen.lowering.strips import Nest, RowStrip
from adc.codegen.lowering.temporaries import ALIGNMENT, layout
from adc.ir.core import Func, Module, Op, Value
from adc.ir.types import DType, Dim, SymDim, num_elements

REGION_PREFIX = "adc.region."      # + a region function's name: its internal LLVM function


class Emitter:
    """Emission state of one LLVM function: symbol values, buffers, and the elements computed so far.

    Dimension values are computed in the entry block (`self.head`) so that every
    loop of the function can use them. `dims` holds the values of `symbols`, in
    order: a kernel's dim_symbols, a region's Module.region_symbols.
    """

    def __init__(self, llmod: ir.Module, module: Module, func: Func, fusion: Plan, fn: ir.Function,
                 dims: ir.Value, symbols: tuple[str, ...], buffers: dict[Value, ir.Value], vector_bits: int,
                 linalg_block: int = 0):
        self.llmod, self.module, self.func, self.plan, self.buffers = llmod, module, func, fusion, buffers
        self.dims_ptr, self.symbol_order, self.vector_bits = dims, symbols, vector_bits
        self.linalg_block = linalg_block        # Target.linalg_block, the blocked factorizations' test hook
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
        self._exit: ir.Block | None = None          # its one way out (leave), and the status it returns there
        self._leaving: ir.PhiInstr | None = None
        self.unchecked: list[SymDim] = []           # shape constraints left to check (check_shapes)
        self.unsized: list[sizes.Shape] = []        # symbolic shapes left to check for fitting int64 bytes
        self.late: frozenset[str] = frozenset()     # symbols scans bind: sizes known only once one ran
        self.strip = RowStrip()                     # nests over the same rows waiting to run strip by strip
        self.kept: dict[ir.Value, str] = {}         # slots of blocks kept for its next call -> their names (kept_blocks.py)
        self.op: Op | None = None                   # the op being lowered: what a failed bounds check names
        self.bounds: bounds.Frame | None = None     # in a bounds-checked build: the extents of its buffers
        self.watch: interrupts.Watch | None = None  # what its loops poll (a kernel's or region's, not a nest's)
        # A kernel's or region's: lowers region function `name` into llmod (lower.py), for `region`
        self.lower_region: Callable[[str], ir.Function] | None = None
        # A loop's body, or a region one runs: the values its products read were mostly written on this
        # thread, by the iteration's nests, so splitting them hands them to another core each iteration
        self.per_iteration = False
        # In an outlined nest of the default build, whose operands are all computed before it is
        # called: each scalar operand, read once in the entry (None: a function whose scalars may
        # be computed later, or a checked build, whose every load is checked where it is made)
        self.scalars_ahead: dict[Value, ir.Value] | None = None

    def nested(self, fn: ir.Function, dims: ir.Value, buffers: dict[Value, ir.Value]) -> "Emitter":
        """The emitter of a function outlined from this one (a loop nest, a matmul's rows)."""
        child = Emitter(self.llmod, self.module, self.func, self.plan, fn, dims, self.symbol_order, buffers,
                        self.vector_bits, self.linalg_block)
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
            fn = self.lower_region(name)
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
        free = libc(self.llmod, "free", ir.VoidType(), [PTR])

        def fresh(bytes_: ir.Value) -> ir.Value:
            block = self.b.call(libc(self.llmod, "aligned_alloc", PTR, [I64, I64]), [i64(ALIGNMENT), bytes_])
            self.fail_if(self.b.icmp_unsigned("==", block, ir.Constant(PTR, None)))
            return block
        with self.b.if_then(self.b.icmp_unsigned("!=", size, i64(0))):
            self.b.store(bounds.take(self, self.kept[slot], size, fresh, lambda ptr: self.b.call(free, [ptr])), slot)
        return self.b.load(slot, typ=PTR)

    def allocate_parts(self, sizes: list[ir.Value]) -> list[ir.Value]:
        """Buffers of `sizes` bytes carved from one allocation: one call to the allocator, and one
        block it can hand back on the next call (a scan's dozens of stacks, allocated apart, each
        came back from the system, page faults and all, on every call)."""
        total, offsets = layout(self, sizes)
        block = self.allocate(total)
        return [self.b.gep(block, [offset], source_etype=I8, inbounds=True) for offset in offsets]

    def fail_if(self, failed: ir.Value, status: ir.Value | int = STATUS_NO_MEMORY) -> None:
        """Return `status` when `failed`, by the function's way out (`leave`)."""
        ok = self.b.append_basic_block("ok")
        self.b.cbranch(failed, self._way_out(), ok).set_weights([1, 99])
        self._leaving.add_incoming(status if isinstance(status, ir.Value) else ir.Constant(I32, status), self.b.block)
        self.b.position_at_end(ok)

    def leave(self, status: ir.Value) -> None:
        """Return `status` once what the function allocated is given back: every return goes by one
        block that releases it all (`close`), not a release of its own (a kernel's glue with 95 ways
        out and 39 blocks grew to 3,721 calls of free, and LLVM's time with it)."""
        self.b.branch(self._way_out())
        self._leaving.add_incoming(status, self.b.block)

    def close(self) -> None:
        """Fill the way out, once every block the function allocates has its slot (each null until
        it is allocated) and the function has left: release them all, and return the status it
        left with (bounds.status: or a failed check's found on the way)."""
        bounds.leave_from_exit(self)
        with self.b.goto_block(self._way_out()):
            self.release()
            self.b.ret(bounds.status(self, self._leaving))

    def _way_out(self) -> ir.Block:
        if self._exit is None:
            self._exit = self.b.function.append_basic_block("leave")
            with self.b.goto_block(self._exit):
                self._leaving = self.b.phi(I32)
        return self._exit

    def release(self) -> None:
        """Give back what the function allocated, kept for its next call (kept_blocks.py)."""
        free = libc(self.llmod, "free", ir.VoidType(), [PTR])
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
