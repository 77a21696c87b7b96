"""Transposition of a function linear in some of its params: how forward mode goes through a
custom gradient.

A `@custom_gradient` kernel's backward maps cotangents to cotangents, ct ↦ Jᵀ·ct, linearly:
its JVP t ↦ J·t is that map transposed. Transposing a linear map is what the adjoint
pass does, so `transposed` (1) checks, op by op with the `LINEAR_IN` and `PRODUCTS`
tables, that the backward is linear in its cotangent params — not merely affine: a
constant added to a cotangent is an error, located at the op that adds it — and (2)
takes the backward's VJP with respect to those params, at cotangent 0 (a linear map's
derivative is the map). The result is an ordinary function, compiled like any other.

    func @bwd(%x: f64, %ct: f64) -> f64 {          func @bwd_transpose(%x: f64, %ct: f64, %t: f64) -> f64 {
      %0 = cos %x : f64                 ==>           %0 = cos %x : f64
      %1 = mul %ct, %0 : f64                          %1 = mul %t, %0 : f64
      return %1                                       return %1
    }                                               }
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from adc.errors import CompileError, Location
from adc.ir.builder import Builder, full
from adc.ir.core import Func, Module, Op, Value
from adc.ir.ops import ALL, OPS
from adc.ir.verify import verify_func
from adc.passes.adjoint import adjoint, cleanup, unique_name
from adc.passes.inline import inline_func

# ops linear in these operands jointly (ALL: every one); their other operands (a select's
# condition, indices) must not depend on the linear inputs
LINEAR_IN: dict[str, tuple[int, ...] | str] = {name: op.linear for name, op in OPS.items() if op.linear}
# ops linear in any one of these operands while the others do not depend on the linear inputs
PRODUCTS: dict[str, tuple[int, ...]] = {name: op.products for name, op in OPS.items() if op.products}


def linear_positions(op: Op) -> range | tuple[int, ...]:
    """The operand positions in which `op` (a LINEAR_IN op) is jointly linear."""
    positions = LINEAR_IN[op.name]
    return range(len(op.operands)) if positions == ALL else positions


@dataclass(frozen=True)
class Transpose:
    """A linear function transposed: `func` takes the original params, then one seed per original
    result, and returns one value per linear param (`linear` lists their indices)."""

    func: Func
    linear: tuple[int, ...]

    @property
    def name(self) -> str:
        return self.func.name


def transposed(funcs: dict[str, Func], name: str, n_linear: int, loc: Location | None) -> Transpose:
    """The transpose of function `name` w.r.t. its last `n_linear` params, added to `funcs` (the
    calling pass's own copy) as f"{name}_transpose" (made unique). CompileError, located at the
    offending op (and mentioning `loc`'s call), when `name` is not linear in those params."""
    module = Module(funcs)
    func = inline_func(funcs[name], module, funcs)
    linear = tuple(range(len(func.params) - n_linear, len(func.params)))
    _check_linear(func, {func.params[i] for i in linear}, loc)
    grad = adjoint(func, unique_name(module, f"{name}_transpose"), funcs, linear)
    b = Builder(funcs, func.loc)
    b.params, b.ops = list(grad.func.params), list(grad.func.ops)
    by_param = dict(zip(grad.wrt, grad.func.returns))
    returns = [by_param[i] if i in by_param else full(b, 0.0, func.params[i].type) for i in linear]
    out = cleanup(b.finish(grad.func.name, returns, func.loc), funcs)
    verify_func(out, funcs, pass_name="transpose")
    funcs[out.name] = out
    return Transpose(out, linear)


def _check_linear(func: Func, inputs: set[Value], loc: Location | None) -> None:
    """CompileError at the first op of `func` that makes a result non-linear in `inputs`."""
    linear = set(inputs)
    producers: dict[Value, Op] = {}
    for op in func.ops:
        producers.update((r, op) for r in op.results)
        touched = [i for i, v in enumerate(op.operands) if v in linear]
        if not touched:
            continue
        why = _nonlinearity(op, touched, linear, producers)
        if why:
            raise CompileError(f"@{func.name} must be linear in its cotangents to run in forward mode "
                               f"(its transpose is the JVP), but {why}{_called_at(loc)}", op.loc)
        linear.update(op.results)
    for value in func.returns:
        if value not in linear and not _is_zero(value, producers):
            raise CompileError(f"@{func.name} must be linear in its cotangents to run in forward mode, "
                               f"but it returns a value that does not depend on them and is not zero"
                               f"{_called_at(loc)}", func.loc)


def _nonlinearity(op: Op, touched: list[int], linear: set[Value], producers) -> str | None:
    """Why `op`, whose operands `touched` are linear in the inputs, is not linear; None if it is."""
    if op.name in LINEAR_IN:
        positions = linear_positions(op)
        if any(i not in positions for i in touched):
            return f"'{op.name}' uses a cotangent where it is not linear"
        constant = [i for i in positions if i not in touched and not _is_zero(op.operands[i], producers)]
        if constant:
            return f"'{op.name}' combines a cotangent with a value that does not depend on it (affine, not linear)"
        return None
    if op.name in PRODUCTS and len(touched) == 1 and touched[0] in PRODUCTS[op.name]:
        return None
    if op.name in PRODUCTS:
        return f"'{op.name}' multiplies cotangents together" if len(touched) > 1 else \
            f"'{op.name}' divides by a cotangent"
    return f"'{op.name}' is applied to a cotangent"


def _is_zero(value: Value, producers: Mapping[Value, Op]) -> bool:
    """A constant 0, or a broadcast of one."""
    op = producers.get(value)
    while op is not None and op.name == "broadcast":
        op = producers.get(op.operands[0])
    return op is not None and op.name == "constant" and op.attrs["value"] == 0


def _called_at(loc: Location | None) -> str:
    return f" (forward mode through the custom gradient at {loc})" if loc else ""
