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
- The cascade's steps (a push, the totals) run once a block, the same for every sum: they are the
  runtime library's functions (`define_runtime`), which a sum calls with the rows it checked.

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

from adc.abi import RUNTIME_CASCADE_STEPS, RUNTIME_GEMM_DTYPES, runtime_cascade_symbol
from adc.codegen.lowering.element_types import REGISTER_TYPES
from adc.codegen.lowering.loops import I1, I64, NOWRAP, PTR, for_range, i64, loop_nest

_DTYPES = {REGISTER_TYPES[dtype]: str(dtype) for dtype in RUNTIME_GEMM_DTYPES}    # element type -> "f32", "f64"
BLOCK = 2048            # elements of the innermost reduced axis summed by one vectorized loop
ROWS = 128              # rows of a column sum (last axis kept) summed into one block of the output row
LEVELS = 48             # a counter of blocks never carries past 48 levels: 2**48 blocks are beyond any memory


@dataclass(frozen=True)
class Elements:
    """A buffer's contiguous elements by index: load(i), store(i, value) (its owner checks them in a
    bounds-checked build), and row(first, count, store): a pointer to element `first`, once its owner
    has checked the `count` elements from it (what a loop outlined into a function reads or writes)."""
    load: Callable[[ir.Value], ir.Value]
    store: Callable[[ir.Value, ir.Value], None]
    row: Callable[[ir.Value, ir.Value, bool], ir.Value]

    @classmethod
    def at(cls, b: ir.IRBuilder, base: ir.Value, ty: ir.Type) -> "Elements":
        """Those of memory no user reaches (a slot on the stack)."""
        return cls(lambda i: b.load(b.gep(base, [i], source_etype=ty), typ=ty),
                   lambda i, value: b.store(value, b.gep(base, [i], source_etype=ty)),
                   lambda first, count, store: b.gep(base, [first], source_etype=ty))


class Cascade:
    """Binary counters of block sums for `width` outputs side by side: level k of output c, element
    k·width + c of `levels`, holds the sum of 2**k blocks when bit k of `count` (an i64 slot) is set.

    Its steps run once a block (every ROWS rows of a column sum, every BLOCK elements of a sum), so
    their loops are the runtime library's (`define_runtime`), compiled once, which every sum calls:
    in each sum's own function, LLVM vectorized and optimized them again (two column sums were 42
    of the 50 ms of LLVM optimization of mlp_loss's backward half)."""

    def __init__(self, levels: Elements, width: ir.Value, count: ir.Value, ty: ir.Type):
        self.levels, self.width, self.count, self.ty = levels, width, count, ty

    def reset(self, b: ir.IRBuilder) -> None:
        b.store(i64(0), self.count)

    def push(self, b: ir.IRBuilder, block: Elements, identity: ir.Value) -> None:
        """Add one block's sums (`width` of them in `block`, set back to `identity`): carried up
        through the set bits of the count, its trailing ones (each a sum of as many blocks), then
        stored at the first clear one."""
        count = b.load(self.count)
        carries = b.cttz(b.not_(count), ir.Constant(I1, 0))
        levels = self.levels.row(i64(0), b.mul(b.add(carries, i64(1), flags=NOWRAP), self.width, flags=NOWRAP), True)
        b.call(_step(b.module, "push", self.ty),
               [levels, self.width, carries, block.row(i64(0), self.width, True), identity])
        b.store(b.add(count, i64(1), flags=NOWRAP), self.count)

    def totals(self, b: ir.IRBuilder, sums: Elements) -> None:
        """Add each output's set levels to its element of `sums` (the unfinished block's), smallest
        first: the latest blocks, then larger sums."""
        count = b.load(self.count)
        top = b.sub(i64(64), b.ctlz(count, ir.Constant(I1, 0)))     # levels up to the highest set bit
        levels = self.levels.row(i64(0), b.mul(top, self.width, flags=NOWRAP), False)
        b.call(_step(b.module, "totals", self.ty), [levels, self.width, count, sums.row(i64(0), self.width, True)])


def define_runtime(module: ir.Module) -> None:
    """The runtime library's cascade steps, for each float dtype (abi.runtime_cascade_symbol):
        push(levels, width, carries, block, identity)    totals(levels, width, count, sums)
    Their pointers are rows a caller checked (Elements.row), which never overlap."""
    for dtype in RUNTIME_GEMM_DTYPES:
        ty = REGISTER_TYPES[dtype]
        for step in RUNTIME_CASCADE_STEPS:
            fn = _step(module, step, ty)
            b = ir.IRBuilder(fn.append_basic_block("entry"))
            (_push if step == "push" else _totals)(b, ty, *fn.args)
            b.ret_void()


def _step(module: ir.Module, step: str, ty: ir.Type) -> ir.Function:
    """Cascade step `step` for elements of type `ty`: the runtime library's function, declared in
    `module` on first use (or to be defined there, in the library's own)."""
    symbol = runtime_cascade_symbol(step, _DTYPES[ty])
    fn = module.globals.get(symbol)
    if fn is None:
        params = [PTR, I64, I64, PTR, ty] if step == "push" else [PTR, I64, I64, PTR]
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), symbol)
        fn.attributes.add("nounwind")
        for arg in fn.args:
            if arg.type == PTR:
                arg.add_attribute("noalias")
    return fn


def _push(b: ir.IRBuilder, ty: ir.Type, levels: ir.Value, width: ir.Value, carries: ir.Value, block: ir.Value,
          identity: ir.Value) -> None:
    levels, block = Elements.at(b, levels, ty), Elements.at(b, block, ty)
    with for_range(b, i64(0), carries) as k:
        with for_range(b, i64(0), width) as c:
            block.store(c, b.fadd(levels.load(_level(b, width, k, c)), block.load(c)))
    with for_range(b, i64(0), width) as c:
        levels.store(_level(b, width, carries, c), block.load(c))
        block.store(c, identity)


def _totals(b: ir.IRBuilder, ty: ir.Type, levels: ir.Value, width: ir.Value, count: ir.Value, sums: ir.Value) -> None:
    levels, sums = Elements.at(b, levels, ty), Elements.at(b, sums, ty)
    with for_range(b, i64(0), b.sub(i64(64), b.ctlz(count, ir.Constant(I1, 0)))) as k:
        with b.if_then(b.icmp_unsigned("!=", b.and_(b.lshr(count, k), i64(1)), i64(0))):
            with for_range(b, i64(0), width) as c:
                sums.store(c, b.fadd(sums.load(c), levels.load(_level(b, width, k, c))))


def _level(b: ir.IRBuilder, width: ir.Value, k: ir.Value, c: ir.Value) -> ir.Value:
    """Element k·width + c of the levels: level k of output c."""
    return b.add(b.mul(k, width, flags=NOWRAP), c, flags=NOWRAP)


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
    cascade = Cascade(Elements.at(b, head.alloca(ty, size=LEVELS), ty), i64(1), head.alloca(I64), ty)
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
    cascade = Cascade(levels, columns, head.alloca(I64), identity.type)
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
