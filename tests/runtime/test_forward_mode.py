"""Forward mode from the runtime: adc.jvp, adc.jacfwd, adc.jacobian(mode=...), adc.hessian
(forward-over-reverse), adc.hvp — compiled kernels from the JVP pass. Oracles: float64 central
finite differences, the reverse-mode routes (adc.jacobian(mode="reverse"), reverse-over-reverse
Hessians, the tape), and the guide's custom-gradient numbers; through custom gradients in a JIT
module and in a shared object; the argument errors."""
import subprocess
import sys

import numpy as np
import pytest

import adc
from tests.support.repository import SAMPLES

SOURCE = """
def loss(w: f64[N], x: f64[N]) -> f64:
    return sum(tanh(w * x)) + sum(w * w * w) / 3.0

def layer(x: f64[B, I], w: f64[I, O], b: f64[O]) -> f64[B, O]:
    return elu(x @ w + b)

def two(x: f64[N], k: i64[N]) -> (f64[N], i64[N], f64):
    return sin(x) * f64(k), k * 2, sum(exp(x))

@custom_gradient
def scaled_sin(x: f64[N]) -> f64[N]:
    c = cos(x)
    def backward(ct: f64[N]) -> f64[N]:
        return 2.0 * ct * c
    return sin(x), backward

def through_custom(x: f64[N]) -> f64[N]:
    return scaled_sin(x * x)
"""
STEP = 1e-6


@pytest.fixture(scope="module")
def m():
    return adc.compile(SOURCE, "forward.adc")


def directional_difference(f, args, tangents):
    plus = f(*[a if t is None else a + STEP * t for a, t in zip(args, tangents)])
    minus = f(*[a if t is None else a - STEP * t for a, t in zip(args, tangents)])
    return (np.asarray(plus) - np.asarray(minus)) / (2 * STEP)


def test_jvp_matches_finite_differences_and_mirrors_the_outputs(m):
    rng = np.random.default_rng(0)
    x, k, dx = rng.standard_normal(5), np.arange(5), rng.standard_normal(5)
    outputs, tangents = adc.jvp(m.two, (x, k), (dx, None))
    for got, expected in zip(outputs, m.two(x, k)):
        np.testing.assert_array_equal(got.numpy(), expected.numpy())
    assert tangents[1] is None
    np.testing.assert_allclose(tangents[0].numpy(), directional_difference(lambda v: m.two(v, k)[0].numpy(), [x], [dx]),
                               rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(float(tangents[2]), float(np.exp(x) @ dx), rtol=1e-12)


def test_jvp_of_one_result_and_of_no_tangent(m):
    w, x = np.linspace(-1, 1, 4), np.linspace(0.5, 2, 4)
    y, dy = adc.jvp(m.loss, [w, x], [np.ones(4), None])
    assert float(y) == float(m.loss(w, x))
    np.testing.assert_allclose(float(dy), adc.grad(m.loss, wrt="w")(w, x).numpy().sum(), rtol=1e-12)
    y, dy = adc.jvp(m.loss, [w, x], [None, None])
    assert float(y) == float(m.loss(w, x)) and float(dy) == 0.0


def test_the_dot_product_identity_against_the_gradient(m):
    # ⟨J·t, c⟩ = ⟨t, Jᵀ·c⟩ with the compiled JVP and VJP of a kernel with a matmul
    rng = np.random.default_rng(1)
    args = [rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), rng.standard_normal(2)]
    tangents = [rng.standard_normal(a.shape) for a in args]
    _, moved = adc.jvp(m.layer, args, tangents)
    cotangent = rng.standard_normal((3, 2))
    variables = [adc.Variable(a) for a in args]
    with adc.GradientTape() as tape:
        y = m.layer(*variables)
    pulled = tape.gradient(y, variables, output_gradients=adc.constant(cotangent))
    np.testing.assert_allclose(np.vdot(moved.numpy(), cotangent),
                               sum(np.vdot(t, p.numpy()) for t, p in zip(tangents, pulled)), rtol=1e-12)


@pytest.mark.parametrize("wrt", ["x", "w", "b", None])
def test_jacfwd_equals_reverse_mode_and_finite_differences(m, wrt):
    rng = np.random.default_rng(2)
    args = [rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), rng.standard_normal(2)]
    forward, reverse = adc.jacfwd(m.layer, wrt=wrt)(*args), adc.jacobian(m.layer, wrt=wrt, mode="reverse")(*args)
    forward, reverse = (forward, reverse) if wrt else (forward[1], reverse[1])
    np.testing.assert_allclose(forward.numpy(), reverse.numpy(), rtol=1e-13, atol=1e-15)
    if wrt == "w":
        numeric = np.stack([directional_difference(lambda v: m.layer(args[0], v, args[2]).numpy(), [args[1]],
                                                   [np.eye(8)[j].reshape(4, 2)]) for j in range(8)], axis=-1)
        np.testing.assert_allclose(forward.numpy(), numeric.reshape(3, 2, 4, 2), rtol=1e-6, atol=1e-9)


def test_forward_over_reverse_hessian_equals_reverse_over_reverse_and_hvp(m):
    rng = np.random.default_rng(3)
    w, x, v = rng.standard_normal(5), rng.standard_normal(5), rng.standard_normal(5)
    forward = adc.hessian(m.loss, wrt="w")(w, x).numpy()
    reverse = adc.hessian(m.loss, wrt="w", mode="reverse")(w, x).numpy()
    np.testing.assert_allclose(forward, reverse, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(forward, forward.T, rtol=1e-13, atol=1e-15)
    hvp = adc.hvp(m.loss, wrt="w")
    assert str(hvp.signature) == "loss_hvp(w: f64[N], x: f64[N], dw: f64[N]) -> f64[N]"
    np.testing.assert_allclose(hvp(w, x, v).numpy(), forward @ v, rtol=1e-12)
    grad = adc.grad(m.loss, wrt="w")
    np.testing.assert_allclose(hvp(w, x, v).numpy(), directional_difference(lambda u: grad(u, x).numpy(), [w], [v]),
                               rtol=1e-6)


def test_reverse_over_forward_through_the_tape(m):
    # the JVP kernel is an ordinary kernel: a tape records it, and its gradient is H·v
    w, x, v = np.linspace(-1, 1, 4), np.linspace(0.5, 2, 4), np.linspace(1, 2, 4)
    wv = adc.Variable(w)
    with adc.GradientTape() as tape:
        _, dy = adc.jvp(m.loss, (wv, x), (v, None))
    np.testing.assert_allclose(tape.gradient(dy, wv).numpy(), adc.hessian(m.loss, wrt="w")(w, x).numpy() @ v,
                               rtol=1e-12)


def test_forward_mode_through_a_custom_gradient_follows_its_backward(m):
    x, dx = np.linspace(-1, 1, 5), np.linspace(0.5, 1.5, 5)
    _, tangent = adc.jvp(m.through_custom, (x,), (dx,))
    # the backward says d scaled_sin(u) = 2 cos(u): the JVP is 2 cos(x²) · 2x · dx, not the forward's cos
    np.testing.assert_allclose(tangent.numpy(), 2 * np.cos(x * x) * 2 * x * dx, rtol=1e-13)
    np.testing.assert_allclose(np.diagonal(adc.jacfwd(m.through_custom)(x).numpy()), 4 * np.cos(x * x) * x,
                               rtol=1e-13)


def test_forward_mode_from_a_shared_object(tmp_path):
    src = tmp_path / "forward.adc"
    src.write_text(SOURCE)
    subprocess.run([sys.executable, "-m", "adc", "compile", str(src), "-o", str(tmp_path / "forward.so")],
                   check=True)
    so = adc.load(tmp_path / "forward.so")
    x, dx = np.linspace(-1, 1, 5), np.ones(5)
    np.testing.assert_allclose(adc.jvp(so.through_custom, (x,), (dx,))[1].numpy(), 4 * np.cos(x * x) * x,
                               rtol=1e-13)
    w = np.linspace(-1, 1, 5)
    np.testing.assert_allclose(adc.hessian(so.loss, wrt="w")(w, x).numpy(),
                               adc.hessian(so.loss, wrt="w", mode="reverse")(w, x).numpy(), rtol=1e-13)


def test_the_guide_custom_gradient_is_not_linear_so_forward_mode_says_where():
    # clip_by_norm(dy, 0.5) is not linear in dy: no JVP can be its transpose
    cg = adc.compile_file(SAMPLES / "custom_gradients.adc")
    with pytest.raises(adc.CompileError, match="must be linear in its cotangents") as err:
        adc.jvp(cg.clipped_square, (2.0,), (1.0,))
    assert "custom_gradients.adc:" in str(err.value)
    assert float(adc.jvp(cg.log1pexp, (100.0,), (1.0,))[1]) == 1.0


@pytest.mark.parametrize("call, error, message", [
    (lambda m: adc.jvp(np.sin, (1.0,), (1.0,)), TypeError, "expects a compiled adc kernel"),
    (lambda m: adc.jvp(m.loss, (np.ones(2),), (np.ones(2),)), ValueError, "primals has 1 entries"),
    (lambda m: adc.jvp(m.loss, (np.ones(2), np.ones(2)), np.ones(2)), TypeError, "tangents must be a list or tuple"),
    (lambda m: adc.jvp(m.two, (np.ones(2), np.ones(2, np.int64)), (None, np.ones(2))), TypeError,
     "parameter 'k' of two is i64"),
    (lambda m: adc.jvp(m.loss, (np.ones(2), np.ones(2)), (np.ones(3), None)), ValueError, "dw"),
    (lambda m: adc.jacobian(m.layer, mode="sideways"), ValueError, "mode must be one of"),
    (lambda m: adc.hvp(m.loss, wrt=[0, 1]), TypeError, "wrt must be one parameter"),
    (lambda m: adc.hvp(m.layer, wrt="x"), ValueError, "layer must return a scalar"),
])
def test_argument_errors(m, call, error, message):
    with pytest.raises(error, match=message):
        call(m)


def recorded(x, w):
    tape = adc.GradientTape(persistent=True)
    with tape:
        tape.watch(x)
        y = adc.elu(adc.matmul(x, w)) * 2.0 + adc.reduce_sum(x * x, axis=1, keepdims=True)
    return tape, y


@pytest.mark.parametrize("chunk", [None, 3])
def test_tape_jacobians_in_forward_mode_equal_reverse_mode(chunk):
    rng = np.random.default_rng(4)
    x, w = adc.constant(rng.standard_normal((7, 5))), adc.Variable(rng.standard_normal((5, 10)))
    tape, y = recorded(x, w)
    unused = adc.constant(np.ones(3))
    forward = tape.jacobian(y, {"w": w, "x": [x, unused]}, mode="forward", parallel_iterations=chunk)
    reverse = tape.jacobian(y, {"w": w, "x": [x, unused]}, mode="reverse")
    np.testing.assert_allclose(forward["w"].numpy(), reverse["w"].numpy(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(forward["x"][0].numpy(), reverse["x"][0].numpy(), rtol=1e-13, atol=1e-15)
    assert forward["x"][1] is None and reverse["x"][1] is None
    both = [tape.batch_jacobian(y, x, mode=mode, parallel_iterations=chunk).numpy() for mode in ("forward", "reverse")]
    np.testing.assert_allclose(both[0], both[1], rtol=1e-13, atol=1e-15)
    assert both[0].shape == (7, 10, 5)


def test_the_tape_mode_rule_and_its_errors():
    from adc.runtime.jacobians import _forward

    assert _forward("auto", [], 5, 10, True) and not _forward("auto", [], 10, 10, True)
    assert not _forward("auto", [], 5, 10, False)       # experimental_use_pfor=False: one seed at a time, reverse
    x = adc.constant(np.linspace(0.1, 1, 4))

    @adc.custom_gradient
    def doubled(v):
        return v * 2.0, lambda dy: dy * 2.0

    with adc.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = adc.concat([doubled(x), x], 0)
    np.testing.assert_allclose(tape.jacobian(y, x).numpy(), np.vstack([2 * np.eye(4), np.eye(4)]))   # auto: reverse
    with pytest.raises(TypeError, match="forward mode cannot run through an @adc.custom_gradient"):
        tape.jacobian(y, x, mode="forward")
    with pytest.raises(ValueError, match="mode must be one of"):
        tape.jacobian(y, x, mode="both")


def test_cross_example_batch_jacobians_are_reverse_mode_only():
    x = adc.constant(np.linspace(0.1, 1, 6).reshape(3, 2))
    with adc.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = adc.concat([x, x * 2.0, x * 3.0], 1)       # each example's 6 outputs from its 2 inputs: auto is forward
    np.testing.assert_array_equal(tape.batch_jacobian(y, x).numpy(),
                                  tape.batch_jacobian(y, x, mode="reverse").numpy())
    with pytest.raises(ValueError, match="only reverse mode computes"):
        tape.batch_jacobian(y, x, mode="forward", allow_cross_example=True)
