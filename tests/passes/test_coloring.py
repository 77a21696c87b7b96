"""Colorings (adc/passes/sparsity/coloring.py) and decompression (compression.py): valid on random
patterns, optimal on bands, fast on large ones; compressed products decompress to the matrix."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from adc.passes.sparsity.coloring import column_coloring, row_coloring, star_coloring
from adc.passes.sparsity.compression import forward_index, reverse_index, seeds, symmetric_index
from adc.passes.sparsity.patterns import Pattern
from tests.support.sparse_problems import patterns


def banded(n: int, below: int, above: int) -> Pattern:
    rows, cols = [], []
    for d in range(-below, above + 1):
        i = np.arange(max(0, -d), min(n, n - d))
        rows.append(i)
        cols.append(i + d)
    return Pattern.from_pairs(np.concatenate(rows), np.concatenate(cols), (n, n))


def assert_columns_orthogonal(p: Pattern, colors: np.ndarray) -> None:
    """No row has two nonzeros in columns of one color."""
    keys = p.row_ids() * (colors.max() + 1) + colors[p.indices]
    assert len(np.unique(keys)) == len(keys)


@settings(max_examples=60, deadline=None)
@given(p=patterns())
def test_column_and_row_colorings_are_valid_and_decompress(p):
    rng = np.random.default_rng(0)
    j = np.zeros((p.rows, p.columns))
    j[p.row_ids(), p.indices] = rng.uniform(1, 2, p.nnz)
    columns = column_coloring(p)
    assert_columns_orthogonal(p, columns)
    assert (j @ seeds(columns, float).T).T.ravel()[forward_index(p, columns)].tolist() == j[p.row_ids(), p.indices].tolist()
    rows = row_coloring(p)
    assert_columns_orthogonal(p.transpose(), rows)
    assert (seeds(rows, float) @ j).ravel()[reverse_index(p, rows)].tolist() == j[p.row_ids(), p.indices].tolist()


@settings(max_examples=60, deadline=None)
@given(p=patterns(square=True))
def test_a_star_coloring_recovers_every_entry_of_a_symmetric_matrix(p):
    rng = np.random.default_rng(1)
    h = np.zeros((p.rows, p.columns))
    h[p.row_ids(), p.indices] = rng.uniform(1, 2, p.nnz)
    h = h + h.T
    colors = star_coloring(p)
    off = p.row_ids() != p.indices
    assert (colors[p.row_ids()[off]] != colors[p.indices[off]]).all()      # a distance-1 coloring
    compressed = (h @ seeds(colors, float).T).T
    assert np.allclose(compressed.ravel()[symmetric_index(p, colors)], h[p.row_ids(), p.indices], rtol=0, atol=0)


def test_bands_take_their_width_in_colors():
    assert column_coloring(banded(50, 1, 1)).max() + 1 == 3
    assert row_coloring(banded(50, 1, 1)).max() + 1 == 3
    assert column_coloring(banded(50, 2, 3)).max() + 1 == 6
    assert star_coloring(banded(50, 1, 1)).max() + 1 == 3


def test_an_arrowhead_is_colored_by_rows_in_forward_and_star_cheaply():
    n = 40
    mask = np.eye(n, dtype=bool)
    mask[0] = mask[:, 0] = True
    p = Pattern.from_pairs(*np.nonzero(mask), (n, n))
    assert column_coloring(p).max() + 1 == n     # the dense row: every column its own color
    assert star_coloring(p).max() + 1 == 2       # the hub one color, every leaf the other


def test_a_banded_pattern_of_100000_columns_takes_three_colors():
    # (about 0.4 s for the column coloring, 0.3 s for the star coloring, on a loaded 2-core machine)
    p = banded(100_000, 1, 1)
    assert column_coloring(p).max() + 1 == 3
    assert star_coloring(p).max() + 1 == 3
