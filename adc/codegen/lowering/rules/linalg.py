"""Buffer rules of cholesky and triangular_solve: one outlined nest each, its outer loop over the
stacked matrices (split across threads), plain scalar loops inside, correct for any size.

Operands are read element by element (`Emitter.value_at`: a load, or the fused producer's
element), results read back and written through `Emitter.load`/`store`, so a bounds-checked
build checks every access.

    %1 = cholesky %a : f64[B,N,N]    ──▶   for b: for j: L[j,j] = sqrt(a[j,j] - Σ_k<j L[j,k]²)
                                                      for i > j: L[i,j] = (a[i,j] - Σ_k<j L[i,k] L[j,k]) / L[j,j]
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import llvmlite.ir as ir

from adc.codegen.native import parallel
from adc.codegen.lowering import bounds
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.element_types import REGISTER_TYPES
from adc.codegen.lowering.loops import I1, NOWRAP, counted_loop, i64
from adc.ir.core import Op, Value
from adc.ir.types import num_elements

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter
    from adc.codegen.lowering.rules.table import LowerRule

lower_rules: dict[str, LowerRule] = {}      # this family's rows of table.lower_rules


def _over_matrices(kernel: Emitter, op: Op, dest: ir.Value,
                   body: Callable[[Emitter, ir.Value, ir.Value], None]) -> None:
    """Outline a nest (start, end, dims, out, leaves...) running `body(em, matrix, out)` for each
    stacked matrix in [start, end), and call it over all of them, split across threads."""
    leaves = kernel.plan.leaves(op)
    fn = bounds.outline(kernel, op.name, 1 + len(leaves))
    em = kernel.nested(fn, fn.args[2], dict(zip(leaves, fn.args[4:])))
    counted_loop(em.b, fn.args[0], fn.args[1], lambda t: body(em, t, fn.args[3]))
    em.b.ret_void()
    result = op.result.type.shape
    buffers = bounds.nest_arguments(kernel, [kernel.dims_ptr, dest] + [kernel.buffers[v] for v in leaves])
    parallel.call_loop(kernel.b, kernel.head, fn, kernel.dim(num_elements(result[:-2])),
                       kernel.dim(num_elements(result)), 1, buffers)


class _Matrices:
    """Element (i, j) of the t-th matrix of a value: read from its operand, or loaded and stored in `out`."""

    def __init__(self, em: Emitter, t: ir.Value, value: Value):
        self.em, self.value, self.dtype = em, value, value.type.dtype
        rows, columns = (em.dim(d) for d in value.type.shape[-2:])
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


def _subtract_products(em: Emitter, acc: ir.Value, start: ir.Value, end: ir.Value,
                       product: Callable[[ir.Value], tuple[ir.Value, ir.Value]]) -> None:
    """acc -= x * y for (x, y) = product(k), k in [start, end), in order."""
    def step(k: ir.Value) -> None:
        x, y = product(k)
        em.b.store(em.b.fsub(em.b.load(acc), em.b.fmul(x, y)), acc)
    counted_loop(em.b, start, end, step)


def cholesky_lower(kernel: Emitter, op: Op, dest: ir.Value) -> None:
    # Cholesky-Crout, column by column: L[j,j] = sqrt(a[j,j] - Σ_k<j L[j,k]²), then the rows below;
    # a pivot not > 0 (or NaN) fails, and the failed matrix becomes NaN (JAX's convention)
    (a,) = op.operands
    dtype = a.type.dtype
    ty = REGISTER_TYPES[dtype]

    def factor(em: Emitter, t: ir.Value, out: ir.Value) -> None:
        b, m = em.b, _Matrices(em, t, a)
        n = em.dim(a.type.shape[-1])
        acc, failed = em.head.alloca(ty), em.head.alloca(I1)
        b.store(ir.Constant(I1, 0), failed)

        def column(j: ir.Value) -> None:
            b.store(m.read(j, j), acc)
            _subtract_products(em, acc, i64(0), j, lambda k: (m.load(out, j, k), m.load(out, j, k)))
            pivot = b.load(acc)
            b.store(b.or_(b.load(failed), b.not_(b.fcmp_ordered(">", pivot, ir.Constant(ty, 0.0)))), failed)
            d = intrinsic(b, "sqrt", [pivot], dtype)
            m.store(out, j, j, d)

            def below(i: ir.Value) -> None:
                b.store(m.read(i, j), acc)
                _subtract_products(em, acc, i64(0), j, lambda k: (m.load(out, i, k), m.load(out, j, k)))
                m.store(out, i, j, b.fdiv(b.load(acc), d))
            counted_loop(b, b.add(j, i64(1), flags=NOWRAP), n, below)
            counted_loop(b, i64(0), j, lambda i: m.store(out, i, j, ir.Constant(ty, 0.0)))
        counted_loop(b, i64(0), n, column)
        with b.if_then(b.load(failed), likely=False):
            nan = ir.Constant(ty, float("nan"))
            counted_loop(b, i64(0), n, lambda i: counted_loop(b, i64(0), n, lambda j: m.store(out, i, j, nan)))
    _over_matrices(kernel, op, dest, factor)


lower_rules["cholesky"] = cholesky_lower


def triangular_solve_lower(kernel: Emitter, op: Op, dest: ir.Value) -> None:
    # substitution, column by column of b: x[i] = (b[i] - Σ t[i,k] x[k]) / t[i,i] over the rows k
    # solved before i (forward for a lower op(a), backward for an upper), t[i,k] = a[k,i] when `trans`
    a, rhs = op.operands
    lower, trans, unit = op.attrs["lower"], op.attrs["trans"], op.attrs["unit_diagonal"]
    forward = lower != trans

    def solve(em: Emitter, t: ir.Value, out: ir.Value) -> None:
        b, ma, mb = em.b, _Matrices(em, t, a), _Matrices(em, t, rhs)
        n, columns = em.dim(a.type.shape[-1]), em.dim(rhs.type.shape[-1])
        acc = em.head.alloca(REGISTER_TYPES[a.type.dtype])

        def coefficient(i: ir.Value, k: ir.Value) -> ir.Value:
            return ma.read(k, i) if trans else ma.read(i, k)

        def row(j: ir.Value, step: ir.Value) -> None:
            i = step if forward else b.sub(b.sub(n, i64(1)), step)
            b.store(mb.read(i, j), acc)
            solved = (i64(0), i) if forward else (b.add(i, i64(1)), n)
            _subtract_products(em, acc, *solved, lambda k: (coefficient(i, k), mb.load(out, k, j)))
            x = b.load(acc)
            mb.store(out, i, j, x if unit else b.fdiv(x, coefficient(i, i)))
        counted_loop(b, i64(0), columns, lambda j: counted_loop(b, i64(0), n, lambda step: row(j, step)))
    _over_matrices(kernel, op, dest, solve)


lower_rules["triangular_solve"] = triangular_solve_lower
