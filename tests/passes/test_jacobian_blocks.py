"""Compiled Jacobians whose seeds would make a value larger than both the result and the budget
(adc/passes/jacobian.py, `_bounded`) take their seeds in blocks: the blocks' function gives what all
the seeds at once give, whatever the block size (the last block overlapping the one before), in
the interpreter and natively. Oracles: closed forms in float64 and central differences."""
from __future__ import annotations

import numpy as np
import pytest

from adc.frontend import compile_source
from adc.ir.interp import run
from adc.passes import jacobian as compositions
from tests.support.native import jit_module

SOURCE = """
def shifted(x: f64[N], d: f64) -> f64[N]:
    return cumsum(x * d)

def loss(x: f64[N], d: f64) -> f64:
    return sum(cumsum(x * d) * x)

def rows(x: f64[B, K]) -> f64[B, 1]:
    return sum(cumsum(x * x, axis=1), axis=1, keepdims=True)
"""

rng = np.random.default_rng(7)
X, D, XB = rng.standard_normal(7), 0.6, rng.standard_normal((3, 5))


def expected_shifted() -> np.ndarray:
    """d cumsum(x d) / d d = cumsum(x)."""
    return np.cumsum(X)


def expected_loss_gradient() -> np.ndarray:
    """loss = d/2 ((sum x)^2 + sum x^2): its gradient is d (sum x + x)."""
    return D * (X.sum() + X)


def expected_rows() -> np.ndarray:
    """d sum_i cumsum(x^2, axis=1)[b, i] / d x[b, j] = 2 x[b, j] (K - j)."""
    return (2 * XB * (5 - np.arange(5)))[:, None, :]


# (what, build, args, expected): each makes a value of a seed per element times the elements (a cumsum of the
# seeds' tangents or cotangents), larger than its result
CASES = [
    ("jacobian of shifted w.r.t. d, reverse",
     lambda m: compositions.jacobian(m, "shifted", [1], mode="reverse")[:2], (X, D), lambda: [expected_shifted()]),
    ("jacobian of loss w.r.t. x, forward",
     lambda m: compositions.jacobian(m, "loss", [0], mode="forward")[:2], (X, D), lambda: [expected_loss_gradient()]),
    ("batch jacobian of rows, forward",
     lambda m: compositions.batch_jacobian(m, "rows", 0, mode="forward"), (XB,), lambda: [expected_rows()]),
]


@pytest.mark.parametrize("budget", [1, 200, 1000, 1 << 40])   # one seed a block ... all in one block
@pytest.mark.parametrize("what, build, args, expected", CASES, ids=[c[0] for c in CASES])
def test_blocks_of_seeds_give_what_all_seeds_at_once_give(what, build, args, expected, budget, monkeypatch):
    monkeypatch.setattr(compositions, "JACOBIAN_BYTES", budget)
    module, func = build(compile_source(SOURCE, "blocks.adc"))
    blocks = f"{func.name}_blocks"
    assert blocks in module.funcs, f"{what}: a seed makes a value larger than the result, so blocks are built"
    whole = compositions.all_seeds_at_once(module, func)
    for got, at_once, want in zip(run(module, blocks, *args), run(module, whole.name, *args), expected(), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got, at_once, rtol=1e-12, atol=1e-12)
    for got, want in zip(run(module, func.name, *args), expected(), strict=True):      # the `if` picks one
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("budget", [1, 300])
def test_blocks_run_natively_and_differentiate_again(budget, mode, monkeypatch):
    """The blocks' loop compiles, and its own Jacobian (through the `if`, the loop, the scan and the
    scatters) is right: d cumsum(x) / dx = [j <= i], against central differences too."""
    monkeypatch.setattr(compositions, "JACOBIAN_BYTES", budget)
    module, func = compositions.jacobian(compile_source(SOURCE, "blocks.adc"), "shifted", [1], mode="reverse")[:2]
    module, again = compositions.jacobian(module, func.name, [0], mode=mode)[:2]
    native = jit_module(module.reachable(again.name))
    np.testing.assert_allclose(run(module, func.name, X, D)[0], np.cumsum(X), rtol=1e-12, atol=1e-12)
    got = getattr(native, again.name)(X, D).numpy()
    np.testing.assert_allclose(got, np.tril(np.ones((7, 7))), rtol=1e-12, atol=1e-12)
    step = 1e-6
    differences = np.stack([(np.cumsum(X + step * e) - np.cumsum(X - step * e)) / (2 * step) for e in np.eye(7)],
                           axis=1)
    np.testing.assert_allclose(got, differences, rtol=1e-7, atol=1e-8)


def test_a_jacobian_whose_values_stay_within_the_result_has_no_blocks():
    """An elementwise function's Jacobian (diagonal, its seeds folded) has no value larger than its
    result: one function, as before, no `if`."""
    module, func, _ = compositions.jacobian(compile_source("def f(x: f64[N]) -> f64[N]:\n    return tanh(x)\n",
                                                           "flat.adc"), "f", mode="reverse")
    assert f"{func.name}_blocks" not in module.funcs and "if" not in [op.name for op in func.ops]
