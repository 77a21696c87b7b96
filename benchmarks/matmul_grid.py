"""`a @ b` over the shapes numerical kernels meet, both dtypes, one and two threads, side by side.

    python benchmarks/run.py matmul_grid

A small product (64³, an RNN step's 32×128×128), a layer's (256×784×512) and large square ones,
each timed in adc (`adc.set_num_threads`), NumPy's BLAS and PyTorch at the same thread count —
NumPy's threads set through threadpoolctl (`pip install threadpoolctl`; without it NumPy runs at
its own default, and the row says so). The six routes of a row (three libraries, one and two
threads) are timed in interleaved rounds (timing.interleaved), so the machine's drift moves them
alike. A cell prints adc's time, the best peer's and their ratio adc/best (target <= 1.0), and
each shape's last column compares adc's two threads with its one, round by round (target: never
slower): two threads count as slower when they took longer in every round but at most one. A
product too small to split runs the same code at both counts, and half its rounds go either way.
Products of a few rows or one column (BESIDE_THE_GRID: a vector-matrix product, a small batch, a
matrix-vector product) follow the grid.
"""
from __future__ import annotations

import statistics

import numpy as np

import adc
from timing import Route, interleaved, optional

SHAPES = ((64, 64, 64), (32, 128, 128), (256, 784, 512), (512, 512, 512), (1024, 1024, 1024),
          (2048, 2048, 2048))
# printed after the grid, outside its target: x @ W, a small batch, W @ x
BESIDE_THE_GRID = ((1, 4096, 4096), (8, 4096, 4096), (4096, 4096, 1))
THREADS = (1, 2)
SETTLE = 0.1    # seconds a multithreaded route runs before each batch (timing.interleaved)


def bench_matmul_grid() -> None:
    kernels = adc.compile("".join(f"def product_{t}(a: {t}[M, K], b: {t}[K, N]) -> {t}[M, N]:\n"
                                  f"    return a @ b\n" for t in ("f32", "f64")), "matmul_grid.adc")
    torch, threadpoolctl = optional("torch"), optional("threadpoolctl")
    print("\nmatmul grid: adc / best of NumPy (BLAS) and torch at the same thread count"
          + ("" if threadpoolctl else " (threadpoolctl missing: NumPy at its default threads)"))
    print(f"  {'M x K x N':>16s} {'dtype':5s}" + "".join(f" | {n} thread{'s' if n > 1 else ' '}: adc / best (ratio)"
                                                       for n in THREADS) + " | 2 vs 1")
    rng = np.random.default_rng(0)
    torch_threads = torch.get_num_threads() if torch else None
    blas_limits = threadpoolctl.threadpool_limits(limits=None, user_api="blas") if threadpoolctl else None
    for m, k, n in SHAPES:
        _row(kernels, rng, m, k, n, torch, threadpoolctl)
    print("  target: adc / best <= 1.0 in every cell; 2 threads never slower than 1")
    print("  a few rows (x @ W, a small batch: B streamed row by row) and one column (W @ x: rows in lanes):")
    for m, k, n in BESIDE_THE_GRID:
        _row(kernels, rng, m, k, n, torch, threadpoolctl)
    adc.set_num_threads(0)
    if torch:
        torch.set_num_threads(torch_threads)
    if blas_limits:
        blas_limits.restore_original_limits()


def _row(kernels, rng, m: int, k: int, n: int, torch, threadpoolctl) -> None:
    """One shape's line per dtype: adc against the best peer at each of THREADS, and 2 vs 1."""
    for dtype in (np.float32, np.float64):
        a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
        kernel = getattr(kernels, f"product_f{np.dtype(dtype).itemsize * 8}")
        np.testing.assert_allclose(kernel(a, b).numpy(), a.astype(np.float64) @ b, rtol=1e-3, atol=1e-2)
        budget = dict(min_time=0.3, repeats=9) if m * n * k < 1 << 27 else {}
        seconds = interleaved(_routes(kernel, a, b, torch, threadpoolctl), **budget)
        cells = []
        for threads in THREADS:
            adc_time = statistics.median(seconds[f"adc {threads}"])
            peers = {peer: statistics.median(seconds[f"{peer} {threads}"]) for peer in ("numpy", "torch")
                     if f"{peer} {threads}" in seconds}
            best = min(peers, key=peers.get)
            cells.append(f" | {_ms(adc_time)} / {best} {_ms(peers[best])} ({adc_time / peers[best]:4.2f})")
        print(f"  {m:>4d} x {k:>4d} x {n:>4d} {np.dtype(dtype).name:7s}" + "".join(cells)
              + f" | {_two_versus_one(seconds['adc 1'], seconds['adc 2'])}")


def _routes(kernel, a, b, torch, threadpoolctl) -> dict[str, Route]:
    """adc, NumPy and torch at each of THREADS, each setting its library's thread count per batch."""
    routes = {}
    for threads in THREADS:
        settle = SETTLE if threads > 1 else 0.0
        routes[f"adc {threads}"] = Route(lambda: kernel(a, b), lambda n=threads: adc.set_num_threads(n), settle)
        blas = ((lambda n=threads: threadpoolctl.threadpool_limits(limits=n, user_api="blas")) if threadpoolctl
                else (lambda: None))
        routes[f"numpy {threads}"] = Route(lambda: a @ b, blas, settle)
        if torch:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            routes[f"torch {threads}"] = Route(lambda: ta @ tb, lambda n=threads: torch.set_num_threads(n), settle)
    return routes


def _two_versus_one(one: list[float], two: list[float]) -> str:
    """adc's two threads against its one, round by round: the median ratio, and a verdict."""
    ratios = [t2 / t1 for t1, t2 in zip(one, two)]
    slower = sum(r > 1 for r in ratios)
    median = statistics.median(ratios)
    if slower >= len(ratios) - 1:
        return f"2 threads slower: {median:.2f}x, in {slower} of {len(ratios)} rounds"
    return f"ok: {median:.2f}x, slower in {slower} of {len(ratios)} rounds"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.3f} ms"
