"""The VJP rule of lu_factor, and the factors and permutation matrix it shares with its JVP rule
(adc/passes/tangent_rules.py).

Part of the VJP rule table (adc/passes/adjoint_rules/__init__.py gathers the families' tables).
The pivots are piecewise constant in `a` (no cotangent flows through them, as in JAX). With
P a = L U, the tangent is d(lu) = L tril₋(M) + triu(M) U for M = L⁻¹ P da U⁻¹ (JAX's
lu_jvp_rule); its transpose, for the factor's cotangent C, is

    G = tril₋(Lᵀ C) + triu(C Uᵀ),   ā = Pᵀ L⁻ᵀ G U⁻ᵀ

written with triangular solves, matmuls and masks, so its derivative is taken by the same rules.
"""
from __future__ import annotations

from adc.ir.builder import Builder
from adc.ir.core import Op, Value
from adc.ir.types import I64
from adc.passes.adjoint_rules.linalg import swap_last, triangle
from adc.passes.adjoint_rules.rule import AdjointRule

adjoint_rules: dict[str, AdjointRule] = {}


def identity_like(b: Builder, x: Value) -> Value:
    """The identity matrix in the type of x (stacked matrices)."""
    rows, columns = (b.op("iota", axis=x.type.rank - k, dtype=I64, shape=x.type.shape) for k in (2, 1))
    return b.op("convert", b.op("eq", rows, columns), dtype=x.type.dtype)


def lu_factors(b: Builder, lu: Value) -> tuple[Value, Value]:
    """(L, U) of a factor: L its strict lower triangle plus the identity, U its upper triangle."""
    return b.op("add", triangle(b, lu, True, 0.0), identity_like(b, lu)), triangle(b, lu, False, 1.0)


def permutation_matrix(b: Builder, op: Op) -> Value:
    """P of lu_factor `op` (P a = L U), in the factor's type: P[i, j] = 1 where perm[i] = j."""
    factor, pivots = op.results
    perm = b.op("lu_pivots_to_permutation", pivots)
    rows = b.op("broadcast", perm, dims=list(range(perm.type.rank)), shape=factor.type.shape)
    columns = b.op("iota", axis=factor.type.rank - 1, dtype=I64, shape=factor.type.shape)
    return b.op("convert", b.op("eq", rows, columns), dtype=factor.type.dtype)


def solve_unit_lower(b: Builder, lu: Value, x: Value, trans: bool) -> Value:
    """L⁻¹ x (L⁻ᵀ x when `trans`), L the unit lower triangle of the factor."""
    return b.op("triangular_solve", lu, x, lower=True, trans=trans, unit_diagonal=True)


def solve_upper_right(b: Builder, lu: Value, x: Value, trans: bool) -> Value:
    """x U⁻¹ (x U⁻ᵀ when `trans`), U the upper triangle of the factor: (U⁻ᵀ xᵀ)ᵀ (or (U⁻¹ xᵀ)ᵀ)."""
    return swap_last(b, b.op("triangular_solve", lu, swap_last(b, x), lower=False, trans=not trans,
                             unit_diagonal=False))


def lu_factor_adjoint(b, op, cts):
    # G = tril₋(Lᵀ C) + triu(C Uᵀ), ā = Pᵀ L⁻ᵀ G U⁻ᵀ (the module docstring); none through the pivots
    ct, lu = cts[0], op.results[0]
    if ct is None:
        return (None,)
    lower, upper = lu_factors(b, lu)
    g = b.op("add", triangle(b, b.op("matmul", swap_last(b, lower), ct), True, 0.0),
             triangle(b, b.op("matmul", ct, swap_last(b, upper)), False, 1.0))
    moved = solve_upper_right(b, lu, solve_unit_lower(b, lu, g, True), True)
    return (b.op("matmul", swap_last(b, permutation_matrix(b, op)), moved),)


adjoint_rules["lu_factor"] = lu_factor_adjoint
