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

Only a kernel's nests: a loop body's run once per iteration over the loop's state, mostly small,
where a strip's bookkeeping costs more than it saves. `RowStrip` collects them as lowering emits them (`Emitter.run_nest` calls `add` instead of calling a nest
and `flush` before anything else); `parallel.call_strip` runs a strip of one nest as that nest's
own call. A nest joins when its outer loop runs over the same dimension and everything it reads
that the strip's nests write, it reads at its own row through ops that keep the row (elementwise
ops, broadcasts and reshapes keeping the leading axis, reductions keeping it), and it writes
nothing they read. What only the strip's nests read (the exps a softmax's sum and gradient both
read) needs no more than a strip's rows: each thread keeps them in scratch on its stack
(parallel.RING_BYTES), where they stay in cache, instead of in their buffer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import llvmlite.ir as ir

from adc.codegen.native import parallel
from adc.codegen.lowering.fusion import MATERIALIZING, Plan
from adc.ir.core import Func, Op, Value
from adc.ir.ops import OPS, REDUCTIONS
from adc.ir.types import Dim

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


class Emitting(Protocol):
    """What a RowStrip asks of the emitter of the function calling the nests (emitter.Emitter)."""

    b: ir.IRBuilder
    head: ir.IRBuilder
    func: Func
    plan: Plan
    buffers: dict[Value, ir.Value]

    def dim(self, d: Dim) -> ir.Value: ...

    def bytes_of(self, value: Value) -> ir.Value: ...


@dataclass
class RowStrip:
    """The nests waiting to run strip by strip, in order; what they write and read."""

    nests: list[Nest] = field(default_factory=list)
    values: set[Value] = field(default_factory=set)        # the values they compute into buffers
    written: set[ir.Value] = field(default_factory=set)    # those buffers
    read: set[ir.Value] = field(default_factory=set)       # the buffers they read
    readers: dict[Value, set[Value | None]] | None = None  # of the function's buffers (nest_readers)
    enabled: bool = True                                    # False: each nest runs alone

    def add(self, nest: Nest, em: Emitting) -> None:
        """Queue `nest`, first running those queued if it cannot join them, unless it can run
        ahead of them (`runs_ahead`): then it runs now and they stay queued."""
        if not self.joins(nest.outer, nest.roots, nest.written, em):
            if self.runs_ahead([em.buffers[v] for v in nest.reads], nest.written):
                parallel.call_loop(em.b, em.head, nest.loop, em.dim(nest.outer), nest.work, nest.grain, nest.buffers)
                return
            self.flush(em)
        self.nests.append(nest)
        self.values.update(nest.roots)
        self.written.update(nest.written)
        self.read.update(em.buffers[v] for v in nest.reads)

    def joins(self, outer: Dim, roots: list[Value], written: list[ir.Value], em: Emitting) -> bool:
        """Whether a nest over the rows of `outer` computing `roots` into `written` may run strip
        by strip after those queued (any may, when none is)."""
        return not self.nests or (self.enabled and outer == self.nests[0].outer and not (self.read | self.written) & set(written)
                                  and _reads_rows(roots, em.plan, em.buffers, self.values, self.written))

    def runs_ahead(self, read: list[ir.Value], written: list[ir.Value]) -> bool:
        """Whether a nest reading buffers `read` and writing `written` may run before the queued
        nests: it reads nothing they write and writes nothing they read or write. (A VJP's
        constants over other rows, an identity matrix made in the middle of its nests over the
        stacked systems, then leaves the strip whole.)"""
        return self.enabled and not self.written & set(read) and not (self.read | self.written) & set(written)

    def flush(self, em: Emitting) -> None:
        """Emit the queued nests' calls: one nest as it always runs, several strip by strip, the
        values only they read in a strip's rows of scratch (`_strip_local`)."""
        nests, self.nests = self.nests, []
        self.values, self.written, self.read = set(), set(), set()
        if len(nests) == 1:
            (nest,) = nests
            parallel.call_loop(em.b, em.head, nest.loop, em.dim(nest.outer), nest.work, nest.grain, nest.buffers)
        elif nests:
            work = nests[0].work
            for nest in nests[1:]:
                work = em.b.add(work, nest.work)
            outer = em.dim(nests[0].outer)
            if self.readers is None:
                self.readers = nest_readers(em.func, em.plan)
            values = _strip_local([r for n in nests for r in n.roots], em, self.readers)
            local = [(em.buffers[v], em.b.udiv(em.bytes_of(v), parallel.at_least_one(em.b, outer)), slot)
                     for v, slot in zip(values, _shared_slots(nests, values, em))]
            parallel.call_strip(em.b, em.head, [(n.loop, n.buffers) for n in nests], outer, work, local,
                                max(n.grain for n in nests))


def queued_by_rule(op: Op) -> bool:
    """Whether `op` is lowered by a rule that queues its nest here like any other (a reduction's;
    matrices.over_matrices' for stacked matrices and small stacked matmuls) or, when it cannot,
    runs the queued ones first itself."""
    return op.name in REDUCTIONS or op.name == "matmul" or OPS[op.name].has("stacked_matrices")


def nest_readers(func: Func, plan: Plan) -> dict[Value, set[Value | None]]:
    """Each buffer of `func` -> the values whose nests read it (None: something else reads it: an
    op lowered by a rule of its own, a return). A view's readers read its operand's buffer too."""
    readers: dict[Value, set[Value | None]] = {}
    for op in func.ops:
        r = op.results[0] if len(op.results) == 1 else None
        if r is not None and (r not in plan.materialized or not plan.has_own_loop(r)):
            continue                    # fused, or stored by another value's nest: read for by its consumer
        nest = r if r is not None and (op.name not in MATERIALIZING or queued_by_rule(op)) else None
        for leaf in plan.leaves(op) if r is not None else op.operands:
            readers.setdefault(leaf, set()).add(nest)
            while leaf in plan.views:
                leaf = plan.views[leaf]
                readers.setdefault(leaf, set()).add(nest)
    for v in func.returns:
        readers.setdefault(v, set()).add(None)
    return readers


def _shared_slots(nests: list[Nest], values: list[Value], em: Emitting) -> list[int]:
    """A slot of scratch for each of the strip-local `values`: a value lives from the first of
    `nests` writing it to the last reading it, and values never live at once share one. (A VJP's
    dozen [B, 16, 16] intermediates took 2 KB a row each: a strip's rows of them outgrew the ring.)"""
    live: dict[ir.Value, list[int]] = {}
    for k, nest in enumerate(nests):
        for buffer in [*nest.written, *(em.buffers[v] for v in nest.reads)]:
            live.setdefault(buffer, [k, k])[1] = k
    return share_slots([(live[em.buffers[v]][0], live[em.buffers[v]][1]) for v in values])


def share_slots(lives: list[tuple[int, int]]) -> list[int]:
    """Slot numbers for values living over the closed ranges `lives` (first and last step), those
    sharing a slot never living at once: greedy interval colouring in order of birth, as many slots
    as values live at once."""
    slot_of = [0] * len(lives)
    ends: list[int] = []            # the last step using each slot so far
    for k in sorted(range(len(lives)), key=lambda k: lives[k][0]):
        born, dies = lives[k]
        slot = next((j for j, end in enumerate(ends) if end < born), len(ends))
        ends[slot:slot + 1] = [dies]
        slot_of[k] = slot
    return slot_of


def _strip_local(roots: list[Value], em: Emitting, readers: dict[Value, set[Value | None]]) -> list[Value]:
    """Those of `roots` (what the strip's nests compute, in order) that only its nests read, in a
    buffer of their own (no view, returned reshape, scatter or transposed read shares it): a
    strip's rows of them are all anyone needs, so they need not go to memory."""
    plan, computed = em.plan, set(roots)
    regrouped = {x for view, x in plan.views.items() if view.type.shape[:1] != x.type.shape[:1]}
    shared = regrouped | set(plan.into) | set(plan.scattered_into)
    return [v for v in roots if v.type.rank and v not in shared and readers.get(v, {None}) <= computed]


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
    if op.name == "transpose":
        return op.attrs["perm"][0] == 0
    if op.name == "matmul" or "stacked_matrices" in OPS[op.name].traits:
        return op.operands[0].type.rank >= 3      # the leading axis stacks matrices (not a matrix's rows)
    return op.name == "reshape" or "elementwise" in OPS[op.name].traits
