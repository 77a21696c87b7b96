"""Row strips: consecutive loop nests over the same rows run a strip of rows at a time.

A softmax cross-entropy over logits [B, C] is three nests over the B rows (a row's max, the sum
of its exps, the gradient), each reading the whole logits: three passes over memory when the
logits outgrow the caches. When each later nest reads what an earlier one wrote only at its own
row, the nests can take turns on strips of rows instead, so a strip's rows stay in cache
between them:

    for s in range(start, end, strip):      # [start, end): the calling thread's share of rows
        reduce_max.loop(s, min(s + strip, end), ...)
        reduce_sum.loop(s, min(s + strip, end), ...)
        mul.loop(s, min(s + strip, end), ...)

`RowStrip` collects them as lowering emits them (lower.py calls `add` instead of calling a nest
and `flush` before anything else); `parallel.call_strip` runs a strip of one nest as that nest's
own call. A nest joins when its outer loop runs over the same dimension and everything it reads
that the strip's nests write, it reads at its own row through ops that keep the row (elementwise
ops, broadcasts and reshapes keeping the leading axis, reductions keeping it), and it writes
nothing they read.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import llvmlite.ir as ir

from adc.codegen import parallel
from adc.codegen.fusion import Plan
from adc.ir.core import Op, Value
from adc.ir.ops import OPS
from adc.ir.types import Dim

REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod"})


@dataclass(frozen=True)
class Nest:
    """One outlined nest's call: `loop(start, end, *buffers)` over the rows of `outer`, computing
    `roots` (the value it stores, then the others it also stores) into `written` buffers."""

    loop: ir.Function
    outer: Dim
    work: ir.Value          # elements it touches, for the threading threshold
    grain: int
    buffers: list[ir.Value]
    roots: list[Value]
    written: list[ir.Value]
    reads: list[Value]      # the values whose buffers it reads


@dataclass
class RowStrip:
    """The nests waiting to run strip by strip, in order; what they write and read."""

    nests: list[Nest] = field(default_factory=list)
    values: set[Value] = field(default_factory=set)        # the values they compute into buffers
    written: set[ir.Value] = field(default_factory=set)    # those buffers
    read: set[ir.Value] = field(default_factory=set)       # the buffers they read

    def add(self, b: ir.IRBuilder, head: ir.IRBuilder, nest: Nest, plan: Plan, buffers: dict[Value, ir.Value],
            dim: Callable[[Dim], ir.Value]) -> None:
        """Queue `nest`, first running those queued if it cannot join them."""
        if not self.joins(nest.outer, nest.roots, nest.written, plan, buffers):
            self.flush(b, head, dim)
        self.nests.append(nest)
        self.values.update(nest.roots)
        self.written.update(nest.written)
        self.read.update(buffers[v] for v in nest.reads)

    def joins(self, outer: Dim, roots: list[Value], written: list[ir.Value], plan: Plan,
              buffers: dict[Value, ir.Value]) -> bool:
        """Whether a nest over the rows of `outer` computing `roots` into `written` may run strip
        by strip after those queued (any may, when none is)."""
        return not self.nests or (outer == self.nests[0].outer and not (self.read | self.written) & set(written)
                                  and _reads_rows(roots, plan, buffers, self.values, self.written))

    def flush(self, b: ir.IRBuilder, head: ir.IRBuilder, dim: Callable[[Dim], ir.Value]) -> None:
        """Emit the queued nests' calls: one nest as it always runs, several strip by strip."""
        nests, self.nests = self.nests, []
        self.values, self.written, self.read = set(), set(), set()
        if len(nests) == 1:
            (nest,) = nests
            parallel.call_loop(b, head, nest.loop, dim(nest.outer), nest.work, nest.grain, nest.buffers)
        elif nests:
            work = nests[0].work
            for nest in nests[1:]:
                work = b.add(work, nest.work)
            parallel.call_strip(b, head, [(n.loop, n.buffers) for n in nests], dim(nests[0].outer), work)


def _reads_rows(roots: list[Value], plan: Plan, buffers: dict[Value, ir.Value], values: set[Value],
                written: set[ir.Value]) -> bool:
    """Whether computing row b of `roots` reads what the strip writes (`values`, in `written`
    buffers) only at row b, through ops that keep the leading axis (a view, a reshape reading
    its operand's buffer, is followed to that operand)."""
    producers, inside = plan.producers, set(roots)
    stack = [(r, True) for r in roots]
    seen: set[tuple[Value, bool]] = set()
    while stack:
        v, aligned = stack.pop()
        if (v, aligned) in seen:
            continue
        seen.add((v, aligned))
        if v not in producers or (v in plan.materialized and v not in inside and v not in plan.views):
            if buffers.get(v) in written and not (aligned and v in values):
                return False
            continue
        op = producers[v]
        stack += ((w, aligned and _keeps_rows(op, k)) for k, w in enumerate(op.operands))
    return True


def _keeps_rows(op: Op, k: int) -> bool:
    """Whether element (b, ...) of `op`'s result reads its operand `k` only in row b."""
    x, result = op.operands[k], op.result
    if not x.type.rank or not result.type.rank or x.type.shape[0] != result.type.shape[0]:
        return False
    if op.name == "broadcast":
        return op.attrs["dims"][0] == 0
    if op.name in REDUCTIONS:
        return 0 not in op.attrs["axes"]
    return op.name == "reshape" or "elementwise" in OPS[op.name].traits
