"""Colorings of a sparsity pattern: which Jacobian columns (or rows) one seed can carry at once.

Two columns that share no row are structurally orthogonal: one JVP seeded with their sum
computes both, each nonzero of the product belonging to one of them. A column coloring is a
coloring of the column intersection graph (columns adjacent when they share a row), and its
number of colors is the number of JVPs a Jacobian costs; a row coloring (the transpose's) the
number of VJPs. A symmetric Hessian needs less: a star coloring (a distance-1 coloring in which
every path on four vertices has three colors; Gebremedhin, Manne and Pothen, "What color is your
Jacobian?", SIAM Review 2005, Algorithm 4.1) lets each nonzero be read directly from H·S, from
its row or from its column. An acyclic coloring (a distance-1 coloring in which every cycle has
three colors: the vertices of any two colors span a forest; Gebremedhin, Tarafdar, Manne and
Pothen, SIAM J. Sci. Comput. 2007) takes fewer colors still, its entries recovered by
substitution along each two-colored tree (substitution.py): 2 on a tridiagonal Hessian, against
a star coloring's 3.

All four are greedy in largest-first order: a vertex takes the smallest color its constraints
leave free, the vertices of most neighbours first. On a band that is the natural order in the
interior, which is optimal: 3 colors for a tridiagonal Jacobian, bandwidth + 1 in general. The
graphs are built with NumPy; only the greedy pass itself is a Python loop, over plain lists.

    column_coloring(tridiagonal(n))     [0 1 2 0 1 2 ...]   3 JVPs whatever n
    star_coloring(tridiagonal(n))       3 colors, each H[i, j] read directly
    acyclic_coloring(tridiagonal(n))    [0 1 0 1 ...], each H[i, j] by substitution
"""
from __future__ import annotations

import numpy as np

from adc.passes.sparsity.patterns import Pattern


def column_graph(pattern: Pattern) -> Pattern:
    """The column intersection graph as a symmetric pattern (columns × columns, no diagonal):
    columns adjacent when some row has both (every pair of each row's nonzeros, vectorized)."""
    sizes = np.diff(pattern.indptr)
    pairs = sizes * sizes
    total = int(pairs.sum())
    first = np.repeat(pattern.indptr[:-1], pairs)
    offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(pairs) - pairs, pairs)
    width = np.repeat(sizes, pairs)
    a, b = pattern.indices[first + offset // width], pattern.indices[first + offset % width]
    apart = a != b
    return Pattern.from_pairs(a[apart], b[apart], (pattern.columns, pattern.columns))


def greedy(graph: Pattern) -> np.ndarray:
    """Distance-1 greedy coloring of a graph (a symmetric pattern) in largest-first order: each
    vertex, of most neighbours first (ties in index order), takes the smallest color its colored
    neighbours leave free."""
    ptr, idx = graph.indptr.tolist(), graph.indices.tolist()
    color = [-1] * graph.rows
    for v in np.argsort(-np.diff(graph.indptr), kind="stable").tolist():
        used = {color[w] for w in idx[ptr[v]:ptr[v + 1]]}
        c = 0
        while c in used:
            c += 1
        color[v] = c
    return np.asarray(color, np.int64)


def column_coloring(pattern: Pattern) -> np.ndarray:
    """A color per column, no two columns sharing a row of the same color (for JVP seeds)."""
    return greedy(column_graph(pattern))


def row_coloring(pattern: Pattern) -> np.ndarray:
    """A color per row, no two rows sharing a column of the same color (for VJP seeds)."""
    return column_coloring(pattern.transpose())


def adjacency(pattern: Pattern) -> tuple[list[int], list[int]]:
    """The adjacency graph of a symmetric pattern (its off-diagonal nonzeros) as CSR lists."""
    n = pattern.columns
    off = pattern.indices != pattern.row_ids()
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(pattern.row_ids()[off], minlength=n), out=ptr[1:])
    return ptr.tolist(), pattern.indices[off].tolist()


def acyclic_coloring(pattern: Pattern) -> np.ndarray:
    """An acyclic coloring of the adjacency graph of a symmetric pattern: adjacent vertices
    differ, and the vertices of any two colors span a forest. Greedy in largest-first order:
    a vertex takes the smallest color c its neighbours leave free such that, for each color b,
    no two of its neighbours of color b are already joined in the {b, c} forest (joining them
    through it would close a cycle); one union-find per pair of colors keeps the forests."""
    ptr, idx = adjacency(pattern)
    color = [-1] * pattern.columns
    forests: dict[tuple[int, int], dict[int, int]] = {}     # a union-find per pair of colors

    def root(forest: dict[int, int], v: int) -> int:
        while forest.get(v, v) != v:
            forest[v] = forest.get(forest[v], forest[v])      # path halving
            v = forest[v]
        return v

    def closes_cycle(c: int, neighbours: list[int]) -> bool:
        seen = set()
        for w in neighbours:
            forest = forests.get((min(c, color[w]), max(c, color[w])))
            key = (color[w], w if forest is None else root(forest, w))
            if key in seen:
                return True
            seen.add(key)
        return False

    degree = np.diff(np.asarray(ptr))
    for v in np.argsort(-degree, kind="stable").tolist():
        neighbours = [w for w in idx[ptr[v]:ptr[v + 1]] if color[w] >= 0]
        used = {color[w] for w in neighbours}
        c = 0
        while c in used or closes_cycle(c, neighbours):
            c += 1
        color[v] = c
        for w in neighbours:
            forest = forests.setdefault((min(c, color[w]), max(c, color[w])), {})
            forest[root(forest, w)] = v if v not in forest else root(forest, v)
    return np.asarray(color, np.int64)


def star_coloring(pattern: Pattern) -> np.ndarray:
    """A star coloring of the adjacency graph of a symmetric pattern (its off-diagonal nonzeros):
    adjacent vertices differ, and no path on four vertices alternates two colors."""
    n = pattern.columns
    ptr, idx = adjacency(pattern)
    color = [-1] * n
    forbidden = [-1] * (n + 1)
    degree = np.diff(np.asarray(ptr))
    for v in np.argsort(-degree, kind="stable").tolist():
        for w in idx[ptr[v]:ptr[v + 1]]:
            cw = color[w]
            if cw >= 0:
                forbidden[cw] = v
            for x in idx[ptr[w]:ptr[w + 1]]:
                cx = color[x]
                if x == v or cx < 0:
                    continue
                if cw < 0:
                    forbidden[cx] = v       # v - w - x: w's color will differ from x's, v's must too
                elif any(color[y] == cw for y in idx[ptr[x]:ptr[x + 1]] if y != w):
                    forbidden[cx] = v       # v - w - x - y would alternate cx and cw
        c = 0
        while forbidden[c] == v:
            c += 1
        color[v] = c
    return np.asarray(color, np.int64)
