"""Derivatives at the seams of builtins composed from kinked pieces (maximum, abs, select, a max
shift, a square root of a sum of squares): the builtin's own derivative where it is smooth
through the seam, the documented convention (docs/autodiff.md) where it is kinked; first and
second order, by every route: compiled kernels (adc.grad, adc.jacfwd, adc.hessian both ways,
adc.hvp) and eager ops (GradientTape, ForwardAccumulator, nested tapes).

Oracles: hand-derived values at the seam, and, where the builtin is smooth there, float64 central
differences (first and second order) of the compiled kernel's value and of the IR run by the
interpreter (tests/support/gradcheck.py). A new builtin with a seam is one row of SEAMS. End to
end: logistic regression's first step from zero weights against its gradient written in NumPy.
"""
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import adc
from adc.frontend import compile_source
from tests.support.gradcheck import check_jvp, check_vjp

STEP1, STEP2 = 1e-6, 1e-4      # central differences of first and second order


@dataclass(frozen=True)
class Seam:
    """sum(`expression`) of z: f64[N] at z = `at`, its gradient and Hessian there (hand-derived);
    `eager` computes the expression from an eager tensor; `smooth`: the builtin is differentiable
    twice at the seam, so finite differences check the values too (else they are a convention)."""

    expression: str
    eager: Callable
    at: list
    gradient: list
    hessian: list
    smooth: bool


SEAMS = {
    # smooth through the seam: softplus = log(1 + e^z), s' = σ(z) = 1/2, s'' = σ(1 - σ) = 1/4 at 0
    "softplus": Seam("softplus(z)", adc.nn.softplus, [0.0, -0.0], [0.5, 0.5], [[0.25, 0.0], [0.0, 0.25]], True),
    # the max shift of the softmax family at a tie: p = 1/n, d lse = p, d² lse = diag(p) - p pᵀ
    "logsumexp": Seam("logsumexp(z)", adc.math.reduce_logsumexp, [0.0, 0.0], [0.5, 0.5],
                      [[0.25, -0.25], [-0.25, 0.25]], True),
    # d p0 = p0 (e0 - p); d² p0 = p0 (e0 - p)(e0 - p)ᵀ - p0 (diag(p) - p pᵀ), p = 1/3
    "softmax": Seam("softmax(z)[0]", lambda z: adc.nn.softmax(z)[0], [0.0, 0.0, 0.0], [2 / 9, -1 / 9, -1 / 9],
                    [[2 / 27, -1 / 27, -1 / 27], [-1 / 27, -1 / 27, 2 / 27], [-1 / 27, 2 / 27, -1 / 27]], True),
    # d (z0 - lse) = e0 - p; d² = -(diag(p) - p pᵀ)
    "log_softmax": Seam("log_softmax(z)[0]", lambda z: adc.nn.log_softmax(z)[0], [0.0, 0.0], [0.5, -0.5],
                        [[-0.25, 0.25], [0.25, -0.25]], True),
    # t * c / maximum(norm(t), c) is t itself near 0 < c
    "clip_by_norm": Seam("clip_by_norm(z, 1.0)", lambda z: adc.clip_by_norm(z, 1.0), [0.0, 0.0], [1.0, 1.0],
                         [[0.0, 0.0], [0.0, 0.0]], True),
    # kinked at the seam: the conventions. The tip of a cone takes abs's: 0, and 0 for the Hessian
    "norm": Seam("norm(z)", adc.norm, [0.0, 0.0], [0.0, 0.0], [[0.0, 0.0], [0.0, 0.0]], False),
    "hypot": Seam("hypot(z, 0.0)", lambda z: np.hypot(z, 0.0), [0.0, -0.0], [0.0, 0.0], [[0.0, 0.0], [0.0, 0.0]],
                  False),
    "abs": Seam("abs(z)", np.abs, [0.0], [0.0], [[0.0]], False),
    "relu": Seam("relu(z)", adc.nn.relu, [0.0], [0.0], [[0.0]], False),
    # elu is smooth once at 0 (both sides' slopes are 1); its second derivative is the left side's, e^0
    "elu": Seam("elu(z)", adc.nn.elu, [0.0], [1.0], [[1.0]], False),
    # ties of maximum and minimum go to the first operand, so clip passes the gradient at its bounds
    "maximum": Seam("maximum(z, 0.0)", lambda z: np.maximum(z, 0.0), [0.0], [1.0], [[0.0]], False),
    "minimum": Seam("minimum(z, 0.0)", lambda z: np.minimum(z, 0.0), [0.0], [1.0], [[0.0]], False),
    "clip": Seam("clip(z, 0.0, 1.0)", lambda z: np.clip(z, 0.0, 1.0), [0.0, 1.0], [1.0, 1.0],
                 [[0.0, 0.0], [0.0, 0.0]], False),
    # tied extrema of a reduction share the cotangent
    "max": Seam("max(z)", adc.reduce_max, [0.0, 0.0], [0.5, 0.5], [[0.0, 0.0], [0.0, 0.0]], False),
}
NAMES = list(SEAMS)
# one kernel `seam_<name>(z) = sum(expression)` per seam
SOURCE = "".join(f"def seam_{name}(z: f64[N]) -> f64:\n    return sum({s.expression})\n\n" for name, s in SEAMS.items())


@pytest.fixture(scope="module")
def kernels():
    module = adc.compile(SOURCE, "seams.adc")
    return {name: getattr(module, f"seam_{name}") for name in SEAMS}


def expected(name: str):
    s = SEAMS[name]
    return np.array(s.at), np.array(s.gradient), np.array(s.hessian)


def direction(n: int) -> np.ndarray:
    return np.random.default_rng(n).standard_normal(n)


@pytest.mark.parametrize("name", NAMES)
def test_compiled_first_order_reverse_and_forward(kernels, name):
    z, gradient, _ = expected(name)
    np.testing.assert_allclose(adc.grad(kernels[name])(z).numpy(), gradient, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(adc.jacfwd(kernels[name])(z).numpy(), gradient, rtol=1e-12, atol=1e-15)
    v = direction(z.size)
    _, tangent = adc.jvp(kernels[name], (z,), (v,))
    np.testing.assert_allclose(float(tangent), gradient @ v, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", NAMES)
def test_compiled_second_order(kernels, name):
    z, _, hessian = expected(name)
    v = direction(z.size)
    np.testing.assert_allclose(adc.hessian(kernels[name])(z).numpy(), hessian, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(adc.hessian(kernels[name], mode="reverse")(z).numpy(), hessian,
                               rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(adc.hvp(kernels[name])(z, v).numpy(), hessian @ v, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", NAMES)
def test_eager_first_and_second_order_on_tapes(name):
    z, gradient, hessian = expected(name)
    x = adc.Variable(z)
    with adc.GradientTape() as outer:
        with adc.GradientTape() as inner:
            y = adc.reduce_sum(SEAMS[name].eager(x))
        g = inner.gradient(y, x)
    np.testing.assert_allclose(g.numpy(), gradient, rtol=1e-12, atol=1e-15)
    zero = adc.UnconnectedGradients.ZERO     # the gradient of abs, relu, ... is piecewise constant
    np.testing.assert_allclose(outer.jacobian(g, x, unconnected_gradients=zero).numpy(), hessian, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", NAMES)
def test_eager_forward_mode_and_forward_over_backward(name):
    z, gradient, hessian = expected(name)
    x, v = adc.Variable(z), direction(z.size)
    with adc.ForwardAccumulator(x, adc.constant(v)) as acc:
        with adc.GradientTape() as tape:
            y = adc.reduce_sum(SEAMS[name].eager(x))
        g = tape.gradient(y, x)
    np.testing.assert_allclose(float(acc.jvp(y)), gradient @ v, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(acc.jvp(g, unconnected_gradients="zero").numpy(), hessian @ v, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", [n for n in NAMES if SEAMS[n].smooth])
def test_smooth_seams_by_the_interpreter_against_central_differences(name):
    # the IR itself, run by the NumPy interpreter: VJP (first and second order) and JVP along
    # random directions against central differences at the seam
    module = compile_source(SOURCE, "seams.adc")
    z = np.array(SEAMS[name].at)
    check_vjp(module, f"seam_{name}", [z], order=2)
    check_jvp(module, f"seam_{name}", [z])


@pytest.mark.parametrize("name", [n for n in NAMES if SEAMS[n].smooth])
def test_the_values_expected_at_smooth_seams_are_central_differences(kernels, name):
    z, gradient, hessian = expected(name)
    f = kernels[name]
    n = z.size
    unit = np.eye(n)
    differences = [(float(f(z + STEP1 * e)) - float(f(z - STEP1 * e))) / (2 * STEP1) for e in unit]
    np.testing.assert_allclose(differences, gradient, rtol=1e-6, atol=1e-9)
    second = [[(float(f(z + STEP2 * (a + b))) - float(f(z + STEP2 * (a - b))) - float(f(z - STEP2 * (a - b)))
                + float(f(z - STEP2 * (a + b)))) / (4 * STEP2 ** 2) for b in unit] for a in unit]
    np.testing.assert_allclose(second, hessian, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- end to end

LOGISTIC = """
def loss(w: f64[D], b: f64, x: f64[N, D], y: f64[N]) -> f64:
    z = x @ w + b
    return mean(softplus(z) - y * z)
"""


def logistic_data():
    """Ten examples, three of them positive: at zero weights σ(0) - y averages 0.5 - 0.3 = 0.2."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((10, 3))
    y = np.array([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0])
    return x, y


def test_logistic_regression_first_step_from_zero_weights():
    # the negative log-likelihood mean(softplus(z) - y z), z = x w + b, has the gradient
    # xᵀ(σ(z) - y)/n, (σ(z) - y) averaged: written out in NumPy, with σ(0) = 1/2
    x, y = logistic_data()
    w, b = np.zeros(3), np.float64(0.0)
    residual = 1 / (1 + np.exp(-(x @ w + b))) - y
    loss = adc.compile(LOGISTIC, "logistic.adc").loss
    dw, db = adc.grad(loss, wrt=["w", "b"])(w, b, x, y)
    np.testing.assert_allclose(float(db), 0.2, rtol=1e-12)
    np.testing.assert_allclose(dw.numpy(), x.T @ residual / len(y), rtol=1e-12, atol=1e-15)
    # second order: xᵀ diag(σ'(0) = 1/4) x / n
    np.testing.assert_allclose(adc.hessian(loss, wrt="w")(w, b, x, y).numpy(), 0.25 * x.T @ x / len(y),
                               rtol=1e-12, atol=1e-15)
    # the same model in eager ops, on a tape
    tw, tb = adc.Variable(w), adc.Variable(b)
    with adc.GradientTape() as tape:
        z = adc.matmul(x, tw) + tb
        nll = adc.reduce_mean(adc.nn.softplus(z) - y * z)
    eager_dw, eager_db = tape.gradient(nll, [tw, tb])
    np.testing.assert_allclose(float(eager_db), 0.2, rtol=1e-12)
    np.testing.assert_allclose(eager_dw.numpy(), x.T @ residual / len(y), rtol=1e-12, atol=1e-15)
