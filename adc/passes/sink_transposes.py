"""A transpose moves to where its operand is made, when a broadcast there absorbs the permutation.

A reverse-mode batch Jacobian stacks its seeds first, [S, B, ...], and transposes the stacked
cotangents to the Jacobian's order [B, S, ...]: one more pass over the whole result, read and
written. The cotangents come out of a matmul whose rows are computed elementwise from
broadcasts, so the rows can be made in the Jacobian's order instead — the broadcasts' `dims`
permuted — and the matmul then writes the result in place:

    %2 = mul %0, %1 : f32[S,B,H]                         %0' = broadcast ... : f32[B,S,H]
    %3 = reshape %2 {shape = [B*S,H]}                    %1' = broadcast ... : f32[B,S,H]
    %4 = matmul %3, %w : f32[B*S,I]              ==>     %2' = mul %0', %1' : f32[B,S,H]
    %5 = reshape %4 {shape = [S,B,I]}                    %3' = reshape %2' {shape = [B*S,H]}
    %6 = transpose %5 {perm = [1,0,2]}                   %4' = matmul %3', %w ; reshape to [B,S,I]

`sink_rules[op]` says how a transpose passes through the op making its operand: through an
elementwise op to each operand, into a broadcast's `dims` (its operand, smaller, transposed only
if the kept axes change order), into an iota's axis, into a transpose (composed), and through a
matmul whose rows the permutation only reorders (`reshape` of a matmul). A transpose is rewritten
only when it vanishes this way — it reaches nothing else — and what it passes through is read by
nothing else, so nothing is computed twice. Only code generation runs this pass
(pipeline.LOWERING): it changes no value, only the order in which memory is written.
"""
from __future__ import annotations

from collections import Counter
from typing import Callable

from adc.ir.builder import Builder
from adc.ir.core import Func, Module, Op, Value
from adc.ir.ops import OPS
from adc.passes.dce import eliminate_dead_code_func

Perm = tuple[int, ...]
MAX_REBUILT = 128   # ops one transpose may pass through (its rules recurse, one level per op), at most


class _Blocked(Exception):
    """The transpose cannot vanish: the rewrite is abandoned, the function kept as it was."""


class Sinker:
    """Rebuilds one transposed value in the permuted order, memoized per (value, perm); `rebuilt`
    lists the ops it made anew, whose results must be read by nothing else."""

    def __init__(self, builder: Builder, producers: dict[Value, Op]):
        self.builder = builder
        self.producers = producers
        self.rebuilt: list[Op] = []
        self.done: dict[tuple[Value, Perm], Value] = {}

    def sink(self, value: Value, perm: Perm) -> Value:
        """`value` transposed by `perm`, built without a transpose of anything its size."""
        if perm == tuple(range(len(perm))):
            return value
        key = (value, perm)
        if key not in self.done:
            op = self.producers.get(value)
            rule = sink_rules.get(op.name) if op is not None else None
            if rule is None and not (op is not None and "elementwise" in OPS[op.name].traits):
                raise _Blocked
            if len(self.rebuilt) >= MAX_REBUILT:
                raise _Blocked
            self.rebuilt.append(op)
            with self.builder.at(op.loc):
                self.done[key] = (rule or _elementwise_sink)(op, perm, self)
        return self.done[key]

    def transposed(self, value: Value, perm: Perm) -> Value:
        """`value` transposed by `perm`: sunk where it can be, else by a transpose op (for a
        broadcast's operand, which has fewer elements than what the transpose would have read)."""
        built, rebuilt, done = len(self.builder.ops), len(self.rebuilt), dict(self.done)
        try:
            return self.sink(value, perm)
        except _Blocked:
            del self.builder.ops[built:], self.rebuilt[rebuilt:]
            self.done = done
            return self.builder.op("transpose", value, perm=list(perm))

    def read_elsewhere(self, reads: Counter) -> bool:
        """Whether a value the rebuilt ops made is read by other ops too (it would then be computed
        in both orders); the first rebuilt op's result is the transpose's operand (none: the
        transpose was the identity)."""
        if not self.rebuilt:
            return False
        inside = Counter(v for op in self.rebuilt for v in op.operands)
        inside[self.rebuilt[0].result] += 1
        return any(reads[r] != inside[r] for op in self.rebuilt for r in op.results)


def _inverse(perm: Perm) -> list[int]:
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return inverse


def _elementwise_sink(op: Op, perm: Perm, s: Sinker) -> Value:
    # op(a, b)ᵀ = op(aᵀ, bᵀ): operands have the result's shape (a scalar stays a scalar)
    operands = [s.sink(v, perm) if v.type.rank else v for v in op.operands]
    return s.builder.op(op.name, *operands, **op.attrs)


def _broadcast_sink(op: Op, perm: Perm, s: Sinker) -> Value:
    # operand axis j goes to result axis dims[j], which the transpose moves to inverse[dims[j]];
    # dims must increase, so the operand's axes are put in that order first
    (x,) = op.operands
    inverse = _inverse(perm)
    moved = [inverse[d] for d in op.attrs["dims"]]
    order = tuple(sorted(range(len(moved)), key=moved.__getitem__))
    shape = op.attrs["shape"]
    return s.builder.op("broadcast", s.transposed(x, order), dims=sorted(moved),
                        shape=[shape[p] for p in perm])


def _iota_sink(op: Op, perm: Perm, s: Sinker) -> Value:
    shape = op.attrs["shape"]
    return s.builder.op("iota", axis=_inverse(perm)[op.attrs["axis"]], dtype=op.attrs["dtype"],
                        shape=[shape[p] for p in perm])


def _transpose_sink(op: Op, perm: Perm, s: Sinker) -> Value:
    # (xᵀᵖ)ᵀᑫ = x transposed by p∘q: nothing left when that is the identity
    (x,) = op.operands
    return s.sink(x, tuple(op.attrs["perm"][p] for p in perm))


def _matmul_rows_sink(op: Op, perm: Perm, s: Sinker) -> Value:
    # reshape(matmul(reshape(X, [M, K]), W), [r0..rk-1, N]) transposed among its first k axes only:
    # the permutation reorders the matmul's rows, so X's rows are made in that order instead
    (m,) = op.operands
    rows = len(perm) - 1
    matmul = s.producers.get(m)
    merge = s.producers.get(matmul.operands[0]) if matmul is not None and matmul.name == "matmul" else None
    if merge is None or merge.name != "reshape" or perm[-1] != rows or matmul.operands[1].type.rank != 2:
        raise _Blocked
    x, shape = merge.operands[0], op.result.type.shape
    if m.type.rank != 2 or x.type.rank < rows or x.type.shape[:rows] != shape[:rows]:
        raise _Blocked
    s.rebuilt += [matmul, merge]
    rows_first = s.sink(x, (*perm[:rows], *range(rows, x.type.rank)))
    a = s.builder.op("reshape", rows_first, shape=list(merge.result.type.shape))
    product = s.builder.op("matmul", a, matmul.operands[1])
    return s.builder.op("reshape", product, shape=[shape[p] for p in perm])


SinkRule = Callable[[Op, Perm, Sinker], Value]
sink_rules: dict[str, SinkRule] = {
    "broadcast": _broadcast_sink, "iota": _iota_sink, "transpose": _transpose_sink, "reshape": _matmul_rows_sink,
}


def sink_transposes(module: Module) -> Module:
    return Module({f.name: sink_transposes_func(f, module.funcs) for f in module}, module.name)


def sink_transposes_func(func: Func, funcs) -> Func:
    """`func` with each transpose that can vanish into where its operand is made rewritten so."""
    producers = {r: op for op in func.ops for r in op.results}
    reads = Counter(v for op in func.ops for v in op.operands) + Counter(func.returns)
    ops: list[Op] = []
    replaced: dict[Value, Value] = {}
    for op in func.ops:
        if op.name == "transpose":
            new = _sunk(op, producers, reads, funcs, ops, replaced)
            if new is not None:
                replaced[op.result] = new
                continue
        ops.append(_renamed(op, replaced))
    if not replaced:
        return func
    returns = tuple(replaced.get(v, v) for v in func.returns)
    return eliminate_dead_code_func(Func(func.name, func.params, tuple(ops), returns, func.loc), funcs)


def _sunk(op: Op, producers: dict[Value, Op], reads: Counter, funcs, ops: list[Op],
          replaced: dict[Value, Value]) -> Value | None:
    """The transpose `op` made without one (the new ops appended to `ops`, reading what earlier
    rewrites `replaced`), or None."""
    (x,) = op.operands
    builder = Builder(funcs, op.loc)
    sinker = Sinker(builder, producers)
    try:
        new = sinker.sink(x, tuple(op.attrs["perm"]))
    except _Blocked:
        return None
    if sinker.read_elsewhere(reads):
        return None
    ops += [_renamed(o, replaced) for o in builder.ops]
    reads.update(v for o in builder.ops for v in o.operands)     # what a later rewrite must not take over
    return replaced.get(new, new)


def _renamed(op: Op, replaced: dict[Value, Value]) -> Op:
    """`op` reading the values that replace its operands, itself when none is replaced."""
    operands = tuple(replaced.get(v, v) for v in op.operands)
    return op if operands == op.operands else Op(op.name, operands, op.attrs, op.results, op.loc)
