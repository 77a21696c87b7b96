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
from adc.codegen.lowering.element_types import ELEMENT_BYTES, REGISTER_TYPES
from adc.codegen.lowering.loops import NOWRAP, counted_loop, for_range, i64
from adc.codegen.lowering.strips import Nest
from adc.ir.core import Op, Value
from adc.ir.types import num_elements

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter


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


def transposed(b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """The columns of a square matrix of vectors (a power of two of them): for each bit h of the
    index, the row and column bits h are exchanged by one shuffle of each pair of rows."""
    width, rows = len(rows), list(rows)
    h = width // 2
    while h:
        for r in (r for r in range(width) if not r & h):
            x, y = rows[r], rows[r + h]
            rows[r] = b.shuffle_vector(x, y, shuffle_mask([c if not c & h else width + c - h for c in range(width)]))
            rows[r + h] = b.shuffle_vector(x, y, shuffle_mask([c + h if not c & h else width + c for c in range(width)]))
        h //= 2
    return rows


def shuffle_mask(indices: list[int]) -> ir.Constant:
    return ir.Constant(ir.VectorType(ir.IntType(32), len(indices)), indices)


def subtract_products(em: Emitter, acc: ir.Value, start: ir.Value, end: ir.Value,
                      product: Callable[[ir.Value], tuple[ir.Value, ir.Value]]) -> None:
    """acc -= x * y for (x, y) = product(k), k in [start, end), in order."""
    def step(k: ir.Value) -> None:
        x, y = product(k)
        em.b.store(em.b.fsub(em.b.load(acc), em.b.fmul(x, y)), acc)
    counted_loop(em.b, start, end, step)


def holds_nan(em: Emitter, m: Matrices, rows: ir.Value, columns: ir.Value) -> ir.Value:
    """Whether the t-th matrix of m's operand holds a NaN (an i1)."""
    b = em.b
    found = em.head.alloca(ir.IntType(1))
    b.store(ir.Constant(ir.IntType(1), 0), found)
    counted_loop(b, i64(0), rows, lambda i: counted_loop(b, i64(0), columns, lambda j: b.store(
        b.or_(b.load(found), b.fcmp_unordered("uno", m.read(i, j), m.read(i, j))), found)))
    return b.load(found)
