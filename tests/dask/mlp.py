"""The MLP of samples/per_example.adc, its data, and its derivatives written out in NumPy: the
reference the Dask tests compare with (independent of adc's autodiff)."""
from __future__ import annotations

import numpy as np

import adc
from tests.support.repository import SAMPLES

I, H = 3, 5


def module():
    return adc.compile_file(SAMPLES / "per_example.adc")


def data(n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """(x, t, w1, b1, w2): n examples and the parameters."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, I)), rng.standard_normal(n), rng.standard_normal((I, H)) * 0.5,
            rng.standard_normal(H) * 0.1, rng.standard_normal(H) * 0.5)


def per_example_gradients(x, t, w1, b1, w2) -> dict[str, np.ndarray]:
    """d loss_i / d (x_i, w1, b1, w2) for loss_i = (tanh(x_i w1 + b1) w2 - t_i)^2, by hand."""
    h = np.tanh(x @ w1 + b1)
    r = h @ w2 - t
    dpre = 2 * r[:, None] * w2[None, :] * (1 - h ** 2)
    return {"x": dpre @ w1.T, "w1": x[:, :, None] * dpre[:, None, :], "b1": dpre, "w2": 2 * r[:, None] * h}
