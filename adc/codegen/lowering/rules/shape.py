"""Element rules of the shape ops: each reads its operand at an index computed from the result's.

broadcast, reshape, transpose and slice are index maps: nothing moves until a consumer reads.
concat and pad choose the operand, or the padding value, by where the index falls.

    %1 = transpose %0 {perm = [1,0]} : f32[N,M]    ──▶   element (i, j) = x[j, i]
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as ir

from adc.codegen.lowering.loops import I1, NOWRAP, Index, i64
from adc.ir.core import Op
from adc.ir.reshapes import reshape_groups

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter
    from adc.codegen.lowering.rules.table import LowerRule

lower_rules: dict[str, LowerRule] = {}      # this family's rows of table.lower_rules


def broadcast_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # operand axis k reads result axis dims[k], or 0 where the operand has size 1
    (x,) = op.operands
    axes = [i64(0) if size == 1 else idx.axes[d] for size, d in zip(x.type.shape, op.attrs["dims"])]
    return em.value_at(x, em.index(x, axes=axes))


lower_rules["broadcast"] = broadcast_lower


def reshape_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # same row-major position; from a per-axis position, run by run of axes of equal sizes
    # (ir/reshapes.py), so a reshape adding or dropping unit axes divides nowhere, and one
    # splitting an axis only there
    (x,) = op.operands
    groups = reshape_groups(x.type.shape, op.result.type.shape) if idx.axes_known else None
    if groups is None:
        return em.value_at(x, em.index(x, flat=idx.flat))
    axes: list[ir.Value] = [i64(0)] * x.type.rank       # a unit axis of x outside every run
    for old, new in groups:
        run = Index(em.b, [idx.extents[a] for a in new], axes=[idx.axes[a] for a in new])
        for a, position in zip(old, Index(em.b, [em.dim(x.type.shape[a]) for a in old], flat=run.flat).axes):
            axes[a] = position
    return em.value_at(x, em.index(x, axes=axes))


lower_rules["reshape"] = reshape_lower


def transpose_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # operand axis perm[k] is result axis k
    (x,) = op.operands
    axes = [None] * x.type.rank
    for k, p in enumerate(op.attrs["perm"]):
        axes[p] = idx.axes[k]
    return em.value_at(x, em.index(x, axes=axes))


lower_rules["transpose"] = transpose_lower


def slice_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # operand axis k = start[k] + step[k] * result axis k
    (x,) = op.operands
    axes = [em.b.add(em.dim(lo), em.b.mul(a, i64(st), flags=NOWRAP), flags=NOWRAP)
            for a, lo, st in zip(idx.axes, op.attrs["start"], op.attrs["step"])]
    return em.value_at(x, em.index(x, axes=axes))


lower_rules["slice"] = slice_lower


def concat_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # along `axis`, operand k covers [offset_k, offset_k + size_k); a binary search finds it, so
    # n operands cost log2(n) compares (and as many levels of recursion here)
    axis = op.attrs["axis"]
    offsets, total = [], 0
    for v in op.operands:
        offsets.append(total)
        total = total + v.type.shape[axis]

    def part(lo: int, hi: int) -> ir.Value:
        if hi - lo == 1:
            return concat_piece(em, op, lo, em.dim(offsets[lo]), idx)
        mid = (lo + hi) // 2
        below = em.b.icmp_signed("<", idx.axes[axis], em.dim(offsets[mid]))
        return em.branch(below, lambda: part(lo, mid), lambda: part(mid, hi))
    return part(0, len(op.operands))


lower_rules["concat"] = concat_lower


# A concat of more operands is stored by one loop choosing per element: LLVM's time grows with
# the loops it vectorizes (1,000 operands: 5 s to compile in one loop, 26 s in a loop each).
MAX_PIECES = 16


def concat_pieces(em: Emitter, op: Op) -> list[tuple[ir.Value, ir.Value]] | None:
    """For a concat along its last axis of at most MAX_PIECES operands: where each operand starts
    and ends along it, so that a nest storing the concat walks each operand in a loop of its own
    (loops.pieced_loop_nest); None for a concat along another axis, where the operand chosen does
    not change in the innermost loop. One loop choosing per element vectorizes into masked loads
    of every operand, and the masked-off lanes' addresses, outside their operand, cost a fault
    assist where they fall on unmapped pages: a concat of three 100,000-element slices took 7.4 ms
    in one loop (AMD Zen 5), 25 ns an element."""
    axis = op.attrs["axis"]
    if axis != op.result.type.rank - 1 or len(op.operands) > MAX_PIECES:
        return None
    pieces, start = [], i64(0)
    for v in op.operands:
        end = em.b.add(start, em.dim(v.type.shape[axis]), flags=NOWRAP)
        pieces.append((start, end))
        start = end
    return pieces


def concat_piece(em: Emitter, op: Op, k: int, start: ir.Value, idx: Index) -> ir.Value:
    """Element `idx` of the concat, inside operand k's piece, which begins at `start` along its axis."""
    v, axes, axis = op.operands[k], list(idx.axes), op.attrs["axis"]
    axes[axis] = em.b.sub(axes[axis], start, flags=NOWRAP)
    return em.value_at(v, em.index(v, axes=axes))


def pad_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # inside [low, low + size) on every axis: x[idx - low]; elsewhere the padding value
    x, value = op.operands
    pad = em.value_at(value, em.index(value))
    inside, axes = ir.Constant(I1, 1), []
    for a, lo, size in zip(idx.axes, op.attrs["low"], x.type.shape):
        shifted = em.b.sub(a, i64(lo))
        inside = em.b.and_(inside, em.b.icmp_unsigned("<", shifted, em.dim(size)))
        axes.append(shifted)
    return em.branch(inside, lambda: em.value_at(x, em.index(x, axes=axes)), lambda: pad)


lower_rules["pad"] = pad_lower
