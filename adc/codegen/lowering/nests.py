"""Loop nests: each value with a buffer computed by one loop nest, outlined into a function of its own.

`emit_loop` outlines the nest storing every element of a value, and of the values fusion has
it store too (Plan.stored_by), into their buffers: a flat loop split across threads
(parallel.py), or a nest over rows queued to run strip by strip with its neighbours
(strips.py); a scalar is computed where it is needed instead. `compute_into` chooses between
that and the buffer rule of an op that fills its own buffer (a reduction, a matmul).

    %1 = sigmoid %0 : f32[N]    ──▶   define internal void @"adc.sigmoid.7"(i64 start, i64 end, ptr dims,
                                          ptr out, ptr x): for i in [start, end): out[i] = sigmoid(x[i])
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as ir

from adc.codegen.native import parallel
from adc.codegen.lowering import bounds
from adc.codegen.lowering.fast_then_exact import fast_then_exact
from adc.codegen.lowering.fusion import MATERIALIZING
from adc.codegen.lowering.loops import (TRANSPOSE_TILE, counted_loop, i64, loop_nest, pieced_loop_nest,
                                        tiled_loop_nest)
from adc.codegen.lowering.rules.shape import concat_piece, concat_pieces
from adc.codegen.lowering.rules.table import lower_rules
from adc.codegen.lowering.strips import Nest, queued_by_rule
from adc.ir.core import Op, Value
from adc.ir.types import num_elements

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter



def compute_into(em: Emitter, value: Value, dest: ir.Value) -> None:
    op = em.op = em.plan.producers[value]
    if op.name in MATERIALIZING:
        if not queued_by_rule(op):
            em.run_queued()
        lower_rules[op.name](em, op, dest)
    else:
        emit_loop(em, value, dest, copy=False)


def emit_loop(kernel: Emitter, value: Value, dest: ir.Value, copy: bool) -> None:
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
    if flat and not kernel.strip.runs_ahead([kernel.buffers[v] for v in leaves], written):
        kernel.run_queued()
    fn = bounds.outline(kernel, "copy" if copy else op.name, 1 + len(stored) + len(leaves))
    em = kernel.nested(fn, fn.args[2], dict(zip(leaves, fn.args[4 + len(stored):])))
    start, end = fn.args[0], fn.args[1]
    outputs = list(zip([*stored, value], [*fn.args[4:4 + len(stored)], fn.args[3]]))
    extents = [em.dim(d) for d in value.type.shape]

    def body(axes: list[ir.Value], piece: int | None = None) -> None:
        idx = em.index(value, flat=axes[0]) if flat else em.index(value, axes=axes)
        for v, out in outputs:
            em.op = em.plan.producers.get(v)
            element = (em.value_at(v, idx) if piece is None or v is not value else
                       concat_piece(em, op, piece, pieces[piece][0], idx))
            em.store(out, v.type.dtype, idx, element)
        em.memo.clear()

    buffers = bounds.nest_arguments(kernel, [kernel.dims_ptr, dest] + [kernel.buffers[v] for v in stored + leaves])
    work = kernel.dim(num_elements(value.type.shape))
    if flat:
        fast_then_exact(em, lambda: counted_loop(em.b, start, end, lambda i: body([i])))
        em.b.ret_void()
        parallel.call_loop(kernel.b, kernel.head, fn, work, work, parallel.FLAT_GRAIN, buffers)
    else:
        ranges = [(start, end)] + [(i64(0), e) for e in extents[1:]]
        tiled = None if copy else _rows_axis_moved(op)
        pieces = None if copy or op.name != "concat" else concat_pieces(em, op)
        if pieces is not None:
            fast_then_exact(em, lambda: pieced_loop_nest(em.b, ranges, pieces, body))
        else:
            fast_then_exact(em, lambda: loop_nest(em.b, ranges, body) if tiled is None else
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

    fast_then_exact(kernel, body)
