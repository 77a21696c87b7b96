"""Blocked pairwise summation: how a float sum over many elements keeps its rounding error small.

A sum carried in one accumulator rounds once per element: its error bound grows like n·eps,
and in f32 it stops growing altogether (a sum of ones sticks at 2**24). A float `reduce_sum`
instead sums blocks of `BLOCK` consecutive elements of its innermost reduced axis with the
vectorized, interleaved loop (a block starts from 0), and combines the blocks' partial sums
pairwise, in a binary counter (`Cascade`): the partial at level k is the sum of 2**k blocks,
and a new block carries into the levels as a binary increment does, so every block's sum
passes through at most ceil(log2(blocks)) + 1 further additions. NumPy's pairwise_sum does
the same with blocks of 128.

Error bound (Higham, "Accuracy and Stability of Numerical Algorithms", §4.2): the computed sum
s of x_1..x_n satisfies

    |s - Σ x_i| <= (L + ceil(log2(ceil(n / BLOCK))) + 1) · eps · Σ |x_i|  + O(eps²)

where L <= BLOCK is the longest chain of additions inside a block: BLOCK / (lanes · 4) + log2(lanes · 4)
when LLVM vectorizes the block's loop (4 interleaved vectors of `lanes` elements: 32 for f32 on
AVX-512, so L <= 68 for BLOCK = 2048) and BLOCK itself at worst. For n = 10**9 f32 that is
~ 90 eps, where one accumulator's bound is 10**9 eps. A row no longer than BLOCK is one block,
summed exactly as before. The order of the additions depends only on the shape, never on the
thread count: a reduction is split across threads by its kept axes only, so each output
element is one thread's cascade.
"""
from __future__ import annotations

from typing import Callable, Sequence

import llvmlite.ir as ir

from adc.codegen.loops import I64, NOWRAP, for_range, i64, loop_nest

BLOCK = 2048            # elements of the innermost reduced axis summed by one vectorized loop
LEVELS = 64             # a binary counter of i64 blocks never carries past 64 levels


class Cascade:
    """A binary counter of block sums: `levels[k]` holds the sum of 2**k blocks when bit k of
    `count` is set. Its slots live on the stack of the function whose `head` made it."""

    def __init__(self, head: ir.IRBuilder, ty: ir.Type):
        self.ty = ty
        self.levels = head.alloca(ty, size=LEVELS)
        self.count = head.alloca(I64)

    def reset(self, b: ir.IRBuilder) -> None:
        b.store(i64(0), self.count)

    def _level(self, b: ir.IRBuilder, k: ir.Value) -> ir.Value:
        return b.gep(self.levels, [k], source_etype=self.ty)

    def _bit(self, b: ir.IRBuilder, count: ir.Value, k: ir.Value) -> ir.Value:
        return b.icmp_unsigned("!=", b.and_(b.lshr(count, k), i64(1)), i64(0))

    def push(self, b: ir.IRBuilder, partial: ir.Value) -> None:
        """Add one block's sum: carry it up through the set bits (each a sum of as many blocks),
        then store it at the first clear one."""
        count = b.load(self.count)
        pre = b.block
        header = b.append_basic_block("cascade.carry.test")
        carry = b.append_basic_block("cascade.carry")
        done = b.append_basic_block("cascade.store")
        b.branch(header)
        b.position_at_end(header)
        k = b.phi(I64, "level")
        value = b.phi(self.ty, "carried")
        k.add_incoming(i64(0), pre)
        value.add_incoming(partial, pre)
        b.cbranch(self._bit(b, count, k), carry, done)
        b.position_at_end(carry)
        k.add_incoming(b.add(k, i64(1), flags=NOWRAP), carry)
        value.add_incoming(b.fadd(b.load(self._level(b, k)), value), carry)
        b.branch(header)
        b.position_at_end(done)
        b.store(value, self._level(b, k))
        b.store(b.add(count, i64(1), flags=NOWRAP), self.count)

    def total(self, b: ir.IRBuilder, identity: ir.Value) -> ir.Value:
        """`identity` plus the set levels, smallest first (the most recent blocks, then larger sums)."""
        count = b.load(self.count)
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
        level = b.load(self._level(b, k))
        added = b.select(self._bit(b, count, k), b.fadd(running, level), running)
        k.add_incoming(b.add(k, i64(1), flags=NOWRAP), body)
        running.add_incoming(added, body)
        b.branch(header)
        b.position_at_end(exit_)
        return running


def blocked_sum(b: ir.IRBuilder, head: ir.IRBuilder, ty: ir.Type, identity: ir.Value,
                ranges: Sequence[tuple[ir.Value, ir.Value]], element: Callable[[list[ir.Value]], ir.Value],
                interleave: int) -> ir.Value:
    """The sum of element(axes) over the nest `ranges` (the last innermost), in blocks of
    `BLOCK` along the last range combined by a `Cascade`. Each block is one `reassoc` loop that
    LLVM vectorizes with `interleave` vectors in flight."""
    cascade = Cascade(head, ty)
    block_sum = head.alloca(ty)
    cascade.reset(b)
    *outer, (start, end) = ranges

    def blocks(outer_axes: list[ir.Value]) -> None:
        with for_range(b, start, end, i64(BLOCK)) as first:
            bound = b.add(first, i64(BLOCK), flags=NOWRAP)
            last = b.select(b.icmp_signed("<", bound, end), bound, end)
            b.store(identity, block_sum)
            with for_range(b, first, last, interleave=interleave) as i:
                b.store(b.fadd(b.load(block_sum), element([*outer_axes, i]), flags=("reassoc",)), block_sum)
            cascade.push(b, b.load(block_sum))
    if outer:
        loop_nest(b, outer, blocks)
    else:
        blocks([])
    return cascade.total(b, identity)
