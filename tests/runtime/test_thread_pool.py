"""Kernels on the runtime library's thread pool: many Python threads calling at once, a forked child,
and adc.set_num_threads, each giving exactly the serial results."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import adc

SOURCE = """
def scaled_tanh(x: f64[N], a: f64) -> f64[N]:
    return tanh(a * x) + x

def rows(x: f32[B, K], w: f32[K, M]) -> f32[B, M]:
    return x @ w
"""
N = 1 << 19          # past the parallel threshold


@pytest.fixture(scope="module")
def m():
    return adc.compile(SOURCE, "pool.adc")


def expected(x, a):
    return np.tanh(a * x) + x


def test_many_threads_calling_kernels_at_once(m):
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(N) for _ in range(8)]
    wanted = [m.scaled_tanh(x, 0.5).numpy() for x in inputs]
    failures = []

    def worker(k: int) -> None:
        for _ in range(20):
            if not np.array_equal(m.scaled_tanh(inputs[k], 0.5).numpy(), wanted[k]):
                failures.append(k)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads) and not failures
    np.testing.assert_allclose(wanted[0], expected(inputs[0], 0.5), rtol=1e-14, atol=1e-14)


def test_every_thread_count_gives_the_same_bits(m):
    x = np.random.default_rng(1).standard_normal(N)
    a = np.random.default_rng(2).standard_normal((640, 96)).astype(np.float32)
    w = np.random.default_rng(3).standard_normal((96, 80)).astype(np.float32)
    try:
        adc.set_num_threads(1)
        serial, product = m.scaled_tanh(x, 0.25).numpy(), m.rows(a, w).numpy()
        for n in (2, 3, 8, 0):
            adc.set_num_threads(n)
            np.testing.assert_array_equal(m.scaled_tanh(x, 0.25).numpy(), serial)
            np.testing.assert_array_equal(m.rows(a, w).numpy(), product)
    finally:
        adc.set_num_threads(0)
    with pytest.raises(TypeError, match="set_num_threads: n must be an int"):
        adc.set_num_threads("2")


FORKED = f"""
import os, signal, sys
import numpy as np
import adc
m = adc.compile({SOURCE!r}, "pool.adc")
x = np.linspace(-3, 3, {N})
want = np.tanh(0.5 * x) + x
assert np.allclose(m.scaled_tanh(x, 0.5).numpy(), want, rtol=1e-14)   # the parent's pool is running
for _ in range(5):
    pid = os.fork()
    if pid == 0:
        signal.alarm(30)                                                  # a deadlock fails, not hangs
        ok = all(np.allclose(m.scaled_tanh(x, 0.5).numpy(), want, rtol=1e-14) for _ in range(50))
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
print("forks ok")
"""


def test_the_pool_survives_fork():
    result = subprocess.run([sys.executable, "-c", FORKED], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "ADC_NUM_THREADS": "2"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "forks ok"
