"""adc.dask.map_kernel on the threaded scheduler: blockwise results equal one direct call's,
element for element, with the chunks, dtype and shape Dask expects, computed lazily."""
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


def test_a_kernel_maps_over_blocks_exactly(m):
    x, t, w1, b1, w2 = mlp.data(1000)
    losses = adc.dask.map_kernel(m.losses, da.from_array(x, chunks=(300, -1)), da.from_array(t, chunks=300),
                                 w1, adc.constant(b1), w2)
    assert isinstance(losses, da.Array)
    assert losses.shape == (1000,) and losses.dtype == np.float64 and losses.chunks == ((300, 300, 300, 100),)
    direct = np.asarray(m.losses(x, t, w1, b1, w2))
    assert np.array_equal(losses.compute(scheduler="threads"), direct)
    assert np.allclose(direct, (np.tanh(x @ w1 + b1) @ w2 - t) ** 2, rtol=1e-13)


def test_nothing_runs_until_computed(m):
    calls = []

    def block(i):
        calls.append(i)
        return mlp.data(10, seed=i)[0]

    x = da.concatenate([da.from_delayed(dask.delayed(block)(i), shape=(10, mlp.I), dtype=np.float64)
                        for i in range(3)])
    _, t, w1, b1, w2 = mlp.data(30)
    losses = adc.dask.map_kernel(m.losses, x, da.from_array(t, chunks=10), w1, b1, w2)
    assert calls == []
    assert losses.compute(scheduler="threads").shape == (30,)
    assert sorted(calls) == [0, 1, 2]


def test_a_result_without_the_batch_dimension_has_one_row_per_block(m):
    x, t, w1, b1, w2 = mlp.data(700)
    sums = adc.dask.map_kernel(m.loss_sum, da.from_array(x, chunks=(250, -1)), da.from_array(t, chunks=250),
                               w1, b1, w2)
    assert sums.shape == (3,)
    expected = [float(m.loss_sum(x[k:k + 250], t[k:k + 250], w1, b1, w2)) for k in (0, 250, 500)]
    assert sums.compute(scheduler="threads").tolist() == expected


def test_another_batch_axis_and_several_results():
    m = adc.compile("def split(x: f32[F, B], s: f32) -> (f32[B, F], f32[F]):\n"
                    "    return transpose(x) * s, sum(x, axis=1)\n", "split.adc")
    x = np.random.default_rng(1).standard_normal((4, 90)).astype(np.float32)
    rows, sums = adc.dask.map_kernel(m.split, da.from_array(x, chunks=(4, 40)), np.float32(2.0), batch_axis=1)
    assert rows.chunks == ((40, 40, 10), (4,)) and sums.shape == (3, 4)
    assert np.array_equal(rows.compute(scheduler="threads"), x.T * np.float32(2.0))
    assert np.allclose(sums.compute(scheduler="threads").sum(axis=0), x.sum(axis=1), rtol=1e-5)
