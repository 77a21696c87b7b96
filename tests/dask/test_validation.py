"""Bad inputs are refused when the graph is built, before any task runs, with an error naming the
parameter (and axis, or both parameters and their chunks)."""
from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

import adc
import adc.dask
from tests.dask import mlp


@pytest.fixture(scope="module")
def m():
    return mlp.module()


def never_computed(shape, dtype=np.float64):
    """A Dask array whose one task fails the test if anything runs it."""
    def run():
        raise AssertionError("a task ran")
    return da.from_delayed(dask.delayed(run)(), shape=shape, dtype=dtype)


def args(n=100, x_chunks=(50, -1), t_chunks=50):
    x, t, w1, b1, w2 = mlp.data(n)
    return [da.from_array(x, chunks=x_chunks), da.from_array(t, chunks=t_chunks), w1, b1, w2]


def test_chunks_along_a_non_batch_axis(m):
    with pytest.raises(ValueError, match=r"parameter 'x' is split along axis 1 \(chunks \(2, 1\)\); only its batch axis 0"):
        adc.dask.map_kernel(m.losses, *args(x_chunks=(50, 2)))


def test_mismatched_batch_chunks(m):
    with pytest.raises(ValueError, match=r"'x' and 't' are chunked differently along the batch axis: "
                                         r"\(50, 50\) and \(30, 30, 30, 10\)"):
        adc.dask.per_example(m.losses, *args(t_chunks=30), wrt="w1")


def test_a_block_shape_the_kernel_refuses(m):
    a = args()
    a[2] = np.zeros((mlp.I + 1, mlp.H))
    with pytest.raises(ValueError, match=r"loss_sum: parameter 'w1' dimension 0 \(I\) is 4, but I = 3 from parameter 'x'"):
        adc.dask.gradient(m.loss_sum, *a)


def test_dtype_and_rank(m):
    a = args()
    a[1] = a[1].astype(np.float32)
    with pytest.raises(TypeError, match="parameter 't' expects dtype f64"):
        adc.dask.map_kernel(m.losses, *a)
    a = args()
    a[3] = a[3].astype(np.float32)
    with pytest.raises(TypeError, match="parameter 'b1' expects dtype f64"):
        adc.dask.map_kernel(m.losses, *a)
    a = args()
    a[1] = a[0]
    with pytest.raises(ValueError, match=r"parameter 't' expects rank 1"):
        adc.dask.map_kernel(m.losses, *a)


def test_nothing_runs_before_the_error(m):
    x, t = never_computed((100, mlp.I)), never_computed((100,)).rechunk(30)
    with pytest.raises(ValueError, match="chunked differently"):
        adc.dask.map_kernel(m.losses, x, t, *mlp.data(1)[2:])


def test_what_cannot_be_blockwise(m):
    with pytest.raises(TypeError, match="no argument of losses is a Dask array"):
        adc.dask.map_kernel(m.losses, *mlp.data(10))
    with pytest.raises(TypeError, match="takes 5 arguments, got 2"):
        adc.dask.map_kernel(m.losses, *args()[:2])
    with pytest.raises(TypeError, match="expects a compiled adc kernel"):
        adc.dask.map_kernel(np.sum, *args())
    with pytest.raises(ValueError, match="parameter 'x' is a Dask argument, split in blocks"):
        adc.dask.gradient(m.loss_sum, *args(), wrt="x")
    with pytest.raises(ValueError, match="reduce must be one of 'sum', 'mean'"):
        adc.dask.gradient(m.loss_sum, *args(), reduce="max")
    with pytest.raises(ValueError, match="has no batch dimension B"):
        adc.dask.per_example(m.loss_sum, *args())
    outer = adc.compile("def outer(x: f64[B]) -> f64[B, B]:\n    return x[:, None] * x[None, :]\n", "outer.adc")
    with pytest.raises(ValueError, match=r"result 0 of outer is f64\[B,B\]: its batch dimension B must be one whole axis"):
        adc.dask.map_kernel(outer.outer, da.ones(10, chunks=5))
    fixed = adc.compile("def fixed(x: f64[4, N]) -> f64[N]:\n    return sum(x, axis=0)\n", "fixed.adc")
    with pytest.raises(ValueError, match=r"parameter 'x' is f64\[4,N\]: its batch axis 0 must be a dimension symbol"):
        adc.dask.map_kernel(fixed.fixed, da.ones((4, 6), chunks=(2, 6)))
