"""Bidirectional partitions (adc/passes/sparsity/bicoloring.py): on random patterns the forward
and reverse products of a random matrix decompress to it; an arrowhead takes 3 seeds however
large, where columns alone or rows alone take n."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from adc.passes.sparsity.bicoloring import bicolor, split_columns, split_rows
from adc.passes.sparsity.coloring import column_coloring, row_coloring
from adc.passes.sparsity.compression import seeds
from adc.passes.sparsity.patterns import Pattern
from tests.support.sparse_problems import patterns


def arrowhead(n: int) -> Pattern:
    rows = np.concatenate([np.arange(n), np.zeros(n - 1, np.int64), np.arange(1, n)])
    cols = np.concatenate([np.arange(n), np.arange(1, n), np.zeros(n - 1, np.int64)])
    return Pattern.from_pairs(rows, cols, (n, n))


def decompresses(p: Pattern, split) -> bool:
    """The products of a random matrix of pattern p with the split's seeds give back its values."""
    values = np.random.default_rng(1).uniform(1, 2, p.nnz)
    matrix = np.zeros((p.rows, p.columns))
    matrix[p.row_ids(), p.indices] = values
    forward = matrix @ seeds(split.columns, np.float64).T          # [rows, colors]
    reverse = seeds(split.rows, np.float64) @ matrix               # [colors, columns]
    flat = np.concatenate([forward.T.ravel(), reverse.ravel()])
    return np.array_equal(flat[split.index], values)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(p=patterns())
def test_every_split_decompresses_to_the_matrix(p):
    for counts, split in ((np.diff(p.indptr), split_rows), (np.bincount(p.indices, minlength=p.columns), split_columns)):
        assert decompresses(p, split(p, counts >= np.median(counts)))
    best = bicolor(p)
    assert best is None or decompresses(p, best)


def test_an_arrowhead_takes_three_seeds_both_ways():
    p = arrowhead(200)
    assert column_coloring(p).max() + 1 == 200 and row_coloring(p).max() + 1 == 200
    best = bicolor(p)
    assert best.count == 3 and decompresses(p, best)
