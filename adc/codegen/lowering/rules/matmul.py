"""Buffer rule of matmul: the rows of every batch's product split across threads (the columns of a
single product of few rows, or a wide one), each thread's share computed by the runtime library's
gemm (gemm.py); a stack of products of small static matrices in the nest over stacked matrices
(matrices.py) instead, W products at a time in SIMD lanes, joining the row strips around it (a
VJP's products per system). A product of one triangular matrix (by its op's record: a cholesky
factor, qr's r, their transposes) and any other skips the triangle's zeros.

    %2 = matmul %a, %b : f32[B,M,N]    ──▶   parallel for rows [s, e) of B*M: gemm(C[s:e] = A[s:e] @ B)
    %2 = matmul %a, %b : f32[8,4096]   ──▶   parallel for columns [s, e): gemm(C[:, s:e] = A @ B[:, s:e])
    %2 = matmul %a, %b : f64[B,8,8]    ──▶   for t in [s, e) by W: C[t:t+W] = A[t:t+W] @ B[t:t+W], unrolled
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as ir

from adc.codegen.native import gemm, parallel
from adc.codegen.lowering import bounds
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.element_types import ELEMENT_BYTES, REGISTER_TYPES
from adc.codegen.lowering.fusion import UNROLLED_ORDER
from adc.codegen.lowering.loops import NOWRAP, counted_loop, i64
from adc.codegen.lowering.rules.matrices import Lanes, Matrices, over_matrices
from adc.ir.core import Op, Value
from adc.ir.ops import OPS
from adc.ir.types import DType, Dim, num_elements

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter
    from adc.codegen.lowering.rules.table import LowerRule

# A matrix product's multiply-adds, shifted right by this, are weighed against
# parallel.THRESHOLD elements: products of 2^19 multiply-adds or more split their rows across
# threads (an RNN step's 32x128x128, Zen 5, two threads: 7.0 -> ~5 us, as OpenBLAS's two).
GEMM_WORK_SHIFT = 2
# In a loop's body (Emitter.per_iteration) a product's operands were written on this thread by the
# iteration before, so a split hands their rows to the other core, and its result back, every
# iteration. Two vCPUs on another die (a cache line's round trip 350 ns, not 60) made an RNN's
# gradient slower on two threads than on one up to 32x512x512 (1.05x; 32x128x128: 1.8x) and faster
# from 32x1024x1024 and 128x512x512 (0.76-0.80x; on a shared L3 every size: 0.6-0.9x). So there
# products of 2^24 multiply-adds or more split.
LOOP_GEMM_WORK_SHIFT = 7
# A product whose C is more than this many times wider than tall splits its columns across threads,
# not its rows (Zen 4, two threads, f64: 32 x 4096 x 4096 27.0 -> 19.7 ms, NumPy 18.0; 32 x 256 x 2048
# 0.50 -> 0.39 ms, NumPy 0.38); at 2 and 4 (256 and 128 x 784 x 512) the column split was as fast
# or, in some runs, 1.3-1.8x slower.
WIDE_RATIO = 4
TRIANGLE_ROWS = 256     # rows of C per gemm of a triangular product (2048, one thread: 102 ms; 113 with 128, 106 with 512)

lower_rules: dict[str, LowerRule] = {}      # this family's rows of table.lower_rules


def matmul_lower(kernel: Emitter, op: Op, dest: ir.Value) -> None:
    # C[b] = A[b] @ B[b] for every batch position b: the rows of all the C[b] together split across
    # threads, so many small products (attention's) share the threads as one large one does
    if small_stacked(op):
        stacked_products(kernel, op, dest)
        return
    kernel.run_queued()     # gemm reads memory: what the queued nests write must be there
    a, b_ = op.operands
    dtype, shape = a.type.dtype, a.type.shape
    m, k, n = shape[-2], shape[-1], b_.type.shape[-1]
    blk = gemm.blocking(dtype, kernel.vector_bits)
    transposed = kernel.plan.transposed
    batches = num_elements(shape[:-2])
    shift = LOOP_GEMM_WORK_SHIFT if kernel.per_iteration else GEMM_WORK_SHIFT
    work = kernel.b.lshr(kernel.dim(batches * m * k * n), i64(shift))
    operands = [kernel.buffers[transposed.get(v, v)] for v in (a, b_)]
    triangle = triangle_of(kernel, a)
    if triangle is not None and batches == 1:
        loop = _triangular_rows(kernel, blk, m, k, n, a in transposed, b_ in transposed, triangle == "lower")
        blocks = kernel.b.sdiv(kernel.b.add(kernel.dim(m), i64(TRIANGLE_ROWS - 1)), i64(TRIANGLE_ROWS))
        parallel.call_loop(kernel.b, kernel.head, loop, blocks, work, 1,
                           bounds.nest_arguments(kernel, [kernel.dims_ptr, dest, *operands]))
        return
    if batches == 1:
        # rows split across threads in strips of MR, or columns in panels of NR (`_split_columns`)
        loop = _matmul_part(kernel, blk, m, k, n, a in transposed, b_ in transposed, split_columns=True)
        by_columns = _split_columns(kernel.b, blk, kernel.dim(m), kernel.dim(n))
        outer = kernel.b.select(by_columns, kernel.dim(n), kernel.dim(m))
        grain = kernel.b.select(by_columns, i64(blk.nr), i64(blk.mr))
    else:
        rows = _matmul_part(kernel, blk, m, k, n, a in transposed, b_ in transposed, split_columns=False)
        loop, outer, grain = _batched_rows(kernel, rows, dtype, m, k, n), kernel.dim(batches * m), blk.mr
    parallel.call_loop(kernel.b, kernel.head, loop, outer, work, grain,
                       bounds.nest_arguments(kernel, [kernel.dims_ptr, dest, *operands]))


def triangle_of(kernel: Emitter, value: Value) -> str | None:
    """"lower" or "upper" when value's matrices are zero past that triangle by its op's record (a
    cholesky factor, qr's r, or a transpose of one that the matmul reads in place), else None."""
    source = kernel.plan.transposed.get(value, value)
    op = kernel.plan.producers.get(source)
    if op is None:
        return None
    triangle = dict(OPS[op.name].triangular).get(op.results.index(source))
    if triangle is None or source is value:
        return triangle
    return "upper" if triangle == "lower" else "lower"


def _triangular_rows(kernel: Emitter, blk: gemm.Blocking, m: Dim, k: Dim, n: Dim, transposed_a: bool,
                     transposed_b: bool, lower: bool) -> ir.Function:
    """blocks(start, end, dims, C, A, B): C = A @ B for a triangular A (BLAS's trmm), TRIANGLE_ROWS rows
    of C a gemm reading only the columns of A that the triangle holds in those rows (lower: up to
    the block's last row; upper: from its first): half a product's work. Blocks [start, end) are
    taken from both ends in turn (0, last, 1, last - 1, ...), so a thread's share of them costs as
    much as another's."""
    fn = bounds.outline(kernel, "matmul_triangular", 3)
    em = kernel.nested(fn, fn.args[2], {})
    start, end, _, c, a, b_ = fn.args[:6]
    product = _Product(em, blk.dtype, (m, k, n), (a, transposed_a), (b_, transposed_b), c)
    m_, k_, n_ = product.sizes
    b = em.b
    blocks = b.sdiv(b.add(m_, i64(TRIANGLE_ROWS - 1)), i64(TRIANGLE_ROWS))

    def block(v: ir.Value) -> None:
        step = b.lshr(v, i64(1))
        index = b.select(b.trunc(v, ir.IntType(1)), b.sub(b.sub(blocks, i64(1)), step), step)
        first = b.mul(index, i64(TRIANGLE_ROWS))
        last = intrinsic(b, "smin", [b.add(first, i64(TRIANGLE_ROWS)), m_], DType.i64)
        if lower:
            low, high = i64(0), intrinsic(b, "smin", [last, k_], DType.i64)
        else:
            low, high = intrinsic(b, "smin", [first, k_], DType.i64), k_
        product.gemm((first, last), (i64(0), n_), (low, high))
    counted_loop(b, start, end, block)
    b.ret_void()
    return fn


def small_stacked(op: Op) -> bool:
    """A stack of products of small static matrices (a VJP's Lᵀ X̄ or outer products per system):
    a gemm call per product costs more than the product."""
    a, b_ = op.operands
    orders = (*a.type.shape[-2:], b_.type.shape[-1])
    return a.type.rank >= 3 and all(isinstance(d, int) and d <= UNROLLED_ORDER for d in orders)


def stacked_products(kernel: Emitter, op: Op, dest: ir.Value) -> None:
    """C = A @ B matrix by matrix (matrices.py's nest, a transposed operand read at (j, i)), over Lanes
    W products at a time: C[i,j] = A[i,0] B[0,j] + A[i,1] B[1,j] + ..., in that order on both paths."""
    a, b_ = op.operands
    m, k, n = a.type.shape[-2], a.type.shape[-1], b_.type.shape[-1]
    zero = ir.Constant(REGISTER_TYPES[a.type.dtype], 0.0)

    def each(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
        b, ma, mb, mc = em.b, Matrices(em, t, a), Matrices(em, t, b_), Matrices(em, t, op.result)
        acc = em.head.alloca(zero.type)

        def entry(i: ir.Value, j: ir.Value) -> None:
            b.store(b.fmul(ma.read(i, i64(0)), mb.read(i64(0), j)) if k else zero, acc)
            counted_loop(b, i64(1), i64(k), lambda p: b.store(
                b.fadd(b.load(acc), b.fmul(ma.read(i, p), mb.read(p, j))), acc))
            mc.store(outs[0], i, j, b.load(acc))
        counted_loop(b, i64(0), i64(m), lambda i: counted_loop(b, i64(0), i64(n), lambda j: entry(i, j)))

    def lanes(em: Emitter, t: ir.Value, outs: list[ir.Value], width: int) -> None:
        b, la, lb = em.b, Lanes(em, t, a, width), Lanes(em, t, b_, width)

        def entry(i: int, j: int) -> ir.Value:
            acc = b.fmul(la.read(i, 0), lb.read(0, j)) if k else ir.Constant(la.type, None)
            for p in range(1, k):
                acc = b.fadd(acc, b.fmul(la.read(i, p), lb.read(p, j)))
            return acc
        c = {(i, j): entry(i, j) for i in range(m) for j in range(n)}
        Lanes(em, t, op.result, width).store(outs[0], lambda i, j: c[i, j], m)
    work = kernel.dim(num_elements(op.result.type.shape[:-2]) * m * k * n)
    over_matrices(kernel, op, [dest], each, work, lanes=lanes)


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
        lo = em.b.sub(intrinsic(em.b, "smax", [start, first], DType.i64), first)
        hi = em.b.sub(intrinsic(em.b, "smin", [end, em.b.add(first, m_)], DType.i64), first)
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


def _matmul_part(kernel: Emitter, blk: gemm.Blocking, m: Dim, k: Dim, n: Dim, transposed_a: bool,
                 transposed_b: bool, split_columns: bool) -> ir.Function:
    """part(start, end, dims, C, A, B): C[start:end] = A[start:end] @ B, by the runtime library's gemm;
    with `split_columns`, a product that `_split_columns` picks takes columns [start, end) instead:
    C[:, start:end] = A @ B[:, start:end]. A transposed operand is its transpose's buffer, read with
    swapped strides."""
    fn = bounds.outline(kernel, "matmul_rows", 3)
    em = kernel.nested(fn, fn.args[2], {})
    start, end, _, c, a, b_ = fn.args[:6]
    product = _Product(em, blk.dtype, (m, k, n), (a, transposed_a), (b_, transposed_b), c)
    m_, k_, n_ = product.sizes
    if split_columns:
        with em.b.if_else(_split_columns(em.b, blk, m_, n_)) as (columns, rows):
            with columns:
                product.gemm((i64(0), m_), (start, end), (i64(0), k_))
            with rows:
                product.gemm((start, end), (i64(0), n_), (i64(0), k_))
    else:
        product.gemm((start, end), (i64(0), n_), (i64(0), k_))
    em.b.ret_void()
    return fn


def _split_columns(b: ir.IRBuilder, blk: gemm.Blocking, m: ir.Value, n: ir.Value) -> ir.Value:
    """Whether a product of `m` x `n` splits C's columns across threads rather than its rows: too few
    rows for two strips of MR (which would leave a thread nothing, or a whole strip against a few
    rows), or C more than WIDE_RATIO times wider than tall, where each thread packing all of B for
    its rows costs more than each reading all of A."""
    few_rows = b.icmp_signed("<", m, i64(2 * blk.mr))
    return b.or_(few_rows, b.icmp_signed(">", n, b.mul(m, i64(WIDE_RATIO))))


class _Product:
    """C = A @ B of an outlined nest: its sizes, and `gemm` of a block of it."""

    def __init__(self, em: Emitter, dtype: DType, sizes: tuple[Dim, Dim, Dim], a: tuple[ir.Value, bool],
                 b_: tuple[ir.Value, bool], c: ir.Value):
        self.em, self.dtype = em, dtype
        self.sizes = m_, k_, n_ = tuple(em.dim(d) for d in sizes)
        (self.a, transposed_a), (self.b_, transposed_b), self.c = a, b_, c
        self.a_strides = (i64(1), m_) if transposed_a else (k_, i64(1))
        self.b_strides = (i64(1), k_) if transposed_b else (n_, i64(1))

    def gemm(self, rows: tuple[ir.Value, ir.Value], columns: tuple[ir.Value, ir.Value],
             depth: tuple[ir.Value, ir.Value]) -> None:
        """C[rows, columns] = A[rows, depth] @ B[depth, columns] (half-open ranges), checked in the
        bounds-checked build."""
        em, dtype, b = self.em, self.dtype, self.em.b
        (rsa, csa), (rsb, csb), n_ = self.a_strides, self.b_strides, self.sizes[2]
        bounds.gemm_operands(em, ELEMENT_BYTES[dtype], rows, columns, depth, (self.a, rsa, csa),
                             (self.b_, rsb, csb), (self.c, n_))
        (r0, r1), (c0, c1), (p0, p1) = rows, columns, depth

        def at(base: ir.Value, row: ir.Value, column: ir.Value, strides: tuple[ir.Value, ir.Value]) -> ir.Value:
            offset = b.add(b.mul(row, strides[0], flags=NOWRAP), b.mul(column, strides[1], flags=NOWRAP), flags=NOWRAP)
            return em.element_ptr(base, dtype, offset)
        b.call(gemm.declare_gemm(em.llmod, dtype),
               [b.sub(r1, r0), b.sub(c1, c0), b.sub(p1, p0), at(self.a, r0, p0, self.a_strides), rsa, csa,
                at(self.b_, p0, c0, self.b_strides), rsb, csb, at(self.c, r0, c0, (n_, i64(1))), n_])


lower_rules["matmul"] = matmul_lower
