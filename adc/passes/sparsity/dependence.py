"""What the sparsity analysis knows of one value: `Dependence`, the state its rules map.

A value's state is its concrete shape, its `Pattern` (which elements of the `wrt` input each
of its elements may depend on; None: none) and, when the integer inputs and the constants fix
them, its elements (`value`: gather indices, trip counts, branch conditions known while the
pattern is built). Float inputs are never known: a pattern holds for every value of them.

    Dependence((3,), Pattern.identity(3))           the wrt input x: f64[3]
    Dependence((2,), None, np.array([0, 2]))        an index parameter, known
    Dependence((), None, None)                      a float parameter other than wrt
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adc.passes.sparsity.patterns import Pattern, union


@dataclass(frozen=True, eq=False)
class Dependence:
    """One value's shape, pattern in the wrt input (None: independent of it) and known elements."""

    shape: tuple[int, ...]
    pattern: Pattern | None = None
    value: np.ndarray | None = None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def positions(self, offset: int = 0) -> np.ndarray:
        """Each element's row-major position (plus `offset`), in the value's shape."""
        return np.arange(offset, offset + self.size, dtype=np.int64).reshape(self.shape)

    def same_as(self, other: "Dependence") -> bool:
        patterns = (self.pattern is None and other.pattern is None) or (
            self.pattern is not None and other.pattern is not None and self.pattern.same_as(other.pattern))
        values = (self.value is None and other.value is None) or (
            self.value is not None and other.value is not None and np.array_equal(self.value, other.value))
        return patterns and values


def join(a: Dependence, b: Dependence) -> Dependence:
    """The state of a value that is either a or b: the union of their patterns, and their
    elements when both know the same ones."""
    same = a.value is not None and b.value is not None and np.array_equal(a.value, b.value)
    return Dependence(a.shape, union([a.pattern, b.pattern]), a.value if same else None)


def stacked(states, columns: int) -> Pattern:
    """The patterns of `states` one after another (rows of independent states empty): the pattern
    of the operands' elements at positions counted across them, in order."""
    parts = [s.pattern or Pattern.empty(s.size, columns) for s in states]
    sizes = np.cumsum([0] + [p.nnz for p in parts[:-1]])
    indptr = np.concatenate([[0]] + [p.indptr[1:] + base for p, base in zip(parts, sizes)])
    return Pattern(indptr.astype(np.int64), np.concatenate([p.indices for p in parts]), columns)


def columns_of(states) -> int:
    """The number of wrt elements (the patterns' columns); 0 when no state depends on wrt."""
    return next((s.pattern.columns for s in states if s.pattern is not None), 0)
