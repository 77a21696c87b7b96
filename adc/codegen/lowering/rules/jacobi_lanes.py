"""eigh and svd of stacked small matrices W at a time, lane l matrix t + l (matrices.py's `Lanes`):
the one-sided Jacobi of spectral.py, operation for operation, on SIMD vectors. Its scalar loops
run one matrix at a time; a sweep's 28 rotations of an 8×8 matrix are each a chain of square
roots and divisions, which W matrices fill the vector units with (10,000 8×8 f64 on a loaded
2-core EPYC, AVX-512: eigh 148 -> 35 ms, svd 176 -> 46 ms; NumPy's LAPACK 123 and 231).

The columns of G (and V) live on the nest's stack as vectors, column-major, so a rotation of
columns i and j, chosen at run time (the pairs loop, not unrolled), reads and writes contiguous
vectors. Each lane rotates a pair when its own test says so (a select keeps the others), and the
sweeps go on while any lane rotated: a lane whose sweep rotated nothing rotates nothing after
it, so each lane ends where spectral.py's loop ends on its matrix, with the same values. The
sort (selection sort, swaps as rotations by (0, -1)) selects per lane as well.

    %w, %v = eigh %a : f64[B,8,8], ...   ──▶   for t by W: G = S + cI over lanes; sweeps while any
                                                  lane rotates; w, v per lane; sorted per lane
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import llvmlite.ir as ir
import numpy as np

from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.loops import I1, I64, NOWRAP, counted_loop, i64
from adc.codegen.lowering.rules.matrices import Lanes
from adc.codegen.native.simd import splat
from adc.ir.core import Value
from adc.ir.types import DType

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter

MAX_SWEEPS = 30


class LaneColumns:
    """Columns of `rows` elements of W matrices on the nest's stack, column c's row r one vector."""

    def __init__(self, em: Emitter, vector: ir.VectorType, rows: int, columns: int):
        self.em, self.vector, self.rows = em, vector, rows
        self.slots = em.head.alloca(vector, size=rows * columns)

    def at(self, c: ir.Value | int, r: int) -> ir.Value:
        c = i64(c) if isinstance(c, int) else c
        return self.em.b.gep(self.slots, [self.em.b.add(self.em.b.mul(c, i64(self.rows)), i64(r))],
                             source_etype=self.vector)

    def load(self, c: ir.Value | int, r: int) -> ir.Value:
        return self.em.b.load(self.at(c, r), typ=self.vector)

    def store(self, c: ir.Value | int, r: int, x: ir.Value) -> None:
        self.em.b.store(x, self.at(c, r))

    def dot(self, i: ir.Value | int, j: ir.Value | int) -> ir.Value:
        # 0 + g_0i g_0j + g_1i g_1j + ..., in spectral.accumulate's order
        b, acc = self.em.b, ir.Constant(self.vector, None)
        for r in range(self.rows):
            acc = b.fadd(acc, b.fmul(self.load(i, r), self.load(j, r)))
        return acc

    def rotate(self, i: ir.Value, j: ir.Value, c: ir.Value, s: ir.Value, where: ir.Value) -> None:
        # (g_i, g_j) <- (c g_i - s g_j, s g_i + c g_j) in the lanes `where` holds
        b = self.em.b
        for r in range(self.rows):
            x, y = self.load(i, r), self.load(j, r)
            self.store(i, r, b.select(where, b.fsub(b.fmul(c, x), b.fmul(s, y)), x))
            self.store(j, r, b.select(where, b.fadd(b.fmul(s, x), b.fmul(c, y)), y))


class LaneJacobi:
    """G's columns (and V's, rotated alike) of W matrices, swept and sorted as spectral._Columns does."""

    def __init__(self, em: Emitter, g: LaneColumns, v: LaneColumns | None, n: int, dtype: DType):
        self.em, self.g, self.v, self.n, self.dtype = em, g, v, n, dtype
        self.vector = g.vector

    def constant(self, x: float) -> ir.Constant:
        return ir.Constant(self.vector, [x] * self.vector.count)

    def math(self, name: str, args: list[ir.Value]) -> ir.Value:
        return intrinsic(self.em.b, name, args, self.dtype)

    def sweeps(self) -> None:
        """Rotate every pair of columns, sweep after sweep, while a lane's sweep rotated a pair."""
        b, em = self.em.b, self.em
        one = self.constant(1.0)
        tolerance = self.constant(float(np.finfo(self.dtype.numpy).eps) * self.g.rows)
        rotated = em.head.alloca(I1)
        b.store(ir.Constant(I1, 1), rotated)

        def pair(i: ir.Value, j: ir.Value) -> None:
            alpha, beta, gamma = self.g.dot(i, i), self.g.dot(j, j), self.g.dot(i, j)
            bound = b.fmul(tolerance, b.fmul(self.math("sqrt", [alpha]), self.math("sqrt", [beta])))
            where = b.fcmp_ordered(">", self.math("fabs", [gamma]), bound)
            b.store(b.or_(b.load(rotated), any_lane(b, where)), rotated)
            zeta = b.fdiv(b.fsub(beta, alpha), b.fmul(self.constant(2.0), gamma))
            root = self.math("sqrt", [b.fadd(one, b.fmul(zeta, zeta))])
            size = b.fadd(self.math("fabs", [zeta]), root)
            t = b.select(b.fcmp_ordered("<", size, self.constant(float("inf"))),
                         b.fdiv(self.math("copysign", [one, zeta]), size), b.fdiv(self.constant(0.5), zeta))
            c = b.fdiv(one, self.math("sqrt", [b.fadd(one, b.fmul(t, t))]))
            self.rotate(i, j, c, b.fmul(c, t), where)

        def sweep(_: ir.Value) -> None:
            with b.if_then(b.load(rotated)):
                b.store(ir.Constant(I1, 0), rotated)
                counted_loop(b, i64(0), i64(self.n), lambda i: counted_loop(
                    b, b.add(i, i64(1), flags=NOWRAP), i64(self.n), lambda j: pair(i, j)))
        counted_loop(b, i64(0), i64(MAX_SWEEPS), sweep)

    def rotate(self, i: ir.Value, j: ir.Value, c: ir.Value, s: ir.Value, where: ir.Value) -> None:
        for columns in (self.g, self.v) if self.v is not None else (self.g,):
            columns.rotate(i, j, c, s, where)

    def sort(self, keys: list[ir.Value], descending: bool) -> list[ir.Value]:
        """Selection sort of the columns by `keys` (one vector per column), per lane; the keys sorted.
        Its loops run at run time, the keys on the stack: unrolled, its n(n-1)/2 swaps, each a
        rotation of every row of G and V, made most of a 9 x 9 svd's code (2.5 MB of LLVM IR)."""
        b, em, n = self.em.b, self.em, self.n
        indices = ir.VectorType(I64, self.vector.count)
        slots = em.head.alloca(self.vector, size=n)
        best, at = em.head.alloca(self.vector), em.head.alloca(indices)
        order = ">" if descending else "<"

        def key(i: ir.Value) -> ir.Value:
            return b.gep(slots, [i], source_etype=self.vector)

        def load(slot: ir.Value) -> ir.Value:
            return b.load(slot, typ=self.vector)

        def select_column(k: ir.Value) -> None:
            b.store(load(key(k)), best)
            b.store(splat(b, indices, k), at)

            def compare(j: ir.Value) -> None:
                candidate = load(key(j))
                better = b.fcmp_ordered(order, candidate, load(best))
                b.store(b.select(better, candidate, load(best)), best)
                b.store(b.select(better, splat(b, indices, j), b.load(at, typ=indices)), at)

            def swap(j: ir.Value) -> None:     # the swap of spectral._Columns.sort: a rotation by (0, -1)
                chosen = b.icmp_signed("==", b.load(at, typ=indices), splat(b, indices, j))
                first, other = load(key(k)), load(key(j))
                b.store(b.select(chosen, other, first), key(k))
                b.store(b.select(chosen, first, other), key(j))
                self.rotate(k, j, self.constant(0.0), self.constant(-1.0), chosen)
            after = b.add(k, i64(1), flags=NOWRAP)
            counted_loop(b, after, i64(n), compare)
            counted_loop(b, after, i64(n), swap)

        for k, x in enumerate(keys):
            b.store(x, key(i64(k)))
        counted_loop(b, i64(0), i64(n), select_column)
        return [load(key(i64(k))) for k in range(n)]


def any_lane(b: ir.IRBuilder, mask: ir.Value) -> ir.Value:
    """Whether any lane of an i1 vector holds."""
    lanes = mask.type.count
    fn = b.module.globals.get(f"llvm.vector.reduce.or.v{lanes}i1")
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(I1, [mask.type]), f"llvm.vector.reduce.or.v{lanes}i1")
    return b.call(fn, [mask])


def nan_lanes(em: Emitter, a: Lanes, rows: int, columns: int) -> ir.Value:
    """The lanes whose matrix holds a NaN (matrices.holds_nan, per lane)."""
    b, found = em.b, None
    for i in range(rows):
        for j in range(columns):
            x = a.read(i, j)
            nan = b.fcmp_unordered("uno", x, x)
            found = nan if found is None else b.or_(found, nan)
    return found


def store_lanes(em: Emitter, t: ir.Value, value: Value, out: ir.Value, width: int, rows: int,
                element: Callable[[int, int], ir.Value], nan: ir.Value, vectors: bool = False) -> None:
    """Store `element(i, j)` of W matrices of `value` (stacked vectors: `vectors`), NaN in the lanes `nan` holds."""
    lanes = Lanes(em, t, value, width, vectors)
    nans = ir.Constant(lanes.type, [float("nan")] * width)
    lanes.store(out, lambda i, j: em.b.select(nan, nans, element(i, j)), rows)
