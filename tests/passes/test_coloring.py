"""Colorings (adc/passes/sparsity/coloring.py) and decompression (compression.py, substitution.py):
valid on random patterns, optimal on bands, fast on large ones; compressed products decompress to
the matrix, by a gather or, for an acyclic coloring, by substitution (written here as the plain
loop its docstring states, the NumPy product H·S as the reference)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings

import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from adc.passes.sparsity.coloring import acyclic_coloring, column_coloring, row_coloring, star_coloring
from adc.passes.sparsity.compression import compress, forward_index, reverse_index, seeds, symmetric_index
from adc.passes.sparsity.patterns import Pattern
from adc.passes.sparsity.substitution import substitution
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


def symmetric_matrix(p: Pattern, seed: int) -> np.ndarray:
    """A symmetric matrix of random values at the pattern's nonzeros and their mirror images."""
    h = np.zeros((p.rows, p.columns))
    h[p.row_ids(), p.indices] = np.random.default_rng(seed).uniform(1, 2, p.nnz)
    return h + h.T


@settings(max_examples=60, deadline=None)
@given(p=patterns(square=True))
def test_a_star_coloring_recovers_every_entry_of_a_symmetric_matrix(p):
    h = symmetric_matrix(p, 1)
    colors = star_coloring(p)
    off = p.row_ids() != p.indices
    assert (colors[p.row_ids()[off]] != colors[p.indices[off]]).all()      # a distance-1 coloring
    compressed = (h @ seeds(colors, float).T).T
    assert np.allclose(compressed.ravel()[symmetric_index(p, colors)], h[p.row_ids(), p.indices], rtol=0, atol=0)


def assert_acyclic(p: Pattern, colors: np.ndarray) -> None:
    """A distance-1 coloring whose every two colors span a forest: edges = vertices - components."""
    rows, cols = p.row_ids(), p.indices
    off = rows != cols
    assert (colors[rows[off]] != colors[cols[off]]).all()
    for a in range(colors.max() + 1):
        for b in range(a + 1, colors.max() + 1):
            keep = off & np.isin(colors[rows], (a, b)) & np.isin(colors[cols], (a, b))
            vertices = np.flatnonzero(np.isin(colors, (a, b)))
            graph = csr_matrix((np.ones(keep.sum()), (rows[keep], cols[keep])), shape=(p.rows, p.rows))
            sub = graph[vertices][:, vertices]
            components, _ = connected_components(sub, directed=False)
            assert sub.nnz // 2 == len(vertices) - components, f"colors {a} and {b} span a cycle"


def substituted(products: np.ndarray, s, nnz: int) -> np.ndarray:
    """The substitution loop of substitution.py's docstring, in Python."""
    out, acc = np.full(nnz, np.nan), np.zeros(len(s.gather))
    for k in range(len(s.gather)):
        assert s.parent[k] == -1 or s.parent[k] > k
        v = products[s.gather[k]] - acc[k]
        out[s.first[k]] = out[s.second[k]] = v
        if s.parent[k] >= 0:
            acc[s.parent[k]] += v
    return out


@settings(max_examples=60, deadline=None)
@given(p=patterns(square=True))
def test_an_acyclic_coloring_recovers_every_entry_by_substitution(p):
    h = symmetric_matrix(p, 2)
    p = Pattern.from_pairs(*np.nonzero(h), h.shape)     # symmetric
    colors = acyclic_coloring(p)
    assert_acyclic(p, colors)
    # both greedy: either may take fewer colors; compress takes the fewer
    assert compress(p, symmetric=True, substitute=True).count == min(colors.max(initial=-1),
                                                                    star_coloring(p).max(initial=-1)) + 1
    if p.nnz:
        got = substituted((h @ seeds(colors, float).T).T.ravel(), substitution(p, colors), p.nnz)
        np.testing.assert_allclose(got, h[p.row_ids(), p.indices], rtol=1e-13)


@pytest.mark.parametrize("width", [1, 2, 3, 5])
def test_an_acyclic_coloring_of_a_band_takes_its_half_width_plus_one(width):
    p = banded(60, width, width)
    colors = acyclic_coloring(p)
    assert_acyclic(p, colors)
    assert colors.max() + 1 == width + 1 < star_coloring(p).max() + 1


def test_a_coloring_with_a_two_colored_cycle_has_no_substitution():
    cycle = Pattern.from_pairs(np.array([0, 1, 1, 2, 2, 3, 3, 0]), np.array([1, 0, 2, 1, 3, 2, 0, 3]), (4, 4))
    with pytest.raises(ValueError, match="not acyclic"):
        substitution(cycle, np.array([0, 1, 0, 1]))
    assert_acyclic(cycle, acyclic_coloring(cycle))       # three colors: the greedy one closes no cycle
    assert acyclic_coloring(cycle).max() + 1 == 3


def test_compress_substitutes_only_when_asked_and_cheaper():
    p = banded(30, 1, 1)
    assert compress(p, symmetric=True).substitution is None and compress(p, symmetric=True).count == 3
    chosen = compress(p, symmetric=True, substitute=True)
    assert chosen.count == 2 and chosen.index is None and chosen.substitution is not None
    star = Pattern.from_pairs(*np.nonzero(np.eye(8, dtype=bool) | (np.arange(8)[:, None] == 0) |
                                          (np.arange(8)[None] == 0)), (8, 8))
    assert compress(star, symmetric=True, substitute=True).substitution is None     # star takes 2 already


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
    assert acyclic_coloring(p).max() + 1 == 2
