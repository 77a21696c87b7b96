"""The batching rule of every op: the table the batching pass (adc/passes/batch.py) runs.

A rule rewrites one op whose operands may carry a leading batch axis into ops
on the batched values, emitting ordinary IR with the builder. The pass calls a
rule only when at least one operand is batched (so the batch dimension is the
leading dimension of any batched operand); ops without batched operands are
kept as they are. Every op of `adc.ir.ops.OPS` has a rule here or is listed in
`NEVER_BATCHED` (ops without operands).

    %0 = reduce_sum %x {axes = [1]} : f32[B]      %x: f32[NB,B,N] batched  ==>
                                                   %0 = reduce_sum %x {axes = [2]} : f32[NB,B]
"""
from __future__ import annotations

from typing import Callable

from adc.errors import CompileError
from adc.ir.builder import Builder
from adc.ir.core import FuncRef, Op, Value
from adc.ir.ops import OPS, with_trait
from adc.ir.types import I32, I64, Dim, SymDim
from adc.passes.regions import build_region, like

# batch_rules[op_name](b, op, args, batched) -> (results, results_batched)
#   b:       the builder of the batched function, stamped with op.loc by the pass
#   op:      the original op
#   args:    its operands in the batched function; args[i] has the leading batch axis iff batched[i]
#   batched: one flag per operand, at least one True
# The rule may move axes as it needs; it returns the new results and one flag per result.
# An unbatched operand is broadcast (`with_batch_axis`) only where it meets a batched one. A rule
# that batches functions of the module (`custom_gradient`) is a generator: it yields
# `batch_callees(...)` and gets their names back, so nested custom gradients batch on the
# trampoline's stack, not Python's.
BatchRule = Callable[[Builder, Op, list[Value], list[bool]], tuple[list[Value], list[bool]]]
batch_rules: dict[str, BatchRule] = {}

NEVER_BATCHED = with_trait("source")     # no operands: the same in every example


def batch_dim(args: list[Value], batched: list[bool]) -> Dim:
    """The size of the batch axis: the leading dimension of any batched operand."""
    return next(a.type.shape[0] for a, flag in zip(args, batched) if flag)


def with_batch_axis(b: Builder, value: Value, size: Dim) -> Value:
    """`value` repeated along a new leading axis of `size` (a not_batched value meeting a batched one)."""
    shape = value.type.shape
    return b.op("broadcast", value, dims=list(range(1, len(shape) + 1)), shape=(size,) + shape)


def _all_batched(b: Builder, args: list[Value], batched: list[bool], size: Dim | None = None) -> list[Value]:
    size = batch_dim(args, batched) if size is None else size
    return [a if flag else with_batch_axis(b, a, size) for a, flag in zip(args, batched)]


def _shifted(axes) -> list[int]:
    return [a + 1 for a in axes]


# ---------------------------------------------------------------- elementwise

def elementwise_batch(b, op, args, batched):
    # f(x[s], y) = f(x, broadcast y)[s]: the same op on operands that all carry the batch axis
    return [b.op(op.name, *_all_batched(b, args, batched), **op.attrs)], [True]


for _name, _opdef in OPS.items():
    if "elementwise" in _opdef.traits and _name not in NEVER_BATCHED:
        batch_rules[_name] = elementwise_batch


def call_batch(b, op, args, batched):
    raise CompileError(f"the batching pass met a call of @{op.attrs['callee']}: inline calls first", op.loc)


batch_rules["call"] = call_batch


def custom_gradient_batch(b, op, args, batched):
    # custom_gradient(x[s]) with forward f and backward g = custom_gradient(x) with f and g batched
    # over all their params (shared operands broadcast), so g's cotangents keep the operands' types
    from adc.passes.batch import batch_callees     # the pass itself batches the callees

    forward, backward = yield batch_callees(b.funcs, [op.attrs["forward"], op.attrs["backward"]])
    results = b.emit("custom_gradient", *_all_batched(b, args, batched), forward=FuncRef(forward),
                     backward=FuncRef(backward), results=op.attrs["results"])
    return list(results), [True] * len(results)


batch_rules["custom_gradient"] = custom_gradient_batch


# ---------------------------------------------------------------- shape ops

def broadcast_batch(b, op, args, batched):
    # broadcast(x[s], dims, shape) = broadcast(x, [0] + (dims+1), [S] + shape)[s]
    (x,) = args
    dims = [0] + _shifted(op.attrs["dims"])
    return [b.op("broadcast", x, dims=dims, shape=x.type.shape[:1] + tuple(op.attrs["shape"]))], [True]


batch_rules["broadcast"] = broadcast_batch


def reshape_batch(b, op, args, batched):
    # reshape(x[s], shape) = reshape(x, [S] + shape)[s]
    (x,) = args
    return [b.op("reshape", x, shape=x.type.shape[:1] + tuple(op.attrs["shape"]))], [True]


batch_rules["reshape"] = reshape_batch


def transpose_batch(b, op, args, batched):
    # transpose(x[s], p) = transpose(x, [0] + (p+1))[s]
    return [b.op("transpose", args[0], perm=[0] + _shifted(op.attrs["perm"]))], [True]


batch_rules["transpose"] = transpose_batch


def _whole_batch(attrs, size: Dim) -> dict:
    """A slice's bounds with the whole batch axis of `size` in front."""
    return {"start": [0, *attrs["start"]], "stop": [size, *attrs["stop"]], "step": [1, *attrs["step"]]}


def slice_batch(b, op, args, batched):
    # x[s][lo:hi:st] = x[:, lo:hi:st][s]
    (x,) = args
    return [b.op("slice", x, **_whole_batch(op.attrs, x.type.shape[0]))], [True]


batch_rules["slice"] = slice_batch


def slice_add_batch(b, op, args, batched):
    # slice_add(base[s], u[s]) = slice_add(base, u, the whole batch axis too)[s]
    base, updates = _all_batched(b, args, batched)
    return [b.op("slice_add", base, updates, **_whole_batch(op.attrs, base.type.shape[0]))], [True]


batch_rules["slice_add"] = slice_add_batch


def concat_batch(b, op, args, batched):
    # concat(x1[s], .., xn[s], axis) = concat(x1, .., xn, axis+1)[s]
    return [b.op("concat", *_all_batched(b, args, batched), axis=op.attrs["axis"] + 1)], [True]


batch_rules["concat"] = concat_batch


def pad_batch(b, op, args, batched):
    # pad(x[s], v) = pad(x, v) with zero width on the batch axis; a per-example v[s] is
    # concatenated as blocks around x instead, as `pad` takes one scalar
    (x, value), (x_batched, value_batched) = args, batched
    low, high = list(op.attrs["low"]), list(op.attrs["high"])
    if not value_batched:
        return [b.op("pad", x, value, low=[0] + low, high=[0] + high)], [True]
    size = value.type.shape[0]
    x = x if x_batched else with_batch_axis(b, x, size)
    for axis, widths in enumerate(zip(low, high), start=1):
        x = _surround(b, x, value, axis, widths)
    return [x], [True]


def _surround(b: Builder, x: Value, value: Value, axis: int, widths) -> Value:
    """x with blocks of the per-example scalar `value` ([S]) of `widths` (low, high) along `axis`."""
    def block(width):
        shape = list(x.type.shape)
        shape[axis] = width
        return b.op("broadcast", value, dims=[0], shape=shape)
    low, high = widths
    parts = ([block(low)] if low else []) + [x] + ([block(high)] if high else [])
    return x if len(parts) == 1 else b.op("concat", *parts, axis=axis)


batch_rules["pad"] = pad_batch


# ---------------------------------------------------------------- indexing by integer tensors
#
# With per-example indices, the examples' axes are merged into one of S*n entries and example s's
# clamped indices offset by s*n: one gather (or scatter_add) serves the whole batch.

def gather_batch(b, op, args, batched):
    # take(x[s], i, a) = take(x, i, a+1)[s]; take(x, i[s], a) moves the new axis a to the front;
    # take(x[s], i[s], a) = take(x merged, offset i, a), then axis a to the front
    (x, indices), (x_batched, indices_batched), axis = args, batched, op.attrs["axis"]
    if not indices_batched:
        return [b.op("gather", x, indices, axis=axis + 1)], [True]
    if not x_batched:
        return [_move_axis(b, b.op("gather", x, indices, axis=axis), axis, 0)], [True]
    n = x.type.shape[axis + 1]
    gathered = b.op("gather", _merge_batch(b, x, axis), _offset_indices(b, indices, n), axis=axis)
    return [_move_axis(b, gathered, axis, 0)], [True]


batch_rules["gather"] = gather_batch


def scatter_batch(b, op, args, batched):
    # scatter_add(base[s], i, u[s], a) = scatter_add(base, i, u, a+1)[s]; with per-example i[s],
    # the bases merge into one axis of S*n entries that the offset indices address (scatter alike)
    size = batch_dim(args, batched)
    base, indices, updates = [a if flag or k == 1 else with_batch_axis(b, a, size)
                              for k, (a, flag) in enumerate(zip(args, batched))]
    axis = op.attrs["axis"]
    if not batched[1]:
        return [b.op(op.name, base, indices, updates, axis=axis + 1)], [True]
    n = base.type.shape[axis + 1]
    merged = b.op(op.name, _merge_batch(b, base, axis), _offset_indices(b, indices, n),
                  _move_axis(b, updates, 0, axis), axis=axis)
    split = b.op("reshape", merged, shape=merged.type.shape[:axis] + (size, n) + merged.type.shape[axis + 1:])
    return [_move_axis(b, split, axis, 0)], [True]


batch_rules["scatter_add"] = batch_rules["scatter"] = scatter_batch


def _move_axis(b: Builder, v: Value, source: int, destination: int) -> Value:
    """v with axis `source` moved to position `destination` (np.moveaxis)."""
    if source == destination:
        return v
    perm = [k for k in range(v.type.rank) if k != source]
    perm.insert(destination, source)
    return b.op("transpose", v, perm=perm)


def _merge_batch(b: Builder, v: Value, axis: int) -> Value:
    """v: [S, *pre, n, *post] (len(pre) = axis) -> [*pre, S*n, *post], example s's entries at s*n + k."""
    moved = _move_axis(b, v, 0, axis)
    shape = moved.type.shape
    return b.op("reshape", moved, shape=shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:])


def _offset_indices(b: Builder, indices: Value, n: Dim) -> Value:
    """i64 indices [S, ...]: example s's indices clamped into [0, n-1] (the index rule), plus s*n."""
    i = b.op("convert", indices, dtype=I64) if indices.type.dtype is not I64 else indices
    shape = i.type.shape

    def scalar(d: Dim) -> Value:
        value = b.op("dim", dtype=I64, value=d) if isinstance(d, SymDim) else b.op("constant", dtype=I64, value=d)
        return b.op("broadcast", value, dims=[], shape=shape)
    zero, size = scalar(0), scalar(n)
    wrapped = b.op("select", b.op("lt", i, zero), b.op("add", i, size), i)
    clamped = b.op("minimum", b.op("maximum", wrapped, zero), scalar(n - 1))
    offsets = b.op("mul", b.op("iota", axis=0, dtype=I64, shape=shape), size)
    return b.op("add", clamped, offsets)


# ---------------------------------------------------------------- reductions and matmul

def reduce_batch(b, op, args, batched):
    # reduce(x[s], axes) = reduce(x, axes+1)[s]
    return [b.op(op.name, args[0], axes=_shifted(op.attrs["axes"]))], [True]


for _name, _opdef in OPS.items():
    if "reduction" in _opdef.traits:
        batch_rules[_name] = reduce_batch


def scan_batch(b, op, args, batched):
    # scan(x[s], axis) = scan(x, axis+1)[s]
    return [b.op(op.name, args[0], **{**op.attrs, "axis": op.attrs["axis"] + 1})], [True]


for _name, _opdef in OPS.items():
    if "scan" in _opdef.traits:
        batch_rules[_name] = scan_batch


def matmul_batch(b, op, args, batched):
    # A[s] @ B[s] is a batched matmul; with one side shared, the batch axis is folded into the
    # rows of A ([S*M, K] @ [K, N]) or the columns of B ([M, K] @ [K, S*N]): one large product
    (x, y), (x_batched, y_batched) = args, batched
    if x_batched and y_batched:
        return [b.op("matmul", x, y)], [True]
    if x_batched:
        return [_fold_rows(b, x, y)], [True]
    return [_fold_columns(b, x, y)], [True]


def _fold_rows(b: Builder, x: Value, y: Value) -> Value:
    """x: [S, *P, M, K] batched, y: [*P, K, N] shared -> [S, *P, M, N]."""
    (size, *outer, m, k), n = x.type.shape, y.type.shape[-1]
    p = len(outer)
    lead = b.op("transpose", x, perm=list(range(1, p + 1)) + [0, p + 1, p + 2])     # [*P, S, M, K]
    rows = b.op("reshape", lead, shape=outer + [size * m, k])
    product = b.op("reshape", b.op("matmul", rows, y), shape=outer + [size, m, n])    # [*P, S, M, N]
    return b.op("transpose", product, perm=[p] + list(range(p)) + [p + 1, p + 2])


def _fold_columns(b: Builder, x: Value, y: Value) -> Value:
    """x: [*P, M, K] shared, y: [S, *P, K, N] batched -> [S, *P, M, N]."""
    (size, *outer, k, n), m = y.type.shape, x.type.shape[-2]
    p = len(outer)
    lead = b.op("transpose", y, perm=list(range(1, p + 2)) + [0, p + 2])              # [*P, K, S, N]
    columns = b.op("reshape", lead, shape=outer + [k, size * n])
    product = b.op("reshape", b.op("matmul", x, columns), shape=outer + [m, size, n])  # [*P, M, S, N]
    return b.op("transpose", product, perm=[p + 1] + list(range(p + 1)) + [p + 2])


batch_rules["matmul"] = matmul_batch


def stacked_matrices_batch(b, op, args, batched):
    # the ops with trait stacked_matrices (cholesky, lu_factor, qr, eigh, svd, ...): the batch axis
    # is one more stacking axis of every operand and result
    results = b.emit(op.name, *_all_batched(b, args, batched), **op.attrs)
    return list(results), [True] * len(results)


for _name, _opdef in OPS.items():
    if _opdef.has("stacked_matrices"):
        batch_rules[_name] = stacked_matrices_batch


# ---------------------------------------------------------------- control flow
#
# A region is batched along its parent's batch axis (batch.batch_region). A loop carries every value
# batched (a shared initial value is broadcast: it may mix with batched ones in the body). Where the
# examples disagree on how long to run (a batched trip count, a while condition), the loop runs
# until every example is done, and an example whose own loop has ended keeps its values. An if on a
# batched condition runs both branches and selects per example.

def _kept_unless(b: Builder, active: Value, new, old) -> list[Value]:
    """Per example, `new` where `active` (bool[NB]) holds, else `old`."""
    return [b.op("select", _across(b, active, o.type.shape), n, o) for n, o in zip(new, old)]


def _across(b: Builder, mask: Value, shape) -> Value:
    """bool[NB] broadcast along the leading axis to `shape`."""
    return mask if tuple(shape) == mask.type.shape else b.op("broadcast", mask, dims=[0], shape=tuple(shape))


def loop_batch(b, op, args, batched):
    # for and scan; a scan stacks batched rows, so its stacking axis moves one to the right
    from adc.passes.batch import batch_region     # the pass itself batches the body

    k, size = op.attrs["carried"], batch_dim(args, batched)
    count, carried, captured = args[0], _all_batched(b, args[1:1 + k], batched[1:1 + k], size), args[1 + k:]
    body = yield batch_region(b.funcs, op.attrs["body"], [False] + [True] * k + batched[1 + k:], size)
    region = FuncRef(body.name)
    if batched[0]:      # per-example trip counts
        params = like(body.params) + [Value(count.type, "count")]

        def masked(inner: Builder) -> list[Value]:
            active = inner.op("lt", inner.op("broadcast", params[0], dims=[], shape=(size,)), params[-1])
            new = inner.emit("call", *params[:-1], callee=region)
            return _kept_unless(inner, active, new[:k], params[1:1 + k]) + list(new[k:])

        region = build_region(b.funcs, f"{body.name}_masked", params, masked, op.loc)
        captured, count = [*captured, count], b.op("reduce_max", count, axes=[0])
    attrs = {**op.attrs, "body": region}
    if op.name == "scan":
        attrs["axis"] += 1
    results = b.emit(op.name, count, *carried, *captured, **attrs)
    return list(results), [True] * len(results)


def while_batch(b, op, args, batched):
    from adc.passes.batch import batch_region     # the pass itself batches the regions

    k, size = op.attrs["carried"], batch_dim(args, batched)
    carried, captured = _all_batched(b, args[:k], batched[:k], size), args[k:]
    flags = [True] * k + batched[k:]
    cond = yield batch_region(b.funcs, op.attrs["cond"], flags, size)
    body = yield batch_region(b.funcs, op.attrs["body"], flags, size)

    def any_running(inner: Builder) -> list[Value]:
        (running,) = inner.emit("call", *inner.params, callee=FuncRef(cond.name))
        most = inner.op("reduce_max", inner.op("convert", running, dtype=I32), axes=[0])
        return [inner.op("gt", most, inner.op("constant", dtype=I32, value=0))]

    def masked(inner: Builder) -> list[Value]:
        (running,) = inner.emit("call", *inner.params, callee=FuncRef(cond.name))
        new = inner.emit("call", *inner.params, callee=FuncRef(body.name))
        return _kept_unless(inner, running, new, inner.params[:k])

    results = b.emit("while", *carried, *captured, **{
        **op.attrs, "body": build_region(b.funcs, f"{body.name}_masked", like(body.params), masked, op.loc),
        "cond": build_region(b.funcs, f"{cond.name}_any", like(cond.params), any_running, op.loc)})
    return list(results), [True] * k


def if_batch(b, op, args, batched):
    from adc.passes.batch import batch_region     # the pass itself batches the branches

    size, captured, flags = batch_dim(args, batched), args[1:], batched[1:]
    if batched[0]:      # both branches are called, with every operand batched (the calls bind the axis)
        captured, flags = _all_batched(b, captured, flags, size), [True] * len(captured)
    then = yield batch_region(b.funcs, op.attrs["then_branch"], flags, size)
    otherwise = yield batch_region(b.funcs, op.attrs["else_branch"], flags, size)
    if not batched[0]:
        results = b.emit("if", args[0], *captured, then_branch=FuncRef(then.name),
                         else_branch=FuncRef(otherwise.name))
        return list(results), [True] * len(results)
    taken = b.emit("call", *captured, callee=FuncRef(then.name))
    other = b.emit("call", *captured, callee=FuncRef(otherwise.name))
    return _kept_unless(b, args[0], taken, other), [True] * len(taken)


batch_rules["for"] = loop_batch
batch_rules["scan"] = loop_batch
batch_rules["while"] = while_batch
batch_rules["if"] = if_batch
