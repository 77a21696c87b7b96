"""adc.dask on a `distributed` LocalCluster of two worker processes, started and stopped here:
kernels compiled from source and loaded from a .so reach the workers by value, the results equal
single-process ones, and a worker killed mid-computation is recovered by Dask."""
from __future__ import annotations

import operator
import os
import shutil
import signal
import time

import dask
import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster, futures_of, wait

import adc
import adc.dask
from tests.dask import mlp

CHUNK = 300


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def m():
    return mlp.module()


def chunked(x, t):
    return da.from_array(x, chunks=(CHUNK, -1)), da.from_array(t, chunks=CHUNK)


def test_blockwise_results_and_derivatives_equal_single_process_ones(client, m):
    x, t, w1, b1, w2 = mlp.data(1000)
    dx, dt = chunked(x, t)
    losses = adc.dask.map_kernel(m.losses, dx, dt, w1, b1, w2)
    per_example = adc.dask.per_example(m.losses, dx, dt, w1, b1, w2, wrt=("w1", "x"))
    total = adc.dask.gradient(m.loss_sum, dx, dt, w1, b1, w2, reduce="mean")
    got_losses, (got_w1, got_x), got_total = client.gather(client.compute([losses, per_example, total]))
    assert np.array_equal(got_losses, np.asarray(m.losses(x, t, w1, b1, w2)))
    jacobian = adc.jacobian(m.losses, wrt="w1", mode="forward")
    assert np.array_equal(got_w1, np.concatenate([np.asarray(jacobian(x[k:k + CHUNK], t[k:k + CHUNK], w1, b1, w2))
                                                  for k in range(0, 1000, CHUNK)]))
    np.testing.assert_allclose(got_x, mlp.per_example_gradients(x, t, w1, b1, w2)["x"], rtol=1e-12, atol=1e-14)
    direct = adc.grad(m.loss_sum, wrt=("w1", "b1", "w2"))(x, t, w1, b1, w2)
    for value, expected in zip(got_total, direct):
        np.testing.assert_allclose(value, np.asarray(expected) / 1000, rtol=1e-12)    # another order of sums


def test_a_batch_jacobian_on_the_cluster_equals_the_closed_form(client):
    layer = adc.compile("def hidden(x: f64[B, I], w: f64[I, H]) -> f64[B, H]:\n    return tanh(x @ w)\n",
                        "hidden.adc")
    x, _, w, _, _ = mlp.data(900)
    jacobians = adc.dask.per_example(layer.hidden, da.from_array(x, chunks=(CHUNK, -1)), w, wrt="x")
    h = np.tanh(x @ w)
    np.testing.assert_allclose(client.compute(jacobians).result(), (1 - h ** 2)[:, :, None] * w.T[None],
                               rtol=1e-12, atol=1e-14)      # d h_b / d x_b: [B, H, I]


def test_every_worker_took_part(client, m):
    x, t, w1, b1, w2 = mlp.data(1200)
    losses = adc.dask.map_kernel(m.losses, *chunked(x, t), w1, b1, w2).persist()
    wait(losses)
    where = client.who_has(futures_of(losses))
    assert len({worker for workers in where.values() for worker in workers}) == 2
    assert np.array_equal(losses.compute(), np.asarray(m.losses(x, t, w1, b1, w2)))


def test_a_kernel_from_source_needs_no_file_on_the_workers(client):
    k = adc.compile("def scaled(x: f64[B, N], s: f64) -> f64[B, N]:\n    return exp(-x * s)\n",
                    "/nonexistent/scaled.adc")
    x = np.random.default_rng(2).standard_normal((500, 4))
    got = adc.dask.map_kernel(k.scaled, da.from_array(x, chunks=(100, -1)), 0.25).compute()
    assert np.array_equal(got, np.asarray(k.scaled(x, 0.25)))


def test_a_kernel_from_a_shared_object_ships_as_its_bytes(client, kernels_so, tmp_path):
    so = tmp_path / "shipped.so"
    shutil.copy(kernels_so, so)
    module = adc.load(so)
    x = np.random.default_rng(3).standard_normal(1000).astype(np.float32)
    got = adc.dask.map_kernel(module.sigmoid_shift, da.from_array(x, chunks=250), np.float32(0.5)).compute()
    assert np.array_equal(got, np.asarray(module.sigmoid_shift(x, np.float32(0.5))))
    mapped = client.run(_mapped_files)      # the workers opened the bytes sent, not the user's file
    assert all(str(so) not in files for files in mapped.values())
    assert any("adc-shipped" in files for files in mapped.values())


def _mapped_files() -> str:
    with open("/proc/self/maps") as f:
        return f.read()


def test_a_worker_killed_mid_computation_is_recovered(client, m):
    x, t, w1, b1, w2 = mlp.data(1800)
    blocks = [da.from_delayed(dask.delayed(operator.getitem)([dask.delayed(time.sleep, pure=False)(0.3),
                                                              x[k:k + CHUNK]], 1), shape=(CHUNK, mlp.I),
                              dtype=np.float64) for k in range(0, 1800, CHUNK)]
    dx = da.concatenate(blocks)
    pids = client.run(os.getpid)
    futures = client.compute(adc.dask.gradient(m.loss_sum, dx, da.from_array(t, chunks=CHUNK), w1, b1, w2))
    victim = _busy_worker(client)
    os.kill(pids[victim], signal.SIGKILL)
    got = client.gather(futures)
    direct = adc.grad(m.loss_sum, wrt=("w1", "b1", "w2"))(x, t, w1, b1, w2)
    for value, expected in zip(got, direct):
        np.testing.assert_allclose(value, np.asarray(expected), rtol=1e-12)
    client.wait_for_workers(2, timeout=60)
    assert pids[victim] not in client.run(os.getpid).values()


def _busy_worker(client, timeout: float = 30.0) -> str:
    """The address of a worker running a task now."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = [worker for worker, tasks in client.processing().items() if tasks]
        if busy:
            return busy[0]
        time.sleep(0.02)
    raise AssertionError("no task started")
