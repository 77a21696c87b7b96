"""The VJP rules of indexing by integer tensors: gather, scatter_add, scatter.

Part of the VJP rule table (adc/passes/adjoint_rules/__init__.py gathers the families' tables).
A gather and a scatter_add are each other's transpose; indices get no cotangent:

    %0 = gather %x, %i {axis = 0} : f64[K]    ==>    %1 = scatter_add %zeros, %i, %ct {axis = 0} : f64[N]
"""
from __future__ import annotations

from adc.ir.builder import Builder, full
from adc.ir.core import Value
from adc.ir.types import DType, TensorType, num_elements
from adc.passes.adjoint_rules.rule import AdjointRule

adjoint_rules: dict[str, AdjointRule] = {}


def gather_adjoint(b, op, cts):
    # d take(x, i) = ct added into zeros like x at the indices (duplicates accumulate); none for i
    x, indices = op.operands
    return (b.op("scatter_add", full(b, 0.0, x.type), indices, cts[0], axis=op.attrs["axis"]), None)


adjoint_rules["gather"] = gather_adjoint


def scatter_add_adjoint(b, op, cts):
    # d scatter_add(base, i, u) = ct, none, take(ct, i)
    ct, indices = cts[0], op.operands[1]
    return (ct, None, b.op("gather", ct, indices, axis=op.attrs["axis"]))


adjoint_rules["scatter_add"] = scatter_add_adjoint


def scatter_adjoint(b, op, cts):
    # d scatter(base, i, u): the base's is ct with the written slices zeroed; an update's is ct at its
    # index when it is the slice that stayed (the last of its duplicates), else 0; none for i
    base, indices, updates = op.operands
    ct, axis = cts[0], op.attrs["axis"]
    zeros = full(b, 0.0, updates.type)
    base_ct, taken = b.op("scatter", ct, indices, zeros, axis=axis), b.op("gather", ct, indices, axis=axis)
    if num_elements(indices.type.shape) == 1:       # one slice written (y[t] = x): it stays
        return base_ct, None, taken
    stayed = _last_writers(b, indices, base.type.shape[axis], updates.type, axis)
    return base_ct, None, b.op("select", stayed, taken, zeros)


def _last_writers(b: Builder, indices: Value, n, updates: TensorType, axis: int) -> Value:
    """True at the slices of `updates` a scatter along `axis` keeps: each index's position in row-major
    order, scattered into n slots, reads back as itself only for the last of its duplicates."""
    count = num_elements(indices.type.shape)
    positions = b.op("reshape", b.op("iota", axis=0, dtype=DType.i64, shape=(count,)), shape=indices.type.shape)
    last = b.op("scatter", full(b, -1, TensorType(DType.i64, (n,))), indices, positions, axis=0)
    stayed = b.op("eq", b.op("gather", last, indices, axis=0), positions)
    return b.op("broadcast", stayed, dims=tuple(range(axis, axis + indices.type.rank)), shape=updates.shape)


adjoint_rules["scatter"] = scatter_adjoint
