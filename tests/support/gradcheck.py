"""Gradient checks against central finite differences in float64, run by the NumPy interpreter.

`check_vjp` compares ⟨t, vjp(c)⟩ with (⟨c, f(x + h t)⟩ - ⟨c, f(x - h t)⟩) / 2h for a
random direction t over every float input and a random cotangent c; inputs not in
`wrt` enter t too, so their derivative must really be zero. Order 2 runs the same
check on the VJP function (the pass applied to its own output). The comparison itself,
`assert_vjp_matches_differences`, takes any f and VJP (the fuzz tests give it compiled
kernels and a NumPy twin). `check_jacobian` builds the full Jacobian both ways for small sizes.
"""
from __future__ import annotations

import numpy as np

from adc.ir.core import Module
from adc.ir.interp import run
from adc.passes.adjoint import Gradient, vjp

STEP = 1e-5


def _is_float(a: np.ndarray) -> bool:
    return np.issubdtype(a.dtype, np.floating)


def check_vjp(module: Module, name: str, args, order: int = 1, rtol: float = 1e-6, atol: float = 1e-8,
              seed: int = 0) -> tuple[Module, Gradient]:
    """Assert the VJP of `name` (and, for order 2, of that VJP) agrees with finite differences."""
    args = [np.asarray(a) for a in args]
    module, grad = vjp(module, name)
    cts = assert_vjp_matches_differences(lambda xs: run(module, name, *xs),
                                         lambda xs, cs: run(module, grad.func.name, *xs, *cs),
                                         args, grad.wrt, np.random.default_rng(seed), rtol, atol, f"@{name}")
    if order > 1:
        check_vjp(module, grad.func.name, list(args) + cts, order - 1, rtol, atol, seed + 1)
    return module, grad


def assert_vjp_matches_differences(f, vjp, args, wrt, rng, rtol: float, atol: float, label: str,
                                   nan_allowed: bool = False) -> list:
    """Assert ⟨t, vjp(x, c)⟩ = ⟨c, f(x + h t) - f(x - h t)⟩ / 2h for random t and c; `f(xs)` gives
    the results, `vjp(xs, cs)` the cotangents of the arguments in `wrt`. Returns the c drawn.
    `nan_allowed`: x is a point where a derivative may be 0·∞ or 0/0 (an empty axis, an infinite
    result), which is NaN in adc as in JAX and PyTorch: a NaN ⟨t, vjp(c)⟩ passes."""
    outs = f(args)
    # a result that is nan or inf at x (a mean over an empty axis) has no derivative to compare: its
    # cotangent is 0 there, and its differences are left out
    cts = [np.where(np.isfinite(o), rng.standard_normal(o.shape), 0.0) if _is_float(o) else np.zeros_like(o)
           for o in outs]
    directions = [rng.standard_normal(a.shape) if _is_float(a) else None for a in args]
    grads = vjp(args, cts)
    assert [g.shape for g in grads] == [args[i].shape for i in wrt]
    adjoint = sum(np.vdot(directions[i], g) for i, g in zip(wrt, grads))
    tangent = _directional_difference(f, args, directions, cts)
    scale = sum(np.sum(np.abs(directions[i] * g)) for i, g in zip(wrt, grads))
    if nan_allowed and np.isnan(adjoint):
        return cts
    assert np.isclose(adjoint, tangent, rtol=rtol, atol=atol * (1 + scale) + _rounding_of_differences(outs, cts)), (
        f"{label}: ⟨t, vjp(c)⟩ = {adjoint!r} but finite differences give {tangent!r}")
    return cts


def _rounding_of_differences(outs, cts) -> float:
    """How far rounding alone can move the differences: f(x ± h t), computed in float64 (the moved
    arguments are), are each rounded to about eps·|f|, and the quotient divides that by 2h. A result
    far larger than its slope (a product of saturated functions, |f| ~ 1e10 with a slope ~ 1e3) moves
    the quotient more than `rtol` admits."""
    return sum(4 * np.finfo(np.float64).eps * float(np.sum(np.abs(c * np.where(np.isfinite(o), o, 0.0)))) / (2 * STEP)
               for c, o in zip(cts, outs) if _is_float(o))


def _directional_difference(f, args, directions, cts) -> float:
    # each result's difference is taken before the sum: a large result that does not move
    # would swallow the others' differences in the rounding of a sum
    def along(sign: float):
        return f([a if t is None else a + sign * STEP * t for a, t in zip(args, directions)])
    with np.errstate(invalid="ignore"):     # inf - inf where c is 0 (a result infinite at x): discarded
        return sum(np.vdot(c, np.where(c != 0, p - m, 0.0)) for c, p, m in zip(cts, along(1.0), along(-1.0))
                   if _is_float(p)) / (2 * STEP)


def check_jacobian(module: Module, name: str, args, rtol: float = 1e-6, atol: float = 1e-8) -> None:
    """Assert every row of the Jacobian from the VJP (unit cotangents) equals finite differences."""
    args = [np.asarray(a, float) for a in args]
    module, grad = vjp(module, name)
    outs = run(module, name, *args)
    for k, out in enumerate(outs):
        for index in np.ndindex(out.shape):
            cts = [np.zeros(o.shape) for o in outs]
            cts[k][index] = 1.0
            rows = run(module, grad.func.name, *args, *cts)
            for i, row in zip(grad.wrt, rows):
                expected = _partials(module, name, args, i, k, index)
                np.testing.assert_allclose(row, expected, rtol=rtol, atol=atol,
                                           err_msg=f"d result {k}{list(index)} / d arg {i}")


def _partials(module, name, args, i, k, index) -> np.ndarray:
    """d outs[k][index] / d args[i], elementwise by central differences."""
    partial = np.zeros(args[i].shape)
    for j in np.ndindex(args[i].shape):
        values = []
        for sign in (1.0, -1.0):
            moved = list(args)
            moved[i] = args[i].copy()
            moved[i][j] += sign * STEP
            values.append(run(module, name, *moved)[k][index])
        partial[j] = (values[0] - values[1]) / (2 * STEP)
    return partial


def check_jvp(module: Module, name: str, args, rtol: float = 1e-6, atol: float = 1e-8, seed: int = 0) -> None:
    """Assert the JVP of `name` gives the primal results and, for random tangents t of every float
    input, tangents equal to (f(x + h t) - f(x - h t)) / 2h elementwise; and that it agrees with the
    VJP: ⟨J·t, c⟩ = ⟨t, Jᵀ·c⟩ for a random c (the dot-product identity)."""
    from adc.passes.jvp import jvp

    args = [np.asarray(a) for a in args]
    rng = np.random.default_rng(seed)
    extended, tangent = jvp(module, name)
    directions = [rng.standard_normal(a.shape) if _is_float(a) else None for a in args]
    outs = run(module, name, *args)
    got = run(extended, tangent.func.name, *args, *(directions[i] for i in tangent.wrt))
    for expected, primal in zip(outs, got):
        np.testing.assert_array_equal(primal, expected, err_msg=f"@{name}: the JVP's primal results")
    moved = [[a if t is None else a + sign * STEP * t for a, t in zip(args, directions)] for sign in (1.0, -1.0)]
    plus, minus = run(module, name, *moved[0]), run(module, name, *moved[1])
    tangents = got[len(outs):]
    assert len(tangents) == len(tangent.outputs)
    for k, t_out in zip(tangent.outputs, tangents):
        np.testing.assert_allclose(t_out, (plus[k] - minus[k]) / (2 * STEP), rtol=rtol, atol=atol,
                                   err_msg=f"@{name}: the tangent of result {k} against finite differences")
    with_vjp, grad = vjp(module, name)
    cts = [rng.standard_normal(o.shape) if _is_float(o) else np.zeros_like(o) for o in outs]
    pulled = run(with_vjp, grad.func.name, *args, *cts)
    forward_side = sum(np.vdot(cts[k], t) for k, t in zip(tangent.outputs, tangents))
    reverse_side = sum(np.vdot(directions[i], g) for i, g in zip(grad.wrt, pulled))
    scale = sum(np.sum(np.abs(directions[i] * g)) for i, g in zip(grad.wrt, pulled))
    assert np.isclose(forward_side, reverse_side, rtol=1e-9, atol=1e-12 * (1 + scale)), (
        f"@{name}: ⟨J·t, c⟩ = {forward_side!r} but ⟨t, Jᵀ·c⟩ = {reverse_side!r}")


def central_jacobian(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """d f / d x by central differences in float64, of shape f(x).shape + x.shape: one pair of
    evaluations per element of x (for the small matrices of rule tests)."""
    columns = []
    for k in range(x.size):
        step = np.zeros(x.size)
        step[k] = h
        columns.append((f(x + step.reshape(x.shape)) - f(x - step.reshape(x.shape))) / (2 * h))
    return np.stack(columns, axis=-1).reshape(np.shape(f(x)) + x.shape)
