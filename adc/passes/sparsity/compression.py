"""Seeds from a coloring, and the gather that decompresses their products into the pattern.

Forward mode pushes one seed per column color through a batched JVP: seed c is 1 at the
columns of color c, and its tangent row B[c] = J·s_c holds J[i, j] at B[c(j), i]. Reverse mode
pulls one seed per row color through a batched VJP: C[c] = s_c·J holds J[i, j] at C[c(i), j].
A star-colored symmetric Hessian pushed forward holds H[i, j] at B[c(j), i] where j is the only
neighbour of i of its color, else (the coloring guarantees it) at B[c(i), j]. Each is one index
array into the flat compressed products, computed once per pattern: decompression is one gather,
values in the pattern's CSR order. An acyclically colored one needs fewer seeds, its entries
recovered by substitution instead (substitution.py), for a caller that can run that loop.
`compress` picks the coloring: acyclic for a symmetric pattern when asked and fewer colors than
star, else star; for others, forward mode when the columns need no more colors than the rows.

    seeds(colors)                              [colors, n] one-hot rows
    values = compressed.ravel()[forward_index(pattern, colors)]
    compress(pattern, "auto")                  # Compression(colors, forward, index)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adc.passes.sparsity.coloring import acyclic_coloring, column_coloring, row_coloring, star_coloring
from adc.passes.sparsity.patterns import Pattern
from adc.passes.sparsity.substitution import Substitution, substitution

MODES = ("auto", "forward", "reverse")


@dataclass(frozen=True)
class Compression:
    """How one pattern's nonzeros are computed: `colors`, a color per seeded element (the wrt
    input's forward, the result's in reverse); `index`, per nonzero in the pattern's CSR order,
    its place in the flat products of the seeds; or, for an acyclic coloring, no index but the
    `substitution` that recovers them."""

    colors: np.ndarray
    forward: bool
    index: np.ndarray | None
    substitution: Substitution | None = None

    @property
    def count(self) -> int:
        """The number of seeds: of colors."""
        return int(self.colors.max()) + 1 if len(self.colors) else 0


def compress(pattern: Pattern, mode: str = "auto", symmetric: bool = False, substitute: bool = False) -> Compression:
    """The coloring of `pattern` for `mode` (one of MODES; a symmetric pattern is star-colored,
    or with `substitute` acyclically colored when that takes fewer seeds, and pushed forward)
    and its decompression."""
    if symmetric:
        colors = star_coloring(pattern)
        fewer = acyclic_coloring(pattern) if substitute else colors
        if fewer.max(initial=-1) < colors.max(initial=-1):
            return Compression(fewer, True, None, substitution(pattern, fewer))
        return Compression(colors, True, symmetric_index(pattern, colors))
    by_columns = column_coloring(pattern) if mode != "reverse" else None
    by_rows = row_coloring(pattern) if mode != "forward" else None
    if by_rows is None or (by_columns is not None and by_columns.max(initial=-1) <= by_rows.max(initial=-1)):
        return Compression(by_columns, True, forward_index(pattern, by_columns))
    return Compression(by_rows, False, reverse_index(pattern, by_rows))


def seeds(colors: np.ndarray, dtype) -> np.ndarray:
    """The seed matrix [number of colors, len(colors)]: row c is 1 where colors == c (-1: an
    element no seed carries)."""
    count = int(colors.max(initial=-1)) + 1
    out = np.zeros((count, len(colors)), dtype)
    seeded = np.flatnonzero(colors >= 0)
    out[colors[seeded], seeded] = 1
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
