"""Register tiles transposed by shuffles: W vectors of W lanes, row r's lane c moved to row c's
lane r, in log2(W) rounds of W shuffles. What turns W matrices' consecutive elements into one
vector per element (matrices.py's Lanes), and W rows of a row-major matrix into W columns (the
gemm's matrix-vector product, whose lanes are rows).

    transposed(b, [row0, row1, ..., row7])  ->  [column0, ..., column7]    (<8 x double> each)
"""
from __future__ import annotations

import llvmlite.ir as ir


def transposed(b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """The columns of a square matrix of vectors (a power of two of them): for each bit h of the
    index, the row and column bits h are exchanged by one shuffle of each pair of rows."""
    width, rows = len(rows), list(rows)
    h = width // 2
    while h:
        for r in (r for r in range(width) if not r & h):
            x, y = rows[r], rows[r + h]
            rows[r] = b.shuffle_vector(x, y, shuffle_mask([c if not c & h else width + c - h for c in range(width)]))
            rows[r + h] = b.shuffle_vector(x, y, shuffle_mask([c + h if not c & h else width + c for c in range(width)]))
        h //= 2
    return rows


def shuffle_mask(indices: list[int]) -> ir.Constant:
    return ir.Constant(ir.VectorType(ir.IntType(32), len(indices)), indices)
