"""What the runtime library's blocked factorizations share (triangular.py, cholesky.py, lu.py,
householder.py): strided views of matrices, the routine being built with its vector helpers, the
halving of a recursion, and the update C -= A @ B on the gemm's subtracting entry, its rows split
across threads when it is large.

The factorizations follow LAPACK's recursive algorithms (dpotrf2, dgetrf2 and Toledo 1997): a
matrix is halved until a block of at most `nb` rows is left, so nearly all the arithmetic is in
large matrix products and only those small blocks run unblocked loops. `nb` is an argument of
every routine (lowering passes the measured default, or a small one to test the recursion).

    View(ptr, rs, cs)       element (i, j) at ptr[i*rs + j*cs]: a block of a row-major matrix
                            with row stride lda is View(ptr + i0*lda + j0, lda, 1), its
                            transpose View(ptr + i0*lda + j0, 1, lda)
    update(r, m, n, k, a, b, c)     c[m, n] -= a[m, k] @ b[k, n], c row- or column-major
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import llvmlite.ir as ir

from adc.abi import runtime_factorization_symbol
from adc.codegen.native import gemm, heap, parallel
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.loops import I64, PTR, for_range, i64
from adc.codegen.native.simd import fma_intrinsic, lanes_below, masked_intrinsic, splat
from adc.ir.types import DType

VOID = ir.VoidType()
MAX_BLOCK = 64          # the largest unblocked block: the routines' tiles on the stack are sized by it
CHUNK_VECTORS = 8       # vectors of a row a substitution (or a triangular product) keeps in registers: 8
                        # independent chains of FMAs hide their latency (4: a trsm of 1024 right-hand sides ~2x slower)
# An update of fewer multiply-adds than this (4M) stays on one thread (a plain matmul splits from
# 2^19: matmul.GEMM_WORK_SHIFT)
PARALLEL_WORK = parallel.THRESHOLD << 5


class View(NamedTuple):
    """A strided matrix: element (i, j) at ptr[i*rs + j*cs]."""

    ptr: ir.Value
    rs: ir.Value
    cs: ir.Value

    def block(self, b: ir.IRBuilder, i: ir.Value, j: ir.Value) -> View:
        """The view whose element (0, 0) is this one's (i, j)."""
        return View(b.gep(self.ptr, [b.add(b.mul(i, self.rs), b.mul(j, self.cs))]), self.rs, self.cs)

    @property
    def T(self) -> View:       # noqa: N802 (NumPy's name)
        return View(self.ptr, self.cs, self.rs)


class Routine:
    """A function of the runtime library being built for one dtype: its builder and helpers."""

    def __init__(self, module: ir.Module, blk: gemm.Blocking, name: str, params: list[ir.Type],
                 result: ir.Type = VOID, exported: bool = False, kernel: bool = False):
        self.module, self.blk, self.elem, self.vector = module, blk, blk.elem, blk.vector
        self.fn = ir.Function(module, ir.FunctionType(result, params), name)
        if not exported:
            self.fn.linkage = "internal"
        self.fn.attributes.add("nounwind")
        if not kernel:      # drivers and scalar loops: LLVM unrolling them cost the library's build 4 s of CPU
            self.fn.attributes.add("optsize")
        entry, body = self.fn.append_basic_block("entry"), self.fn.append_basic_block("body")
        self.entry = ir.IRBuilder(entry)        # the stack's tiles: allocated once a call
        self.entry.position_before(self.entry.branch(body))
        self.b = ir.IRBuilder(body)

    @property
    def args(self) -> list[ir.Value]:
        return list(self.fn.args)

    def tile(self, elements: int) -> ir.Value:
        """A stack array of `elements` elements, aligned for whole vectors (in the entry block: once a call)."""
        slot = self.entry.alloca(self.elem, size=elements)
        slot.align = gemm.PACK_ALIGN
        return slot

    def constant(self, x: float) -> ir.Constant:
        return ir.Constant(self.elem, x)

    def at(self, v: View, i: ir.Value, j: ir.Value) -> ir.Value:
        return self.b.gep(v.ptr, [self.b.add(self.b.mul(i, v.rs), self.b.mul(j, v.cs))])

    def load(self, v: View, i: ir.Value, j: ir.Value) -> ir.Value:
        return self.b.load(self.at(v, i, j))

    def store(self, x: ir.Value, v: View, i: ir.Value, j: ir.Value) -> None:
        self.b.store(x, self.at(v, i, j))

    def splat(self, x: ir.Value) -> ir.Value:
        return splat(self.b, self.vector, x)

    def fma(self, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
        """x * y + z of vectors, rounded once."""
        return self.b.call(fma_intrinsic(self.module, self.vector), [x, y, z])

    def scalar_fma(self, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
        """x * y + z of scalars, rounded once."""
        return intrinsic(self.b, "fma", [x, y, z], self.blk.dtype)

    def vload(self, p: ir.Value, mask: ir.Value | None) -> ir.Value:
        vptr = self.b.bitcast(p, self.vector.as_pointer())
        if mask is None:
            return self.b.load(vptr, align=self.blk.elem_align)
        return self.b.call(masked_intrinsic(self.module, self.vector, "load"),
                           [vptr, ir.Constant(ir.IntType(32), self.blk.elem_align), mask, ir.Constant(self.vector, None)])

    def vstore(self, x: ir.Value, p: ir.Value, mask: ir.Value | None) -> None:
        vptr = self.b.bitcast(p, self.vector.as_pointer())
        if mask is None:
            self.b.store(x, vptr, align=self.blk.elem_align)
        else:
            self.b.call(masked_intrinsic(self.module, self.vector, "store"),
                        [x, vptr, ir.Constant(ir.IntType(32), self.blk.elem_align), mask])

    def chunks(self, width: ir.Value, vectors: int, body: Callable[[ir.Value, list[ir.Value | None]], None]) -> None:
        """body(j, masks) for j = 0, V, 2V, ... < width, V = `vectors` vectors' lanes: whole chunks with
        no masks, then the last partial chunk, if any, with each vector's mask of the lanes left."""
        b, lanes = self.b, vectors * self.blk.vl
        whole = b.mul(b.sdiv(width, i64(lanes)), i64(lanes))
        with for_range(b, i64(0), whole, i64(lanes)) as j:
            body(j, [None] * vectors)
        with b.if_then(b.icmp_signed("<", whole, width)):
            body(whole, [lanes_below(b, self.blk.vl, b.sub(width, b.add(whole, i64(v * self.blk.vl))))
                         for v in range(vectors)])

    def fill(self, v: View, rows: ir.Value, columns: ir.Value, x: float) -> None:
        """v[rows, columns] = x."""
        with for_range(self.b, i64(0), rows) as i:
            with for_range(self.b, i64(0), columns) as j:
                self.store(self.constant(x), v, i, j)

    def context(self, words: list[ir.Value]) -> ir.Value:
        """The arguments of a task for the pool (parallel.call_parallel_for) as an array of i64 words
        on the stack, pointers as integers; a task reads them back with `unpack`."""
        ctx = self.entry.alloca(I64, size=len(words))
        for slot, word in enumerate(words):
            value = self.b.ptrtoint(word, I64) if isinstance(word.type, ir.PointerType) else word
            self.b.store(value, self.b.gep(ctx, [i64(slot)]))
        return self.b.bitcast(ctx, PTR)

    def unpack(self, ctx: ir.Value, count: int) -> list[ir.Value]:
        """The first `count` words of a task's context, as i64 (inttoptr an element pointer back)."""
        return [self.b.load(self.b.gep(ctx, [i64(slot)], source_etype=I64), typ=I64) for slot in range(count)]

    def element_pointer(self, word: ir.Value) -> ir.Value:
        """A pointer to this routine's elements from an integer (a context's word, malloc's result)."""
        return self.b.inttoptr(word if word.type == I64 else self.b.ptrtoint(word, I64), self.elem.as_pointer())

    def allocate(self, elements: ir.Value) -> tuple[ir.Value, ir.Value]:
        """A workspace of `elements` elements from malloc (heap.py): the block (null if there is no
        memory: the caller checks) and a pointer to its elements. Give it back with `release`."""
        block = heap.allocate(self.b, self.b.mul(elements, i64(self.blk.elem_align)))
        return block, self.element_pointer(block)

    def release(self, block: ir.Value) -> None:
        heap.release(self.b, block)

    def ret_if(self, cond: ir.Value, value: ir.Value | None = None) -> None:
        with self.b.if_then(cond, likely=False):
            if value is None:
                self.b.ret_void()
            else:
                self.b.ret(value)

    def min(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.select(self.b.icmp_signed("<", x, y), x, y)


def copy(r: Routine, rows: ir.Value, columns: ir.Value, source: View, dest: View, columns_outside: bool = False) -> None:
    """dest[rows, columns] = source[rows, columns], row by row (or column by column: a column-major source)."""
    outer, inner = (columns, rows) if columns_outside else (rows, columns)
    with for_range(r.b, i64(0), outer) as x:
        with for_range(r.b, i64(0), inner) as y:
            i, j = (y, x) if columns_outside else (x, y)
            r.store(r.load(source, i, j), dest, i, j)


def half(b: ir.IRBuilder, n: ir.Value) -> ir.Value:
    """Where a recursion splits n rows: n / 2."""
    return b.sdiv(n, i64(2))


def clamp_block(b: ir.IRBuilder, nb: ir.Value) -> ir.Value:
    """The unblocked size asked for, within [1, MAX_BLOCK]."""
    nb = b.select(b.icmp_signed("<", nb, i64(1)), i64(1), nb)
    return b.select(b.icmp_signed(">", nb, i64(MAX_BLOCK)), i64(MAX_BLOCK), nb)


def exported(module: ir.Module, blk: gemm.Blocking, routine: str, signature: ir.FunctionType) -> Routine:
    """The exported `adc_rt_<routine>_<dtype>` (abi.runtime_factorization_symbol), to fill in."""
    name = runtime_factorization_symbol(routine, str(blk.dtype))
    return Routine(module, blk, name, list(signature.args), signature.return_type, exported=True)


def declare(module: ir.Module, routine: str, dtype: DType, signature: ir.FunctionType) -> ir.Function:
    """The runtime library's `adc_rt_<routine>_<dtype>`, declared in a kernel module that calls it."""
    name = runtime_factorization_symbol(routine, str(dtype))
    existing = module.globals.get(name)
    return existing if existing is not None else ir.Function(module, signature, name)


def internal(module: ir.Module, blk: gemm.Blocking, routine: str, params: list[ir.Type],
             result: ir.Type = VOID, kernel: bool = False) -> tuple[ir.Function, Routine | None]:
    """The internal `adc_blocked_<routine>_<dtype>`, and its Routine to fill in if it is new (else None);
    a `kernel` (an inner loop of vectors) is optimized for speed, the rest for size."""
    name = f"adc_blocked_{routine}_{blk.dtype}"
    if name in module.globals:
        return module.globals[name], None
    routine_ = Routine(module, blk, name, params, result, kernel=kernel)
    return routine_.fn, routine_


# ---------------------------------------------------------------- the update c -= a @ b

def update(r: Routine, m: ir.Value, n: ir.Value, k: ir.Value, a: View, b_: View, c: View) -> None:
    """c[m, n] -= a[m, k] @ b_[k, n]; c row-major (c.cs == 1) or column-major (c.rs == 1, updated as
    cᵀ -= b_ᵀ aᵀ); rows split across threads when the update is large."""
    r.b.call(_update_function(r.module, r.blk), [m, n, k, a.ptr, a.rs, a.cs, b_.ptr, b_.rs, b_.cs, c.ptr, c.rs, c.cs])


def _update_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "update", [I64, I64, I64, ptr, I64, I64, ptr, I64, I64, ptr, I64, I64])
    if r is None:
        return fn
    m, n, k, a, rsa, csa, b_, rsb, csb, c, rsc, csc = r.args
    b = r.b
    r.ret_if(b.or_(b.or_(b.icmp_signed("<=", m, i64(0)), b.icmp_signed("<=", n, i64(0))), b.icmp_signed("<=", k, i64(0))))
    rows = _rows_function(module, blk)
    with b.if_else(b.icmp_signed("==", csc, i64(1))) as (row_major, column_major):
        with row_major:
            b.call(rows, [m, n, k, a, rsa, csa, b_, rsb, csb, c, rsc])
        with column_major:
            b.call(rows, [n, m, k, b_, csb, rsb, a, csa, rsa, c, csc])
    b.ret_void()
    return fn


def _rows_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """rows(m, n, k, a, rsa, csa, b, rsb, csb, c, ldc): c -= a @ b, c row-major, the rows across
    the pool's threads once m n k reaches PARALLEL_WORK."""
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "update_rows", [I64, I64, I64, ptr, I64, I64, ptr, I64, I64, ptr, I64])
    if r is None:
        return fn
    b = r.b
    m, n, k = r.args[:3]
    task = _rows_task(module, blk)
    with b.if_else(b.icmp_signed(">=", b.mul(b.mul(m, n), k), i64(PARALLEL_WORK))) as (split, alone):
        with split:
            parallel.call_parallel_for(b, task, r.context(r.args), i64(0), m, i64(blk.mr))
        with alone:
            b.call(gemm.define_subtract(module, blk), r.args)
    b.ret_void()
    return fn


def _rows_task(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """task(ctx, start, end): rows [start, end) of the update whose arguments ctx holds."""
    fn, r = internal(module, blk, "update_task", [PTR, I64, I64])
    if r is None:
        return fn
    ctx, start, end = r.args
    b = r.b
    m, n, k, a, rsa, csa, b_, rsb, csb, c, ldc = r.unpack(ctx, 11)
    a, b_, c = (r.element_pointer(w) for w in (a, b_, c))
    b.call(gemm.define_subtract(module, blk), [b.sub(end, start), n, k, b.gep(a, [b.mul(start, rsa)]), rsa, csa,
                                               b_, rsb, csb, b.gep(c, [b.mul(start, ldc)]), ldc])
    b.ret_void()
    return fn
