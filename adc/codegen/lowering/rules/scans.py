"""Buffer rules of the scans cumsum and cumprod: sequential along the scanned axis, so the sums
are NumPy's bit for bit, and vectorized across the other axes when the scanned one is not last.

    %1 = cumsum %0 {axis = 0, exclusive = false, reverse = false} : f32[T,N]
        ──▶   out[0, :] = x[0, :];  for t in [1, T): out[t, :] = out[t - 1, :] + x[t, :]
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import llvmlite.ir as ir

from adc.codegen.native import parallel
from adc.codegen.lowering.fast_then_exact import fast_then_exact
from adc.codegen.lowering.loops import Index, counted_loop, i64, loop_nest
from adc.codegen.lowering.rules.elementwise import int_or_float
from adc.codegen.lowering.rules.reductions import identity, outline_reduction
from adc.ir.core import Op
from adc.ir.types import num_elements

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter
    from adc.codegen.lowering.rules.table import LowerRule

lower_rules: dict[str, LowerRule] = {}      # this family's rows of table.lower_rules


def _scan(kind: str) -> LowerRule:
    """A buffer rule: one outlined nest over the other axes (the first of them split across threads),
    sequential along the scanned axis; each step combines a row of the output with the previous
    one, so when the scanned axis is not the last the innermost loop runs over contiguous
    elements and vectorizes. Steps are not reassociated: the sums are NumPy's, bit for bit."""
    combine = int_or_float("add", "fadd") if kind == "sum" else int_or_float("mul", "fmul")

    def rule(kernel: Emitter, op: Op, dest: ir.Value) -> None:
        (x,), axis = op.operands, op.attrs["axis"]
        fn, em, buffers = outline_reduction(kernel, op, dest)
        fast_then_exact(em, lambda: _scan_along(em, op, kind, combine, fn.args[0], fn.args[1], fn.args[3]))
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
            return identity(kind, dtype) if op.attrs["exclusive"] else em.value_at(x, at(position(j), post))

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
