"""Bidirectional partitions: some Jacobian nonzeros from column-colored JVPs, the others from
row-colored VJPs, for patterns that are dense both ways (an arrowhead needs n colors by columns
and n by rows, but 3 seeds both ways: its dense row by one VJP, the rest by two JVPs).

Coleman and Verma ("The efficient computation of sparse Jacobian matrices using automatic
differentiation", SIAM J. Sci. Comput. 1998) color rows and columns together; this is the split
form of their idea: a set of rows R goes backward, every other row forward. The forward seeds
see only the rows outside R, so their columns are colored on those rows alone; the reverse seeds
are the rows of R (the others unseeded, so they add nothing to the products), colored on R.
Each nonzero is read directly: J[i, j] at B[c(j), i] for i outside R, at C[r(i), j] for i in R.
The transpose split (a set of dense columns forward, the rest backward) is the same with rows
and columns exchanged. R is the rows of most nonzeros, at a few thresholds; the best split wins.

    bicolor(arrowhead(n))      Bicoloring: 2 column colors + 1 row color, whatever n
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adc.passes.sparsity.coloring import column_coloring, row_coloring
from adc.passes.sparsity.patterns import Pattern

THRESHOLDS = 3      # splits tried per side: the rows (columns) of the most nonzeros, then of fewer


@dataclass(frozen=True)
class Bicoloring:
    """A color per column for the JVP seeds and per row for the VJP seeds (-1: not seeded), and,
    per nonzero in CSR order, its place in the flat forward products [colors, rows] followed by
    the flat reverse products [colors, columns]."""

    columns: np.ndarray
    rows: np.ndarray
    index: np.ndarray

    @property
    def forward_count(self) -> int:
        return int(self.columns.max(initial=-1)) + 1

    @property
    def reverse_count(self) -> int:
        return int(self.rows.max(initial=-1)) + 1

    @property
    def count(self) -> int:
        """The number of seeds, both ways."""
        return self.forward_count + self.reverse_count


def _kept(pattern: Pattern, keep: np.ndarray) -> Pattern:
    """The pattern with only the nonzeros `keep` marks."""
    return Pattern.from_pairs(pattern.row_ids()[keep], pattern.indices[keep], (pattern.rows, pattern.columns))


def split_rows(pattern: Pattern, backward: np.ndarray) -> Bicoloring:
    """Rows marked in `backward` by VJPs, the others by JVPs (see the module docstring)."""
    rows = pattern.row_ids()
    back = backward[rows]
    columns = column_coloring(_kept(pattern, ~back))
    row_colors = np.where(backward, row_coloring(_kept(pattern, back)), -1)
    forward = int(columns.max(initial=-1)) + 1
    index = np.where(back, forward * pattern.rows + row_colors[rows] * pattern.columns + pattern.indices,
                     columns[pattern.indices] * pattern.rows + rows)
    return Bicoloring(columns, row_colors, index)


def split_columns(pattern: Pattern, forward: np.ndarray) -> Bicoloring:
    """Columns marked in `forward` by JVPs, the others by VJPs: the transpose's row split."""
    transposed = split_rows(pattern.transpose(), forward)
    pushed = forward[pattern.indices]
    rows = pattern.row_ids()
    count = int(transposed.rows.max(initial=-1)) + 1
    index = np.where(pushed, transposed.rows[pattern.indices] * pattern.rows + rows,
                     count * pattern.rows + transposed.columns[rows] * pattern.columns + pattern.indices)
    return Bicoloring(transposed.rows, transposed.columns, index)


def _densest(counts: np.ndarray) -> list[np.ndarray]:
    """Marks of the elements of most nonzeros, at the THRESHOLDS highest counts (never all)."""
    levels = np.unique(counts)[::-1][:THRESHOLDS]
    return [counts >= t for t in levels if (counts >= t).sum() < len(counts)]


def bicolor(pattern: Pattern) -> Bicoloring | None:
    """The split of fewest seeds over the densest rows and the densest columns (None: an empty
    pattern, or one without a row or column to split off)."""
    if not pattern.nnz:
        return None
    candidates = [split_rows(pattern, marks) for marks in _densest(np.diff(pattern.indptr))]
    candidates += [split_columns(pattern, marks)
                   for marks in _densest(np.bincount(pattern.indices, minlength=pattern.columns))]
    return min(candidates, key=lambda b: b.count, default=None)
