"""The sparsity rules of the ops that compute arrays: elementwise, shape, indexing, reductions,
scans, matmul and the ops on stacked matrices (control flow and calls: control_flow.py).

A rule has the signature `rule(op, states, ctx) -> tuple of Dependence` (one per result):
`states` are the operands' (dependence.py), `ctx` the walk's Context (`ctx.shape` evaluates a
type's dimensions). It runs when some operand depends on wrt or is not known; the analysis
computes known values itself, and drops the patterns of integer and bool results. Where an op
moves elements (a reshape, a slice, a gather at known indices) the rule runs the interpreter's
own rule on the operands' element positions: the result says which element each one is.

    %0 = slice %x {start = [1], stop = [N], step = [1]}     row r of %0 = row r + 1 of %x
    %1 = reduce_sum %0 {axes = [0]}                         row 0 = the union of %0's rows
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from adc.ir.interp import eval_rules
from adc.ir.ops import OPS
from adc.passes.sparsity.dependence import Dependence, columns_of, stacked
from adc.passes.sparsity.patterns import Pattern, union

# sparsity_rules[op_name](op, states, ctx) -> the Dependence of each result (see the docstring)
SparsityRule = Callable
sparsity_rules: dict[str, SparsityRule] = {}


def result(op, ctx, pattern: Pattern | None, index: int = 0) -> Dependence:
    return Dependence(ctx.shape(op.results[index].type.shape), pattern)


def gathered(pattern: Pattern, destination: np.ndarray, rows: int) -> Pattern:
    """Row r of the result: the union of the rows e of `pattern` with destination[e] == r."""
    destination = np.asarray(destination, np.int64).ravel()
    groups = Pattern.from_pairs(destination, np.arange(len(destination)), (rows, len(destination)))
    return pattern.combine(groups)


def elementwise_sparsity(op, states, ctx):
    # f(x, y)[i] reads x[i] and y[i] only: the union of the operands' rows
    return (result(op, ctx, union(s.pattern for s in states)),)


def no_dependence(op, states, ctx):
    # piecewise constant (floor, comparisons), stop_gradient, an index result: no derivative flows
    return tuple(result(op, ctx, None, i) for i in range(len(op.results)))


for _name, _opdef in OPS.items():
    if _opdef.has("elementwise"):
        sparsity_rules[_name] = elementwise_sparsity
    if _opdef.has("non_differentiable") or _opdef.has("index_result"):
        sparsity_rules[_name] = no_dependence


def select_sparsity(op, states, ctx):
    # select(c, x, y)[i] reads x[i] where c[i], y[i] elsewhere: a known c picks, else both
    c, x, y = states
    if c.value is None:
        return elementwise_sparsity(op, states, ctx)
    where = np.broadcast_to(c.value, c.shape).ravel().astype(bool)
    positions = np.arange(where.size, dtype=np.int64)
    return (result(op, ctx, stacked([x, y], columns_of(states)).take(
        np.where(where, positions, positions + where.size))),)


sparsity_rules["select"] = select_sparsity


def moved_sparsity(op, states, ctx):
    # each result element is one operand element (or none): the interpreter's rule, run on the
    # operands' element positions counted across them (indices at their known values), says which
    indexing = OPS[op.name].has("indexing")
    if indexing and states[1].value is None:
        return unknown_index_sparsity(op, states, ctx)
    moving = [Dependence(s.shape) if indexing and i == 1 else s for i, s in enumerate(states)]
    offsets = np.cumsum([0] + [s.size for s in moving])
    args = [states[1].value if indexing and i == 1 else s.positions(offsets[i]) for i, s in enumerate(moving)]
    (source,) = eval_rules[op.name](args, op.attrs, ctx)
    return (result(op, ctx, stacked(moving, columns_of(states)).take(np.asarray(source).ravel())),)


sparsity_rules.update(broadcast=moved_sparsity, reshape=moved_sparsity, transpose=moved_sparsity,
                      slice=moved_sparsity, concat=moved_sparsity, pad=moved_sparsity, gather=moved_sparsity,
                      scatter=moved_sparsity)


def _lines(shape: tuple[int, ...], axis: int, span: int) -> np.ndarray:
    """Per element of a value of `shape`, its line: the position of its axes outside [axis, axis + span)."""
    kept = shape[:axis] + (1,) * span + shape[axis + span:]
    ids = np.arange(int(np.prod(kept, dtype=np.int64)), dtype=np.int64).reshape(kept)
    return np.broadcast_to(ids, shape).ravel()


def unknown_index_sparsity(op, states, ctx):
    # indices not known until run time: a gathered element may read, a scattered one be written
    # by, any element of its line along `axis` (the other axes fixed): the union of that line
    axis, span = op.attrs["axis"], op.operands[1].type.rank
    x, out = states[0], result(op, ctx, None)
    moving, moving_span, out_span = (states[2], span, 1) if OPS[op.name].has("scatter") else (x, 1, span)
    lines = int(np.prod(x.shape[:axis] + x.shape[axis + 1:], dtype=np.int64))
    read = None
    if moving.pattern is not None:
        along = gathered(moving.pattern, _lines(moving.shape, axis, moving_span), lines)
        read = along.take(_lines(out.shape, axis, out_span))
    base = x.pattern if OPS[op.name].has("scatter") else None
    return (result(op, ctx, union([base, read])),)


def scatter_add_sparsity(op, states, ctx):
    # base[r] plus every update the indices put at r: the updates' destinations are the result
    # positions a gather at the same indices reads
    base, indices, updates = states
    if indices.value is None:
        return unknown_index_sparsity(op, states, ctx)
    out = result(op, ctx, None)
    (destination,) = eval_rules["gather"]([out.positions(), indices.value], op.attrs, ctx)
    return (_added(op, ctx, out, base, updates, destination),)


def slice_add_sparsity(op, states, ctx):
    # base[r] plus the update the slice puts at r: the updates' destinations are the result
    # positions the slice reads
    base, updates = states
    out = result(op, ctx, None)
    (destination,) = eval_rules["slice"]([out.positions()], op.attrs, ctx)
    return (_added(op, ctx, out, base, updates, destination),)


def _added(op, ctx, out: Dependence, base: Dependence, updates: Dependence, destination) -> Dependence:
    """The result of adding each update into base at its `destination` (a result position)."""
    rows = np.concatenate([np.arange(base.size, dtype=np.int64), np.asarray(destination, np.int64).ravel()])
    return result(op, ctx, gathered(stacked([base, updates], columns_of([base, updates])), rows, out.size))


sparsity_rules.update(scatter_add=scatter_add_sparsity, slice_add=slice_add_sparsity)


def reduce_sparsity(op, states, ctx):
    # an element of the result reads every element reduced into it (max and min conservatively:
    # which one wins depends on the values)
    (x,), axes = states, tuple(op.attrs["axes"])
    out = result(op, ctx, None)
    destination = np.broadcast_to(np.expand_dims(out.positions(), axes), x.shape)
    return (result(op, ctx, gathered(x.pattern, destination, out.size)),)


def scan_sparsity(op, states, ctx):
    # element t of a line reads the line's elements s <= t (s < t exclusive; >= and > reversed)
    (x,), a = states, op.attrs
    length = x.shape[a["axis"]]
    lines = np.moveaxis(x.positions(), a["axis"], -1).reshape(-1, length)
    shift = -1 if a["exclusive"] else 0
    t, s = np.triu_indices(length, -shift) if a["reverse"] else np.tril_indices(length, shift)
    groups = Pattern.from_pairs(lines[:, t].ravel(), lines[:, s].ravel(), (x.size, x.size))
    return (result(op, ctx, x.pattern.combine(groups)),)


for _name, _opdef in OPS.items():
    if _opdef.has("reduction") and _name not in sparsity_rules:
        sparsity_rules[_name] = reduce_sparsity
    if _opdef.has("scan"):
        sparsity_rules[_name] = scan_sparsity


def matmul_sparsity(op, states, ctx):
    # (A @ B)[.., i, j] reads A[.., i, :] and B[.., :, j]: A's rows and B's columns reduced, then
    # broadcast over the product (the structural product, never m·n·k pairs)
    a, b = states
    out = result(op, ctx, None)
    batch, m, n = out.shape[:-2], out.shape[-2], out.shape[-1]
    rows = np.arange(int(np.prod(batch + (m,), dtype=np.int64)), dtype=np.int64).reshape(batch + (m, 1))
    cols = np.arange(int(np.prod(batch + (n,), dtype=np.int64)), dtype=np.int64).reshape(batch + (1, n))
    parts = []
    if a.pattern is not None:
        reduced = gathered(a.pattern, np.broadcast_to(rows, a.shape), rows.size)
        parts.append(reduced.take(np.broadcast_to(rows, out.shape)))
    if b.pattern is not None:
        reduced = gathered(b.pattern, np.broadcast_to(cols, b.shape), cols.size)
        parts.append(reduced.take(np.broadcast_to(cols, out.shape)))
    return (result(op, ctx, union(parts)),)


sparsity_rules["matmul"] = matmul_sparsity


def stacked_matrices_sparsity(op, states, ctx):
    # cholesky, triangular_solve, lu_factor, qr, eigh, svd: matrix k of each result reads all of matrix k of
    # every operand (a factorization mixes a matrix's elements; conservative within one), so a
    # stack of systems is block-diagonal. The stacking axes are the first operand's leading ones.
    batch = states[0].shape[:-2]
    count = int(np.prod(batch, dtype=np.int64))
    per_matrix = union(gathered(s.pattern, _matrix_of(batch, s.shape), count) for s in states if s.pattern is not None)
    return tuple(result(op, ctx, None if per_matrix is None else per_matrix.take(_matrix_of(batch, shape)), i)
                 for i, shape in enumerate(ctx.shape(r.type.shape) for r in op.results))


def _matrix_of(batch: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    """Each element's stacked-matrix number, in `shape` (`batch` followed by a matrix or a vector)."""
    numbers = np.arange(int(np.prod(batch, dtype=np.int64)), dtype=np.int64).reshape(batch)
    return np.broadcast_to(numbers.reshape(batch + (1,) * (len(shape) - len(batch))), shape)


for _name, _opdef in OPS.items():
    if _opdef.has("stacked_matrices") and not _opdef.has("non_differentiable"):
        sparsity_rules[_name] = stacked_matrices_sparsity
