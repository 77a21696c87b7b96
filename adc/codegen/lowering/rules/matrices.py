"""What the buffer rules of the linear-algebra ops share: a nest over stacked matrices, split
across threads, and the elements of one matrix read, loaded and stored by row and column.

Used by linalg.py (cholesky, triangular_solve) and lu.py (lu_factor, lu_pivots_to_permutation).
Results are read back and written through `Emitter.load`/`store`, so a bounds-checked build
checks every access:

    over_matrices(kernel, op, [dest], body)   ──▶   nest(start, end, dims, out, a):
                                                      for t in [start, end): body(em, t, out)
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import llvmlite.ir as ir

from adc.codegen.native import parallel
from adc.codegen.lowering import bounds
from adc.codegen.lowering.loops import NOWRAP, counted_loop
from adc.ir.core import Op, Value
from adc.ir.types import num_elements

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter


def over_matrices(kernel: Emitter, op: Op, dests: list[ir.Value], body: Callable[..., None],
                  vectors: bool = False) -> None:
    """Outline a nest (start, end, dims, outs..., leaves...) running `body(em, t, *outs)` for each
    stacked matrix t (each vector, if `vectors`) of the op's first result in [start, end), and call it
    over all of them, split across threads."""
    leaves = kernel.plan.leaves(op)
    fn = bounds.outline(kernel, op.name, len(dests) + len(leaves))
    outs = fn.args[3:3 + len(dests)]
    em = kernel.nested(fn, fn.args[2], dict(zip(leaves, fn.args[3 + len(dests):])))
    counted_loop(em.b, fn.args[0], fn.args[1], lambda t: body(em, t, *outs))
    em.b.ret_void()
    result = op.results[0].type.shape
    buffers = bounds.nest_arguments(kernel, [kernel.dims_ptr, *dests] + [kernel.buffers[v] for v in leaves])
    parallel.call_loop(kernel.b, kernel.head, fn, kernel.dim(num_elements(result[:-1] if vectors else result[:-2])),
                       kernel.dim(num_elements(result)), 1, buffers)


class Matrices:
    """Element (i, j) of the t-th matrix of a value (or element i of its t-th vector, `j` None): read
    from its operand, or loaded and stored in `out`."""

    def __init__(self, em: Emitter, t: ir.Value, value: Value, vectors: bool = False):
        self.em, self.value, self.dtype = em, value, value.type.dtype
        axes = value.type.shape[-1:] if vectors else value.type.shape[-2:]
        self.columns = em.dim(axes[-1])
        size = self.columns if vectors else em.b.mul(em.dim(axes[0]), self.columns, flags=NOWRAP)
        self.base = em.b.mul(t, size, flags=NOWRAP)

    def _index(self, i: ir.Value, j: ir.Value | None):
        b = self.em.b
        at = i if j is None else b.add(b.mul(i, self.columns, flags=NOWRAP), j, flags=NOWRAP)
        return self.em.index(self.value, flat=b.add(self.base, at, flags=NOWRAP))

    def read(self, i: ir.Value, j: ir.Value | None = None) -> ir.Value:
        return self.em.value_at(self.value, self._index(i, j))

    def load(self, out: ir.Value, i: ir.Value, j: ir.Value | None = None) -> ir.Value:
        return self.em.load(out, self.dtype, self._index(i, j))

    def store(self, out: ir.Value, i: ir.Value, j: ir.Value | None, x: ir.Value) -> None:
        self.em.store(out, self.dtype, self._index(i, j), x)
        self.em.memo.clear()


def subtract_products(em: Emitter, acc: ir.Value, start: ir.Value, end: ir.Value,
                      product: Callable[[ir.Value], tuple[ir.Value, ir.Value]]) -> None:
    """acc -= x * y for (x, y) = product(k), k in [start, end), in order."""
    def step(k: ir.Value) -> None:
        x, y = product(k)
        em.b.store(em.b.fsub(em.b.load(acc), em.b.fmul(x, y)), acc)
    counted_loop(em.b, start, end, step)
