"""The VJP rules of the shape ops: broadcast, reshape, transpose, slice, slice_add, concat, pad.

Part of the VJP rule table (adc/passes/adjoint_rules/__init__.py gathers the families' tables).
Each undoes its op on the cotangent: a broadcast's is a sum over the broadcast axes, a slice's
its cotangent placed back among zeros:

    %0 = broadcast %b {dims = [1], shape = [B,N]} : f64[B,N]    ==>    %1 = reduce_sum %ct {axes = [0]} : f64[N]
"""
from __future__ import annotations

from adc.ir.builder import Builder, full
from adc.ir.core import Value
from adc.passes.adjoint_rules.rule import AdjointRule

adjoint_rules: dict[str, AdjointRule] = {}


def kept_axes(rank: int, axes) -> list[int]:
    """The axes of a rank-`rank` value that are not among `axes` (what a sum over `axes` keeps)."""
    return [i for i in range(rank) if i not in axes]


def broadcast_adjoint(b, op, cts):
    # d broadcast(x) = ct summed over the new and the stretched size-1 axes, reshaped to x
    x, shape, dims = op.operands[0], op.attrs["shape"], op.attrs["dims"]
    kept = [d for d, size in zip(dims, x.type.shape) if size == shape[d]]
    ct = cts[0]
    if len(kept) < len(shape):
        ct = b.op("reduce_sum", ct, axes=kept_axes(len(shape), kept))
    return (ct if ct.type == x.type else b.op("reshape", ct, shape=x.type.shape),)


adjoint_rules["broadcast"] = broadcast_adjoint


def reshape_adjoint(b, op, cts):
    # d reshape(x) = ct reshaped back
    return (b.op("reshape", cts[0], shape=op.operands[0].type.shape),)


adjoint_rules["reshape"] = reshape_adjoint


def transpose_adjoint(b, op, cts):
    # d transpose(x, p) = transpose(ct, p⁻¹)
    perm = op.attrs["perm"]
    inverse = sorted(range(len(perm)), key=lambda i: perm[i])
    return (b.op("transpose", cts[0], perm=inverse),)


adjoint_rules["transpose"] = transpose_adjoint


def _zeros(b: Builder, like: Value, axis: int, extent) -> Value:
    shape = list(like.type.shape)
    shape[axis] = extent
    return full(b, 0.0, like.type.with_shape(shape))


def _pad_zeros(b: Builder, v: Value, low, high) -> Value:
    """v surrounded by zeros: `pad` for static widths, `concat` of zero blocks for symbolic ones."""
    static = [isinstance(lo, int) and isinstance(hi, int) for lo, hi in zip(low, high)]
    low_static = [lo if s else 0 for lo, s in zip(low, static)]
    high_static = [hi if s else 0 for hi, s in zip(high, static)]
    if any(low_static) or any(high_static):
        zero = b.op("constant", dtype=v.type.dtype, value=0.0)
        v = b.op("pad", v, zero, low=low_static, high=high_static)
    for axis in (i for i, s in enumerate(static) if not s):
        parts = [_zeros(b, v, axis, low[axis])] if low[axis] != 0 else []
        parts += [v] + ([_zeros(b, v, axis, high[axis])] if high[axis] != 0 else [])
        v = b.op("concat", *parts, axis=axis)
    return v


def slice_adjoint(b, op, cts):
    # d x[lo:hi:st] = ct placed back among zeros shaped like x: padded with zeros (step 1), else
    # added into zeros at every st-th place (slice_add; a sum of such cotangents adds each into
    # the rest, adc/passes/adjoint.py)
    x, a = op.operands[0], op.attrs
    if any(step > 1 for step in a["step"]):
        return (b.op("slice_add", full(b, 0.0, x.type), cts[0], **a),)
    return (_pad_zeros(b, cts[0], a["start"], [size - hi for size, hi in zip(x.type.shape, a["stop"])]),)


adjoint_rules["slice"] = slice_adjoint


def slice_add_adjoint(b, op, cts):
    # d slice_add(base, u) = ct, ct[lo:hi:st]
    return (cts[0], b.op("slice", cts[0], **op.attrs))


adjoint_rules["slice_add"] = slice_add_adjoint


def concat_adjoint(b, op, cts):
    # d concat(x1..xn) = the slice of ct where each xi landed
    ct, axis = cts[0], op.attrs["axis"]
    rank, offset, pieces = ct.type.rank, 0, []
    for x in op.operands:
        start, stop = [0] * rank, list(ct.type.shape)
        start[axis], stop[axis] = offset, offset + x.type.shape[axis]
        pieces.append(b.op("slice", ct, start=start, stop=stop, step=[1] * rank))
        offset = stop[axis]
    return tuple(pieces)


adjoint_rules["concat"] = concat_adjoint


def _sum_all(b: Builder, v: Value) -> Value:
    return b.op("reduce_sum", v, axes=list(range(v.type.rank))) if v.type.rank else v


def pad_adjoint(b, op, cts):
    # d pad(x, v) = the slice of ct over x, and sum(ct) - sum(that slice) for the padding value
    ct, (x, _) = cts[0], op.operands
    low = op.attrs["low"]
    inner = b.op("slice", ct, start=low, stop=[lo + d for lo, d in zip(low, x.type.shape)],
                 step=[1] * x.type.rank)
    return (inner, b.op("sub", _sum_all(b, ct), _sum_all(b, inner)))


adjoint_rules["pad"] = pad_adjoint
