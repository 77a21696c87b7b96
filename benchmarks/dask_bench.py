"""The `dask` benchmark: per-example gradient norms of samples/per_example.adc's MLP, in examples
per second, by direct kernel calls in one process, and through adc.dask on Dask's synchronous
and threaded schedulers and on a LocalCluster of two worker processes; the Dask path's overhead
over direct calls at 100,000-example chunks is the synchronous route's time over the direct one's
(same work, same thread), the median of runs made in pairs side by side; the same for the calls
written by hand as dask.delayed tasks, Dask's plainest route; and its floor, what Dask alone
adds: the same norms through Dask over per-example gradients computed beforehand."""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np


SAMPLES = Path(__file__).resolve().parent.parent / "samples"
EXAMPLES, CHUNK = 800_000, 100_000
PARAMS = ("w1", "b1", "w2")
PAIRS = 9


def seconds(fn, repeats: int = 3) -> float:
    """Median wall time of `repeats` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def paired_times(baseline, other, pairs: int = PAIRS) -> list[tuple[float, float]]:
    """(baseline's time, other's time) of each pair, run back to back (the order alternating): the
    machine's drift between two separate medians (here up to 15% a minute) moves both alike."""
    timed = []
    for k in range(pairs):
        times = {}
        for name, fn in ((("baseline", baseline), ("other", other)) if k % 2 == 0 else
                         (("other", other), ("baseline", baseline))):
            start = time.perf_counter()
            fn()
            times[name] = time.perf_counter() - start
        timed.append((times["baseline"], times["other"]))
    return timed


def norms_of(grads) -> np.ndarray:
    """Each example's gradient norm over every parameter, from per-example gradients (NumPy or Dask)."""
    total = sum((g ** 2).sum(axis=tuple(range(1, g.ndim))) for g in grads)
    return total ** 0.5


def bench_dask() -> None:
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster

    import adc.dask

    m = adc.compile_file(SAMPLES / "per_example.adc")
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((EXAMPLES, 3)), rng.standard_normal(EXAMPLES)
    params = [rng.standard_normal((3, 5)) * 0.5, np.zeros(5), rng.standard_normal(5) * 0.5]
    jacobian = adc.jacobian(m.losses, wrt=PARAMS, mode="forward")

    def direct():
        return np.concatenate([norms_of([np.asarray(g) for g in jacobian(x[k:k + CHUNK], t[k:k + CHUNK], *params)])
                               for k in range(0, EXAMPLES, CHUNK)])

    def dask_norms(dx, dt):
        return norms_of(adc.dask.per_example(m.losses, dx, dt, *params, wrt=PARAMS))

    dx, dt = da.from_array(x, chunks=(CHUNK, -1)), da.from_array(t, chunks=CHUNK)
    reference = direct()
    routes = {"direct calls, one process": seconds(direct)}
    for scheduler in ("synchronous", "threads"):
        assert np.array_equal(dask_norms(dx, dt).compute(scheduler=scheduler), reference)
        routes[f"adc.dask, {scheduler} scheduler"] = seconds(lambda: dask_norms(dx, dt).compute(scheduler=scheduler))
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster):
        cx, ct = dask.persist(dx, dt)       # the examples are in the workers' memory, as in this process's
        assert np.array_equal(dask_norms(cx, ct).compute(), reference)
        routes["adc.dask, LocalCluster of 2 workers"] = seconds(lambda: dask_norms(cx, ct).compute())
    print(f"\nPer-example gradient norms, MLP 3-5-1 (samples/per_example.adc), {EXAMPLES:,} examples "
          f"in {CHUNK:,}-example chunks: examples/s")
    for name, s in routes.items():
        print(f"  {name:38s} {EXAMPLES / s:12,.0f} examples/s   {s * 1e3:8.1f} ms")
    pairs = paired_times(direct, lambda: dask_norms(dx, dt).compute(scheduler="synchronous"))
    ratios = [through_dask / alone for alone, through_dask in pairs]
    print(f"  Dask path overhead over direct calls (synchronous / direct, median of {PAIRS} runs side by side): "
          f"{statistics.median(ratios):.3f}x  [{min(ratios):.3f} - {max(ratios):.3f}]")
    by_hand = delayed_norms(jacobian, x, t, params)
    assert np.allclose(by_hand(), reference)
    by_hand_ratios = [through_dask / alone for alone, through_dask in paired_times(direct, by_hand)]
    print(f"  the same calls as dask.delayed tasks, written by hand: {statistics.median(by_hand_ratios):.3f}x  "
          f"[{min(by_hand_ratios):.3f} - {max(by_hand_ratios):.3f}]")
    grads = [np.asarray(g) for g in jacobian(x, t, *params)]
    floor = dask_floor(da, grads, statistics.median(alone for alone, _ in pairs))
    print(f"  its floor, Dask's own part: the norms of precomputed per-example gradients through Dask "
          f"take {floor['added'] * 1e3:.1f} ms more than through NumPy (the gradients' blocks as tasks); "
          f"a path whose kernel calls cost nothing more than direct ones would print {floor['ratio']:.3f}x")
    print("  target: overhead <= 1.2x")


def delayed_norms(jacobian, x: np.ndarray, t: np.ndarray, params: list):
    """The overhead route's work written by hand: a dask.delayed task per chunk calling the forward
    Jacobian on its slice, its results joined by da.concatenate, the same norms, synchronously."""
    import dask
    import dask.array as da

    shapes = [np.shape(g)[1:] for g in jacobian(x[:1], t[:1], *params)]

    def chunk(k: int) -> tuple:
        return tuple(np.asarray(g) for g in jacobian(x[k:k + CHUNK], t[k:k + CHUNK], *params))

    def norms():
        calls = [dask.delayed(chunk)(k) for k in range(0, EXAMPLES, CHUNK)]
        grads = [da.concatenate([da.from_delayed(call[j], shape=(min(CHUNK, EXAMPLES - k), *shape), dtype=x.dtype)
                                 for call, k in zip(calls, range(0, EXAMPLES, CHUNK))]) for j, shape in enumerate(shapes)]
        return norms_of(grads).compute(scheduler="synchronous")
    return norms


def dask_floor(da, grads: list[np.ndarray], direct: float) -> dict[str, float]:
    """What Dask alone adds to the benchmark's route: its norms over per-example gradients computed
    beforehand, each block a task that returns it (as adc.dask's call of a block does), against
    NumPy's norms of the same blocks; paired runs, as the overhead's."""
    import dask

    blocks = [[g[k:k + CHUNK] for g in grads] for k in range(0, EXAMPLES, CHUNK)]
    lazy = [da.concatenate([da.from_delayed(dask.delayed(lambda b=b, j=j: b[j])(), shape=b[j].shape, dtype=b[j].dtype)
                            for b in blocks]) for j in range(len(grads))]

    def through_numpy():
        return np.concatenate([norms_of(b) for b in blocks])

    def through_dask():
        return norms_of(lazy).compute(scheduler="synchronous")

    assert np.allclose(through_dask(), through_numpy())
    added = statistics.median(b - a for a, b in paired_times(through_numpy, through_dask))
    return {"added": added, "ratio": (direct + added) / direct}
