"""Loop-building blocks for lowering: element positions, counted loops, outlined loop functions.

Lowering (its rules, rules/) describes what each element is; this module owns how
loops look, so every loop nest has the shape LLVM's loop vectorizer expects:
a counted `i64` induction variable from `start` to `end` (`icmp slt`, `add nuw
nsw`), and each nest lives in its own internal function whose buffer pointers
are `noalias` parameters, so the vectorizer needs no run-time alias checks.

An outlined loop function has the signature

    internal void @loop_<n>(i64 start, i64 end, ptr noalias dims, ptr noalias out, ptr noalias in...)

and runs the outermost loop over [start, end) only, so the range can be split
between threads.

    entry:   br header
    header:  %i = phi [start, entry], [%i.next, body];  br (%i < end), body, exit
    body:    ...;  %i.next = add nuw nsw %i, 1;  br header
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Callable, Iterator, Sequence

import llvmlite.ir as ir

from adc.ir.types import Dim, SymDim

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()
NOWRAP = ("nuw", "nsw")
TRANSPOSE_TILE = 16     # a transpose's nest walks 16 x 16 blocks: 16 cache lines read, 16 written
# A kernel of fixed sizes is compiled with LLVM's unrolling (compiler.lowered_kernel), for its short
# loops: a row of 5 unrolled, the loop around it vectorizes across rows (the [600, 5] cross-entropy's
# value and gradient: 3.8 us rolled, 2.4 unrolled). A longer loop vectorizes itself, and unrolled,
# the loop around it vectorized with interleaved or scattered stores costs more: the Brusselator's
# direct nonzeros (a [2, 32, 32] concat, a select over rows of 6) took 2.3 us rolled, 2.8 with rows
# of 6 unrolled, 4.7 with rows of 32 too. So loops of more iterations than this stay rolled.
ROLLED_ABOVE = 5


def i64(n: int) -> ir.Constant:
    return ir.Constant(I64, n)


def stack_array(head: ir.IRBuilder, b: ir.IRBuilder, etype: ir.Type, values: Sequence[ir.Value]) -> ir.Value:
    """An array of `values` (of `etype`) on the stack, as an opaque pointer: allocated by `head` (in
    the entry block, so once per call), filled by `b`."""
    array = head.bitcast(head.alloca(etype, size=max(1, len(values))), PTR)
    for k, v in enumerate(values):
        b.store(v, b.gep(array, [i64(k)], source_etype=etype))
    return array


def evaluate_dim(b: ir.IRBuilder, d: Dim, symbols: dict[str, ir.Value]) -> ir.Value:
    """A dimension polynomial as i64 arithmetic over the symbols' run-time values."""
    if not isinstance(d, SymDim):
        return i64(int(d))
    total = None
    for mono, coeff in d.terms:
        term = i64(coeff)
        for name in mono:
            term = b.mul(term, symbols[name], flags=("nsw",))
        total = term if total is None else b.add(total, term, flags=("nsw",))
    return total


class Index:
    """The position of one element: per-axis i64 values, its row-major linear index, or both.

    Each form is derived from the other on first use, so a flattened loop that
    only ever reads buffers of its own shape never divides. The derived form is
    emitted at the end of the block the index was made in (`home`), which
    dominates every use: a first use inside one arm of a branch (a concat's part,
    a gather from a possibly empty axis) would otherwise define it where a later
    use outside that arm cannot see it.
    """

    def __init__(self, b: ir.IRBuilder, extents: Sequence[ir.Value],
                 axes: Sequence[ir.Value] | None = None, flat: ir.Value | None = None):
        self.b = b
        self.home = b.block
        self.extents = tuple(extents)
        self._axes = tuple(axes) if axes is not None else None
        self._flat = flat
        if not self.extents:
            self._axes, self._flat = (), i64(0)

    @property
    def axes_known(self) -> bool:
        """Whether the per-axis form is at hand (given, or derived already): reading it divides no more."""
        return self._axes is not None

    @property
    def axes(self) -> tuple[ir.Value, ...]:
        if self._axes is None:
            with self.b.goto_block(self.home):
                rest, axes = self._flat, []
                for extent in reversed(self.extents[1:]):
                    axes.append(self.b.urem(rest, extent))
                    rest = self.b.udiv(rest, extent)
            self._axes = (rest, *reversed(axes))
        return self._axes

    @property
    def flat(self) -> ir.Value:
        if self._flat is None:
            with self.b.goto_block(self.home):
                flat = self._axes[0]
                for extent, axis in zip(self.extents[1:], self._axes[1:]):
                    flat = self.b.add(self.b.mul(flat, extent, flags=NOWRAP), axis, flags=NOWRAP)
            self._flat = flat
        return self._flat


@contextmanager
def for_range(b: ir.IRBuilder, start: ir.Value, end: ir.Value, step: ir.Value | None = None,
              interleave: int = 1) -> Iterator[ir.Value]:
    """for (i = start; i < end; i += step): the `with` block emits the body; leaves `b` after the loop.
    `interleave` > 1 asks LLVM to vectorize it with that many vectors in flight (`interleaved`)."""
    pre = b.block
    header = b.append_basic_block("loop.header")
    block = b.append_basic_block("loop.body")
    exit_ = b.append_basic_block("loop.exit")
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64, "i")
    i.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", i, end), block, exit_)
    b.position_at_end(block)
    yield i
    following = b.add(i, step if step is not None else i64(1), flags=NOWRAP)
    i.add_incoming(following, b.block)
    latch = b.branch(header)
    hints = loop_hints(b.module, interleave, _long(start, end, step))
    if hints is not None:
        latch.set_metadata("llvm.loop", hints)
    b.position_at_end(exit_)


def _long(start: ir.Value, end: ir.Value, step: ir.Value | None) -> bool:
    """A loop of constant trip count above ROLLED_ABOVE (a kernel of fixed sizes has those)."""
    if not all(isinstance(v, ir.Constant) for v in (start, end, step or i64(1))):
        return False
    return (int(end.constant) - int(start.constant)) // max(int((step or i64(1)).constant), 1) > ROLLED_ABOVE


def loop_hints(module: ir.Module, interleave: int, rolled: bool) -> ir.values.MDValue | None:
    """Loop metadata for LLVM, None when there is nothing to ask:
    - `interleave` > 1: that many vectors in flight, which its vectorizer otherwise never
      interleaves (Target.optimize): a reduction then keeps `interleave` independent accumulators,
      so its loop is not bound by the latency of one chain (a row max: compare, blend, max per vector);
    - `rolled`: never unrolled (ROLLED_ABOVE).
    A loop's ID is a node whose first operand is itself, which llvmlite cannot build but by hand."""
    hints = []
    if interleave > 1:
        hints.append(module.add_metadata([ir.MetaDataString(module, "llvm.loop.interleave.count"),
                                          ir.Constant(I32, interleave)]))
    if rolled:
        hints.append(module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")]))
    if not hints:
        return None
    loop_id = ir.values.MDValue(module, [], name=str(len(module.metadata)))
    loop_id.operands = (loop_id, *hints)
    return loop_id


def counted_loop(b: ir.IRBuilder, start: ir.Value, end: ir.Value, body: Callable[[ir.Value], None]) -> None:
    """for (i = start; i < end; ++i) body(i); leaves `b` after the loop."""
    with for_range(b, start, end) as i:
        body(i)


def loop_nest(b: ir.IRBuilder, ranges: Sequence[tuple[ir.Value, ir.Value]],
              body: Callable[[list[ir.Value]], None], interleave: int = 1) -> None:
    """Nested counted loops, the first range outermost; body gets the induction variables; the
    innermost is `interleave`d (for_range). The loops are entered one after the other on an
    ExitStack: a nest is as deep as a tensor's rank."""
    with ExitStack() as loops:
        last = len(ranges) - 1
        body([loops.enter_context(for_range(b, start, end, interleave=interleave if k == last else 1))
              for k, (start, end) in enumerate(ranges)])


def pieced_loop_nest(b: ir.IRBuilder, ranges: Sequence[tuple[ir.Value, ir.Value]],
                     pieces: Sequence[tuple[ir.Value, ir.Value]], body: Callable[[list[ir.Value], int], None]) -> None:
    """loop_nest with the last range walked in `pieces`, one loop after the other: piece k is the
    part of the last range inside [start_k, end_k), its body told k. An index-set split: the
    body of each piece can read its own operand unconditionally, where a single loop would branch
    per element (and vectorize the branch into masked loads of every operand)."""
    with ExitStack() as loops:
        outer = [loops.enter_context(for_range(b, start, end)) for start, end in ranges[:-1]]
        first, last = ranges[-1]
        for k, (start, end) in enumerate(pieces):
            low = b.select(b.icmp_signed(">", start, first), start, first)
            high = b.select(b.icmp_signed("<", end, last), end, last)
            with for_range(b, low, high) as i:
                body([*outer, i], k)


def tiled_loop_nest(b: ir.IRBuilder, ranges: Sequence[tuple[ir.Value, ir.Value]], tiled: int, tile: int,
                    body: Callable[[list[ir.Value]], None]) -> None:
    """loop_nest with axis `tiled` and the last axis walked in tile x tile blocks (the rest in
    order): a nest that reads a buffer along `tiled` (a transpose moving its rows' axis) touches
    `tile` cache lines per block for reads and `tile` for writes, not a line per element."""
    last = len(ranges) - 1
    axes: list[ir.Value | None] = [None] * len(ranges)
    step = i64(tile)
    with ExitStack() as loops:
        corners = {}
        for k, (start, end) in enumerate(ranges):
            if k in (tiled, last):
                corners[k] = loops.enter_context(for_range(b, start, end, step))
            else:
                axes[k] = loops.enter_context(for_range(b, start, end))
        for k in (tiled, last):
            corner, end = corners[k], ranges[k][1]
            bound = b.add(corner, step, flags=NOWRAP)
            axes[k] = loops.enter_context(for_range(b, corner, b.select(b.icmp_signed("<", bound, end), bound, end)))
        body(axes)


def if_then_else(b: ir.IRBuilder, cond: ir.Value, then: Callable[[], ir.Value],
                 otherwise: Callable[[], ir.Value]) -> ir.Value:
    """cond ? then() : otherwise(), evaluating only the taken side (it may load)."""
    with b.if_else(cond) as (on_true, on_false):
        with on_true:
            yes = then()
            yes_block = b.block
        with on_false:
            no = otherwise()
            no_block = b.block
    merged = b.phi(yes.type)
    merged.add_incoming(yes, yes_block)
    merged.add_incoming(no, no_block)
    return merged


def outline(module: ir.Module, stem: str, n_buffers: int) -> ir.Function:
    """A new, empty internal `void(i64 start, i64 end, ptr dims, ptr noalias buffers...)`.

    `noinline`: LLVM optimizes and vectorizes each nest once (the bulk of a module's compile time),
    not once per caller; a nest that may run on several threads is inlined into its task instead,
    its only caller (parallel.call_loop).
    """
    name = f"adc.{stem}.{len(module.globals)}"
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64, I64, PTR] + [PTR] * n_buffers), name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.attributes.add("noinline")
    for arg in fn.args[2:]:
        arg.add_attribute("noalias")
    return fn
