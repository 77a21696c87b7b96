"""Guide, "Input gradient regularization", in float64 against central finite differences.

The nested-tape result d||d out/dx|| / d(w, b), out = sum(layer(x)**2), is compared with
finite differences of the same magnitude computed by NumPy alone.
"""
import numpy as np
import pytest

import adc

LAYERS = """
def dense_relu(x: f64[B, I], w: f64[I, O], b: f64[O]) -> f64[B, O]:
    return relu(x @ w + b)

def dense_softplus(x: f64[B, I], w: f64[I, O], b: f64[O]) -> f64[B, O]:
    return softplus(x @ w + b)
"""

ACTIVATIONS = {
    # name: (activation, its derivative)
    "dense_relu": (lambda z: np.maximum(z, 0), lambda z: (z > 0).astype(float)),
    "dense_softplus": (lambda z: np.logaddexp(z, 0), lambda z: 1 / (1 + np.exp(-z))),
}


def magnitude(x, w, b, name):
    act, dact = ACTIVATIONS[name]
    z = x @ w + b
    g1 = (2 * act(z) * dact(z)) @ w.T     # d sum(act(z)**2) / dx
    return np.linalg.norm(g1)


def finite_differences(x, w, b, name, h=1e-6):
    grads = []
    for p in (w, b):
        g = np.zeros_like(p)
        for i in np.ndindex(p.shape):
            old = p[i]
            p[i] = old + h
            up = magnitude(x, w, b, name)
            p[i] = old - h
            down = magnitude(x, w, b, name)
            p[i] = old
            g[i] = (up - down) / (2 * h)
        grads.append(g)
    return grads


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_input_gradient_regularization_matches_finite_differences(name):
    rng = np.random.default_rng(7)
    x_np, w_np, b_np = rng.standard_normal((7, 5)), rng.standard_normal((5, 10)) * 0.5, rng.standard_normal(10) * 0.1
    layer = getattr(adc.compile(LAYERS, "layers64.adc"), name)
    x = adc.constant(x_np)
    kernel, bias = adc.Variable(w_np), adc.Variable(b_np)
    with adc.GradientTape() as t2:
        with adc.GradientTape(watch_accessed_variables=False) as t1:
            t1.watch(x)
            out = adc.reduce_sum(layer(x, kernel, bias) ** 2)
        g1 = t1.gradient(out, x)
        g1_mag = adc.norm(g1)
    dg = t2.gradient(g1_mag, [kernel, bias])
    assert [d.shape for d in dg] == [(5, 10), (10,)]
    np.testing.assert_allclose(float(g1_mag), magnitude(x_np, w_np, b_np, name), rtol=1e-12)
    for got, want in zip(dg, finite_differences(x_np, w_np.copy(), b_np.copy(), name)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-7)
    if name == "dense_softplus":
        assert np.abs(np.asarray(dg[1])).max() > 1e-3  # the second-order terms are really there
