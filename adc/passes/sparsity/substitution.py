"""Recovering a symmetric Hessian from acyclically colored products, by substitution.

With an acyclic coloring (coloring.py), the products B = H·S of the seeds hold, at B[b, i], the
sum of row i's entries over the columns of color b. The vertices of two colors a and b span a
forest, and every neighbour of i of color b lies in its tree: rooted anywhere, they are i's
parent p and its children. So, leaves first,

    H[i, p] = B[color(p), i] - sum of H[i, c] over i's children c in that tree

and each entry, once known, is subtracted from its parent's sum. A diagonal entry is read
directly: no neighbour of i has i's color. `substitution` lays this out for a loop that runs in
native code at every call (adc/runtime/native_substitution.c): one step per entry, in an order
where every tree edge comes after its children (by height in its tree, so that neighbouring steps
belong to different trees and a processor overlaps them),

    v = products[gather[k]] - acc[k];  out[first[k]] = out[second[k]] = v
    if parent[k] >= 0: acc[parent[k]] += v

`first` and `second` are the entry's two places in the pattern's CSR order (the same for a
diagonal one). Numerically each entry is a short alternating sum along its tree, as in
Gebremedhin, Tarafdar, Manne and Pothen (SIAM J. Sci. Comput. 2007, "substitution").
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from adc.passes.sparsity.patterns import Pattern


@dataclass(frozen=True)
class Substitution:
    """The loop's arrays, one entry per diagonal entry and per edge of the pattern; `parent[k]`
    is later than k, or -1."""

    gather: np.ndarray
    parent: np.ndarray
    first: np.ndarray
    second: np.ndarray


def substitution(pattern: Pattern, colors: np.ndarray) -> Substitution:
    """The substitution of a symmetric pattern's entries from the products [colors, n] of an
    acyclic coloring's seeds (ValueError when the coloring is not acyclic)."""
    n = pattern.columns
    rows, cols = pattern.row_ids(), pattern.indices
    upper = np.flatnonzero(rows < cols)
    trees: dict[tuple[int, int], dict[int, list[int]]] = {}
    for i, j in zip(rows[upper].tolist(), cols[upper].tolist()):
        a, b = int(colors[i]), int(colors[j])
        if a == b:
            raise ValueError(f"the coloring gives neighbours {i} and {j} one color")
        tree = trees.setdefault((min(a, b), max(a, b)), {})
        tree.setdefault(i, []).append(j)
        tree.setdefault(j, []).append(i)
    child, parent_vertex, height = [], [], []       # the edges (child, parent), children first
    parent_edge: list[tuple[int, int]] = []          # (tree, vertex) of each edge's parent edge
    for t, tree in enumerate(trees.values()):
        seen: set[int] = set()
        for start in tree:
            if start in seen:
                continue
            seen.add(start)
            order, queue = [], deque([(start, -1)])
            while queue:
                v, p = queue.popleft()
                order.append((v, p))
                for w in tree[v]:
                    if w == p:
                        continue
                    if w in seen:
                        raise ValueError(f"the coloring is not acyclic: the vertices of colors {colors[v]} and "
                                         f"{colors[w]} close a cycle at vertex {w}")
                    seen.add(w)
                    queue.append((w, v))
            above: dict[int, int] = {}          # a vertex's height: its longest way down to a leaf
            for v, p in reversed(order[1:]):
                child.append(v)
                parent_vertex.append(p)
                height.append(above.get(v, 0))
                above[p] = max(above.get(p, 0), height[-1] + 1)
                parent_edge.append((t, p))
    # by height: an edge after its children, and neighbouring steps in other trees (independent)
    by_height = np.argsort(np.asarray(height, np.int64), kind="stable").tolist()
    position = {(parent_edge[e][0], child[e]): k for k, e in enumerate(by_height)}    # (tree, vertex) -> its edge
    parent = [position.get(parent_edge[e], -1) for e in by_height]      # the root has no edge
    child = [child[e] for e in by_height]
    parent_vertex = [parent_vertex[e] for e in by_height]
    child_a, parent_a = np.asarray(child, np.int64), np.asarray(parent_vertex, np.int64)
    diagonal = np.flatnonzero(rows == cols)
    keys = rows * n + cols
    return Substitution(
        gather=np.concatenate([colors[parent_a] * n + child_a, colors[rows[diagonal]] * n + rows[diagonal]]),
        parent=np.concatenate([np.asarray(parent, np.int64), np.full(len(diagonal), -1, np.int64)]),
        first=np.concatenate([np.searchsorted(keys, child_a * n + parent_a), diagonal]),
        second=np.concatenate([np.searchsorted(keys, parent_a * n + child_a), diagonal]))
