"""The VJP rules of reductions, scans and matmul.

Part of the VJP rule table (adc/passes/adjoint_rules/__init__.py gathers the families' tables).
A reduction's cotangent is broadcast back over the reduced axes (shared among ties for max and
min), a scan's runs the scan the other way, a matmul's multiplies by the other operand transposed:

    %0 = reduce_sum %x {axes = [1]} : f64[B]    ==>    %1 = broadcast %ct {dims = [0], shape = [B,N]} : f64[B,N]
"""
from __future__ import annotations

from adc.ir.builder import Builder, full
from adc.ir.core import Op, Value
from adc.passes.adjoint_rules.rule import AdjointRule
from adc.passes.adjoint_rules.shape import kept_axes

adjoint_rules: dict[str, AdjointRule] = {}


def _unreduce(b: Builder, op: Op, v: Value) -> Value:
    """A value of the reduction's result shape, broadcast back over the reduced axes."""
    x = op.operands[0]
    return b.op("broadcast", v, dims=kept_axes(x.type.rank, op.attrs["axes"]), shape=x.type.shape)


def reduce_sum_adjoint(b, op, cts):
    # d sum(x) = ct broadcast back
    return (_unreduce(b, op, cts[0]),)


adjoint_rules["reduce_sum"] = reduce_sum_adjoint


def reduce_max_adjoint(b, op, cts):
    # d max(x) = ct*(x == y)/count of ties: tied extrema share the cotangent (TensorFlow's convention)
    x = op.operands[0]
    ties = b.op("convert", b.op("eq", x, _unreduce(b, op, op.result)), dtype=x.type.dtype)
    count = b.op("reduce_sum", ties, axes=op.attrs["axes"])
    return (b.op("mul", _unreduce(b, op, b.op("div", cts[0], count)), ties),)


adjoint_rules["reduce_max"] = reduce_max_adjoint
adjoint_rules["reduce_min"] = reduce_max_adjoint      # d min(x): the same rule, ties at the minimum


def reduce_prod_adjoint(b, op, cts):
    # d prod(x) = ct*y/x (nan where an element is exactly 0)
    return (b.op("div", _unreduce(b, op, b.op("mul", cts[0], op.result)), op.operands[0]),)


adjoint_rules["reduce_prod"] = reduce_prod_adjoint


# ---------------------------------------------------------------- scans


def _scan(b: Builder, name: str, x: Value, op: Op, flip: bool = False) -> Value:
    """`name` along op's axis, exclusive as op, in op's direction or (flip) the opposite one."""
    return b.op(name, x, axis=op.attrs["axis"], exclusive=op.attrs["exclusive"], reverse=op.attrs["reverse"] != flip)


def cumsum_adjoint(b, op, cts):
    # d cumsum(x) = cumsum(ct) run the other way: x_j reaches every y_i scanned after it
    return (_scan(b, "cumsum", cts[0], op, flip=True),)


adjoint_rules["cumsum"] = cumsum_adjoint


def cumprod_zeros(b: Builder, op: Op) -> tuple[Value, Value, Value, Value]:
    """(x == 0, the first zero in scan order, x with its zeros replaced by 1, the products of the
    scan with the first zero replaced by 1): what keeps the derivatives of cumprod exact at zeros.
    With z the first zero, dy_i/dx_k is y_i/x_k for x_k != 0, the products but x_z for k = z,
    and 0 at a later zero (its products hold x_z)."""
    x = op.operands[0]
    zero, one = full(b, 0.0, x.type), full(b, 1.0, x.type)
    is_zero = b.op("eq", x, zero)
    none_before = b.op("cumprod", b.op("select", is_zero, zero, one), axis=op.attrs["axis"], exclusive=True,
                       reverse=op.attrs["reverse"])
    first = b.op("bitwise_and", is_zero, b.op("eq", none_before, one))
    return is_zero, first, b.op("select", is_zero, one, x), _scan(b, "cumprod", b.op("select", first, one, x), op)


def cumprod_adjoint(b, op, cts):
    # d cumprod(x)_k = Σ_{i after k} ct_i dy_i/dx_k: (reverse-scanned ct*y)/x, and at the first zero
    # the reverse-scanned ct times the products without it (cumprod_zeros)
    _, first, nonzero, without_first = cumprod_zeros(b, op)
    ct = cts[0]
    at_first = _scan(b, "cumsum", b.op("mul", ct, without_first), op, flip=True)
    elsewhere = b.op("div", _scan(b, "cumsum", b.op("mul", ct, op.result), op, flip=True), nonzero)
    return (b.op("select", first, at_first, elsewhere),)


adjoint_rules["cumprod"] = cumprod_adjoint


def matmul_adjoint(b, op, cts):
    # d(A @ B) = ct @ Bᵀ, Aᵀ @ ct (transposes of the last two axes)
    a, m = op.operands
    perm = list(range(a.type.rank - 2)) + [a.type.rank - 1, a.type.rank - 2]
    return (b.op("matmul", cts[0], b.op("transpose", m, perm=perm)),
            b.op("matmul", b.op("transpose", a, perm=perm), cts[0]))


adjoint_rules["matmul"] = matmul_adjoint
