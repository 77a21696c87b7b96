"""`a @ b` over the shapes numerical kernels meet, both dtypes, one and two threads, side by side.

    python benchmarks/run.py matmul_grid

A small product (64³, an RNN step's 32×128×128), a layer's (256×784×512) and large square ones,
each timed in adc (`adc.set_num_threads`), NumPy's BLAS and PyTorch at the same thread count —
NumPy's threads set through threadpoolctl (`pip install threadpoolctl`; without it NumPy runs at
its own default, and the row says so). A cell prints adc's time, the best peer's and their
ratio adc/best (target <= 1.0), and each shape's last column says whether adc's two threads beat
its one (target: never slower).
"""
from __future__ import annotations

import numpy as np

import adc
from timing import optional, timed

SHAPES = ((64, 64, 64), (32, 128, 128), (256, 784, 512), (512, 512, 512), (1024, 1024, 1024),
          (2048, 2048, 2048))
THREADS = (1, 2)


def bench_matmul_grid() -> None:
    kernels = adc.compile("".join(f"def product_{t}(a: {t}[M, K], b: {t}[K, N]) -> {t}[M, N]:\n"
                                  f"    return a @ b\n" for t in ("f32", "f64")), "matmul_grid.adc")
    torch, threadpoolctl = optional("torch"), optional("threadpoolctl")
    print("\nmatmul grid: adc / best of NumPy (BLAS) and torch at the same thread count"
          + ("" if threadpoolctl else " (threadpoolctl missing: NumPy at its default threads)"))
    print(f"  {'M x K x N':>16s} {'dtype':5s}" + "".join(f" | {n} thread{'s' if n > 1 else ' '}: adc / best (ratio)"
                                                       for n in THREADS) + " | 2 vs 1")
    rng = np.random.default_rng(0)
    for m, k, n in SHAPES:
        for dtype in (np.float32, np.float64):
            a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
            kernel = getattr(kernels, f"product_f{np.dtype(dtype).itemsize * 8}")
            np.testing.assert_allclose(kernel(a, b).numpy(), a.astype(np.float64) @ b, rtol=1e-3, atol=1e-2)
            cells, adc_times = [], []
            for threads in THREADS:
                adc_time, peers = _at_threads(threads, kernel, a, b, torch, threadpoolctl)
                best = min(peers, key=peers.get)
                adc_times.append(adc_time)
                cells.append(f" | {_ms(adc_time)} / {best} {_ms(peers[best])} ({adc_time / peers[best]:4.2f})")
            verdict = "ok" if adc_times[1] <= adc_times[0] else f"2 threads {adc_times[1] / adc_times[0]:.2f}x slower"
            print(f"  {m:>4d} x {k:>4d} x {n:>4d} {np.dtype(dtype).name:7s}" + "".join(cells) + f" | {verdict}")
    adc.set_num_threads(0)
    print("  target: adc / best <= 1.0 in every cell; 2 threads never slower than 1")


def _at_threads(threads: int, kernel, a, b, torch, threadpoolctl) -> tuple[float, dict[str, float]]:
    adc.set_num_threads(threads)
    budget = dict(min_time=0.3, repeats=9) if a.shape[0] * b.shape[1] * a.shape[1] < 1 << 27 else {}
    adc_time = timed(lambda: kernel(a, b), **budget)
    peers = {}
    if threadpoolctl:
        with threadpoolctl.threadpool_limits(threads, user_api="blas"):
            peers["numpy"] = timed(lambda: a @ b, **budget)
    else:
        peers["numpy"] = timed(lambda: a @ b, **budget)
    if torch:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        peers["torch"] = timed(lambda: ta @ tb, **budget)
        torch.set_num_threads(before)
    return adc_time, peers


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.3f} ms"
