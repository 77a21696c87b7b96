"""Blocked pairwise summation: how a float sum over many elements keeps its rounding error small.

A sum carried in one accumulator rounds once per element: its error bound grows like n·eps,
and in f32 it stops growing altogether (a sum of ones sticks at 2**24). A float `reduce_sum`
instead sums blocks and combines the blocks' sums pairwise, in a binary counter (`Cascade`):
level k holds the sum of 2**k blocks, and a full block carries into the levels as a binary
increment does, so every block's sum passes through at most ceil(log2(blocks)) further additions
before the last, unfinished block's sum and the set levels (at most that many again) are added
up. NumPy's pairwise_sum does the same with blocks of 128.

- Reducing the last axis (`blocked_sum`): a block is `BLOCK` consecutive elements of the innermost
  reduced axis, summed from 0 by the vectorized loop with 4 interleaved vector accumulators, or as
  many shorter rows as make `BLOCK` elements (`_filled_blocks`); its levels are on the stack.
- Keeping the last axis (`blocked_column_sums`, a column sum such as a bias gradient): the rows
  in order, each one contiguous loop adding into the output row, which holds the columns' sums
  of the current block of `ROWS` rows; a full block is pushed into the columns' levels, a buffer
  of `columns` elements per level (`column_levels_bytes`: a part of the kernel's block), so the
  rows stream, however wide.

    for each row r of x[R, C]:    out[:] += x[r, :]              (vectorized along the row)
        every ROWS rows:          carry out[:] up through levels[k][:] while bit k of count is set,
                                  levels[k][:] = out[:]; out[:] = 0; count += 1
    at the end:                   out[:] += levels[k][:] for each set bit k, smallest first

Error bound (Higham, "Accuracy and Stability of Numerical Algorithms", §4.2, a sum computed
along a tree of additions whose deepest path has h additions): the computed s of x_1..x_n has

    |s - Σ x_i| <= (L + 2·ceil(log2(blocks)) + 1) · eps · Σ |x_i|  + O(eps²)

where L is the longest chain of additions inside a block: for a vectorized block, BLOCK / (4·lanes)
+ log2(4·lanes) (38 for f32 on AVX-512, 16 lanes; 70 on AVX2) for rows of at least BLOCK elements,
below 2·BLOCK = 4096 in the worst case (rows shorter than a vector, summed one by one); below
2·ROWS = 256 for a column sum. For n = 10**9 f32 that is ~ 80 eps, where one accumulator's bound
is 10**9 eps. A row of at most BLOCK elements is one block, its loop alone; a column sum over
fewer than ROWS rows is one block too. The order of the additions depends only on the shape,
never on the thread count: a reduction is split across threads by its kept axes only, so each
output element is one thread's cascade.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import llvmlite.ir as ir

from adc.codegen.lowering.loops import I1, I64, NOWRAP, for_range, i64, loop_nest

BLOCK = 2048            # elements of the innermost reduced axis summed by one vectorized loop
ROWS = 128              # rows of a column sum (last axis kept) summed into one block of the output row
LEVELS = 48             # a counter of blocks never carries past 48 levels: 2**48 blocks are beyond any memory


@dataclass(frozen=True)
class Elements:
    """A buffer's elements by index: load(i), store(i, value) (its owner checks them in a
    bounds-checked build)."""
    load: Callable[[ir.Value], ir.Value]
    store: Callable[[ir.Value, ir.Value], None]

    @classmethod
    def at(cls, b: ir.IRBuilder, base: ir.Value, ty: ir.Type) -> "Elements":
        """Those of memory no user reaches (a slot on the stack)."""
        return cls(lambda i: b.load(b.gep(base, [i], source_etype=ty), typ=ty),
                   lambda i, value: b.store(value, b.gep(base, [i], source_etype=ty)))


class Cascade:
    """Binary counters of block sums for `width` outputs side by side: level k of output c, element
    k·width + c of `levels`, holds the sum of 2**k blocks when bit k of `count` (an i64 slot) is set."""

    def __init__(self, levels: Elements, width: ir.Value, count: ir.Value):
        self.levels, self.width, self.count = levels, width, count

    def reset(self, b: ir.IRBuilder) -> None:
        b.store(i64(0), self.count)

    def _at(self, b: ir.IRBuilder, k: ir.Value, c: ir.Value) -> ir.Value:
        return b.add(b.mul(k, self.width, flags=NOWRAP), c, flags=NOWRAP)

    def push(self, b: ir.IRBuilder, block: Elements, identity: ir.Value) -> None:
        """Add one block's sums (`width` of them in `block`, set back to `identity`): carried up
        through the set bits of the count, its trailing ones (each a sum of as many blocks), then
        stored at the first clear one."""
        count = b.load(self.count)
        carries = b.cttz(b.not_(count), ir.Constant(I1, 0))
        with for_range(b, i64(0), carries) as k:
            with for_range(b, i64(0), self.width) as c:
                block.store(c, b.fadd(self.levels.load(self._at(b, k, c)), block.load(c)))
        with for_range(b, i64(0), self.width) as c:
            self.levels.store(self._at(b, carries, c), block.load(c))
            block.store(c, identity)
        b.store(b.add(count, i64(1), flags=NOWRAP), self.count)

    def totals(self, b: ir.IRBuilder, sums: Elements) -> None:
        """Add each output's set levels to its element of `sums` (the unfinished block's), smallest
        first: the latest blocks, then larger sums."""
        count = b.load(self.count)
        with for_range(b, i64(0), b.sub(i64(64), b.ctlz(count, ir.Constant(I1, 0)))) as k:
            with b.if_then(b.icmp_unsigned("!=", b.and_(b.lshr(count, k), i64(1)), i64(0))):
                with for_range(b, i64(0), self.width) as c:
                    sums.store(c, b.fadd(sums.load(c), self.levels.load(self._at(b, k, c))))


def _blocks(b: ir.IRBuilder, ranges: Sequence[tuple[ir.Value, ir.Value]], size: int,
            block: Callable[[list[ir.Value], ir.Value, ir.Value], None]) -> None:
    """block(outer_axes, first, last) for each run of at most `size` positions of the last range,
    at every position of the ranges before it."""
    *outer, (start, end) = ranges

    def runs(outer_axes: list[ir.Value]) -> None:
        with for_range(b, start, end, i64(size)) as first:
            bound = b.add(first, i64(size), flags=NOWRAP)
            block(outer_axes, first, b.select(b.icmp_signed("<", bound, end), bound, end))
    if outer:
        loop_nest(b, outer, runs)
    else:
        runs([])


def _filled_blocks(b: ir.IRBuilder, filled: ir.Value, ranges: Sequence[tuple[ir.Value, ir.Value]], size: int,
                   add_run: Callable[[list[ir.Value], ir.Value, ir.Value], None], flush: Callable[[], None]) -> None:
    """add_run(outer_axes, first, last) for each run of at most `size` positions of the last range,
    at every position of the others; flush() whenever the runs added since the last flush reach
    `size` positions (the runs after the last are the unfinished block). A block is so one run of
    a long row, or as many short rows as make `size` (fewer than 2 * size positions): a cascade
    step per row of 3 was most of a full sum over [2M, 3]. `filled` is an i64 slot counting the
    positions not flushed. There are at most (positions // size) flushes."""
    b.store(i64(0), filled)

    def run(outer_axes: list[ir.Value], first: ir.Value, last: ir.Value) -> None:
        add_run(outer_axes, first, last)
        count = b.add(b.load(filled), b.sub(last, first), flags=NOWRAP)
        b.store(count, filled)
        with b.if_then(b.icmp_signed(">=", count, i64(size))):
            flush()
            b.store(i64(0), filled)
    _blocks(b, ranges, size, run)


def blocked_sum(b: ir.IRBuilder, head: ir.IRBuilder, ty: ir.Type, identity: ir.Value,
                ranges: Sequence[tuple[ir.Value, ir.Value]], element: Callable[[list[ir.Value]], ir.Value],
                interleave: int) -> ir.Value:
    """The sum of element(axes) over the nest `ranges` (the last innermost), in blocks of `BLOCK`
    positions of the last range (`_filled_blocks`) combined by a `Cascade` on the stack. Each run
    is one `reassoc` loop that LLVM vectorizes with `interleave` vectors in flight."""
    cascade = Cascade(Elements.at(b, head.alloca(ty, size=LEVELS), ty), i64(1), head.alloca(I64))
    # block_sum is only loaded and stored, so it lives in a register; the cascade reads a block
    # through a pointer it indexes, which would keep block_sum in memory on every row's chain
    block_sum, pushed, total, filled = head.alloca(ty), head.alloca(ty), head.alloca(ty), head.alloca(I64)
    cascade.reset(b)
    b.store(identity, block_sum)

    def add_run(outer_axes: list[ir.Value], first: ir.Value, last: ir.Value) -> None:
        with for_range(b, first, last, interleave=interleave) as i:
            b.store(b.fadd(b.load(block_sum), element([*outer_axes, i]), flags=("reassoc",)), block_sum)

    def flush() -> None:
        b.store(b.load(block_sum), pushed)
        cascade.push(b, Elements.at(b, pushed, ty), identity)
        b.store(identity, block_sum)
    def blocks() -> None:
        _filled_blocks(b, filled, ranges, BLOCK, add_run, flush)
        b.store(b.load(block_sum), total)
        cascade.totals(b, Elements.at(b, total, ty))
    if len(ranges) > 1:
        blocks()
        return b.load(total)
    # a row of at most BLOCK elements is one block: its loop alone, as the cascade would add it
    ((start, end),) = ranges
    with b.if_else(b.icmp_signed("<=", b.sub(end, start), i64(BLOCK))) as (one_block, several):
        with one_block:
            add_run([], start, end)
            b.store(b.load(block_sum), total)
        with several:
            blocks()
    return b.load(total)


def blocked_column_sums(b: ir.IRBuilder, head: ir.IRBuilder, identity: ir.Value,
                        ranges: Sequence[tuple[ir.Value, ir.Value]], columns: ir.Value,
                        element: Callable[[list[ir.Value], ir.Value], ir.Value], sums: Elements,
                        levels: Elements) -> None:
    """sums[c] = Σ element(axes, c) over the nest `ranges`, for each column c < `columns`: the
    rows in order, each one contiguous (vectorized) loop adding into `sums`, which holds the sums
    of the current block of `ROWS` positions of the last range (`_filled_blocks`); a full block
    is pushed into the columns' `Cascade`, whose levels are `levels` (`column_levels_bytes` of them)."""
    cascade = Cascade(levels, columns, head.alloca(I64))
    with for_range(b, i64(0), columns) as c:
        sums.store(c, identity)
    cascade.reset(b)

    def add_run(outer_axes: list[ir.Value], first: ir.Value, last: ir.Value) -> None:
        with for_range(b, first, last) as row:
            with for_range(b, i64(0), columns) as c:
                sums.store(c, b.fadd(sums.load(c), element([*outer_axes, row], c)))
    _filled_blocks(b, head.alloca(I64), ranges, ROWS, add_run, lambda: cascade.push(b, sums, identity))
    cascade.totals(b, sums)


def column_levels_bytes(b: ir.IRBuilder, rows: ir.Value, columns: ir.Value, element_bytes: int) -> ir.Value:
    """The bytes of the levels of a column sum over `rows` positions (`blocked_column_sums`):
    `columns` elements per bit of its most pushes, rows // ROWS (none below ROWS rows; never more
    than a 128th of its operand)."""
    pushes = b.sdiv(b.select(b.icmp_signed("<", rows, i64(0)), i64(0), rows), i64(ROWS))
    levels = b.sub(i64(64), b.ctlz(pushes, ir.Constant(I1, 0)))
    return b.mul(b.mul(levels, columns, flags=NOWRAP), i64(element_bytes), flags=NOWRAP)
