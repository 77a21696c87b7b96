"""Reverse-mode differentiation: the vector-Jacobian product (VJP) of a function, as IR.

`vjp(module, name)` inlines the function, then builds `{name}_vjp`: its params
are the primal params followed by one cotangent per primal result (`ct`, or
`ct0, ct1, ...`); its body replays the primal ops, then walks them backwards
applying `adjoint_rules` (adc/passes/adjoint_rules/), summing the cotangents
of values used several times; it returns the cotangents of the `wrt` params.
Cleanup (simplify, cse, dce until nothing changes) keeps it lean, and the
verifier checks it. The output is ordinary IR, so `vjp` of a VJP function
gives second derivatives.

Invariant: a cotangent has its value's type; only float values get one; a
`None` from a rule is a symbolic zero and adds nothing, so `wrt` holds exactly
the float params connected to a result through a differentiable path.

    func @f(%x: f32) -> f32 {                 func @f_vjp(%x: f32, %ct: f32) -> f32 {
      %0 = mul %x, %x : f32          ==>        %0 = mul %ct, %x : f32
      return %0                                 %1 = constant {dtype = f32, value = 2.0} : f32
    }                                           %2 = mul %0, %1 : f32
                                                return %2
                                              }
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from adc.errors import CompileError, VerifyError
from adc.ir.builder import Builder
from adc.ir.core import Func, Module, Op, Value
from adc.ir.verify import verify_func
from adc.passes.adjoint_rules import adjoint_rules
from adc.passes.cse import cse_func
from adc.passes.dce import eliminate_dead_code_func
from adc.passes.inline import inline_func
from adc.passes.prune_loops import prune_loops
from adc.passes.regions import call_free, derived_once, fresh_name
from adc.passes.simplify import simplify_func

CLEANUP_ROUNDS = 4      # simplify exposes work for cse and back; two rounds usually reach the fixed point


@dataclass(frozen=True)
class Gradient:
    """A VJP function and the indices of the primal params it returns cotangents for."""

    func: Func
    wrt: tuple[int, ...]


def passthrough(vjp_func: Func, n_results: int) -> tuple[int | None, ...]:
    """For each value a VJP function returns: the index of the result cotangent it is (the VJP of
    `x + y` passes its cotangent through unchanged), or None."""
    cotangents = vjp_func.params[len(vjp_func.params) - n_results:]
    return tuple(cotangents.index(v) if v in cotangents else None for v in vjp_func.returns)


def vjp(module: Module, name: str, wanted: Iterable[int] | None = None,
        primals: bool = False) -> tuple[Module, Gradient]:
    """The VJP of function `name`: inline calls, differentiate, clean up (simplify, cse, dce),
    verify. Returns the input module plus the new function (named f"{name}_vjp", made unique
    if taken) and the Gradient record. Never mutates `module`.

    `wanted` limits the cotangents to those params (default: all): the work only the others
    need is then removed by dead-code elimination — a tape asks for the inputs it tracks.
    With `primals`, the function returns the primal results first: what the gradient computes of
    them anyway (a loop reversed runs the loop once) is not computed again."""
    if name not in module.funcs:
        raise CompileError(f"no function @{name} to differentiate in {module.name} "
                           f"(functions: {', '.join(module.funcs) or 'none'})")
    funcs = dict(module.funcs)          # inlining copies regions, rules add region functions
    primal = inline_func(module[name], module, funcs)
    grad = adjoint(primal, unique_name(module, f"{name}_vjp"), funcs, wanted, primals)
    func = cleanup(grad.func, funcs)
    verify_func(func, funcs, pass_name="adjoint")
    return Module(funcs, module.name).replace(func), Gradient(func, grad.wrt)


def adjoint(func: Func, name: str, funcs: Mapping[str, Func], wanted: Iterable[int] | None = None,
            primals: bool = False) -> Gradient:
    """The uncleaned VJP of a call-free `func`, named `name`, for the `wanted` params (default all),
    returning `func`'s results first with `primals`."""
    b = Builder(funcs, func.loc)
    b.params, b.ops = list(func.params), list(func.ops)
    cts = Cotangents(b)
    for value, seed_name in zip(func.returns, _cotangent_names(func)):
        cts.add(value, b.param(seed_name, value.type))
    for op in reversed(func.ops):
        _backward(b, op, cts)
    wanted = range(len(func.params)) if wanted is None else set(wanted)
    wrt = tuple(i for i, p in enumerate(func.params) if p in cts and i in wanted)
    returns = (list(func.returns) if primals else []) + [cts[func.params[i]] for i in wrt]
    return Gradient(b.finish(name, returns, func.loc), wrt)


def region_vjp(funcs: dict[str, Func], name: str, wanted: Iterable[int]) -> Gradient:
    """The cleaned VJP of region function `name` w.r.t. its `wanted` params (those connected to a
    result: `wrt`), added to `funcs` (the calling pass's own copy)."""
    def build() -> Gradient:
        grad = adjoint(call_free(funcs, name), fresh_name(funcs, f"{name}_vjp"), funcs, wanted)
        func = cleanup(grad.func, funcs)
        funcs[func.name] = func
        return Gradient(func, grad.wrt)

    wanted = tuple(sorted(set(wanted)))
    return derived_once(funcs, funcs[name], ("vjp", wanted), lambda grad: (grad.func,), build)


def cleanup(func: Func, funcs: dict[str, Func]) -> Func:
    """simplify, cse, dce and the pruning of loops, repeated until the function stops changing
    (`funcs`, the calling pass's own copy, gets the pruned loops' bodies). A round changed
    nothing when it kept every op, parameter and returned value: each pass keeps the ops it does
    not rewrite (comparing the printed text instead found the same rounds, at a tenth of a
    second-order derivative's compile)."""
    for _ in range(CLEANUP_ROUNDS):
        previous = func
        func = prune_loops(eliminate_dead_code_func(cse_func(simplify_func(func, funcs)), funcs), funcs)
        if _same_parts(func, previous):
            break
    return func


def _same_parts(func: Func, other: Func) -> bool:
    return all(len(a) == len(b) and all(x is y for x, y in zip(a, b))
               for a, b in ((func.params, other.params), (func.ops, other.ops), (func.returns, other.returns)))


def _backward(b: Builder, op: Op, cts: "Cotangents") -> None:
    """Apply op's rule to its results' cotangents and add what it gives to its operands'."""
    incoming = tuple(cts.get(r) for r in op.results)
    if all(ct is None for ct in incoming):
        return
    rule = adjoint_rules.get(op.name)
    if rule is None:
        raise CompileError(f"cannot differentiate op '{op.name}': no rule in adjoint_rules", op.loc)
    with b.at(op.loc):
        outgoing = rule(b, op, incoming)
        for operand, ct in zip(op.operands, outgoing, strict=True):
            cts.add(operand, ct, op)


class Cotangents(dict):
    """Value -> the sum of the cotangents given for it so far, built with `b`.

    A cotangent that is an update of zeros — a scatter_add into zeros (the adjoint of a gather,
    maybe reshaped), a slice's (zeros padded around it, or a slice_add into zeros) — is not added
    to the rest as a whole tensor: its updates go into the other term instead (scatter_add,
    slice_add), so the sum costs a few updates, not a buffer of zeros and a pass adding it (a
    column z[:, j] of z[K, 5] read several times: strided loops over K, not nests over z choosing
    per element). That adds the terms in another order, which is the adjoint's choice to make (a
    cotangent sum has no order of its own)."""

    def __init__(self, b: Builder):
        super().__init__()
        self.b = b
        self._producers: dict[Value, Op] = {}
        self._indexed = 0

    def add(self, value: Value, ct: Value | None, op: Op | None = None) -> None:
        """cts[value] += ct, for float values; None adds nothing."""
        if ct is None or not value.type.dtype.is_float:
            return
        if ct.type != value.type:
            raise VerifyError(f"the adjoint rule of '{op.name if op else 'return'}' gave a cotangent of "
                              f"type {ct.type} for a value of type {value.type}")
        self[value] = self._sum(self[value], ct) if value in self else ct

    def _sum(self, x: Value, y: Value) -> Value:
        for into, other in ((x, y), (y, x)):
            update = self._update_of_zeros(other)
            if update is not None:
                return update(into)
        return self.b.op("add", x, y)

    def _update_of_zeros(self, value: Value) -> Callable[[Value], Value] | None:
        """When `value` is an update of zeros (see the class docstring): the same update applied
        to another value of its type; else None."""
        op = self._producer(value)
        if self._zero_padding(op):
            return lambda into: self._slice_add(into, op)
        if op is not None and op.name == "slice_add" and self._zeros(op.operands[0]):
            return lambda into: self.b.op("slice_add", into, op.operands[1], **op.attrs)
        if op is not None and op.name == "reshape":
            op = self._producer(op.operands[0])
        if op is None or op.name != "scatter_add" or not self._zeros(op.operands[0]):
            return None
        return lambda into: self._scatter_add(into, op)

    def _slice_add(self, into: Value, pad: Op) -> Value:
        """`into` plus the values `pad` surrounds by zeros, at their place."""
        x, low = pad.operands[0], pad.attrs["low"]
        return self.b.op("slice_add", into, x, start=low, stop=[lo + d for lo, d in zip(low, x.type.shape)],
                         step=[1] * len(low))

    def _scatter_add(self, into: Value, scatter: Op) -> Value:
        """`into` plus the updates `scatter` (into zeros, maybe of another shape) adds."""
        flat = scatter.result.type
        base = into if into.type == flat else self.b.op("reshape", into, shape=flat.shape)
        total = self.b.op("scatter_add", base, *scatter.operands[1:], **scatter.attrs)
        return total if total.type == into.type else self.b.op("reshape", total, shape=into.type.shape)

    def _zero_padding(self, op: Op | None) -> bool:
        """Whether `op` pads a value of rank 1 or more with zeros (a slice's cotangent)."""
        return op is not None and op.name == "pad" and op.result.type.rank > 0 and self._zeros(op.operands[1])

    def _zeros(self, value: Value) -> bool:
        """Whether `value` is a constant 0, maybe broadcast."""
        op = self._producer(value)
        while op is not None and op.name == "broadcast":
            op = self._producer(op.operands[0])
        return op is not None and op.name == "constant" and op.attrs["value"] == 0

    def _producer(self, value: Value) -> Op | None:
        ops = self.b.ops
        for op in ops[self._indexed:]:
            self._producers.update((r, op) for r in op.results)
        self._indexed = len(ops)
        return self._producers.get(value)


def _cotangent_names(func: Func) -> list[str]:
    """`ct` (or `ct0, ct1, ...`), prefixed by `d` until no param has one of those names."""
    taken = {p.name for p in func.params}
    base = "ct"
    while True:
        names = [base] if len(func.returns) == 1 else [f"{base}{i}" for i in range(len(func.returns))]
        if taken.isdisjoint(names):
            return names
        base = "d" + base


def unique_name(module: Module, name: str) -> str:
    """`name`, or `name` with the first numeric suffix no function of `module` has."""
    candidate, n = name, 1
    while candidate in module.funcs:
        candidate, n = f"{name}{n}", n + 1
    return candidate
