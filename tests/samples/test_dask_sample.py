"""samples/dask_per_example.py runs on a small problem (its own local cluster) and prints what
NumPy computes for the same examples: the per-example gradient norms, then falling SGD losses."""
import re
import subprocess
import sys

import dask.array as da
import numpy as np

from tests.dask import mlp
from tests.support.repository import SAMPLES

EXAMPLES, CHUNK = 20_000, 5_000


def reference():
    """The sample's data (generated the same way) and initial parameters, and NumPy's figures."""
    x = da.random.default_rng(1).standard_normal((EXAMPLES, 3), chunks=(CHUNK, 3))
    x, t = x.compute(), da.sin(x).sum(axis=1).compute()
    rng = np.random.default_rng(0)
    w1, b1, w2 = rng.standard_normal((3, 5)) * 0.5, np.zeros(5), rng.standard_normal(5) * 0.5
    grads = mlp.per_example_gradients(x, t, w1, b1, w2)
    norms = np.sqrt(sum((grads[p] ** 2).reshape(EXAMPLES, -1).sum(axis=1) for p in ("w1", "b1", "w2")))
    loss = np.mean((np.tanh(x @ w1 + b1) @ w2 - t) ** 2)
    return norms, loss


def test_the_dask_sample_prints_numpys_figures():
    result = subprocess.run([sys.executable, str(SAMPLES / "dask_per_example.py"), "--examples", str(EXAMPLES),
                             "--chunk", str(CHUNK)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(r"per-example gradient norms of 20,000 examples on 2 workers: [\d.]+ s, [\d,]+ examples/s", out)
    norms, loss = reference()
    assert f"norms: mean {norms.mean():.4f}, max {norms.max():.4f}" in out
    losses = [float(v) for v in re.findall(r"SGD step \d: mean loss ([\d.]+)", out)]
    assert len(losses) == 5 and losses[0] == float(f"{loss:.6f}")
    assert all(later < earlier for earlier, later in zip(losses, losses[1:]))
    assert re.search(r"five SGD steps: [\d.]+ s, [\d,]+ examples/s", out)
