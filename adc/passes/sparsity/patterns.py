"""Boolean sparse matrices in CSR form: the dependence patterns the sparsity analysis propagates.

A `Pattern` has one row per element of a value (row-major) and one column per element of the
`wrt` input: row r lists, sorted and without repeats, the inputs element r may depend on. It is
two NumPy int64 arrays, `indptr` and `indices` (SciPy's CSR layout, without SciPy). Every
operation is vectorized: its cost grows with the nonzeros it touches, never with rows × columns.

    x = Pattern.identity(3)                  rows [0] [1] [2]
    x.take(np.array([1, 2, -1]))             rows [1] [2] []     (a shifted slice, zero padded)
    x.combine(Pattern.from_pairs(...))       row r = the union of the rows the pairs list for r
    decode(encode(patterns))                 the same patterns, through bytes (the compile cache)
"""
from __future__ import annotations

import io

import numpy as np


class Pattern:
    """A boolean matrix `rows` × `columns` in CSR form (indices sorted and unique within a row)."""

    __slots__ = ("indptr", "indices", "columns")

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, columns: int):
        self.indptr, self.indices, self.columns = indptr, indices, columns

    @property
    def rows(self) -> int:
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    @classmethod
    def identity(cls, n: int) -> "Pattern":
        return cls(np.arange(n + 1, dtype=np.int64), np.arange(n, dtype=np.int64), n)

    @classmethod
    def empty(cls, rows: int, columns: int) -> "Pattern":
        return cls(np.zeros(rows + 1, np.int64), np.zeros(0, np.int64), columns)

    @classmethod
    def from_pairs(cls, rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> "Pattern":
        """The pattern whose nonzeros are the (row, column) pairs given (repeats allowed)."""
        n_rows, n_cols = shape
        keys = np.sort(rows.astype(np.int64) * max(n_cols, 1) + cols.astype(np.int64))
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if len(keys) else keys
        row_of = keys // max(n_cols, 1)
        indptr = np.zeros(n_rows + 1, np.int64)
        np.cumsum(np.bincount(row_of, minlength=n_rows), out=indptr[1:])
        return cls(indptr, keys - row_of * max(n_cols, 1), n_cols)

    def row_ids(self) -> np.ndarray:
        """The row of each nonzero (COO rows)."""
        return np.repeat(np.arange(self.rows, dtype=np.int64), np.diff(self.indptr))

    def take(self, source: np.ndarray) -> "Pattern":
        """Row r of the result is row source[r] of this one (empty where source[r] is out of range: -1)."""
        source = np.asarray(source, np.int64).ravel()
        valid = (source >= 0) & (source < self.rows)
        safe = np.where(valid, source, 0)
        starts = self.indptr[safe] if self.rows else np.zeros(len(source), np.int64)
        lengths = np.where(valid, self.indptr[np.minimum(safe + 1, self.rows)] - starts, 0)
        indptr = np.zeros(len(source) + 1, np.int64)
        np.cumsum(lengths, out=indptr[1:])
        offsets = np.arange(indptr[-1], dtype=np.int64) - np.repeat(indptr[:-1] - starts, lengths)
        return Pattern(indptr, self.indices[offsets], self.columns)

    def combine(self, groups: "Pattern") -> "Pattern":
        """Row r of the result is the union of the rows of this pattern that row r of `groups`
        lists: the structural product groups · self."""
        taken = self.take(groups.indices)
        rows = np.repeat(groups.row_ids(), np.diff(taken.indptr))
        return Pattern.from_pairs(rows, taken.indices, (groups.rows, self.columns))

    def transpose(self) -> "Pattern":
        return Pattern.from_pairs(self.indices, self.row_ids(), (self.columns, self.rows))

    def same_as(self, other: "Pattern") -> bool:
        return (self.columns == other.columns and np.array_equal(self.indptr, other.indptr)
                and np.array_equal(self.indices, other.indices))

    def __repr__(self) -> str:
        return f"Pattern({self.rows} x {self.columns}, {self.nnz} nonzeros)"


def union(patterns) -> Pattern | None:
    """The elementwise union of patterns of one shape (None entries: no dependence)."""
    found = [p for p in patterns if p is not None]
    if len(found) <= 1 or all(p is found[0] for p in found):
        return found[0] if found else None
    rows = np.concatenate([p.row_ids() for p in found])
    cols = np.concatenate([p.indices for p in found])
    return Pattern.from_pairs(rows, cols, (found[0].rows, found[0].columns))


def encode(patterns) -> bytes:
    """Patterns as bytes (NumPy's .npz of their arrays, no pickle), for the on-disk cache."""
    arrays = {"columns": np.array([p.columns for p in patterns], np.int64)}
    for k, p in enumerate(patterns):
        arrays[f"indptr{k}"], arrays[f"indices{k}"] = p.indptr, p.indices
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def decode(data: bytes) -> tuple[Pattern, ...]:
    """The patterns `encode` wrote."""
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        return tuple(Pattern(arrays[f"indptr{k}"], arrays[f"indices{k}"], int(columns))
                     for k, columns in enumerate(arrays["columns"]))
