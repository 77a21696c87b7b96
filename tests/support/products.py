"""Matrix products checked against NumPy: sizes around the gemm's block boundaries, and the
rounding bound a computed product must keep to."""
from __future__ import annotations

import numpy as np


def around(*sizes: int) -> list[int]:
    """Each size, one less and one more (at least 1), in order."""
    return sorted({s + d for s in sizes for d in (-1, 0, 1) if s + d >= 1})


def assert_product(got, a, b) -> None:
    """Within a dot product's rounding bound (sqrt(K) growth) of the float64 product."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    eps = np.finfo(a.dtype).eps
    bound = 4 * eps * np.sqrt(max(a.shape[-1], 1)) * (np.abs(a64) @ np.abs(b64)) + 1e-300
    assert got.shape == (a64 @ b64).shape and np.all(np.abs(np.asarray(got) - a64 @ b64) <= bound)
