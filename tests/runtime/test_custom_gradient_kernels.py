"""@custom_gradient kernels and external functions under the tape, JIT-compiled in process: the VJP
kernel compiled from the IR calls the user's forward and backward, so it is compiled with them.
Oracles: the guide's 2.0, closed forms, and float64 central finite differences of the gradient."""
import numpy as np
import pytest

import adc
from tests.support.repository import SAMPLES


@pytest.fixture(scope="module")
def m():
    return adc.compile_file(SAMPLES / "custom_gradients.adc")


def gram_energy_gradient(w):
    return 4.0 * (w @ w.T) @ w


def test_guide_clip_gradients_through_the_tape(m):
    v = adc.Variable(2.0)
    with adc.GradientTape() as t:
        output = m.clip_gradients(v * v)
    assert float(t.gradient(output, v)) == 2.0


def test_gram_energy_first_and_second_order_against_finite_differences(m):
    w0 = np.random.default_rng(0).standard_normal((3, 3))
    w = adc.Variable(w0)
    with adc.GradientTape(persistent=True) as t2:
        with adc.GradientTape() as t1:
            y = m.gram_energy(w)
        g = t1.gradient(y, w)
    np.testing.assert_allclose(g.numpy(), gram_energy_gradient(w0), rtol=1e-12)
    hessian = t2.jacobian(g, w)
    step, fd = 1e-6, np.empty((3, 3, 3, 3))
    for k in np.ndindex(3, 3):
        e = np.zeros((3, 3))
        e[k] = step
        fd[(..., *k)] = (gram_energy_gradient(w0 + e) - gram_energy_gradient(w0 - e)) / (2 * step)
    np.testing.assert_allclose(hessian.numpy(), fd, rtol=1e-6, atol=1e-8)
    one_seed_at_a_time = t2.jacobian(g, w, experimental_use_pfor=False)
    np.testing.assert_allclose(hessian.numpy(), one_seed_at_a_time.numpy(), rtol=1e-12)


def test_external_function_gradient_through_the_tape(m):
    from math import erf, exp, pi, sqrt

    x0 = np.array([-1.5, 0.0, 0.3, 2.0])
    x = adc.Variable(x0)
    with adc.GradientTape() as t:
        y = m.gelu(x)
    want = [0.5 * (1 + erf(a / sqrt(2))) + a * exp(-a * a / 2) / sqrt(2 * pi) for a in x0]
    np.testing.assert_allclose(t.gradient(y, x).numpy(), want, rtol=1e-12)


# A backward that is deliberately NOT the derivative of the forward (x³ forward, 10 sin(x) x dy
# backward): a second derivative must differentiate the user's backward, so it equals the finite
# differences of g(x) = 10 sin(x) x, not 6x. JIT and a loaded .so alike.
NOT_THE_DERIVATIVE = '''
@custom_gradient
def odd(x: f64[N]) -> f64[N]:
    def backward(dy: f64[N]) -> f64[N]:
        return 10.0 * sin(x) * x * dy
    return x * x * x, backward

def total(x: f64[N]) -> f64:
    return sum(odd(x * 0.5))
'''


def user_gradient(x):
    """d total / dx by the user's backward: 0.5 * 10 sin(x/2) (x/2)."""
    return 5.0 * np.sin(x / 2) * (x / 2)


# A backward using a value its forward saves (e = exp(-|x|)): outer tapes differentiate the
# backward through e, itself a function of x.
SAVES_A_VALUE = '''
@custom_gradient
def stable_softplus(x: f64[N]) -> f64[N]:
    e = exp(-abs(x))
    def backward(dy: f64[N]) -> f64[N]:
        return dy * where(x > 0.0, 1.0 / (1.0 + e), e / (1.0 + e))
    return maximum(x, 0.0) + log1p(e), backward
'''


@pytest.fixture(scope="module", params=["jit", "so"])
def custom_module(request, tmp_path_factory):
    source = NOT_THE_DERIVATIVE + SAVES_A_VALUE
    if request.param == "jit":
        return adc.compile(source, "custom.adc")
    from adc import compiler, driver

    out = tmp_path_factory.mktemp("custom") / "custom.so"
    driver.write_shared_object(compiler.elaborate(source, "custom.adc"), out)
    return adc.load(out)


def nested_tape_derivatives(kernel, x0, first):
    """The gradient and Hessian of `kernel` at x0 through nested tapes, checked against `first`
    (the expected gradient, a NumPy function) and its float64 central differences."""
    x = adc.Variable(x0)
    with adc.GradientTape() as t2:
        with adc.GradientTape() as t1:
            y = kernel(x)
        g = t1.gradient(y, x)
    h = t2.jacobian(g, x).numpy()
    np.testing.assert_allclose(g.numpy(), first(x0), rtol=1e-14)
    step = 1e-6
    fd = [(first(x0 + step * e) - first(x0 - step * e)) / (2 * step) for e in np.eye(x0.size)]
    np.testing.assert_allclose(h, np.array(fd).T, rtol=1e-7, atol=1e-9)
    return h


def test_second_order_differentiates_the_users_backward(custom_module):
    x0 = np.array([-1.3, 0.4, 2.2])
    h = nested_tape_derivatives(custom_module.total, x0, user_gradient)
    assert not np.allclose(np.diag(h), 6 * (x0 / 2) * 0.25)     # not the forward's own second derivative



def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# kernel -> the first three derivatives of the function whose sum the tapes differentiate, in
# closed form: softplus' = sigmoid, sigmoid' = s(1-s), s(1-s)' = s(1-s)(1-2s); total's are those
# of its backward, 2.5 x sin(x/2).
ORDERS = {
    "stable_softplus": (sigmoid, lambda x: sigmoid(x) * (1 - sigmoid(x)),
                        lambda x: sigmoid(x) * (1 - sigmoid(x)) * (1 - 2 * sigmoid(x))),
    "total": (user_gradient, lambda x: 2.5 * np.sin(x / 2) + 1.25 * x * np.cos(x / 2),
              lambda x: 2.5 * np.cos(x / 2) - 0.625 * x * np.sin(x / 2)),
}


@pytest.mark.parametrize("name", ORDERS)
def test_three_orders_through_nested_tapes(custom_module, name):
    """Each order against its closed form, and orders 2 and 3 against float64 central differences
    of the order below; the targets are computed while the outer tapes record."""
    x0 = np.array([0.3, -1.2, 2.0])
    x, kernel = adc.Variable(x0), getattr(custom_module, name)
    with adc.GradientTape() as t3:
        with adc.GradientTape() as t2:
            with adc.GradientTape() as t1:
                y = adc.reduce_sum(kernel(x))
            g1 = t1.gradient(y, x)
            s1 = adc.reduce_sum(g1)
        g2 = t2.gradient(s1, x)
        s2 = adc.reduce_sum(g2)
    g3 = t3.gradient(s2, x)
    step, closed = 1e-5, ORDERS[name]
    for order, got in enumerate((g1, g2, g3)):
        np.testing.assert_allclose(got.numpy(), closed[order](x0), rtol=1e-12)
        if order:
            below = closed[order - 1]
            fd = (below(x0 + step) - below(x0 - step)) / (2 * step)
            np.testing.assert_allclose(got.numpy(), fd, rtol=1e-7)


def test_a_target_computed_after_the_outer_tape_ended_warns(custom_module):
    """As in TensorFlow, reduce_sum(g) run after t2's block is not recorded, so no gradient flows
    from it; adc says so instead of returning None in silence."""
    x = adc.Variable(np.array([0.3, -1.2, 2.0]))
    with adc.GradientTape() as t2:
        with adc.GradientTape() as t1:
            y = adc.reduce_sum(custom_module.stable_softplus(x))
        g = t1.gradient(y, x)
    with pytest.warns(UserWarning, match=r"the target was not recorded by this tape \(computed after its "
                                         r"`with` block ended"):
        assert t2.gradient(adc.reduce_sum(g), x) is None


# Gradients of external functions that use each other (sinh <-> cosh) or their own function
# (exp2' = ln 2 exp2): each order applies a gradient again. Oracle: closed forms and float64
# central differences of the first derivative.
MUTUAL = '''
extern def sinh(x: f64) -> f64
extern def cosh(x: f64) -> f64
extern def exp2(x: f64) -> f64

@gradient(sinh)
def sinh_grad(x: f64, dy: f64) -> f64:
    return dy * cosh(x)

@gradient(cosh)
def cosh_grad(x: f64, dy: f64) -> f64:
    return dy * sinh(x)

@gradient(exp2)
def exp2_grad(x: f64, dy: f64) -> f64:
    return dy * 0.6931471805599453 * exp2(x)

def f(x: f64[N]) -> f64:
    return sum(sinh(x) * cosh(x) + exp2(x))
'''


def test_external_gradients_may_call_each_other_and_their_own_function():
    m = adc.compile(MUTUAL, "mutual.adc")
    x0 = np.array([0.3, -1.2, 0.8])

    def first(v):
        return np.cosh(2 * v) + np.log(2) * np.exp2(v)

    h = nested_tape_derivatives(m.f, x0, first)
    np.testing.assert_allclose(adc.hessian(m.f)(x0).numpy(), h, rtol=1e-14)


# Names of the backward's parameters as in a Python closure: its cotangent may shadow an input,
# and a saved value may carry the name of an input it replaced, or a name Python reserves (each
# was a ValueError when the module was loaded: @f_backward had two parameters x, or one `yield`).
SHADOWING = '''
@custom_gradient
def scale(x: f64[N]) -> f64[N]:
    def backward(x: f64[N]) -> f64[N]:
        return 3.0 * x
    return x, backward

@custom_gradient
def double(x: f64) -> f64:
    x = 2.0 * x
    yield = x
    def backward(dy: f64) -> f64:
        return dy * yield
    return x, backward
'''


def test_the_backward_may_shadow_an_input_and_save_a_value_of_its_name():
    m = adc.compile(SHADOWING, "shadowing.adc")
    x, v = adc.constant(np.array([1.0, -2.0])), adc.constant(np.array(1.5))
    with adc.GradientTape(persistent=True) as t:
        t.watch([x, v])
        y, z = m.scale(x), m.double(v)
    np.testing.assert_array_equal(t.gradient(y, x, output_gradients=np.array([0.5, 2.0])).numpy(), [1.5, 6.0])
    assert float(t.gradient(z, v)) == 3.0       # dy times the saved x, 2 * 1.5
