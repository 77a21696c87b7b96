"""Linear combinations of sums become one sum: `sum(a) + c * sum(b)` is `sum(a + c b)`.

Reverse mode leaves them everywhere: the cotangent of a value broadcast to many elements (a
scalar parameter, a bias) is the sum of its users' cotangents, one reduction per use, added up.
The reverse of an RK4 step summed twelve products for its three scalar parameters, twelve loop
nests per iteration; one sum per parameter reads the elements once, and the elementwise
combination fuses into that one nest.

A *combination* is built from `reduce_sum` results (its *terms*: float, used once, all summing
operands of one type over the same axes) by the ops of LINEAR: add, sub, neg, mul by a
coefficient, div by one. A coefficient has the sums' type; it is broadcast along the summed
axes. A combination of two terms or more that is used as a whole (not inside a larger one)
becomes one sum of the combined operands, scaled after the sum when it ends in a scaling:

    %s = reduce_sum %a {axes = [0]} : f64          %0 = broadcast %c {dims = [], shape = [P]}
    %t = reduce_sum %b {axes = [0]} : f64   ==>    %1 = mul %b, %0 : f64[P]
    %u = mul %t, %c : f64                          %2 = add %a, %1 : f64[P]
    %v = add %s, %u : f64                          %v = reduce_sum %2 {axes = [0]} : f64

Every combination gets its elementwise twin where it stands; only those of the combinations
replaced are read, and dead code elimination then removes the rest and the old sums.
"""
from __future__ import annotations

from collections import Counter
from typing import Mapping
from adc.ir.builder import Builder
from adc.ir.core import Attrs, Func, Module, Op, Value
from adc.ir.ops import OPS, with_trait
from adc.ir.types import TensorType
from adc.passes.dce import eliminate_dead_code_func

Signature = tuple[TensorType, tuple[int, ...]]      # the terms' operand type and summed axes

# op -> which of its operands are combinations: "every" one, or exactly one of those at the
# positions given, the others coefficients (a product of two sums is no combination)
LINEAR: dict[str, str | tuple[int, ...]] = {
    **{name: "every" for name in with_trait("additive")},
    **{name: op.products for name, op in OPS.items() if op.products and op.has("elementwise")}}


def combine_sums(module: Module) -> Module:
    """`module` with each combination of sums in each of its functions summed once."""
    return Module({f.name: combine_sums_func(f, module.funcs) for f in module}, module.name)


def combine_sums_func(func: Func, funcs: Mapping[str, Func]) -> Func:
    uses = Counter(v for op in func.ops for v in op.operands) + Counter(func.returns)
    signature: dict[Value, Signature] = {}      # combination -> its terms' signature
    terms: dict[Value, int] = {}                # combination -> how many sums it adds up
    twin: dict[Value, Value] = {}               # combination -> its elementwise twin, unsummed
    combined: set[Value] = set()                # combinations read by a larger combination
    parts_of: dict[Value, list[Value]] = {}     # combination -> the combinations its op reads
    ops: list[Op] = []
    for op in func.ops:
        ops.append(op)
        found = _combination(op, signature, uses)
        if found is None:
            continue
        sig, parts = found
        b = Builder(funcs, op.loc)
        if op.name == "reduce_sum":
            twin[op.result] = op.operands[0]
        else:
            twin[op.result] = b.op(op.name, *(twin[v] if v in parts else _spread(b, v, sig) for v in op.operands))
        signature[op.result] = sig
        terms[op.result] = sum(terms[v] for v in parts) if parts else 1
        combined.update(parts)
        parts_of[op.result] = parts
        ops[-1:] = [*b.ops, op]
    replaced = {_inner(v, parts_of) for v, n in terms.items() if n > 1 and v not in combined}
    if not replaced:
        return func
    result = []
    for op in ops:
        if op.results and op.results[0] in replaced:
            op = Op("reduce_sum", (twin[op.result],), Attrs({"axes": list(signature[op.result][1])}), op.results, op.loc)
        result.append(op)
    return eliminate_dead_code_func(Func(func.name, func.params, tuple(result), func.returns, func.loc))


def _combination(op: Op, signature: dict[Value, Signature], uses: Counter) -> tuple[Signature, list[Value]] | None:
    """(the signature, the operands that are combinations) when `op` makes a combination."""
    if len(op.results) != 1 or not op.result.type.dtype.is_float:
        return None
    if op.name == "reduce_sum":
        return (op.operands[0].type, tuple(op.attrs["axes"])), []
    rule = LINEAR.get(op.name)
    if rule is None:
        return None
    candidates = [v for v in op.operands if v in signature and uses[v] == 1]
    if rule == "every":
        parts = list(op.operands)
        if candidates != parts or len(set(parts)) != len(parts):
            return None
    else:
        parts = [op.operands[k] for k in rule if op.operands[k] in candidates]
        if len(parts) != 1 or len(candidates) != 1:
            return None
    if len({signature[v] for v in parts}) != 1:
        return None
    return signature[parts[0]], parts


def _inner(v: Value, parts_of: dict[Value, list[Value]]) -> Value:
    """The combination under the negations and scalings that end `v`: those stay outside the sum,
    applied once, not to every element."""
    while len(parts_of[v]) == 1:
        (v,) = parts_of[v]
    return v


def _spread(b: Builder, coefficient: Value, sig: Signature) -> Value:
    """`coefficient` (of the sums' type) broadcast along the summed axes to the terms' type."""
    operand, axes = sig
    kept = [k for k in range(operand.rank) if k not in axes]
    return b.op("broadcast", coefficient, dims=kept, shape=list(operand.shape))
