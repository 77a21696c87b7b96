"""Seeds from a coloring, and the gather that decompresses their products into the pattern.

Forward mode pushes one seed per column color through a batched JVP: seed c is 1 at the
columns of color c, and its tangent row B[c] = J·s_c holds J[i, j] at B[c(j), i]. Reverse mode
pulls one seed per row color through a batched VJP: C[c] = s_c·J holds J[i, j] at C[c(i), j].
A star-colored symmetric Hessian pushed forward holds H[i, j] at B[c(j), i] where j is the only
neighbour of i of its color, else (the coloring guarantees it) at B[c(i), j]. Each is one index
array into the flat compressed products, computed once per pattern: decompression is one gather,
values in the pattern's CSR order.

    seeds(colors)                              [colors, n] one-hot rows
    values = compressed.ravel()[forward_index(pattern, colors)]
"""
from __future__ import annotations

import numpy as np

from adc.passes.sparsity.patterns import Pattern


def seeds(colors: np.ndarray, dtype) -> np.ndarray:
    """The seed matrix [number of colors, len(colors)]: row c is 1 where colors == c."""
    count = int(colors.max()) + 1 if len(colors) else 0
    out = np.zeros((count, len(colors)), dtype)
    out[colors, np.arange(len(colors))] = 1
    return out


def forward_index(pattern: Pattern, colors: np.ndarray) -> np.ndarray:
    """Where J[i, j] is in the flat products [colors, rows] of column-colored seeds: B[c(j), i]."""
    return colors[pattern.indices] * pattern.rows + pattern.row_ids()


def reverse_index(pattern: Pattern, colors: np.ndarray) -> np.ndarray:
    """Where J[i, j] is in the flat products [colors, columns] of row-colored seeds: C[c(i), j]."""
    return colors[pattern.row_ids()] * pattern.columns + pattern.indices


def symmetric_index(pattern: Pattern, colors: np.ndarray) -> np.ndarray:
    """Where H[i, j] is in the flat products [colors, n] of star-colored seeds: B[c(j), i] when j
    is the only column of its color in row i, else B[c(i), j]."""
    rows, n, count = pattern.row_ids(), pattern.columns, int(colors.max(initial=-1)) + 1
    keys = rows * count + colors[pattern.indices]
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    direct = counts[inverse] == 1
    return np.where(direct, colors[pattern.indices] * n + rows, colors[rows] * n + pattern.indices)
