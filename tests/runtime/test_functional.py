"""adc.grad / adc.jacobian / adc.hessian: compiled derivative kernels of a kernel. Oracles: the tape
(its own route through the VJPs), float64 central finite differences, closed forms, and the
guide's clip_gradients 2.0 for a custom gradient; plus the argument errors, raised before compiling."""
import subprocess
import sys

import numpy as np
import pytest

import adc
from tests.support.repository import SAMPLES

SOURCE = """
def loss(w: f64[N], x: f64[N]) -> f64:
    return sum(tanh(w * x)) + sum(w * w * w) / 3.0

def layer(x: f64[B, I], w: f64[I, O]) -> f64[B, O]:
    return elu(x @ w)

def scaled(x: f64[N], k: i32, unused: f64) -> f64:
    return sum(x * x) * 2.0

def mlp(x: f64[B, I], w1: f64[I, H], w2: f64[H, O]) -> f64[B, O]:
    return softmax(elu(tanh(x @ w1) @ w2), axis=1)

def centered(x: f64[B, I]) -> f64[B, I]:
    return x - mean(x, axis=0)
"""
STEP = 1e-6


@pytest.fixture(scope="module")
def m():
    return adc.compile(SOURCE, "functional.adc")


def central_difference(f, x):
    """d f(x) / d x, of shape f(x).shape + x.shape, in float64."""
    y = np.asarray(f(x))
    out = np.zeros(y.shape + x.shape)
    for j in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[j] = STEP
        out[(...,) + j] = (np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * STEP)
    return out


def test_grad_matches_the_tape_and_finite_differences(m):
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal(4), rng.standard_normal(4)
    dw, dx = adc.grad(m.loss)(w, x)
    wv, xv = adc.Variable(w), adc.Variable(x)
    with adc.GradientTape() as t:
        y = m.loss(wv, xv)
    tape_dw, tape_dx = t.gradient(y, [wv, xv])
    np.testing.assert_allclose(dw.numpy(), tape_dw.numpy(), rtol=1e-14)
    np.testing.assert_allclose(dx.numpy(), tape_dx.numpy(), rtol=1e-14)
    np.testing.assert_allclose(dw.numpy(), central_difference(lambda v: m.loss(v, x).numpy(), w), rtol=1e-7)


def test_value_and_grad_is_the_value_and_the_gradient_in_one_kernel(m):
    rng = np.random.default_rng(1)
    w, x = rng.standard_normal(4), rng.standard_normal(4)
    value, dw = adc.value_and_grad(m.loss, wrt="w")(w, x)
    assert value.shape == () and float(value) == float(m.loss(w, x))
    np.testing.assert_array_equal(dw.numpy(), adc.grad(m.loss, wrt="w")(w, x).numpy())
    assert str(adc.value_and_grad(m.scaled).signature) == \
        "scaled_value_and_grad(x: f64[N], k: i32, unused: f64) -> (f64, f64[N], f64)"
    value, dx, dunused = adc.value_and_grad(m.scaled)(np.array([1.0, -2.0]), 3, 0.5)
    assert (float(value), dx.tolist(), float(dunused)) == (10.0, [4.0, -8.0], 0.0)
    with pytest.raises(ValueError, match="layer must return a scalar"):
        adc.value_and_grad(m.layer)


def test_wrt_by_name_index_and_sequence(m):
    assert str(adc.grad(m.loss, wrt="w").signature) == "loss_grad(w: f64[N], x: f64[N]) -> f64[N]"
    assert adc.grad(m.loss, wrt=-1).signature.result_types == adc.grad(m.loss, wrt="x").signature.result_types
    assert len(adc.grad(m.loss, wrt=["x", 0]).signature.result_types) == 2
    assert adc.grad(m.loss, wrt="w") is adc.grad(m.loss, wrt=0)     # compiled once


def test_jacobian_matches_the_tape_and_finite_differences(m):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    jx, jw = adc.jacobian(m.layer)(x, w)
    assert jx.shape == (3, 2, 3, 4) and jw.shape == (3, 2, 4, 2)
    xv = adc.Variable(x)
    with adc.GradientTape() as t:
        y = m.layer(xv, w)
    np.testing.assert_allclose(jx.numpy(), t.jacobian(y, xv).numpy(), rtol=1e-14)
    np.testing.assert_allclose(jw.numpy(), central_difference(lambda v: m.layer(x, v).numpy(), w), rtol=1e-6,
                               atol=1e-9)


@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
def test_batch_jacobian_is_each_examples_jacobian(m, mode):
    rng = np.random.default_rng(5)
    x, w1, w2 = rng.standard_normal((4, 3)), rng.standard_normal((3, 6)), rng.standard_normal((6, 2))
    j = adc.batch_jacobian(m.mlp, wrt="x", mode=mode)(x, w1, w2).numpy()
    assert j.shape == (4, 2, 3)
    for b in range(4):      # example b alone, by central differences
        np.testing.assert_allclose(j[b], central_difference(lambda v: m.mlp(v[None], w1, w2).numpy()[0], x[b]),
                                   rtol=1e-6, atol=1e-9)
    xv = adc.Variable(x)
    with adc.GradientTape() as t:
        y = m.mlp(xv, w1, w2)
    np.testing.assert_allclose(j, t.batch_jacobian(y, xv).numpy(), rtol=1e-12, atol=1e-15)


def test_batch_jacobian_of_an_unconnected_parameter_is_zeros():
    k = adc.compile("def f(x: f64[B, I], y: f64[B, O]) -> f64[B, O]:\n    return y * 2.0\n", "unconnected.adc")
    j = adc.batch_jacobian(k.f, wrt="x")(np.ones((2, 3)), np.ones((2, 4))).numpy()
    np.testing.assert_array_equal(j, np.zeros((2, 4, 3)))


def test_hessian_against_finite_differences_of_the_gradient_and_symmetric(m):
    rng = np.random.default_rng(2)
    w, x = rng.standard_normal(5), rng.standard_normal(5)
    h = adc.hessian(m.loss, wrt="w")(w, x).numpy()
    assert h.shape == (5, 5)
    dloss = adc.grad(m.loss, wrt="w")
    np.testing.assert_allclose(h, central_difference(lambda v: dloss(v, x).numpy(), w), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(h, h.T, atol=1e-14)
    closed_form = np.diag(-2 * x * x * np.tanh(w * x) * (1 - np.tanh(w * x) ** 2) + 2 * w)
    np.testing.assert_allclose(h, closed_form, rtol=1e-12, atol=1e-14)


def test_derivative_kernels_compose_and_record_on_tapes(m):
    w, x = np.array([0.3, -0.7]), np.array([1.1, 0.4])
    mixed = adc.jacobian(adc.grad(m.loss, wrt="w"), wrt="x")(w, x).numpy()
    t = np.tanh(w * x)
    np.testing.assert_allclose(mixed, np.diag((1 - t * t) - 2 * w * x * t * (1 - t * t)), rtol=1e-12)
    wv = adc.Variable(w)
    with adc.GradientTape() as tape:
        g = adc.grad(m.loss, wrt="w")(wv, x)
    np.testing.assert_allclose(tape.jacobian(g, wv).numpy(), adc.hessian(m.loss)(w, x).numpy(), rtol=1e-12)


def test_unconnected_and_integer_parameters(m):
    dx, dunused = adc.grad(m.scaled)(np.array([1.0, 2.0]), 3, 0.5)
    np.testing.assert_array_equal(dx.numpy(), [4.0, 8.0])
    assert float(dunused) == 0.0
    with pytest.raises(TypeError, match="parameter 'k' of scaled is i32"):
        adc.grad(m.scaled, wrt="k")


def test_custom_gradients_are_used():
    cg = adc.compile_file(SAMPLES / "custom_gradients.adc")
    assert float(adc.grad(cg.clipped_square)(2.0)) == 2.0
    assert float(adc.grad(cg.log1pexp)(100.0)) == 1.0


@pytest.mark.parametrize("call, error, message", [
    (lambda m: adc.grad(np.sin), TypeError, "expects a compiled adc kernel"),
    (lambda m: adc.grad(m.loss, wrt="v"), ValueError, r"wrt='v' is not a parameter of loss\(w: f64\[N\], x"),
    (lambda m: adc.grad(m.loss, wrt=2), ValueError, "wrt=2 is not a parameter"),
    (lambda m: adc.grad(m.loss, wrt=[]), ValueError, "wrt names no parameter"),
    (lambda m: adc.grad(m.loss, wrt=["w", 0]), ValueError, "'w' is listed twice"),
    (lambda m: adc.grad(m.layer), ValueError, r"layer must return a scalar, it returns f64\[B,O\]"),
    (lambda m: adc.hessian(m.layer, wrt="x"), ValueError, "layer must return a scalar"),
    (lambda m: adc.hessian(m.loss, wrt=[0, 1]), TypeError, "wrt must be one parameter"),
    (lambda m: adc.batch_jacobian(m.mlp, wrt=["x"]), TypeError, "wrt must be one parameter"),
    (lambda m: adc.batch_jacobian(m.mlp, mode="fwd"), ValueError, "mode must be one of"),
    (lambda m: adc.batch_jacobian(m.loss), ValueError, r"loss must return a tensor of rank >= 2 \(examples on axis 0\), it returns f64:"),
    (lambda m: adc.batch_jacobian(m.layer, wrt="w"), ValueError,
     r"parameter 'w' \(f64\[I,O\]\) and the result \(f64\[B,O\]\) must share their leading"),
    (lambda m: adc.batch_jacobian(m.centered), adc.CompileError, r"result\[i\] must depend on 'x'\[i\] only"),
])
def test_argument_errors(m, call, error, message):
    with pytest.raises(error, match=message):
        call(m)


def test_a_no_gradients_module_refuses(tmp_path):
    src = tmp_path / "f.adc"
    src.write_text(SOURCE)
    subprocess.run([sys.executable, "-m", "adc", "compile", str(src), "-o", str(tmp_path / "f.so"),
                    "--no-gradients"], check=True)
    with pytest.raises(LookupError, match="'loss'.*--no-gradients"):
        adc.grad(adc.load(tmp_path / "f.so").loss)


def test_a_batch_jacobian_kernel_pickles_as_its_recipe_and_works_from_a_shared_object(m, tmp_path):
    import pickle

    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    kernel = adc.batch_jacobian(m.layer, wrt="x", mode="forward")
    shipped = pickle.loads(pickle.dumps(kernel))      # transformed("batch_jacobian", kernel, wrt, mode) again
    assert shipped.signature.name == "layer_batch_jacobian"
    np.testing.assert_array_equal(shipped(x, w).numpy(), kernel(x, w).numpy())
    src = tmp_path / "layer.adc"
    src.write_text(SOURCE)
    subprocess.run([sys.executable, "-m", "adc", "compile", str(src), "-o", str(tmp_path / "layer.so")], check=True)
    from_so = adc.batch_jacobian(adc.load(tmp_path / "layer.so").layer, wrt="x")     # derived from the IR it carries
    np.testing.assert_allclose(from_so(x, w).numpy(), kernel(x, w).numpy(), rtol=1e-14)
    np.testing.assert_allclose(kernel(x, w).numpy()[1], central_difference(lambda v: m.layer(v[None], w).numpy()[0], x[1]),
                               rtol=1e-6, atol=1e-9)
