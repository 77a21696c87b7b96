"""adc.dask.per_example and adc.dask.gradient on the threaded scheduler, against the MLP's
derivatives written out in NumPy (tests/dask/mlp.py) and against direct single-process calls.
Tolerances: the blockwise per-example rows are the direct call's rows exactly; the summed gradient
adds the blocks' partial sums in another order than one call over all the data, so it agrees to
rounding (rtol 1e-12)."""
from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

import adc
import adc.dask
from tests.dask import mlp

CHUNK = 400


@pytest.fixture(scope="module")
def m():
    return mlp.module()


@pytest.fixture(scope="module")
def problem():
    x, t, w1, b1, w2 = mlp.data(1500)
    return (x, t, w1, b1, w2), (da.from_array(x, chunks=(CHUNK, -1)), da.from_array(t, chunks=CHUNK), w1, b1, w2)


def test_per_example_gradients_of_the_parameters_and_the_inputs(m, problem):
    args, dask_args = problem
    wrt = ("w1", "b1", "w2", "x")
    got = dask.compute(*adc.dask.per_example(m.losses, *dask_args, wrt=wrt), scheduler="threads")
    reference = mlp.per_example_gradients(*args)
    for name, value in zip(wrt, got):
        assert value.shape == reference[name].shape
        np.testing.assert_allclose(value, reference[name], rtol=1e-12, atol=1e-14, err_msg=name)


def test_a_derivative_kernel_maps_like_a_direct_call(m, problem):
    args, dask_args = problem
    jacobian = adc.jacobian(m.losses, wrt=("w1", "w2"), mode="forward")
    got = dask.compute(*adc.dask.per_example(jacobian, *dask_args), scheduler="threads")
    direct = jacobian(*args)
    for value, expected in zip(got, direct):
        assert np.array_equal(value, np.asarray(expected))


def test_a_batch_jacobian_per_block():
    layer = adc.compile("def hidden(x: f64[B, I], w: f64[I, H]) -> f64[B, H]:\n    return tanh(x @ w)\n",
                        "hidden.adc")
    x, _, w, _, _ = mlp.data(900)
    got = adc.dask.per_example(layer.hidden, da.from_array(x, chunks=(250, -1)), w, wrt="x").compute(
        scheduler="threads")
    h = np.tanh(x @ w)
    expected = (1 - h ** 2)[:, :, None] * w.T[None, :, :]          # d h_b / d x_b: [B, H, I]
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_the_gradient_summed_over_blocks_is_the_one_of_all_the_data(m, problem, reduce):
    args, dask_args = problem
    got = dask.compute(*adc.dask.gradient(m.loss_sum, *dask_args, reduce=reduce, split_every=2),
                       scheduler="threads")
    direct = adc.grad(m.loss_sum, wrt=("w1", "b1", "w2"))(*args)
    reference = mlp.per_example_gradients(*args)
    scale = 1 / len(args[0]) if reduce == "mean" else 1
    for name, value, expected in zip(("w1", "b1", "w2"), got, direct):
        np.testing.assert_allclose(value, np.asarray(expected) * scale, rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(value, reference[name].sum(axis=0) * scale, rtol=1e-11, err_msg=name)


def test_one_parameter_gives_one_array(m, problem):
    _, dask_args = problem
    gw2 = adc.dask.gradient(m.loss_sum, *dask_args, wrt="w2")
    assert isinstance(gw2, da.Array) and gw2.shape == (mlp.H,)
