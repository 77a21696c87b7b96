"""Fusion planning: which values of a kernel get a buffer, and which are computed in a consumer's loop.

Lowering emits one loop nest per materialized value; every other value is
computed on demand, element by element, inside the loop of the value that
consumes it. A value is materialized when it is

- a parameter (its input buffer) or a returned value (written straight into its output buffer);
- a result of a control-flow op (for, while, if) or one of its operands: the region functions it
  runs read and write buffers;
- the result of a reduction, scan, matmul or scatter, an operand of matmul (gemm reads memory),
  another operand an op's record says is `buffered` (the runtime library's routines read it), or
  an operand of an op on stacked small matrices unrolled over SIMD lanes (`unrolled_over_lanes`:
  each element read many times, W matrices at once) — but a transpose of the last two axes that
  only they read is neither computed nor stored: the matmul reads its operand's buffer with
  swapped strides, the lanes its element (j, i) (`transposed`);
- the base of a scatter or a slice_add (an op that `updates` its first operand) that nothing else
  reads: its own (parallel) loop nest writes it straight into the op's buffer, and the op then only
  adds or writes its updates (`scattered_into`); a chain of them (the cotangent of a value sliced
  several times, each slice's adding to the rest) shares one buffer;
- the fused operand of a materialized reshape: its nest runs over its own shape and the reshape is a
  view of its buffer (a nest over the reshape's shape maps every element back through it);
- a transpose moving its operand's last axis, read through a broadcast: stored once, the nest
  reading it loads contiguously instead of striding across the operand's rows;
- expanded by a broadcast, or used by several ops (unless they are elementwise ops of one loop
  nest, which computes it once per element, or elementwise ops and reductions reading it at their
  element when it costs at most `RECOMPUTED` ops, none of them vector math (`TRANSCENDENTAL`)
  or a reshape of a computed value (`REGROUPING`): each loop recomputes it, cheaper than storing
  and reloading it), unless it is cheap to
  recompute (a load through an index map, a constant, a dimension, an iota);
- the root of a fused computation of more than `MAX_FUSED` ops: a loop body is
  bounded, so LLVM's time on it (superlinear in its size) and lowering's recursion
  (one level per fused op) do not grow with the program, and a `**` chain of 200
  terms costs 200 times one term. The largest fused operands get the buffers.

    %0 = broadcast %delta {dims = [], shape = [N]} : f32[N]    # fused (cheap)
    %1 = add %x, %0 : f32[N]                                   # fused
    %2 = sigmoid %1 : f32[N]                                   # materialized: returned
    return %2                                                  # -> one loop, writes outputs[0]

A materialized elementwise value read only at each element of a later loop nest
of its shape (and by no other loop before that one) is computed and stored by
that nest, not by a nest of its own: a loop nest may fill several buffers.
relu's mask and result, both saved for the backward, are one loop:

    %2 = add %0, %1 : f32[B,H]               # read by both: computed once per element
    %5 = le %2, %4 : bool[B,H]               # returned: stored by %6's loop ...
    %6 = select %5, %4, %2 : f32[B,H]        # ... which also stores %6

Loop nests of one shape that do not read each other merge too (horizontal fusion): an earlier
one moves down into a later one when nothing reads its buffers in between, or a later one moves
up into an earlier one when everything it reads is ready there (written by then: not a value
that itself moved down into a loop after that one; never across a control-flow op).
The residuals a VJP's forward saves are one loop, not one each: in a loop's body, where each
nest costs a call per iteration, the forward of an RK4 step saving 21 residuals went from five
nests to one.

A loop nest is *flat* when every element it computes reads its operands at the
same row-major position (elementwise ops, scalar broadcasts, reshapes): it is
then one loop over the element count, the best shape for the vectorizer.

A materialized reshape of a materialized value is the same bytes, so it costs no
loop and no buffer: it is a *view* of its operand's buffer, or, when it is
returned, its operand is computed straight *into* the output buffer:

    %1 = reshape %ct {shape = [M*S,N]} : f32[M*S,N]     # a view of %ct's buffer
    %2 = matmul %1, %0 : f32[M*S,K]                     # written into outputs[0] ...
    %3 = reshape %2 {shape = [S,M,K]} : f32[S,M,K]      # ... which is %3's buffer
    return %3
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from typing import Callable, Iterable, Sequence

from adc.ir.core import Func, Op, Value
from adc.ir.ops import OPS, with_trait

CONTROL_FLOW = with_trait("control_flow")
MATERIALIZING = with_trait("materializes")
UPDATES = with_trait("updates")
INDEX_MAPS = with_trait("index_map")
SOURCES = with_trait("source")
FLAT_SAFE = with_trait("flat")
STACKED_MATRICES = with_trait("stacked_matrices")
UNROLLED_ORDER = 16     # matrices up to this (static) order are factored, solved and multiplied over lanes
MAX_FUSED = 128     # ops computed for each element of one loop nest, at most
RECOMPUTED = 3      # ops per element a value read by several loop nests may cost and still be recomputed
                    # in each: cheaper than storing and reloading it once it outgrows the caches
# Vector math: each element costs tens of instructions (an f32 exp, about as much as storing and
# reloading it), so a value computed with one is stored once, not recomputed in each nest reading it.
TRANSCENDENTAL = with_trait("transcendental")
# A computed value seen through a reshape is recomputed at each element of a nest over the reshaped
# shape through an integer division per merged axis: stored once instead, when several nests read it
# (the one-hot seeds of a reverse-mode Hessian, [B,I,H,H] read as [B,I*H,H] by two nests: 46 -> 27 ms).
REGROUPING = frozenset({"reshape"})


@dataclass(frozen=True)
class Plan:
    """The fusion decisions for one function."""

    producers: dict[Value, Op]
    materialized: frozenset[Value]
    views: dict[Value, Value]       # reshape result -> the operand whose buffer it reads
    into: dict[Value, Value]        # value -> the returned reshape of it whose output buffer it fills
    transposed: dict[Value, Value]  # matmul (or lanes) operand -> the buffer it is read from, transposed
    stored_by: dict[Value, tuple[Value, ...]]   # loop nest root -> the other values its loop stores, in order
    scattered_into: dict[Value, Value]  # value -> the scatter (slice_add) whose buffer it fills before the updates

    def is_fused(self, value: Value) -> bool:
        return value not in self.materialized

    def has_own_loop(self, value: Value) -> bool:
        """False for a materialized value another value's loop nest computes and stores."""
        return value not in self._stored_elsewhere

    @cached_property
    def _stored_elsewhere(self) -> frozenset[Value]:
        return frozenset(v for members in self.stored_by.values() for v in members)

    def leaves(self, root: Op) -> list[Value]:
        """The buffers the loop of `root` reads (the values it stores are computed, `root` too:
        a value moved up into its loop may read it), in first-use order."""
        members = self.stored_by.get(root.results[0], ())
        return _leaves([root, *(self.producers[m] for m in members)], self.producers,
                       self.materialized - {*root.results, *members})

    def is_flat(self, root: Op) -> bool:
        """True when the loop of `root` reads every operand at the result's linear index."""
        return _flat_loop(root, self.stored_by.get(root.result, ()), self.producers, self.materialized)


def _flat_loop(root: Op, members: Iterable[Value], producers: dict[Value, Op], materialized: frozenset[Value]) -> bool:
    """True when the loop of `root`, also computing `members`, reads every operand at the result's
    linear index."""
    inside = set(members)
    stack = [root] + [producers[v] for v in inside]
    while stack:
        op = stack.pop()
        if not _flat_op(op):
            return False
        stack += (producers[v] for v in op.operands if v not in materialized or v in inside)
    return True


def _leaves(roots: list[Op], producers: dict[Value, Op], buffers: frozenset[Value] | set[Value]) -> list[Value]:
    """The values in `buffers` that computing `roots` element by element reads, in first-use order."""
    found: dict[Value, None] = {}
    stack = [iter(op.operands) for op in reversed(roots)]   # depth-first, left to right, on a stack of its own
    while stack:
        v = next(stack[-1], None)
        if v is None:
            stack.pop()
        elif v in buffers:
            found.setdefault(v, None)
        elif v in producers:
            stack.append(iter(producers[v].operands))
    return list(found)


def _flat_op(op: Op) -> bool:
    if op.name == "broadcast":
        return op.operands[0].type.rank == 0
    return op.name in FLAT_SAFE or "elementwise" in OPS[op.name].traits


def plan(func: Func) -> Plan:
    producers = {r: op for op in func.ops for r in op.results}
    users = _users(func)
    uses = Counter({v: len(ops) for v, ops in users.items()})
    uses.update(func.returns)
    forced = set(func.params) | set(func.returns)
    transposed = _transposed_operands(func, users)
    for op in func.ops:
        if op.name in MATERIALIZING:
            forced.update(op.results)
        if op.name in CONTROL_FLOW:
            forced.update(op.operands)
        if op.name == "matmul" or unrolled_over_lanes(op):
            forced.update(transposed.get(v, v) for v in op.operands)
        forced.update(op.operands[k] for k in OPS[op.name].buffered)
    cheap = _cheap_values(func, forced)
    for op in func.ops:
        if op.name == "broadcast" and (op.operands[0] not in cheap or _reads_across_rows(producers, op.operands[0])):
            forced.add(op.operands[0])
    forced.update(_read_apart(func, forced, cheap, uses, users))
    forced.difference_update(transposed)
    forced.update(_reshaped_operands(func, forced, cheap))
    scattered_into = _scatter_bases(func, producers, uses, forced)
    sizes = _bound_loop_bodies(func, forced)
    views, into = _shared_buffers(func, forced)
    readers = _buffer_readers(func, producers, frozenset(forced), views, transposed)
    stored_by = _shared_loops(func, producers, frozenset(forced), views, into, readers, sizes,
                              set(scattered_into))
    unbuffered = _unbuffered(func, stored_by, readers)
    stored = {w: kept for w, members in stored_by.items()
              if (kept := tuple(m for m in members if m not in unbuffered))}
    return Plan(producers, frozenset(forced - unbuffered), views, into, transposed, stored, scattered_into)


def _scatter_bases(func: Func, producers: dict[Value, Op], uses: Counter, forced: set[Value]) -> dict[Value, Value]:
    """The bases of scatters and slice_adds (UPDATES) computed straight into the op's buffer (by a loop nest of
    their own, parallel and vectorized, or as the result of another such op), which then only adds the
    updates: a base read by nothing else (the op's own indices and updates included: they would read the
    buffer the op is changing), neither a parameter nor returned, seen through one reshape (a view of it
    then)."""
    found: dict[Value, Value] = {}
    for op in func.ops:
        if op.name not in UPDATES or op.operands[0] in op.operands[1:]:
            continue
        base = op.operands[0]
        inner = producers.get(base)
        if inner is not None and inner.name == "reshape" and uses[base] == 1:
            base = inner.operands[0]
        inner = producers.get(base)
        if (inner is None or (inner.name in MATERIALIZING and inner.name not in UPDATES) or inner.name in SOURCES
                or uses[base] != 1 or base in func.returns or len(inner.results) != 1):
            continue
        forced.add(base)
        if base is not op.operands[0]:
            forced.add(op.operands[0])
        found[base] = op.result
    return found


def _users(func: Func) -> dict[Value, list[Op]]:
    """Value -> the ops that use it, each once, in program order."""
    users: dict[Value, list[Op]] = {}
    for op in func.ops:
        for v in dict.fromkeys(op.operands):
            users.setdefault(v, []).append(op)
    return users


def _read_apart(func: Func, forced: set[Value], cheap: set[Value], uses: Counter,
                users: dict[Value, list[Op]]) -> set[Value]:
    """The values used by several ops that need a buffer: all but those whose users are elementwise
    ops of one loop nest (ending in an elementwise op or a reduction) reading them at the element
    that loop visits: lowering memoizes each value at each element, so that loop computes them
    once per element, as a buffer would."""
    apart: set[Value] = set()
    loop: dict[Value, Value | None] = {}    # fused value -> the loop reading it at its own element, or None

    def loop_of(user: Op) -> Value | None:
        traits = OPS[user.name].traits
        if len(user.results) != 1 or not ("elementwise" in traits or "reduction" in traits):
            return None
        r = user.result
        return r if r in forced or r in apart else loop.get(r)

    cost = _recompute_costs(func, cheap | forced)
    for op in reversed(func.ops):
        if len(op.results) != 1 or op.result in forced or op.result in cheap:
            continue
        v = op.result
        loops = {loop_of(u) for u in users.get(v, ())}
        loop[v] = loops.pop() if len(loops) == 1 else None
        if uses[v] > 1 and loop[v] is None and not (cost[v] <= RECOMPUTED and _read_per_element(v, users, uses)):
            apart.add(v)
    return apart


def _recompute_costs(func: Func, cheap: set[Value]) -> dict[Value, int]:
    """Value -> ops per element to compute it from buffers and cheap values (an upper bound: fused
    operands that later get a buffer cost less)."""
    cost: dict[Value, int] = {}
    for op in func.ops:
        own = RECOMPUTED + 1 if op.name in TRANSCENDENTAL or op.name in REGROUPING else 1
        for r in op.results:
            cost[r] = 0 if r in cheap else min(own + sum(cost.get(v, 0) for v in op.operands), RECOMPUTED + 1)
    return cost


def _read_per_element(v: Value, users: dict[Value, list[Op]], uses: Counter) -> bool:
    """True when every user of v is an elementwise op or a reduction (each can compute v at the
    element it visits) and v is not returned."""
    readers = users.get(v, ())
    return len(readers) == uses[v] and all(
        len(u.results) == 1 and ("elementwise" in OPS[u.name].traits or "reduction" in OPS[u.name].traits)
        for u in readers)


def _bound_loop_bodies(func: Func, forced: set[Value]) -> dict[Value, int]:
    """Materialize the largest fused operands of every op whose loop would compute more than
    MAX_FUSED ops per element (a fused value used n times counts n times, an upper bound; a constant, a
    dimension or an iota is an operand, not a computation). Returns the ops each value's
    computation takes per element."""
    size: dict[Value, int] = {}         # ops computed per element of each fused value
    for op in func.ops:
        if op.name == "matmul" or op.name in CONTROL_FLOW:     # read their operands' buffers
            continue
        fused = sorted((v for v in dict.fromkeys(op.operands) if v in size and v not in forced), key=size.get,
                       reverse=True)
        total = (op.name not in SOURCES) + sum(size[v] * op.operands.count(v) for v in fused)
        for v in fused:
            if total <= MAX_FUSED:
                break
            forced.add(v)
            total -= size[v] * op.operands.count(v)
        size.update(dict.fromkeys(op.results, total))
    return size


def _buffer_readers(func: Func, producers: dict[Value, Op], materialized: frozenset[Value], views: dict[Value, Value],
                    transposed: dict[Value, Value]) -> dict[Value, list[Value]]:
    """Buffer -> the materialized values whose computation reads it."""
    readers: dict[Value, list[Value]] = {}
    for op in func.ops:
        if op.name == "matmul":
            read = [transposed.get(v, v) for v in op.operands]
        elif op.name in CONTROL_FLOW:
            read = op.operands
        elif op.results[0] in materialized and op.results[0] not in views:     # (a factorization's several results)
            read = _leaves([op], producers, materialized)
        else:
            continue
        for v in read:
            readers.setdefault(v, []).extend(op.results)
    return readers


def _shared_loops(func: Func, producers: dict[Value, Op], materialized: frozenset[Value], views: dict[Value, Value],
                  into: dict[Value, Value], readers: dict[Value, list[Value]], sizes: dict[Value, int],
                  scatter_bases: set[Value]) -> dict[Value, tuple[Value, ...]]:
    """Which loop nests also store other materialized values (Plan.stored_by): a value v with a loop
    of its own moves into the loop of a later value w when w's loop reads v at each of its
    elements only (through elementwise ops, v of w's shape), no loop or matmul between them reads
    v's buffer, and the merged body stays within MAX_FUSED ops per element."""
    position = {r: k for k, op in enumerate(func.ops) for r in op.results}
    # value -> the position of the loop nest that stores it: a later one's, once moved down into it
    written = dict(position)
    barrier = list(accumulate(op.name in CONTROL_FLOW for op in func.ops))     # control-flow ops up to each op
    shared = set(views.values()) | set(views) | set(into) | set(into.values()) | scatter_bases

    def own_loop(v: Value) -> bool:
        op = producers.get(v)
        return op is not None and v in materialized and op.name not in MATERIALIZING and v not in shared

    stored_by: dict[Value, tuple[Value, ...]] = {}
    size: dict[Value, int] = {}         # the loops so far -> ops per element
    loops = _Candidates(producers, materialized, size, stored_by, position)
    for op in func.ops:
        if len(op.results) != 1 or not own_loop(op.result):
            continue
        w = op.result
        members, size[w] = [], sizes.get(w, 0)
        while True:
            candidates = [v for v in _read_at_each_element(op, members, producers, materialized)
                          if v in size and v.type.shape == w.type.shape and size[w] + size[v] <= MAX_FUSED]
            group = next((v for v in candidates if _unread_between(v, stored_by.get(v, ()), w, members,
                                                                   readers, position)), None)
            if group is not None:
                merged = size[w] + size[group]
            else:
                group, merged = _sibling(op, members, loops, readers)
            if group is None:
                break
            moved = [*stored_by.pop(group, ()), group]
            members = sorted([*members, *moved], key=position.get)
            written.update(dict.fromkeys(moved, position[w]))
            size[w] = merged
            del size[group]
        earlier, merged = _earlier_loop(op, members, loops, barrier, written)
        if earlier is not None:
            stored_by[earlier] = tuple(sorted([*stored_by.get(earlier, ()), *members, w], key=position.get))
            for m in (w, *members):         # computed there now: what later merges ask of its readers
                position[m] = written[m] = position[earlier]
            size[earlier] = merged
            del size[w]
        elif members:
            stored_by[w] = tuple(members)
    return stored_by


class _Candidates:
    """The loop nests a loop may merge with (horizontal fusion): the earlier roots of its shape and
    flatness whose merged body stays within MAX_FUSED ops per element, latest first. What each
    root's loop computes is found once per state of its loop, not once per loop asking."""

    def __init__(self, producers: dict[Value, Op], materialized: frozenset[Value], size: dict[Value, int],
                 stored_by: dict[Value, tuple[Value, ...]], position: dict[Value, int]):
        self.producers, self.materialized = producers, materialized
        self.size, self.stored_by, self.position = size, stored_by, position
        self._facts: dict[tuple, tuple[bool, set[int]]] = {}

    def facts(self, root: Op, members: Sequence[Value]) -> tuple[bool, set[int]]:
        """(whether the loop of `root` storing `members` is flat, the ops it computes)."""
        key = (root.result, tuple(members))
        if key not in self._facts:
            self._facts[key] = (_flat_loop(root, members, self.producers, self.materialized),
                                _loop_ops(root, members, self.producers, self.materialized))
        return self._facts[key]

    def first(self, root: Op, members: list[Value], accepts: Callable[[Value], bool],
              stop: Callable[[Value], bool] = lambda v: False) -> tuple[Value | None, int]:
        """The latest earlier root `accepts` takes (before one `stop` ends the search), and the ops
        per element of the merged loop; (None, 0) when there is none."""
        w = root.result
        flat, ours = self.facts(root, members)
        for v in reversed([v for v in self.size if v is not w and self.position[v] < self.position[w]]):
            if stop(v):
                break
            if v.type.shape != w.type.shape:
                continue
            v_flat, theirs = self.facts(self.producers[v], self.stored_by.get(v, ()))
            if v_flat == flat and len(ours | theirs) <= MAX_FUSED and accepts(v):
                return v, len(ours | theirs)
        return None, 0


def _sibling(root: Op, members: list[Value], loops: _Candidates, readers: dict[Value, list[Value]]
             ) -> tuple[Value | None, int]:
    """An earlier loop nest that `root`'s loop may run too although it reads none of its values:
    nothing reads its buffers before `root`. One pass over the elements instead of two: the
    residuals a VJP's forward saves (cos x beside sin x) were each a loop re-reading the inputs,
    and in a loop's body each nest costs its call every iteration. An op both loops compute is
    counted once: a loop computes each value once per element, and cos x merged with sin x
    shares x's chain."""
    return loops.first(root, members, lambda v: _unread_between(v, loops.stored_by.get(v, ()), root.result, members,
                                                                readers, loops.position))


def _earlier_loop(root: Op, members: list[Value], loops: _Candidates, barrier: list[int],
                  written: dict[Value, int]) -> tuple[Value | None, int]:
    """An earlier loop nest that may compute `root`'s loop (and `members`) too: every buffer they
    read is ready before it, or is one of its values read at the element it visits. Ready means
    written there (`written`): a value moved down into a later loop is not stored at its own
    position, and a loop moved up above that one read its buffer unwritten (a batched loop's
    mask, stored by the loop of a later comparison, was read by the select of the carried
    values). The cotangents a reverse step returns, read after a reduction of the loop that
    computes the values they are made of, were each a nest of their own: `_sibling` cannot move
    that loop past its reader. Never above a control-flow op (`barrier` counts them by
    position): a scan binds the sizes of what follows it."""
    producers, materialized, position = loops.producers, loops.materialized, loops.position
    reads = _leaves([root, *(producers[m] for m in members)], producers, materialized - set(members))
    aligned = set(_read_at_each_element(root, members, producers, materialized))

    def ready(v: Value) -> bool:
        loop = {v, *loops.stored_by.get(v, ())}
        return all(written.get(r, -1) < position[v] or (r in loop and r in aligned) for r in reads)

    return loops.first(root, members, ready, stop=lambda v: barrier[position[v]] != barrier[position[root.result]])


def _loop_ops(root: Op, members: Iterable[Value], producers: dict[Value, Op], materialized: frozenset[Value]
              ) -> set[int]:
    """The ops (by identity) the loop of `root`, also storing `members`, computes at each element;
    constants, dimensions and iotas are operands, not computations."""
    inside = set(members)
    seen: dict[int, Op] = {}
    stack = [root] + [producers[v] for v in inside]
    while stack:
        op = stack.pop()
        if id(op) not in seen:
            seen[id(op)] = op
            stack += (producers[v] for v in op.operands if v in producers and (v not in materialized or v in inside))
    return {k for k, op in seen.items() if op.name not in SOURCES}


def _unbuffered(func: Func, stored_by: dict[Value, tuple[Value, ...]], readers: dict[Value, list[Value]]
                ) -> set[Value]:
    """The values a loop stores that only that loop reads (relu's x @ w + b, read by its mask and
    its select): computed once per element there, they need no buffer."""
    found = set()
    for w, members in stored_by.items():
        in_loop = {w, *members}
        found.update(m for m in members if m not in func.returns and set(readers.get(m, ())) <= in_loop)
    return found


def _read_at_each_element(root: Op, members: list[Value], producers: dict[Value, Op],
                          materialized: frozenset[Value]) -> list[Value]:
    """The buffers the loop of `root` (which also computes `members`) reads only at the element it
    visits: through elementwise ops alone, on every path."""
    inside = set(members)
    at_element: dict[Value, None] = {}
    elsewhere: set[Value] = set()
    seen: set[tuple[Value, bool]] = set()
    stack = [(root, True)] + [(producers[v], True) for v in members]
    while stack:
        op, aligned = stack.pop()
        aligned = aligned and "elementwise" in OPS[op.name].traits
        for v in op.operands:
            if v in materialized and v not in inside:
                if aligned:
                    at_element.setdefault(v, None)
                else:
                    elsewhere.add(v)
            elif v in producers and (v, aligned) not in seen:
                seen.add((v, aligned))
                stack.append((producers[v], aligned))
    return [v for v in at_element if v not in elsewhere]


def _unread_between(v: Value, its_members: tuple[Value, ...], w: Value, w_members: list[Value],
                    readers: dict[Value, list[Value]], position: dict[Value, int]) -> bool:
    """True when moving the computation of v (and the values its loop stores) to w's loop leaves no
    reader of their buffers before w outside that loop."""
    in_loop = {w, v, *its_members, *w_members}
    return all(position[r] > position[w] or r in in_loop
               for m in (v, *its_members) for r in readers.get(m, ()))


def _transposed_operands(func: Func, users: dict[Value, list[Op]]) -> dict[Value, Value]:
    """Transposes of the last two axes that only matmuls and rules unrolling matrices over lanes
    read: no loop and no buffer, the matmul reads the transpose's operand with swapped strides
    (the VJP of a matmul is made of them), the lanes its element (j, i) (a Cholesky VJP's)."""
    found = {}
    for op in (op for op in func.ops if op.name == "transpose"):
        rank = op.result.type.rank
        if (rank >= 2 and op.result not in func.returns
                and tuple(op.attrs["perm"]) == (*range(rank - 2), rank - 1, rank - 2)
                and all(user.name == "matmul" or unrolled_over_lanes(user) for user in users.get(op.result, ()))):
            found[op.result] = op.operands[0]
    return found


def unrolled_order(value: Value) -> int | None:
    """The order of value's matrices when it is static and small enough for the matrix rules to
    unroll over SIMD lanes (rules/matrices.py's Lanes), else None."""
    n = value.type.shape[-1]
    return n if isinstance(n, int) and n <= UNROLLED_ORDER else None


def unrolled_over_lanes(op: Op) -> bool:
    """A single-result op on stacked matrices of a small static order: its rule reads each operand's
    elements many times, W matrices at once, so each operand gets a buffer (a fused one would be
    computed lane by lane at every read)."""
    return (len(op.results) == 1 and op.name in STACKED_MATRICES and op.operands[0].type.rank >= 3
            and unrolled_order(op.operands[0]) is not None)


def _reads_across_rows(producers: dict[Value, Op], value: Value) -> bool:
    """True for a transpose that moves its operand's last axis: cheap to recompute once, but read
    through a broadcast (every row of a larger nest) its element loads stride across the operand's rows
    and the nest's inner loop does not vectorize; stored once, it reads contiguously (the reverse batch
    Jacobian's rows of w2 per seed, 4M scalar loads and branches: 60% of the kernel's time)."""
    op = producers.get(value)
    return op is not None and op.name == "transpose" and op.attrs["perm"][-1] != value.type.rank - 1


def _reshaped_operands(func: Func, forced: set[Value], cheap: set[Value]) -> list[Value]:
    """The fused operands of materialized reshapes: stored by a loop nest of their own shape, the
    reshape is a view of them. A nest over the reshape's shape would map each element back through
    it (a division per element, and per-lane loads of any broadcast operand: the batched VJP's
    [S*B, H] matmul operand, a select over [S, B, H], ran at a third of memory speed)."""
    return [op.operands[0] for op in func.ops
            if op.name == "reshape" and op.result in forced and op.operands[0] not in cheap]


def _shared_buffers(func: Func, materialized: set[Value]) -> tuple[dict[Value, Value], dict[Value, Value]]:
    """The reshapes that need no copy: views of their operand, or returned ones whose operand (not a
    parameter, a view or a returned value itself) is computed into the output buffer."""
    views: dict[Value, Value] = {}
    into: dict[Value, Value] = {}
    for op in func.ops:
        if op.name != "reshape" or op.result not in materialized or op.operands[0] not in materialized:
            continue
        (x,) = op.operands
        if op.result not in func.returns:
            views[op.result] = x
        elif (func.returns.count(op.result) == 1 and x not in func.returns and x not in func.params
              and x not in views and x not in into):
            into[x] = op.result
    return views, into


def _cheap_values(func: Func, forced: set[Value]) -> set[Value]:
    """Values whose element costs a load or less: recomputing them beats a buffer."""
    cheap = set(forced)
    for op in func.ops:
        if op.name in SOURCES or (op.name in INDEX_MAPS and all(v in cheap for v in op.operands)):
            cheap.add(op.result)
    return cheap
