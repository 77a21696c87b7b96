"""Dimension algebra of reshapes: which axes a reshape merges or splits, for symbolic sizes too.

A reshape keeps row-major order, so it regroups runs of adjacent axes; the passes that see
through reshapes (simplify composing reshape-transpose-reshape chains, the one-hot pass
carrying its structure) ask how. Sizes may be symbolic: a size divides another only
exactly (`quotient`), never by assumption about a symbol's value.

    quotient(N*M, M) == N                     reshape_groups([2, N*M], [2, N, M]) == [((0,), (0,)), ((1,), (1, 2))]
    merged_runs([I, B, O], [I, B*O]) == [[0], [1, 2]]
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

from adc.ir.types import Dim, SymDim


def quotient(a: Dim, b: Dim) -> Dim | None:
    """a / b when b divides a exactly: integers, or each term of a by b's single term."""
    if a == b:
        return 1
    if isinstance(b, int) and not isinstance(a, SymDim):
        return a // b if b and a % b == 0 else None
    b_terms = [((), b)] if isinstance(b, int) else list(b.terms)
    if len(b_terms) != 1 or not isinstance(a, SymDim):
        return None
    (mb, cb), out = b_terms[0], {}
    for m, c in a.terms:
        rest = Counter(m)
        rest.subtract(mb)
        if c % cb or any(n < 0 for n in rest.values()):
            return None
        out[tuple(sorted(rest.elements()))] = c // cb
    return SymDim.of(out)


def common_digits(a: Sequence[Dim], b: Sequence[Dim]) -> list[tuple[int, int, Dim]] | None:
    """The digits two row-major groups of the same element count share, major first: (position in a,
    position in b, size); size-1 axes have none. None when a digit of one straddles two of the other."""
    digits = []
    ia, ib = len(a) - 1, len(b) - 1
    ra, rb = (a[ia] if ia >= 0 else 1), (b[ib] if ib >= 0 else 1)
    while ia >= 0 and ib >= 0:
        if ra == 1 or rb == 1:
            ia, ra = (ia - 1, a[ia - 1] if ia > 0 else 1) if ra == 1 else (ia, ra)
            ib, rb = (ib - 1, b[ib - 1] if ib > 0 else 1) if rb == 1 else (ib, rb)
            continue
        if ra == rb:
            digits.append((ia, ib, ra))
            ra = rb = 1
        elif (q := quotient(ra, rb)) is not None:
            digits.append((ia, ib, rb))
            ra, rb = q, 1
        elif (q := quotient(rb, ra)) is not None:
            digits.append((ia, ib, ra))
            ra, rb = 1, q
        else:
            return None
    rest = ([ra, *a[:ia]] if ia >= 0 else []) + ([rb, *b[:ib]] if ib >= 0 else [])
    return digits[::-1] if all(d == 1 for d in rest) else None


def reshape_groups(old: Sequence[Dim], new: Sequence[Dim]) -> list[tuple[tuple[int, ...], tuple[int, ...]]] | None:
    """The smallest runs of old axes and new axes of equal element counts, size-1 axes left out; None
    when a run's count cannot be shown equal (symbolic sizes that do not divide)."""
    olds, news = [a for a, d in enumerate(old) if d != 1], [a for a, d in enumerate(new) if d != 1]
    groups = []
    while olds and news:
        a, b = [olds.pop()], [news.pop()]
        pa, pb = old[a[0]], new[b[0]]
        while pa != pb:
            if quotient(pb, pa) not in (None, 1) and olds:
                a.insert(0, olds.pop())
                pa = pa * old[a[0]]
            elif quotient(pa, pb) not in (None, 1) and news:
                b.insert(0, news.pop())
                pb = pb * new[b[0]]
            else:
                return None
        groups.insert(0, (tuple(a), tuple(b)))
    return None if olds or news else groups


def merged_runs(fine, coarse) -> list[list[int]] | None:
    """The runs of adjacent `fine` axes whose sizes multiply to each `coarse` axis, when a reshape
    from `fine` to `coarse` only merges axes; None otherwise."""
    runs, i = [], 0
    for size in coarse:
        run, product = [], 1
        while i < len(fine) and (not run or product != size):
            run.append(i)
            product, i = product * fine[i], i + 1
        if product != size:
            return None
        runs.append(run)
    return runs if i == len(fine) else None
