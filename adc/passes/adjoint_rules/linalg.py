"""The VJP rules of cholesky and triangular_solve, and the triangle masks they share with their
JVP rules (adc/passes/tangent_rules.py).

Part of the VJP rule table (adc/passes/adjoint_rules/__init__.py gathers the families' tables).
Each rule is ordinary IR — triangular solves, matmuls, transposes, masks made of iota and
select — so its derivative is taken by the same rules (second order). Both ops read one
triangle of `a`, so its cotangent lies in that triangle:

    %x = triangular_solve %a, %b {lower = true, trans = false, ...}    ct of %x = %ct    ==>
    %1 = triangular_solve %a, %ct {lower = true, trans = true, ...}          (ct of %b)
    %2 = matmul %1, %x'  ;  %3 = neg (lower triangle of %2)                     (ct of %a; %x' = xᵀ)
"""
from __future__ import annotations

from adc.ir.builder import Builder, full
from adc.ir.core import Value
from adc.ir.types import I64
from adc.passes.adjoint_rules.rule import AdjointRule

adjoint_rules: dict[str, AdjointRule] = {}


def swap_last(b: Builder, x: Value) -> Value:
    """x with its last two axes swapped (each stacked matrix transposed)."""
    rank = x.type.rank
    return b.op("transpose", x, perm=list(range(rank - 2)) + [rank - 1, rank - 2])


def triangle(b: Builder, x: Value, lower: bool, diagonal: float) -> Value:
    """The strictly `lower` (or upper) triangle of each matrix of x, its diagonal times `diagonal`
    (1, ½ or 0), zeros elsewhere."""
    rows, columns = (b.op("iota", axis=x.type.rank - k, dtype=I64, shape=x.type.shape) for k in (2, 1))
    zeros = full(b, 0.0, x.type)
    on_diagonal = x if diagonal == 1 else zeros if diagonal == 0 else b.op("mul", x, full(b, diagonal, x.type))
    inside = b.op("gt" if lower else "lt", rows, columns)
    return b.op("select", inside, x, b.op("select", b.op("eq", rows, columns), on_diagonal, zeros))


def phi(b: Builder, x: Value) -> Value:
    """Murray's Φ: the lower triangle of x with its diagonal halved."""
    return triangle(b, x, True, 0.5)


def solve_lower(b: Builder, factor: Value, rhs: Value, trans: bool) -> Value:
    """L⁻¹ rhs, or L⁻ᵀ rhs when `trans`, for a lower factor L."""
    return b.op("triangular_solve", factor, rhs, lower=True, trans=trans, unit_diagonal=False)


def cholesky_adjoint(b, op, cts):
    # Murray 2016: P = Φ(Lᵀ L̄), S̄ = L⁻ᵀ P L⁻¹; a is read from its lower triangle, so ā = Φ(S̄ + S̄ᵀ)
    factor = op.result
    p = phi(b, b.op("matmul", swap_last(b, factor), cts[0]))
    s_t = solve_lower(b, factor, swap_last(b, solve_lower(b, factor, p, True)), True)     # S̄ᵀ = L⁻ᵀ Pᵀ L⁻¹
    return (phi(b, b.op("add", s_t, swap_last(b, s_t))),)


adjoint_rules["cholesky"] = cholesky_adjoint


def solve_mask(b: Builder, op, x: Value) -> Value:
    """x restricted to the entries of `a` that triangular_solve `op` reads."""
    return triangle(b, x, op.attrs["lower"], 0.0 if op.attrs["unit_diagonal"] else 1.0)


def triangular_solve_adjoint(b, op, cts):
    # x = op(a)⁻¹ b: b̄ = op(a)⁻ᵀ x̄; ā = -b̄ xᵀ (op = identity) or -x b̄ᵀ (op = transpose), in a's triangle
    a, x = op.operands[0], op.result
    rhs = b.op("triangular_solve", a, cts[0], **{**op.attrs, "trans": not op.attrs["trans"]})
    outer = (b.op("matmul", x, swap_last(b, rhs)) if op.attrs["trans"]
             else b.op("matmul", rhs, swap_last(b, x)))
    return (b.op("neg", solve_mask(b, op, outer)), rhs)


adjoint_rules["triangular_solve"] = triangular_solve_adjoint
