"""Buffer rules of the reductions (reduce_sum, _max, _min, _prod) and arg-reductions (argmax,
argmin): one outlined nest each.

With the last axis reduced, each output element has a scalar accumulator over the reduced axes
(a float sum's is a cascade of block sums, summation.py; a float max or min runs on ordered
values first); with the last axis kept, the nest combines rows into the output, contiguous in
both. The outer loop, over the first kept axis, splits across threads or joins a strip of
nests over the same rows (strips.py).

    %1 = reduce_sum %0 {axes = [1]} : f32[N]    ──▶   for i: out[i] = blocked_sum(x[i, :])
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import llvmlite.ir as ir

from adc.codegen.native import parallel
from adc.codegen.lowering import bounds
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.element_types import ELEMENT_BYTES, REGISTER_TYPES
from adc.codegen.lowering.fast_then_exact import fast_then_exact
from adc.codegen.lowering.fusion import Plan
from adc.codegen.lowering.loops import I1, I64, Index, counted_loop, i64, loop_nest
from adc.codegen.lowering.strips import Nest
from adc.codegen.lowering.summation import Elements, blocked_column_sums, blocked_sum
from adc.codegen.lowering.temporaries import levels_bytes, sums_columns
from adc.ir.core import Op, Value
from adc.ir.types import DType, num_elements

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter
    from adc.codegen.lowering.rules.table import LowerRule

# A float sum, max or min over a row keeps 4 vector accumulators (loops.loop_hints), so its loop is
# not bound by one chain's latency: NaN-propagating max was a compare, a blend and a max per vector
# (a row max over 4096 x 1000 f32: 0.47 -> 0.23 ms); a sum's chain is one add per vector, 3 cycles
# for 16 elements of a row in L1 (a cross-entropy's row sums: ~0.11 ms of its 0.70, ~0.03 with 4).
INTERLEAVED_REDUCTIONS = {"max": 4, "min": 4, "sum": 4}
# A float max or min also runs on ordered values first: llvm.maxnum/minnum under no-NaN, no-signed-zero flags is
# one vmaxps/vminps per vector, where NaN-propagating llvm.maximum/minimum also orders -0 < +0
# with a sign test and two blends on the accumulator's chain. A row holding a NaN, or whose
# extremum is a zero (the sign then matters), runs again exactly: same bits, 0.45 -> 0.21 ms for a
# row max over 4096 x 1000 f32 on one thread.
ORDERED_EXTREMA = {"max": "maxnum", "min": "minnum"}
ORDERED_FLAGS = ("nnan", "nsz", "reassoc")

lower_rules: dict[str, LowerRule] = {}      # this family's rows of table.lower_rules


def identity(kind: str, dtype: DType) -> ir.Constant:
    """sum +0.0 (as NumPy's: an empty sum, and a sum of -0.0s, is 0.0), prod 1, max -inf / INT_MIN,
    min +inf / INT_MAX."""
    ty = REGISTER_TYPES[dtype]
    if dtype.is_float:
        return ir.Constant(ty, {"sum": 0.0, "prod": 1.0, "max": float("-inf"), "min": float("inf")}[kind])
    bits = ty.width - 1
    return ir.Constant(ty, {"sum": 0, "prod": 1, "max": -(1 << bits), "min": (1 << bits) - 1}[kind])


def _combine(b: ir.IRBuilder, kind: str, dtype: DType, acc: ir.Value, x: ir.Value) -> ir.Value:
    """One reduction step; floats carry only `reassoc`, which lets LLVM vectorize without touching NaN/inf."""
    if kind in ("max", "min"):
        name = ("maximum" if kind == "max" else "minimum") if dtype.is_float else "s" + kind
        return intrinsic(b, name, [acc, x], dtype, ("reassoc",) if dtype.is_float else ())
    if dtype.is_float:
        return (b.fadd if kind == "sum" else b.fmul)(acc, x, flags=("reassoc",))
    return (b.add if kind == "sum" else b.mul)(acc, x)


def _reduction(kind: str) -> LowerRule:
    """A buffer rule: one outlined nest, split across threads only when each output element is
    reduced within one outer iteration (`_accumulate_scalar`); `_accumulate_rows` combines into the
    whole output on every outer iteration and stays on the calling thread."""
    def rule(kernel: Emitter, op: Op, dest: ir.Value) -> None:
        (x,) = op.operands
        fn, em, buffers = outline_reduction(kernel, op, dest)
        if x.type.rank and x.type.rank - 1 not in op.attrs["axes"]:
            fast_then_exact(em, lambda: _accumulate_rows(em, op, kind, fn.args[3]))
            em.b.ret_void()
            kernel.run_queued()
            kernel.b.call(fn, [i64(0), kernel.dim(x.type.shape[0]), *buffers])
            return
        _accumulate_scalar(em, op, kind, fn.args[0], fn.args[1], fn.args[3])
        em.b.ret_void()
        _call_over_kept(kernel, op, fn, buffers)
    rule.__name__ = f"reduce_{kind}_lower"
    return rule


def outline_reduction(kernel: Emitter, op: Op, dest: ir.Value) -> tuple[ir.Function, Emitter, list[ir.Value]]:
    """The outlined function of reduction `op`, (start, end, dims, out, leaves...), its emitter, and
    the kernel's buffers to call it with (`dest` the output)."""
    leaves = _reduction_leaves(kernel.plan, op)
    levels = [_column_levels(kernel, op)] if sums_columns(op) else []
    fn = bounds.outline(kernel, op.name, 1 + len(leaves) + len(levels))
    em = kernel.nested(fn, fn.args[2], dict(zip(leaves, fn.args[4:])))
    if levels:
        em.levels[op.result] = fn.args[4 + len(leaves)]
    return fn, em, bounds.nest_arguments(kernel, [kernel.dims_ptr, dest] + [kernel.buffers[v] for v in leaves] + levels)


def _column_levels(kernel: Emitter, op: Op) -> ir.Value:
    """Where column sum `op` keeps its levels: its part of the function's block, or, when a scan's
    length sizes them, a buffer allocated here."""
    if op.result in kernel.levels:
        return kernel.levels[op.result]
    size = levels_bytes(kernel, op)
    return bounds.track(kernel, kernel.allocate(size), size, bounds.describe_levels(kernel, op.result), "temporary")


def _reduction_leaves(plan: Plan, op: Op) -> list[Value]:
    """The buffers the nest of reduction `op` reads: its operand's, or those it is computed from."""
    (x,) = op.operands
    return [x] if x in plan.materialized else plan.leaves(op)


def _call_over_kept(kernel: Emitter, op: Op, fn: ir.Function, buffers: list[ir.Value]) -> None:
    """Call `fn`, whose outermost loop runs over the first kept axis, split across threads (or
    once, for a full reduction); over the rows (the first axis kept), with the nests around it."""
    (x,) = op.operands
    kept = [d for k, d in enumerate(x.type.shape) if k not in op.attrs["axes"]]
    work = kernel.dim(num_elements(x.type.shape))
    if kept and 0 not in op.attrs["axes"]:
        kernel.run_nest(Nest(fn, kept[0], work, 1, buffers, [op.result], [buffers[1]],
                             _reduction_leaves(kernel.plan, op)))
        return
    kernel.run_queued()
    if kept:
        parallel.call_loop(kernel.b, kernel.head, fn, kernel.dim(kept[0]), work, 1, buffers)
    else:
        kernel.b.call(fn, [i64(0), i64(1), *buffers])


def _accumulate_scalar(em: Emitter, op: Op, kind: str, start: ir.Value, end: ir.Value, out: ir.Value) -> None:
    """Last axis reduced: per output element, a scalar accumulator over the reduced axes (innermost contiguous);
    a float sum's is a cascade of block sums (summation.blocked_sum), so its error grows like log n.

    The outermost loop runs over the first kept axis in [start, end) (or once, for a full reduction).
    """
    (x,) = op.operands
    axes, dtype = op.attrs["axes"], x.type.dtype
    kept = [k for k in range(x.type.rank) if k not in axes]
    extents = [em.dim(d) for d in x.type.shape]
    acc = em.head.alloca(REGISTER_TYPES[dtype])

    ordered = ORDERED_EXTREMA.get(kind) if dtype.is_float else None
    unordered = em.head.alloca(I1) if ordered else None

    def reduce_at(kept_axes: list[ir.Value]) -> None:
        def element_at(reduced_axes: list[ir.Value]) -> ir.Value:
            position = dict(zip(kept, kept_axes)) | dict(zip(axes, reduced_axes))
            return em.value_at(x, em.index(x, axes=[position[k] for k in range(x.type.rank)]))

        def step(reduced_axes: list[ir.Value]) -> None:
            em.b.store(_combine(em.b, kind, dtype, em.b.load(acc), element_at(reduced_axes)), acc)
            em.memo.clear()

        def ordered_step(reduced_axes: list[ir.Value]) -> None:
            element = element_at(reduced_axes)
            em.b.store(intrinsic(em.b, ordered, [em.b.load(acc), element], dtype, ORDERED_FLAGS), acc)
            em.b.store(em.b.or_(em.b.load(unordered), em.b.fcmp_unordered("uno", element, element)), unordered)
            em.memo.clear()

        def loop(body: Callable[[list[ir.Value]], None]) -> None:
            em.b.store(identity(kind, dtype), acc)
            loop_nest(em.b, [(i64(0), extents[k]) for k in axes], body,
                      interleave=INTERLEAVED_REDUCTIONS.get(kind, 1) if dtype.is_float else 1)

        def element(reduced_axes: list[ir.Value]) -> ir.Value:
            value = element_at(reduced_axes)
            em.memo.clear()
            return value

        def reduce() -> None:
            if kind == "sum" and dtype.is_float and axes:     # (no axes: a copy of a scalar)
                em.b.store(blocked_sum(em.b, em.head, REGISTER_TYPES[dtype], identity(kind, dtype),
                                       [(i64(0), extents[k]) for k in axes], element,
                                       INTERLEAVED_REDUCTIONS[kind]), acc)
                return
            if not ordered:
                loop(step)
                return
            em.b.store(ir.Constant(I1, 0), unordered)
            loop(ordered_step)
            zero = em.b.fcmp_ordered("==", em.b.load(acc), ir.Constant(REGISTER_TYPES[dtype], 0.0))
            with em.b.if_then(em.b.select(em.b.load(unordered), ir.Constant(I1, 1), zero), likely=False):
                loop(step)
        fast_then_exact(em, reduce)
        em.store(out, dtype, em.index(op.result, axes=kept_axes), em.b.load(acc))

    _for_kept_positions(em, kept, extents, start, end, reduce_at)


def _for_kept_positions(em: Emitter, kept: list[int], extents: list[ir.Value], start: ir.Value, end: ir.Value,
                        body: Callable[[list[ir.Value]], None]) -> None:
    """body(kept_axes) at every position of the kept axes, the first of them in [start, end)
    (a full reduction: once, for start = 0, end = 1)."""
    if kept:
        loop_nest(em.b, [(start, end)] + [(i64(0), extents[k]) for k in kept[1:]], body)
    else:
        counted_loop(em.b, start, end, lambda _: body([]))


def _accumulate_rows(em: Emitter, op: Op, kind: str, out: ir.Value) -> None:
    """Last axis kept: fill the output with the identity, then combine every input element into its
    output element in row-major order, so the inner loop is contiguous in both (not splittable)."""
    (x,) = op.operands
    axes, dtype = op.attrs["axes"], x.type.dtype
    kept = [k for k in range(x.type.rank) if k not in axes]
    if sums_columns(op):
        _sum_columns(em, op, out)
        return
    total = em.dim(num_elements(op.result.type.shape))
    counted_loop(em.b, i64(0), total,
                 lambda i: em.store(out, dtype, em.index(op.result, flat=i), identity(kind, dtype)))

    def step(all_axes: list[ir.Value]) -> None:
        element = em.value_at(x, em.index(x, axes=all_axes))
        target = em.index(op.result, axes=[all_axes[k] for k in kept])
        em.store(out, dtype, target, _combine(em.b, kind, dtype, em.load(out, dtype, target), element))
        em.memo.clear()
    loop_nest(em.b, [(i64(0), em.dim(d)) for d in x.type.shape], step)


def _sum_columns(em: Emitter, op: Op, out: ir.Value) -> None:
    """A float sum keeping its last axis: at each position of the other kept axes, the columns'
    sums of row blocks in row order, into the output row, their cascades' levels in the nest's
    `levels` (summation.blocked_column_sums), so its error grows like log n."""
    (x,) = op.operands
    axes, dtype = op.attrs["axes"], x.type.dtype
    kept = [k for k in range(x.type.rank) if k not in axes]
    extents = [em.dim(d) for d in x.type.shape]
    levels = _elements(em, em.levels[op.result], dtype, lambda i: Index(em.b, [i], axes=[i], flat=i))   # one axis

    def columns(outer: list[ir.Value]) -> None:
        def element(reduced: list[ir.Value], column: ir.Value) -> ir.Value:
            position = dict(zip(kept, [*outer, column])) | dict(zip(axes, reduced))
            value = em.value_at(x, em.index(x, axes=[position[k] for k in range(x.type.rank)]))
            em.memo.clear()
            return value
        sums = _elements(em, out, dtype, lambda column: em.index(op.result, axes=[*outer, column]))
        blocked_column_sums(em.b, em.head, identity("sum", dtype), [(i64(0), extents[k]) for k in axes],
                            extents[-1], element, sums, levels)
    if kept[:-1]:
        loop_nest(em.b, [(i64(0), extents[k]) for k in kept[:-1]], columns)
    else:
        columns([])


def _elements(em: Emitter, base: ir.Value, dtype: DType, index: Callable[[ir.Value], Index]) -> Elements:
    """The elements of buffer `base`, the i-th at index(i) (consecutive i, consecutive elements: a
    row of the last axis), through the emitter's (checked) loads and stores."""
    def row(first: ir.Value, count: ir.Value, store: bool) -> ir.Value:
        offset = index(first).flat
        if em.bounds is not None:       # a bounds-checked build: the whole row, as each access would be
            bounds.span(em, base, ELEMENT_BYTES[dtype], offset, em.b.add(offset, em.b.sub(count, i64(1))),
                        em.b.icmp_signed(">", count, i64(0)), "store" if store else "load", store)
        return em.element_ptr(base, dtype, offset)
    return Elements(lambda i: em.load(base, dtype, index(i)), lambda i, value: em.store(base, dtype, index(i), value),
                    row)


for _kind in ("sum", "max", "min", "prod"):
    lower_rules[f"reduce_{_kind}"] = _reduction(_kind)

# ---------------------------------------------------------------- arg-reductions

def _arg_reduction(kind: str) -> LowerRule:
    """A buffer rule: per output element, one pass along the axis carrying the best value and its
    index (the outer loop, over the kept axes, splits across threads)."""
    def rule(kernel: Emitter, op: Op, dest: ir.Value) -> None:
        fn, em, buffers = outline_reduction(kernel, op, dest)
        _scan_for_index(em, op, kind, fn.args[0], fn.args[1], fn.args[3])
        em.b.ret_void()
        _call_over_kept(kernel, op, fn, buffers)
    rule.__name__ = f"arg{kind}_lower"
    return rule


def _replaces(b: ir.IRBuilder, kind: str, dtype: DType, x: ir.Value, best: ir.Value) -> ir.Value:
    """Whether x takes best's place: strictly better, so the first of equals stays, or the first
    nan, which nothing replaces (NumPy's argmax and argmin)."""
    predicate = ">" if kind == "max" else "<"
    if not dtype.is_float:
        return b.icmp_signed(predicate, x, best)
    # unordered: better, or x is nan; best is a number (the identity at first)
    return b.and_(b.fcmp_unordered(predicate, x, best), b.fcmp_ordered("==", best, best))


def _scan_for_index(em: Emitter, op: Op, kind: str, start: ir.Value, end: ir.Value, out: ir.Value) -> None:
    """The index of the best element along the axis, starting from the identity at index 0, so an
    empty axis gives 0 (the interpreter's choice) and an axis of identities its first index."""
    (x,), (axis,) = op.operands, op.attrs["axes"]
    dtype = x.type.dtype
    kept = [k for k in range(x.type.rank) if k != axis]
    extents = [em.dim(d) for d in x.type.shape]
    best, index = em.head.alloca(REGISTER_TYPES[dtype]), em.head.alloca(I64)

    def scan_at(kept_axes: list[ir.Value]) -> None:
        def step(k: ir.Value) -> None:
            position = dict(zip(kept, kept_axes)) | {axis: k}
            element = em.value_at(x, em.index(x, axes=[position[i] for i in range(x.type.rank)]))
            current = em.b.load(best)
            better = _replaces(em.b, kind, dtype, element, current)
            em.b.store(em.b.select(better, element, current), best)
            em.b.store(em.b.select(better, k, em.b.load(index)), index)
            em.memo.clear()

        em.b.store(identity(kind, dtype), best)
        em.b.store(i64(0), index)
        counted_loop(em.b, i64(0), extents[axis], step)
        em.store(out, DType.i64, em.index(op.result, axes=kept_axes), em.b.load(index))
    _for_kept_positions(em, kept, extents, start, end, scan_at)


for _kind in ("max", "min"):
    lower_rules[f"arg{_kind}"] = _arg_reduction(_kind)
