"""Rules of indexing: gather reads through its indices, scatter and scatter_add write through
theirs, slice_add adds into a static slice.

An index follows the rule of adc/ir/ops/indexing.py (negative counts from the end once, then clamps), so
neither reads nor writes out of bounds. A scatter's buffer rule splits the positions along its
axis between threads, each applying the updates that land in its own, in order; a slice_add's
splits its base's rows, each thread adding the updates that land in its own (each lands once).

    %2 = gather %x, %i {axis = 0} : f32[K,M]    ──▶   element (j, m) = x[clamped(i[j]), m]
    %3 = slice_add %b, %u {start = [0,2], step = [1,1], stop = [K,3]}    ──▶   b[k, 2] += u[k, 0], k < K
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import llvmlite.ir as ir

from adc.codegen.native import parallel
from adc.codegen.lowering import bounds
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.element_types import REGISTER_TYPES
from adc.codegen.lowering.loops import I1, I64, NOWRAP, Index, i64, loop_nest
from adc.codegen.lowering.rules.elementwise import int_or_float
from adc.ir.core import Op, Value
from adc.ir.types import DType, Dim, num_elements

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter
    from adc.codegen.lowering.rules.table import LowerRule

lower_rules: dict[str, LowerRule] = {}      # this family's rows of table.lower_rules


def clamped_index(em: Emitter, indices: Value, axes: list[ir.Value], n: ir.Value) -> ir.Value:
    """indices[axes] as an i64 position in [0, n-1] by the index rule of adc/ir/ops/indexing.py: a negative
    index counts from the end once, then clamps; never out of bounds (n > 0 is the caller's)."""
    i = em.value_at(indices, em.index(indices, axes=axes))
    i = em.b.sext(i, I64) if indices.type.dtype is DType.i32 else i
    wrapped = em.b.select(em.b.icmp_signed("<", i, i64(0)), em.b.add(i, n), i)
    highest = em.b.sub(n, i64(1))
    return intrinsic(em.b, "smin", [intrinsic(em.b, "smax", [wrapped, i64(0)], DType.i64), highest], DType.i64)


def _unless_empty(em: Emitter, n: Dim, dtype: DType, read: Callable[[], ir.Value]) -> ir.Value:
    """read(), or 0 when the axis of size n is empty (then nothing may be read)."""
    zero = ir.Constant(REGISTER_TYPES[dtype], 0)
    if isinstance(n, int):
        return read() if n else zero
    return em.branch(em.b.icmp_signed("==", em.dim(n), i64(0)), lambda: zero, read)


def gather_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # result (pre, j, post) = x[pre, clamped(indices[j]), post]: a load through an index map
    x, indices = op.operands
    axis, rank = op.attrs["axis"], indices.type.rank
    n = x.type.shape[axis]

    def read() -> ir.Value:
        k = clamped_index(em, indices, list(idx.axes[axis:axis + rank]), em.dim(n))
        return em.value_at(x, em.index(x, axes=[*idx.axes[:axis], k, *idx.axes[axis + rank:]]))
    return _unless_empty(em, n, x.type.dtype, read)


lower_rules["gather"] = gather_lower


# What one update of a scatter into a large base is weighed as, in elements streamed: a cache miss
# (some 10 ns, overlapped with others) against a vector lane's share of a streamed line.
SCATTERED_UPDATE_WORK = 64


def scatter_lower(kernel: Emitter, op: Op, dest: ir.Value) -> None:
    # dest = base, then dest[pre, clamped(indices[j]), post] += updates[pre, j, post] (scatter: =) in
    # row-major order of the updates. The positions along `axis` are split between threads, each
    # thread copying its positions of the base and applying the updates that land in them (all of
    # them, scanning every index): an element's updates are applied by one thread, in order, so
    # duplicates accumulate as on one thread (scatter: the last one stays), and no two writes race
    base, indices, updates = op.operands
    leaves = kernel.plan.leaves(op)
    fn = bounds.outline(kernel, op.name, 1 + len(leaves))
    em = kernel.nested(fn, fn.args[2], dict(zip(leaves, fn.args[4:])))
    owned_start, owned_end = fn.args[0], fn.args[1]
    out, dtype, axis = fn.args[3], base.type.dtype, op.attrs["axis"]
    copying = op.result not in kernel.plan.scattered_into.values()     # else the base's own loop wrote dest
    if copying:
        _copy_base(em, op, out, [(owned_start, owned_end) if d == axis else (i64(0), em.dim(n))
                                 for d, n in enumerate(base.type.shape)])
    n = em.dim(base.type.shape[axis])
    add = int_or_float("add", "fadd")

    def accumulate(axes: list[ir.Value]) -> None:
        k = clamped_index(em, indices, axes[axis:axis + indices.type.rank], n)
        owned = em.b.and_(em.b.icmp_signed(">=", k, owned_start), em.b.icmp_signed("<", k, owned_end))
        with em.b.if_then(owned):
            target = em.index(op.result, axes=[*axes[:axis], k, *axes[axis + indices.type.rank:]])
            update = em.value_at(updates, em.index(updates, axes=axes))
            if op.name == "scatter_add":
                update = add(em.b, dtype, em.load(out, dtype, target), update)
            em.store(out, dtype, target, update)
        em.memo.clear()
    loop_nest(em.b, [(i64(0), em.dim(d)) for d in updates.type.shape], accumulate)
    em.b.ret_void()
    buffers = bounds.nest_arguments(kernel, [kernel.dims_ptr, dest, *[kernel.buffers[v] for v in leaves]])
    parallel.call_loop(kernel.b, kernel.head, fn, kernel.dim(base.type.shape[axis]),
                       _scatter_work(kernel, op, dest, copying), parallel.FLAT_GRAIN, buffers)


def _scatter_work(kernel: Emitter, op: Op, dest: ir.Value, copying: bool) -> ir.Value:
    """What splitting a scatter across threads is weighed by (parallel.THRESHOLD): the base's
    elements when it is copied (not when a loop body updates its carried buffer in place: a
    step writing one slice of a stack of them costs no wake-up of the pool); and when the
    base is that large, an update is taken to cost what SCATTERED_UPDATE_WORK copied elements
    do, a cache miss each, not a vector's lane."""
    base, _, updates = op.operands
    b = kernel.b
    size = kernel.dim(num_elements(base.type.shape))
    moved = b.mul(kernel.dim(num_elements(updates.type.shape)), i64(SCATTERED_UPDATE_WORK), flags=NOWRAP)
    copied = i64(0)
    if copying:
        copied = b.select(_in_place(kernel, base, dest), i64(0), size)
    return b.add(copied, b.select(b.icmp_signed(">=", size, i64(parallel.THRESHOLD)), moved, i64(0)), flags=NOWRAP)


def _in_place(em: Emitter, base: Value, out: ir.Value) -> ir.Value:
    """Whether a loop body gave one buffer as a scatter's base and its result (control_flow.updated_in_place):
    the base is then already there, and is not copied."""
    return em.b.icmp_unsigned("==", em.buffers[base], out) if base in em.buffers else ir.Constant(I1, 0)


def _copy_base(em: Emitter, op: Op, out: ir.Value, ranges: list[tuple[ir.Value, ir.Value]]) -> None:
    """out = the base (first operand) of `op` over `ranges`, unless a loop body gave its buffer as out."""
    base = op.operands[0]
    with em.b.if_then(em.b.not_(_in_place(em, base, out))):
        loop_nest(em.b, ranges, lambda axes: _copy_element(em, base, op.result, out, axes))


def _copy_element(em: Emitter, source: Value, like: Value, out: ir.Value, axes: list[ir.Value]) -> None:
    index = em.index(like, axes=axes)
    em.store(out, like.type.dtype, index, em.value_at(source, em.index(source, axes=axes)))
    em.memo.clear()


lower_rules["scatter_add"] = lower_rules["scatter"] = scatter_lower


def slice_add_lower(kernel: Emitter, op: Op, dest: ir.Value) -> None:
    # dest = base, then dest[start + step*i] += updates[i] for every i of the updates: the threads
    # split the base's rows, each copying its own (unless the base's own nest wrote dest) and adding
    # the updates that land in them; a slice holds each position once, so no two writes race
    base, updates = op.operands
    leaves = kernel.plan.leaves(op)
    fn = bounds.outline(kernel, op.name, 1 + len(leaves))
    em = kernel.nested(fn, fn.args[2], dict(zip(leaves, fn.args[4:])))
    first, last, out = fn.args[0], fn.args[1], fn.args[3]
    copying = op.result not in kernel.plan.scattered_into.values()
    if copying:
        _copy_base(em, op, out, [(first, last)] + [(i64(0), em.dim(n)) for n in base.type.shape[1:]])
    start, step, dtype = op.attrs["start"], op.attrs["step"], base.type.dtype
    rows = [_landing(em, edge, start[0], step[0], updates.type.shape[0]) for edge in (first, last)]
    add = int_or_float("add", "fadd")

    def accumulate(axes: list[ir.Value]) -> None:
        target = em.index(op.result, axes=[em.b.add(em.dim(lo), em.b.mul(a, i64(st), flags=NOWRAP), flags=NOWRAP)
                                           for a, lo, st in zip(axes, start, step)])
        update = em.value_at(updates, em.index(updates, axes=axes))
        em.store(out, dtype, target, add(em.b, dtype, em.load(out, dtype, target), update))
        em.memo.clear()
    loop_nest(em.b, [tuple(rows)] + [(i64(0), em.dim(n)) for n in updates.type.shape[1:]], accumulate)
    em.b.ret_void()
    b = kernel.b
    work = kernel.dim(num_elements(updates.type.shape))
    if copying:
        work = b.add(work, b.select(_in_place(kernel, base, dest), i64(0), kernel.dim(num_elements(base.type.shape))),
                     flags=NOWRAP)
    buffers = bounds.nest_arguments(kernel, [kernel.dims_ptr, dest, *[kernel.buffers[v] for v in leaves]])
    parallel.call_loop(b, kernel.head, fn, kernel.dim(base.type.shape[0]), work, parallel.FLAT_GRAIN, buffers)


def _landing(em: Emitter, row: ir.Value, start: Dim, step: int, count: Dim) -> ir.Value:
    """The first update row i (of `count`) whose base row start + step*i is at `row` or after."""
    ahead = intrinsic(em.b, "smax", [em.b.sub(row, em.dim(start)), i64(0)], DType.i64)
    rounded_up = em.b.udiv(em.b.add(ahead, i64(step - 1), flags=NOWRAP), i64(step))
    return intrinsic(em.b, "smin", [rounded_up, em.dim(count)], DType.i64)


lower_rules["slice_add"] = slice_add_lower
