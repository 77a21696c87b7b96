"""adc.vmap: a kernel mapped over a batch by the batching pass, one compiled kernel, against a loop
over the examples in NumPy; JAX's in_axes/out_axes; composed with grad, jacobian, tapes, pickling
and adc.dask; and the errors of axes that do not fit."""
import pickle

import dask.array as da
import numpy as np
import pytest

import adc
import adc.dask
from adc.runtime.kernel import Kernel

SOURCE = """
def loss(w: f64[N], x: f64[N], t: f64) -> f64:
    return (sum(tanh(w * x)) - t) ** 2

def affine(x: f64[N], w: f64[N, M]) -> (f64[M], f64):
    y = x @ w
    return y, sum(y)
"""

rng = np.random.default_rng(0)
W, XS, TS = rng.standard_normal(4), rng.standard_normal((6, 4)), rng.standard_normal(6)
WM = rng.standard_normal((4, 3))


def loss_np(w, x, t):
    return (np.tanh(w * x).sum() - t) ** 2


def loss_grad_np(w, x, t):
    return 2 * (np.tanh(w * x).sum() - t) * (1 - np.tanh(w * x) ** 2) * x


@pytest.fixture(scope="module")
def m():
    return adc.compile(SOURCE, "vmap.adc")


def test_shared_parameters_and_batched_ones(m):
    per_example = adc.vmap(m.loss, in_axes=(None, 0, 0))
    assert isinstance(per_example, Kernel)     # compiled: one native call for the batch
    assert str(per_example.signature) == "loss_vmap(w: f64[N], x: f64[NB,N], t: f64[NB]) -> f64[NB]"
    want = [loss_np(W, x, t) for x, t in zip(XS, TS)]
    np.testing.assert_allclose(per_example(W, XS, TS).numpy(), want, rtol=1e-12)


def test_in_axes_int_batches_every_parameter(m):
    ws = rng.standard_normal((6, 4))
    got = adc.vmap(m.loss)(ws, XS, TS).numpy()
    np.testing.assert_allclose(got, [loss_np(w, x, t) for w, x, t in zip(ws, XS, TS)], rtol=1e-12)


def test_axes_other_than_the_first_and_negative_ones(m):
    moved = adc.vmap(m.affine, in_axes=(-1, None), out_axes=(1, 0))
    assert str(moved.signature) == "affine_vmap(x: f64[N,NB], w: f64[N,M]) -> (f64[M,NB], f64[NB])"
    y, s = moved(XS.T.copy(), WM)
    np.testing.assert_allclose(y.numpy(), (XS @ WM).T, rtol=1e-12)
    np.testing.assert_allclose(s.numpy(), (XS @ WM).sum(axis=1), rtol=1e-12)


def test_a_vmapped_kernel_is_vmapped_again(m):
    ts = rng.standard_normal(5)
    grid = adc.vmap(adc.vmap(m.loss, in_axes=(None, 0, None)), in_axes=(None, None, 0))
    want = [[loss_np(W, x, t) for x in XS] for t in ts]
    np.testing.assert_allclose(grid(W, XS, ts).numpy(), want, rtol=1e-12)


def test_per_example_gradients_two_ways(m):
    """vmap of grad, and the Jacobian of the vmapped loss w.r.t. the shared weights, agree with the
    analytic per-example gradients."""
    want = [loss_grad_np(W, x, t) for x, t in zip(XS, TS)]
    of_grad = adc.vmap(adc.grad(m.loss, wrt="w"), in_axes=(None, 0, 0))
    np.testing.assert_allclose(of_grad(W, XS, TS).numpy(), want, rtol=1e-10)
    jac = adc.jacobian(adc.vmap(m.loss, in_axes=(None, 0, 0)), wrt="w")
    np.testing.assert_allclose(jac(W, XS, TS).numpy(), want, rtol=1e-10)


def test_a_tape_differentiates_through_a_vmapped_kernel(m):
    w = adc.Variable(W)
    with adc.GradientTape() as tape:
        total = adc.reduce_sum(adc.vmap(m.loss, in_axes=(None, 0, 0))(w, XS, TS))
    np.testing.assert_allclose(tape.gradient(total, w).numpy(),
                               sum(loss_grad_np(W, x, t) for x, t in zip(XS, TS)), rtol=1e-10)


def test_a_vmapped_kernel_pickles_by_value(m):
    per_example = adc.vmap(m.loss, in_axes=(None, 0, 0))
    again = pickle.loads(pickle.dumps(per_example))
    assert str(again.signature) == str(per_example.signature)
    np.testing.assert_array_equal(again(W, XS, TS).numpy(), per_example(W, XS, TS).numpy())


def test_a_vmapped_kernel_runs_on_dask_blocks(m):
    per_example = adc.vmap(adc.grad(m.loss, wrt="w"), in_axes=(None, 0, 0))
    got = adc.dask.map_kernel(per_example, W, da.from_array(XS, chunks=(4, 4)), da.from_array(TS, chunks=4))
    np.testing.assert_allclose(got.compute(), [loss_grad_np(W, x, t) for x, t in zip(XS, TS)], rtol=1e-10)


@pytest.mark.parametrize("in_axes, out_axes, error, message", [
    ((0, None), 0, ValueError, r"in_axes has 2 entries for 3 parameters \(w, x, t\)"),
    (None, 0, ValueError, "batches no parameter"),
    ((None, 2, 0), 0, ValueError, r"in_axes entry 2 for parameter 'x' \(f64\[N\]\) is out of range: batched, it has 2 axes"),
    ((None, 0, -2), 0, ValueError, "in_axes entry -2 for parameter 't'"),
    ((None, 0.0, 0), 0, TypeError, "in_axes entry for parameter 'x' must be an int or None, got 0.0"),
    (0, None, TypeError, "out_axes entry for result 'result 0' must be an int .every result carries the batch axis"),
    (0, 1, ValueError, r"out_axes entry 1 for result 'result 0' \(f64\) is out of range"),
    (0, (0, 0), ValueError, "out_axes has 2 entries for 1 results"),
])
def test_axes_that_do_not_fit_are_refused(m, in_axes, out_axes, error, message):
    with pytest.raises(error, match=message):
        adc.vmap(m.loss, in_axes=in_axes, out_axes=out_axes)


def test_only_kernels_are_mapped():
    with pytest.raises(TypeError, match="adc.vmap: expects a compiled adc kernel .* got function"):
        adc.vmap(lambda x: x)
