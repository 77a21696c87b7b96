"""What the buffer rules of the matrix factorizations share (linalg.py: cholesky and triangular_solve;
orthogonal.py: qr; spectral.py: eigh and svd; lu.py: lu_factor and lu_pivots_to_permutation): one
outlined nest over the stacked matrices (or vectors), split across threads, and element access to
the t-th matrix (or vector) of a value.

Operands are read element by element (`Emitter.value_at`: a load, or the fused producer's
element), results read back and written through `Emitter.load`/`store`, so a bounds-checked
build checks every access. A rule may also give a body over `Lanes`: W consecutive matrices at
once, lane l holding matrix t + l, each element one SIMD vector (W = the target's vector width in
elements). Small matrices are latency-bound one at a time (a Cholesky or a substitution is a chain
of dependent divisions and square roots); W independent chains fill the vector units instead.

    %q, %r = qr %a : f64[B,M,N], f64[B,N,N]   ──▶   define internal void @"adc.qr.3"(i64 start, i64 end,
                                                    ptr dims, ptr q, ptr r, ptr a): for t in [start, end): ...
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import llvmlite.ir as ir

from adc.codegen.native import parallel
from adc.codegen.lowering import bounds
from adc.codegen.lowering.element_types import ELEMENT_BYTES, MEMORY_TYPES, REGISTER_TYPES
from adc.codegen.lowering.loops import NOWRAP, counted_loop, for_range, i64
from adc.codegen.lowering.shuffles import transposed
from adc.codegen.lowering.strips import Nest
from adc.ir.core import Op, Value
from adc.ir.types import Dim, num_elements

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter


# Matrices from these sizes on are factored and solved by the runtime library's blocked routines
# (codegen/native/: cholesky.py, lu.py, triangular.py) in blocks of order BLOCK; smaller ones by the
# scalar loops (or Lanes) of the rules. Each threshold is a list of (order, columns) pairs, any of
# which suffices: measured one thread, CPU time, stacks of f64 matrices (AMD EPYC, znver5): the
# blocked cholesky is level at order 32 (0.22 ms for 122 of them), lu_factor at 48, qr faster from
# 24 (289 of them: 1.77 against 1.98 ms; 2.0 against 5.7 ms for 15 of 256 x 64), eigh (tridiagonal,
# against one-sided Jacobi) from 12 (578 of them: 7.4 against 9.8 ms; 8 x 8: 11.6 against 10.1), svd
# (bidiagonal) from 24 (72 of them: 8.6 against 9.7 ms; 16 x 16: 13.4 against 10.3); a triangular
# solve of n right-hand sides 4x faster from n = 16, of 1 to 4 of them level only at 64.
# Target.linalg_block, a test hook, sends every matrix there.
CHOLESKY_BLOCKED = ((32, 0),)
LU_BLOCKED = ((48, 0),)
SOLVE_BLOCKED = ((64, 0), (16, 16))
QR_BLOCKED = ((24, 0),)
EIGH_BLOCKED = ((12, 0),)
SVD_BLOCKED = ((24, 0),)
BLOCK = 16          # level with 32 for cholesky, 5-10% faster for lu_factor and solves (order 1024)
QR_BLOCK = 32       # qr's panels (order 1024: 51 ms, 62 with 16, 55 with 64)
EIGH_BLOCK = 32     # eigh's tridiagonal reduction's panels (order 1024: 223 ms, 224 with 16, 251 with 64)
SVD_BLOCK = 16      # svd's bidiagonal reduction's panels (order 1024: 391 ms, 401 with 32)

Body = Callable[["Emitter", ir.Value, list[ir.Value]], None]


def by_size(kernel: Emitter, order: Dim, columns: Dim, thresholds: tuple[tuple[int, int], ...], blocked: Body,
            unblocked: Body) -> Body:
    """The body of a nest over matrices of `order` (with `columns` right-hand sides): `blocked` from
    any of the `thresholds` (order, columns) on, else `unblocked`; decided here for static sizes,
    when the nest runs for symbolic ones."""
    if kernel.linalg_block:
        return blocked
    if isinstance(order, int) and isinstance(columns, int):
        return blocked if any(order >= n and columns >= k for n, k in thresholds) else unblocked

    def body(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
        b, large = em.b, ir.Constant(ir.IntType(1), 0)
        for n, k in thresholds:
            large = b.or_(large, b.and_(b.icmp_signed(">=", em.dim(order), i64(n)),
                                        b.icmp_signed(">=", em.dim(columns), i64(k))))
        with b.if_else(large) as (yes, no):
            with yes:
                blocked(em, t, outs)
            with no:
                unblocked(em, t, outs)
    return body


def block_size(em: Emitter, default: int = BLOCK) -> ir.Value:
    """The order of the blocks the runtime library's routines leave unblocked."""
    return i64(em.linalg_block or default)


def runtime_matrix(em: Emitter, m: Matrices, buffer: ir.Value, elements: ir.Value) -> ir.Value:
    """A pointer to m's matrix in `buffer`, for a routine of the runtime library that reads or writes
    its first `elements` elements: in a checked build, checked first to lie in the buffer."""
    b = em.b
    bounds.span(em, buffer, ELEMENT_BYTES[m.dtype], m.base, b.sub(b.add(m.base, elements), i64(1)),
                b.icmp_signed(">", elements, i64(0)), "the runtime library's routine")
    return b.bitcast(em.element_ptr(buffer, m.dtype, m.base), MEMORY_TYPES[m.dtype].as_pointer())


def over_matrices(kernel: Emitter, op: Op, dests: list[ir.Value],
                  body: Callable[[Emitter, ir.Value, list[ir.Value]], None], work: ir.Value | None = None,
                  vectors: bool = False, lanes: Callable[[Emitter, ir.Value, list[ir.Value], int], None] | None = None
                  ) -> None:
    """Outline a nest (start, end, dims, outs..., leaves...) running `body(em, matrix, outs)` for each
    stacked matrix of the first operand (each vector, `vectors=True`, as in `Matrices`) in [start, end),
    and call it over all of them, split across threads once `work` (default: the first result's
    elements) is large enough. Given `lanes`, `lanes(em, t, outs, width)` runs on matrices t, ...,
    t + width - 1 while a whole group of them is left, and `body` on the rest.

    Over one stacking axis, with `lanes`, the nest is a nest over rows (strips.py): it runs strip by
    strip with the nests around it that read only their own matrices (a VJP's solves, products and
    masks), whose intermediates then stay in cache instead of filling [B, N, N] buffers. (Larger
    matrices, one at a time, run alone, after the queued nests.)"""
    stacks = op.operands[0].type.shape[:-1 if vectors else -2]
    queued = lanes is not None and len(stacks) == 1
    if not queued:
        kernel.run_queued()
    leaves = kernel.plan.leaves(op)
    outs = len(dests)
    fn = bounds.outline(kernel, op.name, outs + len(leaves))
    em = kernel.nested(fn, fn.args[2], dict(zip(leaves, fn.args[3 + outs:])))
    start, end, results = fn.args[0], fn.args[1], list(fn.args[3:3 + outs])
    width = 1
    if lanes is not None:
        width = lane_count(em, op.operands[0].type.dtype)
        with for_range(em.b, start, em.b.sub(end, i64(width - 1)), i64(width)) as t:
            lanes(em, t, results, width)
        start = t          # the loop's counter where it stopped: the first matrix left
    counted_loop(em.b, start, end, lambda t: body(em, t, results))
    em.b.ret_void()
    buffers = bounds.nest_arguments(kernel, [kernel.dims_ptr, *dests] + [kernel.buffers[v] for v in leaves])
    count = None if queued else kernel.dim(num_elements(stacks))
    work = work if work is not None else kernel.dim(num_elements(op.results[0].type.shape))
    if queued:
        kernel.run_nest(Nest(fn, stacks[0], work, width, buffers, list(op.results), list(dests), leaves))
    else:
        parallel.call_loop(kernel.b, kernel.head, fn, count, work, 1, buffers)


class Matrices:
    """Element (i, j) of the t-th matrix of a value: read from its operand, or loaded and stored in
    `out`. A value of stacked vectors (`vectors=True`, [..., N]) is a stack of one-row matrices."""

    def __init__(self, em: Emitter, t: ir.Value, value: Value, vectors: bool = False):
        self.em, self.value, self.dtype = em, value, value.type.dtype
        rows, columns = (i64(1), em.dim(value.type.shape[-1])) if vectors else (em.dim(d) for d in value.type.shape[-2:])
        self.columns = columns
        self.base = em.b.mul(t, em.b.mul(rows, columns, flags=NOWRAP), flags=NOWRAP)

    def _index(self, i: ir.Value, j: ir.Value):
        b = self.em.b
        return self.em.index(self.value, flat=b.add(self.base, b.add(b.mul(i, self.columns, flags=NOWRAP), j,
                                                                     flags=NOWRAP), flags=NOWRAP))

    def read(self, i: ir.Value, j: ir.Value) -> ir.Value:
        return self.em.value_at(self.value, self._index(i, j))

    def load(self, out: ir.Value, i: ir.Value, j: ir.Value) -> ir.Value:
        return self.em.load(out, self.dtype, self._index(i, j))

    def store(self, out: ir.Value, i: ir.Value, j: ir.Value, x: ir.Value) -> None:
        self.em.store(out, self.dtype, self._index(i, j), x)
        self.em.memo.clear()


def lane_count(em: Emitter, dtype) -> int:
    """How many elements of `dtype` one of the target's vectors holds."""
    return max(1, em.vector_bits // (8 * ELEMENT_BYTES[dtype]))


class Lanes:
    """Element (i, j) (static) of matrices t, ..., t + width - 1 of a value as one vector, lane l
    matrix t + l. Read and stored lane by lane through `Matrices`, so a checked build checks each
    access; in the default build a value in a buffer moves `width` consecutive elements of a lane
    at a time instead (whole vectors, transposed in registers), the elements past the last whole
    `width` of a matrix lane by lane. A fused transpose of the last two axes (a VJP's Lᵀ) is read
    as its operand's element (j, i)."""

    def __init__(self, em: Emitter, t: ir.Value, value: Value, width: int, vectors: bool = False):
        self.em, self.value, self.width = em, value, width
        op = em.plan.producers.get(value)
        swaps = (not vectors and value not in em.buffers and op is not None and op.name == "transpose"
                 and list(op.attrs["perm"]) == [*range(value.type.rank - 2), value.type.rank - 1, value.type.rank - 2])
        self.swapped = Lanes(em, t, op.operands[0], width) if swaps else None
        self.matrices = [Matrices(em, em.b.add(t, i64(lane), flags=NOWRAP), value, vectors) for lane in range(width)]
        self.type = ir.VectorType(REGISTER_TYPES[value.type.dtype], width)
        self.align = ELEMENT_BYTES[value.type.dtype]
        rows, self.columns = (1, value.type.shape[-1]) if vectors else value.type.shape[-2:]
        whole = em.bounds is None and isinstance(rows, int) and isinstance(self.columns, int)
        self.whole_elements = rows * self.columns // width * width if whole else 0
        self.blocks: dict[int, list[ir.Value]] = {}

    def _pointer(self, base: ir.Value, lane: int, first: int) -> ir.Value:
        m = self.matrices[lane]
        return self.em.element_ptr(base, self.value.type.dtype, self.em.b.add(m.base, i64(first), flags=NOWRAP))

    def read(self, i: int, j: int) -> ir.Value:
        if self.swapped is not None:
            return self.swapped.read(j, i)
        b, e = self.em.b, i * self.columns + j
        first = e - e % self.width
        if e < self.whole_elements and self.value in self.em.buffers:
            if first not in self.blocks:
                base = self.em.buffers[self.value]
                self.blocks[first] = transposed(b, [b.load(self._pointer(base, lane, first), typ=self.type, align=self.align)
                                                    for lane in range(self.width)])
            return self.blocks[first][e - first]
        x = ir.Constant(self.type, ir.Undefined)
        for lane, m in enumerate(self.matrices):
            x = b.insert_element(x, m.read(i64(i), i64(j)), i64(lane))
        return x

    def store(self, out: ir.Value, element: Callable[[int, int], ir.Value], rows: int) -> None:
        """Store element(i, j) for every (i, j) of `rows` rows."""
        b = self.em.b
        for first in range(0, self.whole_elements, self.width):
            vectors = transposed(b, [element(*divmod(e, self.columns)) for e in range(first, first + self.width)])
            for lane, x in enumerate(vectors):
                b.store(x, self._pointer(out, lane, first), align=self.align)
        for e in range(self.whole_elements, rows * self.columns):
            x = element(*divmod(e, self.columns))
            for lane, m in enumerate(self.matrices):
                m.store(out, i64(e // self.columns), i64(e % self.columns), b.extract_element(x, i64(lane)))
        self.em.memo.clear()


def subtract_products(em: Emitter, acc: ir.Value, start: ir.Value, end: ir.Value,
                      product: Callable[[ir.Value], tuple[ir.Value, ir.Value]]) -> None:
    """acc -= x * y for (x, y) = product(k), k in [start, end), in order."""
    def step(k: ir.Value) -> None:
        x, y = product(k)
        em.b.store(em.b.fsub(em.b.load(acc), em.b.fmul(x, y)), acc)
    counted_loop(em.b, start, end, step)


def fill(em: Emitter, m: Matrices, out: ir.Value, rows: ir.Value, columns: ir.Value, x: ir.Value) -> None:
    """Element (i, j) of m's matrix in `out` = x for every i < rows, j < columns."""
    counted_loop(em.b, i64(0), rows, lambda i: counted_loop(em.b, i64(0), columns, lambda j: m.store(out, i, j, x)))


def holds_nan(em: Emitter, m: Matrices, rows: ir.Value, columns: ir.Value) -> ir.Value:
    """Whether the t-th matrix of m's operand holds a NaN (an i1)."""
    b = em.b
    found = em.head.alloca(ir.IntType(1))
    b.store(ir.Constant(ir.IntType(1), 0), found)
    counted_loop(b, i64(0), rows, lambda i: counted_loop(b, i64(0), columns, lambda j: b.store(
        b.or_(b.load(found), b.fcmp_unordered("uno", m.read(i, j), m.read(i, j))), found)))
    return b.load(found)
