"""Blocked pairwise summation: how a float sum over many elements keeps its rounding error small.

A sum carried in one accumulator rounds once per element: its error bound grows like n·eps,
and in f32 it stops growing altogether (a sum of ones sticks at 2**24). A float `reduce_sum`
instead sums blocks and combines the blocks' sums pairwise, in a binary counter (`Cascade`):
level k holds the sum of 2**k blocks, and a new block carries into the levels as a binary
increment does, so every block's sum passes through at most ceil(log2(blocks)) further additions
before the levels (at most that many again) are added up. NumPy's pairwise_sum does the same with
blocks of 128.

- Reducing the last axis (`blocked_sum`): a block is `BLOCK` consecutive elements of the innermost
  reduced axis, summed from 0 by the vectorized loop with 4 interleaved vector accumulators, or as
  many shorter rows as make `BLOCK` elements (`_filled_blocks`).
- Keeping the last axis (`blocked_column_sums`, a column sum such as a bias gradient): a
  tile of `TILE_BYTES` of columns at a time, a block is `ROWS` consecutive positions of the
  innermost reduced axis, each row's run of columns one contiguous loop adding into the columns'
  partials.

Error bound (Higham, "Accuracy and Stability of Numerical Algorithms", §4.2, a sum computed
along a tree of additions whose deepest path has h additions): the computed s of x_1..x_n has

    |s - Σ x_i| <= (L + 2·ceil(log2(blocks)) + 1) · eps · Σ |x_i|  + O(eps²)

where L is the longest chain of additions inside a block: for a vectorized block, BLOCK / (4·lanes)
+ log2(4·lanes) (38 for f32 on AVX-512, 16 lanes; 70 on AVX2) for rows of at least BLOCK elements,
below 2·BLOCK = 4096 in the worst case (rows shorter than a vector, summed one by one); below
2·ROWS = 256 for a column sum. For n = 10**9 f32 that is ~ 80 eps, where one accumulator's bound
is 10**9 eps. A row no longer than BLOCK is one block, summed as before. The order of the
additions depends only on the shape, never on the thread count: a reduction is split across
threads by its kept axes only, so each output element is one thread's cascade.
"""
from __future__ import annotations

from typing import Callable, Sequence

import llvmlite.ir as ir

from adc.codegen.lowering.loops import I64, NOWRAP, PTR, for_range, i64, loop_nest

BLOCK = 2048            # elements of the innermost reduced axis summed by one vectorized loop
ROWS = 128              # rows of a column sum (last axis kept) summed into one block of partials
TILE_BYTES = 4096       # of each row, the columns (last-axis outputs) whose cascades advance together
LEVELS = 48             # a counter of blocks never carries past 48 levels: 2**48 blocks are beyond any memory


class Cascade:
    """Binary counters of block sums for `width` outputs side by side: level k of output c holds the
    sum of 2**k blocks when bit k of `count` is set. Its slots are on the stack, allocated by
    `builder` where it stands; a block's partials are `width` consecutive elements in memory."""

    def __init__(self, builder: ir.IRBuilder, ty: ir.Type, width: int):
        self.ty, self.width = ty, width
        self.levels = builder.alloca(ty, size=LEVELS * width)
        self.count = builder.alloca(I64)

    def reset(self, b: ir.IRBuilder) -> None:
        b.store(i64(0), self.count)

    def _at(self, b: ir.IRBuilder, base: ir.Value, k: ir.Value, c: ir.Value) -> ir.Value:
        return b.gep(base, [b.add(b.mul(k, i64(self.width), flags=NOWRAP), c, flags=NOWRAP)], source_etype=self.ty)

    def _bit(self, b: ir.IRBuilder, count: ir.Value, k: ir.Value) -> ir.Value:
        return b.icmp_unsigned("!=", b.and_(b.lshr(count, k), i64(1)), i64(0))

    def push(self, b: ir.IRBuilder, partials: ir.Value, used: ir.Value) -> None:
        """Add one block's partials (the first `used` of `width`): carry them up through the set
        bits (each a sum of as many blocks), then store them at the first clear one."""
        count = b.load(self.count)
        pre = b.block
        header = b.append_basic_block("cascade.carry.test")
        carry = b.append_basic_block("cascade.carry")
        done = b.append_basic_block("cascade.store")
        b.branch(header)
        b.position_at_end(header)
        k = b.phi(I64, "level")
        k.add_incoming(i64(0), pre)
        b.cbranch(self._bit(b, count, k), carry, done)
        b.position_at_end(carry)
        with for_range(b, i64(0), used) as c:
            into = self._at(b, partials, i64(0), c)
            b.store(b.fadd(b.load(self._at(b, self.levels, k, c)), b.load(into)), into)
        k.add_incoming(b.add(k, i64(1), flags=NOWRAP), b.block)
        b.branch(header)
        b.position_at_end(done)
        with for_range(b, i64(0), used) as c:
            b.store(b.load(self._at(b, partials, i64(0), c)), self._at(b, self.levels, k, c))
        b.store(b.add(count, i64(1), flags=NOWRAP), self.count)

    def totals(self, b: ir.IRBuilder, identity: ir.Value, used: ir.Value,
               emit: Callable[[ir.Value, ir.Value], None]) -> None:
        """emit(c, identity plus output c's set levels, smallest first: the latest blocks, then larger sums)."""
        count = b.load(self.count)
        with for_range(b, i64(0), used) as c:
            pre = b.block
            header = b.append_basic_block("cascade.total.test")
            body = b.append_basic_block("cascade.total")
            exit_ = b.append_basic_block("cascade.total.done")
            b.branch(header)
            b.position_at_end(header)
            k = b.phi(I64, "level")
            running = b.phi(self.ty, "total")
            k.add_incoming(i64(0), pre)
            running.add_incoming(identity, pre)
            b.cbranch(b.icmp_unsigned("!=", b.lshr(count, k), i64(0)), body, exit_)
            b.position_at_end(body)
            level = b.load(self._at(b, self.levels, k, c))
            added = b.select(self._bit(b, count, k), b.fadd(running, level), running)
            k.add_incoming(b.add(k, i64(1), flags=NOWRAP), body)
            running.add_incoming(added, body)
            b.branch(header)
            b.position_at_end(exit_)
            emit(c, running)


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


def _minimum(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def _filled_blocks(b: ir.IRBuilder, filled: ir.Value, ranges: Sequence[tuple[ir.Value, ir.Value]], size: int,
                   add_run: Callable[[list[ir.Value], ir.Value, ir.Value], None], flush: Callable[[], None]) -> None:
    """add_run(outer_axes, first, last) for each run of at most `size` positions of the last range,
    at every position of the others; flush() whenever the runs added since the last flush reach
    `size` positions, and after the last. A block is so one run of a long row, or as many short
    rows as make `size` (fewer than 2 * size positions): a cascade step per row of 3 was most of a
    full sum over [2M, 3]. `filled` is an i64 slot counting the positions not flushed."""
    b.store(i64(0), filled)

    def run(outer_axes: list[ir.Value], first: ir.Value, last: ir.Value) -> None:
        add_run(outer_axes, first, last)
        count = b.add(b.load(filled), b.sub(last, first), flags=NOWRAP)
        b.store(count, filled)
        with b.if_then(b.icmp_signed(">=", count, i64(size))):
            flush()
            b.store(i64(0), filled)
    _blocks(b, ranges, size, run)
    with b.if_then(b.icmp_signed(">", b.load(filled), i64(0))):
        flush()


def blocked_sum(b: ir.IRBuilder, head: ir.IRBuilder, ty: ir.Type, identity: ir.Value,
                ranges: Sequence[tuple[ir.Value, ir.Value]], element: Callable[[list[ir.Value]], ir.Value],
                interleave: int) -> ir.Value:
    """The sum of element(axes) over the nest `ranges` (the last innermost), in blocks of `BLOCK`
    positions of the last range (`_filled_blocks`) combined by a `Cascade`. Each run is one
    `reassoc` loop that LLVM vectorizes with `interleave` vectors in flight."""
    cascade = Cascade(head, ty, 1)
    # block_sum is only loaded and stored, so it lives in a register; the cascade reads a block
    # through a pointer it indexes, which would keep block_sum in memory on every row's chain
    block_sum, pushed, result, filled = head.alloca(ty), head.alloca(ty), head.alloca(ty), head.alloca(I64)
    cascade.reset(b)
    b.store(identity, block_sum)

    def add_run(outer_axes: list[ir.Value], first: ir.Value, last: ir.Value) -> None:
        with for_range(b, first, last, interleave=interleave) as i:
            b.store(b.fadd(b.load(block_sum), element([*outer_axes, i]), flags=("reassoc",)), block_sum)

    def flush() -> None:
        b.store(b.load(block_sum), pushed)
        cascade.push(b, pushed, i64(1))
        b.store(identity, block_sum)
    _filled_blocks(b, filled, ranges, BLOCK, add_run, flush)
    cascade.totals(b, identity, i64(1), lambda _, total: b.store(total, result))
    return b.load(result)


def blocked_column_sums(b: ir.IRBuilder, ty: ir.Type, identity: ir.Value,
                        ranges: Sequence[tuple[ir.Value, ir.Value]], columns: ir.Value,
                        element: Callable[[list[ir.Value], ir.Value], ir.Value],
                        emit: Callable[[ir.Value, ir.Value], None]) -> None:
    """emit(c, Σ element(axes, c) over the nest `ranges`) for each column c < `columns`: a
    tile of `TILE_BYTES` of columns at a time, each row's run of them one contiguous (vectorized)
    loop, in blocks of `ROWS` positions of the last range (`_filled_blocks`) combined by a
    `Cascade` per column."""
    tile = TILE_BYTES // (4 if isinstance(ty, ir.FloatType) else 8)
    saved = b.call(_stack_intrinsic(b.module, "llvm.stacksave.p0", PTR, []), [])
    cascade = Cascade(b, ty, tile)
    partials, filled = b.alloca(ty, size=tile), b.alloca(I64)
    with for_range(b, i64(0), columns, i64(tile)) as first_column:
        used = _minimum(b, i64(tile), b.sub(columns, first_column))
        cascade.reset(b)

        def clear() -> None:
            with for_range(b, i64(0), used) as c:
                b.store(identity, b.gep(partials, [c], source_etype=ty))

        def add_run(outer_axes: list[ir.Value], first: ir.Value, last: ir.Value) -> None:
            with for_range(b, first, last) as row:
                with for_range(b, i64(0), used) as c:
                    slot = b.gep(partials, [c], source_etype=ty)
                    b.store(b.fadd(b.load(slot), element([*outer_axes, row], b.add(first_column, c, flags=NOWRAP))),
                            slot)

        def flush() -> None:
            cascade.push(b, partials, used)
            clear()
        clear()
        _filled_blocks(b, filled, ranges, ROWS, add_run, flush)
        cascade.totals(b, identity, used, lambda c, total: emit(b.add(first_column, c, flags=NOWRAP), total))
    b.call(_stack_intrinsic(b.module, "llvm.stackrestore.p0", ir.VoidType(), [PTR]), [saved])


def _stack_intrinsic(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """llvm.stacksave / llvm.stackrestore: a column sum's ~200 KB of levels are taken off the stack
    where it ends, so the two column sums of a nest run fast then exact, or a column sum inside a
    loop, never hold more than one at a time."""
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, ir.FunctionType(ret, args), name)
