"""Per-example gradient norms of an MLP over 2,000,000 examples, and five steps of data-parallel
SGD, on a local Dask cluster of worker processes (adc.dask; docs/dask.md).

    python samples/dask_per_example.py                                  # 2,000,000 examples
    python samples/dask_per_example.py --examples 20000 --chunk 5000    # a quick run

The examples are generated on the workers, in chunks along the batch axis, and never pass
through this process: the kernels of per_example.adc travel to the workers by value. Prints the
throughput of the per-example gradient norms, then the mean loss before each SGD step (it falls).
"""
import argparse
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
from distributed import Client, LocalCluster

import adc
import adc.dask

I, H = 3, 5
PARAMS = ("w1", "b1", "w2")


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2_000_000)
    parser.add_argument("--chunk", type=int, default=100_000, help="examples per block")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of the local cluster")
    parser.add_argument("--learning-rate", type=float, default=0.2)
    return parser.parse_args()


def gradient_norms(m, x, t, params):
    """Each example's gradient norm over every parameter: sqrt(sum_p |d loss_i / d p|^2)."""
    grads = adc.dask.per_example(m.losses, x, t, *params, wrt=PARAMS)
    return da.sqrt(sum((g ** 2).sum(axis=tuple(range(1, g.ndim))) for g in grads))


def main():
    args = arguments()
    m = adc.compile_file(Path(__file__).with_name("per_example.adc"))
    rng = np.random.default_rng(0)
    params = [rng.standard_normal((I, H)) * 0.5, np.zeros(H), rng.standard_normal(H) * 0.5]
    with LocalCluster(n_workers=args.workers, processes=True, threads_per_worker=1,
                      dashboard_address=None) as cluster, Client(cluster):
        x = da.random.default_rng(1).standard_normal((args.examples, I), chunks=(args.chunk, I))
        t = da.sin(x).sum(axis=1)                               # the regression target
        x, t = dask.persist(x, t)                               # the data stays on the workers
        start = time.perf_counter()
        norms = gradient_norms(m, x, t, params).compute()
        elapsed = time.perf_counter() - start
        print(f"per-example gradient norms of {args.examples:,} examples on {args.workers} workers: "
              f"{elapsed:.2f} s, {args.examples / elapsed:,.0f} examples/s")
        print(f"  norms: mean {norms.mean():.4f}, max {norms.max():.4f}")
        start = time.perf_counter()
        for step in range(5):
            loss = adc.dask.map_kernel(m.loss_sum, x, t, *params).sum() / args.examples
            loss, *grads = dask.compute(loss, *adc.dask.gradient(m.loss_sum, x, t, *params, reduce="mean"))
            print(f"SGD step {step}: mean loss {loss:.6f}")
            params = [p - args.learning_rate * g for p, g in zip(params, grads)]
        elapsed = time.perf_counter() - start
        print(f"five SGD steps: {elapsed:.2f} s, {5 * args.examples / elapsed:,.0f} examples/s")


if __name__ == "__main__":
    main()
