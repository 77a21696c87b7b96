"""logaddexp, an op added as a record (adc/ir/ops/elementwise.py), its VJP and its vector math: every
surface derives it — the builtin, the interpreter, forward mode, batching, the eager adc.math function
and NumPy's ufunc on tensors and tapes."""
import numpy as np
import pytest

import adc
from adc.ir import interp
from adc.frontend import compile_source

SOURCE = """
def softplus_pair(x: f64[N], y: f64[N]) -> f64:
    return sum(logaddexp(x, 2.0 * y) + logaddexp(x, 0.0))
def lse32(x: f32[N], y: f32[N]) -> f32[N]:
    return logaddexp(x, y)
"""


@pytest.fixture(scope="module")
def module():
    return adc.compile(SOURCE)


def test_the_builtin_agrees_with_numpy_and_the_interpreter(module):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(1000) * 20, rng.standard_normal(1000) * 20
    want = np.sum(np.logaddexp(x, 2 * y) + np.logaddexp(x, 0.0))
    assert float(module.softplus_pair(x, y)) == pytest.approx(want, rel=1e-14)
    (interpreted,) = interp.run(compile_source(SOURCE, "lse.adc"), "softplus_pair", x, y)
    assert float(interpreted) == pytest.approx(want, rel=1e-14)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    np.testing.assert_allclose(module.lse32(x32, y32), np.logaddexp(x32, y32), rtol=2e-6, atol=1e-6)


def test_its_gradient_is_the_softmax_of_its_arguments_in_every_route(module):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(6), rng.standard_normal(6)
    dx = np.exp(x - np.logaddexp(x, 2 * y)) + np.exp(x - np.logaddexp(x, 0.0))
    dy = 2 * np.exp(2 * y - np.logaddexp(x, 2 * y))
    gx, gy = adc.grad(module.softplus_pair)(x, y)
    np.testing.assert_allclose(gx, dx, rtol=1e-13)
    np.testing.assert_allclose(gy, dy, rtol=1e-13)
    forward = adc.jacfwd(module.softplus_pair)(x, y)
    np.testing.assert_allclose(forward[0], dx, rtol=1e-13)
    hessian = np.asarray(adc.hessian(module.softplus_pair)(x, y))
    p, q = np.exp(x - np.logaddexp(x, 2 * y)), np.exp(x - np.logaddexp(x, 0.0))
    np.testing.assert_allclose(np.diag(hessian), p * (1 - p) + q * (1 - q), rtol=1e-12)


def test_the_eager_function_and_numpys_ufunc_record_on_a_tape():
    x = adc.Variable(np.array([0.5, -3.0, 40.0]))
    y = np.array([1.0, 2.0, -40.0])
    with adc.GradientTape(persistent=True) as tape:
        eager = adc.math.reduce_sum(adc.math.logaddexp(x, y))
        through_numpy = np.sum(np.logaddexp(x, y))
    assert float(eager) == pytest.approx(np.sum(np.logaddexp(x.numpy(), y)))
    want = np.exp(x.numpy() - np.logaddexp(x.numpy(), y))
    np.testing.assert_allclose(tape.gradient(eager, x), want, rtol=1e-14)
    np.testing.assert_allclose(tape.gradient(through_numpy, x), want, rtol=1e-14)


def test_a_batch_jacobian_goes_through_it(module):
    kernel = adc.compile("def f(x: f64[B, N]) -> f64[B, N]:\n    return logaddexp(x, 1.0 - x)\n").f
    x = np.random.default_rng(2).standard_normal((3, 4))
    jac = np.asarray(adc.batch_jacobian(kernel)(x))
    r = np.logaddexp(x, 1 - x)
    want = np.exp(x - r) - np.exp(1 - x - r)
    np.testing.assert_allclose(np.einsum("bii->bi", jac), want, rtol=1e-13)
    assert np.count_nonzero(jac - np.einsum("bi,ij->bij", np.einsum("bii->bi", jac), np.eye(4))) == 0
