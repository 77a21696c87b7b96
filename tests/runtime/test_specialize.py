"""adc.specialize: a kernel compiled for fixed sizes of its dimension symbols gives the kernel's
values and derivatives at those sizes (loops, a while loop, matrix products), refuses arguments of
other sizes with an error naming the parameter, keeps the bounds checks of a checked module,
pickles, and is compiled once per (kernel, sizes)."""
import pickle

import numpy as np
import pytest

import adc
from adc.runtime.kernel import Kernel
from tests.support.repository import SAMPLES

rng = np.random.default_rng(0)


@pytest.fixture(scope="module")
def loops():
    return adc.compile_file(SAMPLES / "loops.adc")


@pytest.fixture(scope="module")
def kernels():
    return adc.compile_file(SAMPLES / "kernels.adc")


def mlp_args(b=7, i=5, h=9, o=3):
    f32 = np.float32
    return [rng.standard_normal(s).astype(f32) for s in ((b, i), (i, h), (h,), (h, o), (o,))]


def test_values_and_gradients_at_the_bound_sizes(kernels):
    args = mlp_args()
    fixed = adc.specialize(kernels.mlp_loss, B=7, I=5, H=9, O=3)
    assert isinstance(fixed, Kernel)
    assert str(fixed.signature) == ("mlp_loss_B7_H9_I5_O3(x: f32[7,5], w1: f32[5,9], b1: f32[9], w2: f32[9,3], "
                                    "b2: f32[3]) -> f32")
    np.testing.assert_allclose(fixed(*args).numpy(), kernels.mlp_loss(*args).numpy(), rtol=1e-6)
    for got, want in zip(adc.grad(fixed)(*args), adc.grad(kernels.mlp_loss)(*args)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-7)
    tensors = [adc.Variable(a) for a in args]
    with adc.GradientTape() as tape:
        loss = fixed(*tensors)
    for got, want in zip(tape.gradient(loss, tensors), adc.grad(kernels.mlp_loss)(*args)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-7)


def test_some_symbols_bound_the_others_free(kernels):
    fixed = adc.specialize(kernels.mlp_loss, I=5, O=3)
    assert str(fixed.signature).startswith("mlp_loss_I5_O3(x: f32[B,5], w1: f32[5,H]")
    for b, h in ((1, 1), (7, 9), (33, 17)):
        args = mlp_args(b=b, h=h)
        np.testing.assert_allclose(fixed(*args).numpy(), kernels.mlp_loss(*args).numpy(), rtol=1e-6)


@pytest.mark.parametrize("steps", [0, 1, 25])
def test_loops_with_the_sizes_in_their_bodies(loops, steps):
    theta, omega = rng.standard_normal(6), rng.standard_normal(6)
    args = (theta, omega, 0.1, 9.81, 0.01, np.int64(steps))
    fixed = adc.specialize(loops.pendulum, P=6)
    for got, want in zip(fixed(*args), loops.pendulum(*args)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-13)
    xs, targets = rng.standard_normal((steps + 1, 4, 3)).astype(np.float32), rng.standard_normal((4, 2))
    weights = [rng.standard_normal(s).astype(np.float32) * 0.5 for s in ((3, 8), (8, 8), (8,), (8, 2))]
    rnn = (xs, targets.astype(np.float32), *weights)
    fixed_rnn = adc.specialize(loops.rnn_loss, T=steps + 1, B=4, H=8)
    np.testing.assert_allclose(fixed_rnn(*rnn).numpy(), loops.rnn_loss(*rnn).numpy(), rtol=1e-5)
    for got, want in zip(adc.grad(fixed_rnn, wrt="wh")(*rnn), adc.grad(loops.rnn_loss, wrt="wh")(*rnn)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-6)


def test_a_while_loop(loops):
    c = rng.standard_normal(11) * 3
    fixed = adc.specialize(loops.cubic_root, N=11)
    np.testing.assert_allclose(fixed(c, 1e-12).numpy(), loops.cubic_root(c, 1e-12).numpy(), rtol=1e-14)


def test_arguments_of_other_sizes_are_refused_naming_the_parameter(kernels):
    fixed = adc.specialize(kernels.mlp_loss, B=7, O=3)
    with pytest.raises(ValueError, match="parameter 'x' dimension 0 must be 7, got 6"):
        fixed(*mlp_args(b=6))
    with pytest.raises(ValueError, match="parameter 'w2'"):
        fixed(*mlp_args(o=4))


@pytest.mark.parametrize("sizes, message", [({"N": 3}, "no dimension symbol 'N'; its parameters' are B, I, H, O"),
                                            ({"B": -1}, "non-negative int, got -1"),
                                            ({"B": 2.0}, "non-negative int, got 2.0"),
                                            ({"B": True}, "non-negative int, got True")])
def test_sizes_that_do_not_fit(kernels, sizes, message):
    with pytest.raises(ValueError, match=message):
        adc.specialize(kernels.mlp_loss, **sizes)


def test_compiled_once_per_kernel_and_sizes(kernels):
    assert adc.specialize(kernels.mlp_loss, B=3) is adc.specialize(kernels.mlp_loss, B=np.int64(3))
    assert adc.specialize(kernels.mlp_loss, B=3) is not adc.specialize(kernels.mlp_loss, B=4)
    assert adc.specialize(kernels.mlp_loss) is kernels.mlp_loss
    with pytest.raises(TypeError, match="adc.specialize"):
        adc.specialize(np.sum, B=3)


def test_pickled_it_is_specialized_again(kernels):
    fixed = adc.specialize(kernels.mlp_loss, B=7, I=5)
    again = pickle.loads(pickle.dumps(fixed))
    assert str(again.signature) == str(fixed.signature)
    args = mlp_args()
    np.testing.assert_allclose(again(*args).numpy(), fixed(*args).numpy())


def test_a_checked_module_stays_checked(monkeypatch):
    """The checked build's test hook stores one element past the result (tests/runtime/test_bounds_checks.py):
    the specialized kernel of a checked module is checked too."""
    monkeypatch.setenv("ADC_BOUNDS_MISINDEX", "result")
    m = adc.compile("def scaled(x: f64[N]) -> f64[N]:\n    return exp(x) * 2.0\n", "scaled.adc", check_bounds=True)
    fixed = adc.specialize(m.scaled, N=13)
    with pytest.raises(adc.BoundsError, match=r"scaled_N13: mul at scaled.adc:2:12: store at index 13 is out of "
                                              r"bounds of result 0 \(extent 13\)"):
        fixed(np.arange(13.0))
