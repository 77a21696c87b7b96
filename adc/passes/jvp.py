"""Forward-mode differentiation: the Jacobian-vector product (JVP) of a function, as IR.

`jvp(module, name)` inlines the function, then builds `{name}_jvp`: its params are
the primal params followed by one tangent per differentiated param (`dx` for a
param `x`); its body runs the primal ops in order, each followed by its rule from
`tangent_rules` (adc/passes/tangent_rules.py) mapping operand tangents to result
tangents; it returns the primal results, then the tangent of each float result
(`primals=False`: the tangents only — what batching needs for a forward-mode
Jacobian). The same cleanup as the adjoint pass (simplify, cse, dce) keeps it lean,
and the verifier checks it; the output is ordinary IR, so the JVP of a VJP is a
Hessian-vector product and its batch a forward-over-reverse Hessian.

Invariant: a tangent has its value's type; only float values get one; a `None`
from a rule is a symbolic zero, so an op none of whose operands moves costs nothing,
and a result that does not depend on the differentiated params gets zeros.

    func @f(%x: f32) -> f32 {                 func @f_jvp(%x: f32, %dx: f32) -> (f32, f32) {
      %0 = mul %x, %x : f32          ==>        %0 = mul %x, %x : f32
      return %0                                 %1 = mul %dx, %x : f32
    }                                           %2 = add %1, %1 : f32
                                                return %0, %2
                                              }
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from adc.errors import CompileError, VerifyError
from adc.ir.builder import Builder, full
from adc.ir.core import Func, Module, Op, Value
from adc.ir.verify import verify_func
from adc.passes.adjoint import cleanup, unique_name
from adc.passes.inline import inline_func
from adc.passes.regions import call_free, fresh_name
from adc.passes.tangent_rules import tangent_rules


@dataclass(frozen=True)
class Tangent:
    """A JVP function: it takes a tangent for each primal param in `wrt` and returns the tangent
    of each result in `outputs` (the float results), after the primal results when `primals`.
    `moving`: some result's tangent is not a symbolic zero (else the results do not depend on the
    `wrt` params, and a tape or accumulator treats them as unconnected, as the VJP's empty wrt)."""

    func: Func
    wrt: tuple[int, ...]
    outputs: tuple[int, ...]
    primals: bool
    moving: bool = True

    @property
    def connected(self) -> tuple[int, ...]:
        """`wrt` when some result moves with those params, else ()."""
        return self.wrt if self.moving else ()


def jvp(module: Module, name: str, wanted: Iterable[int] | None = None,
        primals: bool = True) -> tuple[Module, Tangent]:
    """The JVP of function `name` w.r.t. the `wanted` params (default: every float param; others
    are ignored): inline calls, differentiate, clean up, verify. Returns the module plus the new
    function (named f"{name}_jvp", made unique) and any it calls (transposed custom gradients),
    and the Tangent record. Never mutates `module`."""
    if name not in module.funcs:
        raise CompileError(f"no function @{name} to differentiate in {module.name} "
                           f"(functions: {', '.join(module.funcs) or 'none'})")
    funcs = dict(module.funcs)          # rules may add functions (transposed custom gradients, regions)
    primal = inline_func(module[name], module, funcs)
    tangent = forward(primal, unique_name(module, f"{name}_jvp"), funcs, wanted, primals)
    func = cleanup(tangent.func, funcs)
    verify_func(func, funcs, pass_name="jvp")
    return Module(funcs, module.name).replace(func), Tangent(func, tangent.wrt, tangent.outputs, primals,
                                                            tangent.moving)


def forward(func: Func, name: str, funcs: Mapping[str, Func], wanted: Iterable[int] | None = None,
            primals: bool = True) -> Tangent:
    """The uncleaned JVP of a call-free `func`, named `name`, w.r.t. its `wanted` float params."""
    wanted = range(len(func.params)) if wanted is None else set(wanted)
    wrt = tuple(i for i, p in enumerate(func.params) if i in wanted and p.type.dtype.is_float)
    b = Builder(funcs, func.loc)
    b.params = list(func.params)
    names = _tangent_names(func, wrt)
    tangents: dict[Value, Value] = {func.params[i]: b.param(n, func.params[i].type) for i, n in zip(wrt, names)}
    for op in func.ops:
        b.ops.append(op)
        _push(b, op, tangents)
    outputs = tuple(i for i, v in enumerate(func.returns) if v.type.dtype.is_float)
    results = [func.returns[i] for i in outputs]
    with b.at(func.loc):
        outs = [tangents[v] if v in tangents else full(b, 0.0, v.type) for v in results]
    returns = (list(func.returns) if primals else []) + outs
    return Tangent(b.finish(name, returns, func.loc), wrt, outputs, primals, any(v in tangents for v in results))


def region_jvp(funcs: dict[str, Func], name: str, wanted: Iterable[int]) -> Func:
    """The cleaned JVP of region function `name` w.r.t. its `wanted` params, primal results first,
    not yet added to `funcs` (a control-flow rule arranges its params first)."""
    tangent = forward(call_free(funcs, name), fresh_name(funcs, f"{name}_jvp"), funcs, wanted)
    return cleanup(tangent.func, funcs)


def _push(b: Builder, op: Op, tangents: dict[Value, Value]) -> None:
    """Apply op's rule to its operands' tangents, recording the tangents of its results."""
    incoming = tuple(tangents.get(v) for v in op.operands)
    if all(t is None for t in incoming):
        return
    rule = tangent_rules.get(op.name)
    if rule is None:
        raise CompileError(f"cannot differentiate op '{op.name}' in forward mode: no rule in tangent_rules", op.loc)
    with b.at(op.loc):
        outgoing = rule(b, op, incoming)
    for result, tangent in zip(op.results, outgoing, strict=True):
        if tangent is None or not result.type.dtype.is_float:
            continue
        if tangent.type != result.type:
            raise VerifyError(f"the tangent rule of '{op.name}' gave a tangent of type {tangent.type} "
                              f"for a value of type {result.type}")
        tangents[result] = tangent


def _tangent_names(func: Func, wrt: tuple[int, ...]) -> list[str]:
    """`d<param>` for each param in wrt, prefixed by more `d`s until no name is taken."""
    taken = {p.name for p in func.params}
    names = []
    for i in wrt:
        candidate = "d" + (func.params[i].name or f"arg{i}")
        while candidate in taken:
            candidate = "d" + candidate
        taken.add(candidate)
        names.append(candidate)
    return names
