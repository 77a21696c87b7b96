"""Fusion planning: which values of a kernel get a buffer, and which are computed in a consumer's loop.

Lowering emits one loop nest per materialized value; every other value is
computed on demand, element by element, inside the loop of the value that
consumes it. A value is materialized when it is

- a parameter (its input buffer) or a returned value (written straight into its output buffer);
- the result of a reduction or matmul, or an operand of matmul (gemm reads memory) — but a
  transpose of the last two axes that only matmuls read is neither computed nor stored: the
  matmul reads its operand's buffer with swapped strides (`transposed`);
- expanded by a broadcast, or used by several ops (unless they are elementwise ops of one loop
  nest, which computes it once per element), unless it is cheap to recompute (a load through
  an index map, a constant, a dimension, an iota);
- the root of a fused computation of more than `MAX_FUSED` ops: a loop body is
  bounded, so LLVM's time on it (superlinear in its size) and lowering's recursion
  (one level per fused op) do not grow with the program, and a `**` chain of 200
  terms costs 200 times one term. The largest fused operands get the buffers.

    %0 = broadcast %delta {dims = [], shape = [N]} : f32[N]    # fused (cheap)
    %1 = add %x, %0 : f32[N]                                   # fused
    %2 = sigmoid %1 : f32[N]                                   # materialized: returned
    return %2                                                  # -> one loop, writes outputs[0]

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

from adc.ir.core import Func, Op, Value
from adc.ir.ops import OPS

MATERIALIZING = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "matmul"})
INDEX_MAPS = frozenset({"broadcast", "reshape", "transpose", "slice", "stop_gradient"})
SOURCES = frozenset({"constant", "dim", "iota"})
FLAT_SAFE = frozenset({"reshape", "constant", "dim"})
MAX_FUSED = 64      # ops computed for each element of one loop nest, at most


@dataclass(frozen=True)
class Plan:
    """The fusion decisions for one function."""

    producers: dict[Value, Op]
    materialized: frozenset[Value]
    views: dict[Value, Value]       # reshape result -> the operand whose buffer it reads
    into: dict[Value, Value]        # value -> the returned reshape of it whose output buffer it fills
    transposed: dict[Value, Value]  # matmul operand -> the buffer a matmul reads it from, transposed

    def is_fused(self, value: Value) -> bool:
        return value not in self.materialized

    def leaves(self, root: Op) -> list[Value]:
        """The materialized values the fused computation of `root` reads, in first-use order."""
        found: dict[Value, None] = {}
        stack = [iter(root.operands)]       # depth-first, left to right, on a stack of its own
        while stack:
            v = next(stack[-1], None)
            if v is None:
                stack.pop()
            elif v in self.materialized:
                found.setdefault(v, None)
            elif v in self.producers:
                stack.append(iter(self.producers[v].operands))
        return list(found)

    def is_flat(self, root: Op) -> bool:
        """True when `root` and its fused producers all read operands at the result's linear index."""
        stack = [root]
        while stack:
            op = stack.pop()
            if not _flat_op(op):
                return False
            stack += (self.producers[v] for v in op.operands if v not in self.materialized)
        return True


def _flat_op(op: Op) -> bool:
    if op.name == "broadcast":
        return op.operands[0].type.rank == 0
    return op.name in FLAT_SAFE or "elementwise" in OPS[op.name].traits


def plan(func: Func) -> Plan:
    producers = {op.result: op for op in func.ops}
    uses = Counter(v for op in func.ops for v in set(op.operands))
    uses.update(func.returns)
    forced = set(func.params) | set(func.returns)
    transposed = _transposed_operands(func)
    for op in func.ops:
        if op.name in MATERIALIZING:
            forced.add(op.result)
        if op.name == "matmul":
            forced.update(transposed.get(v, v) for v in op.operands)
    cheap = _cheap_values(func, forced)
    for op in func.ops:
        if op.name == "broadcast" and op.operands[0] not in cheap:
            forced.add(op.operands[0])
    forced.update(_read_apart(func, forced, cheap, uses))
    forced.difference_update(transposed)
    _bound_loop_bodies(func, forced)
    return Plan(producers, frozenset(forced), *_shared_buffers(func, forced), transposed)


def _read_apart(func: Func, forced: set[Value], cheap: set[Value], uses: Counter) -> set[Value]:
    """The values used by several ops that need a buffer: all but those whose users are elementwise
    ops of one loop nest (ending in an elementwise op or a reduction) reading them at the element
    that loop visits: lowering memoizes each value at each element, so that loop computes them
    once per element, as a buffer would."""
    users: dict[Value, list[Op]] = {}
    for op in func.ops:
        for v in dict.fromkeys(op.operands):
            users.setdefault(v, []).append(op)
    apart: set[Value] = set()
    loop: dict[Value, Value | None] = {}    # fused value -> the loop reading it at its own element, or None

    def loop_of(user: Op) -> Value | None:
        traits = OPS[user.name].traits
        if len(user.results) != 1 or not ("elementwise" in traits or "reduction" in traits):
            return None
        r = user.result
        return r if r in forced or r in apart else loop.get(r)

    for op in reversed(func.ops):
        if len(op.results) != 1 or op.result in forced or op.result in cheap:
            continue
        v = op.result
        loops = {loop_of(u) for u in users.get(v, ())}
        loop[v] = loops.pop() if len(loops) == 1 else None
        if uses[v] > 1 and loop[v] is None:
            apart.add(v)
    return apart


def _bound_loop_bodies(func: Func, forced: set[Value]) -> None:
    """Materialize the largest fused operands of every op whose loop would compute more than
    MAX_FUSED ops per element (a fused value used n times counts n times, an upper bound; a constant, a
    dimension or an iota is an operand, not a computation)."""
    size: dict[Value, int] = {}         # ops computed per element of each fused value
    for op in func.ops:
        if op.name == "matmul":         # reads its operands' buffers
            continue
        fused = sorted((v for v in dict.fromkeys(op.operands) if v in size and v not in forced), key=size.get,
                       reverse=True)
        total = (op.name not in SOURCES) + sum(size[v] * op.operands.count(v) for v in fused)
        for v in fused:
            if total <= MAX_FUSED:
                break
            forced.add(v)
            total -= size[v] * op.operands.count(v)
        size[op.result] = total


def _transposed_operands(func: Func) -> dict[Value, Value]:
    """Transposes of the last two axes that only matmuls read: no loop and no buffer, the matmul
    reads the transpose's operand with swapped strides (the VJP of a matmul is made of them)."""
    users: dict[Value, list[Op]] = {}
    for op in func.ops:
        for v in op.operands:
            users.setdefault(v, []).append(op)
    found = {}
    for op in func.ops:
        rank = op.result.type.rank
        if (op.name == "transpose" and rank >= 2 and op.result not in func.returns
                and tuple(op.attrs["perm"]) == (*range(rank - 2), rank - 1, rank - 2)
                and all(user.name == "matmul" for user in users.get(op.result, ()))):
            found[op.result] = op.operands[0]
    return found


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
