"""The JVP rule of every op: the table the forward-mode pass (adc/passes/jvp.py) runs.

A rule turns the tangents of an op's operands into tangents of its results,
emitting ordinary IR with the builder, so forward mode composes with every other
pass (the batched JVP is a forward-mode Jacobian, the JVP of a gradient a
Hessian-vector product). Every op of `adc.ir.ops.OPS` has a rule here; the ops
whose records say they have no derivative (`non_differentiable`, `index_result`) share one.

Families need no rule of their own:
- a unary elementwise op has a diagonal, hence symmetric, Jacobian: its tangent rule
  is its adjoint rule (`SELF_ADJOINT`);
- a binary elementwise op's tangent is the sum of the tangents times its partials, which
  its adjoint rule gives for a cotangent of 1;
- an op linear in some operands (`LINEAR_IN`: sums, structure, gathers) maps their
  tangents through itself, zeros standing in for symbolic-zero tangents;
- a custom gradient's backward is linear in its cotangents, so its JVP is the
  transpose of the backward (adc/passes/transpose.py);
- a control-flow op becomes the same op over (value, tangent) pairs, its regions
  differentiated by the pass itself (adc/passes/regions.py).

    %0 = mul %x, %y : f64[N]      tangents %tx, %ty    ==>    %1 = mul %tx, %y : f64[N]
                                                               %2 = mul %x, %ty : f64[N]
                                                               %3 = add %1, %2 : f64[N]     (tangent of %0)
"""
from __future__ import annotations

from typing import Callable

from adc.errors import CompileError
from adc.ir.builder import Builder, full, sum_present as _sum
from adc.ir.core import FuncRef, Op, Value
from adc.ir.ops import OPS, with_trait
from adc.passes.adjoint_rules import adjoint_rules
from adc.passes.adjoint_rules.calls import attached_gradient, lift_elementwise
from adc.passes.adjoint_rules.linalg import phi, solve_lower, solve_mask, swap_last, triangle
from adc.passes.adjoint_rules.lu import lu_factors, permutation_matrix, solve_unit_lower, solve_upper_right
from adc.passes.adjoint_rules.reductions import cumprod_zeros
from adc.passes.orthogonal_rules import tangent_rules as orthogonal_tangent_rules
from adc.passes.regions import add_region, extend, unused_params
from adc.passes.transpose import LINEAR_IN, linear_positions, transposed

# tangent_rules[op_name](b, op, tangents) -> one tangent (or None) per result of `op`
#   b:        the builder of the JVP function, stamped with op.loc by the pass; op is already in it
#   op:       the primal op; its operands and results are values of the JVP function
#   tangents: the tangents of op's operands; None is a symbolic zero (not all are None)
# A returned None is a symbolic zero. A tangent has its value's type; integer results get None.
TangentRule = Callable[[Builder, Op, tuple["Value | None", ...]], tuple["Value | None", ...]]
tangent_rules: dict[str, TangentRule] = {}


def _zero_if_none(b: Builder, tangent: Value | None, like: Value) -> Value:
    return full(b, 0.0, like.type) if tangent is None else tangent


def zero_tangent(b, op, tangents):
    # piecewise constant, a constant, stop_gradient or an index: no tangent for any result
    return (None,) * len(op.results)


for _name in with_trait("non_differentiable") | with_trait("index_result"):
    tangent_rules[_name] = zero_tangent


def call_tangent(b, op, tangents):
    raise CompileError(f"the JVP pass met a call of @{op.attrs['callee']}: inline calls first", op.loc)


tangent_rules["call"] = call_tangent


# ---------------------------------------------------------------- unary elementwise: the adjoint rule

# A differentiable unary elementwise op f without attributes: its adjoint rule multiplies the
# cotangent by f'(x), and its tangent is the same product with the tangent.
SELF_ADJOINT = tuple(name for name, op in OPS.items() if op.has("unary") and op.has("elementwise")
                     and not op.has("non_differentiable") and not op.attrs)


def self_adjoint_tangent(b, op, tangents):
    # t * f'(x), the same product the adjoint rule forms with a cotangent
    return adjoint_rules[op.name](b, op, tangents)


for _name in SELF_ADJOINT:
    tangent_rules[_name] = self_adjoint_tangent


def partials_tangent(b, op, tangents):
    # d f(x, y) = tx*df/dx + ty*df/dy, the partials being the adjoint rule's cotangents for ct = 1
    # (pow: p*x**(p-1) and y*log(x) where x > 0 else 0)
    partials = adjoint_rules[op.name](b, op, (full(b, 1.0, op.result.type),))
    return (_sum(b, *(t and b.op("mul", t, d) for t, d in zip(tangents, partials))),)


# every differentiable binary elementwise op without a rule below (pow, atan2, hypot, ...)
for _name, _opdef in OPS.items():
    if _opdef.has("binary") and _opdef.has("elementwise") and not _opdef.has("non_differentiable"):
        tangent_rules[_name] = partials_tangent


# ---------------------------------------------------------------- linear in some operands

def linear_tangent(b, op, tangents):
    # the op applied to the tangents of its linear operands (zeros for symbolic zeros), the others as they are
    positions = linear_positions(op)
    if op.name == "convert" and not (op.operands[0].type.dtype.is_float and op.result.type.dtype.is_float):
        return (None,)
    operands = [_zero_if_none(b, t, v) if i in positions else v
                for i, (v, t) in enumerate(zip(op.operands, tangents))]
    return b.emit(op.name, *operands, **op.attrs)


for _name in LINEAR_IN:
    tangent_rules[_name] = linear_tangent


# ---------------------------------------------------------------- bilinear and binary elementwise

def _bilinear_tangent(b, op, tangents):
    # d(x ∘ y) = tx ∘ y + x ∘ ty, for a product ∘ linear in each operand
    (x, y), (tx, ty) = op.operands, tangents
    return (_sum(b, tx and b.op(op.name, tx, y, **op.attrs), ty and b.op(op.name, x, ty, **op.attrs)),)


tangent_rules["mul"] = _bilinear_tangent
tangent_rules["matmul"] = _bilinear_tangent


def add_tangent(b, op, tangents):
    # d(x + y) = tx + ty; a symbolic zero adds nothing (no 0 + t in the IR, which no cleanup may fold)
    return (_sum(b, *tangents),)


tangent_rules["add"] = add_tangent


def sub_tangent(b, op, tangents):
    # d(x - y) = tx - ty, -ty when x does not move
    tx, ty = tangents
    return (tx if ty is None else b.op("neg", ty) if tx is None else b.op("sub", tx, ty),)


tangent_rules["sub"] = sub_tangent


def div_tangent(b, op, tangents):
    # d(x/y) = (tx - (x/y)*ty) / y
    (tx, ty), y = tangents, op.operands[1]
    numerator = _sum(b, tx, ty and b.op("neg", b.op("mul", op.result, ty)))
    return (b.op("div", numerator, y),)


tangent_rules["div"] = div_tangent


def mod_tangent(b, op, tangents):
    # x % y = x - y * (x // y), the quotient piecewise constant: d = tx - ty * (x // y)
    (tx, ty), (x, y) = tangents, op.operands
    return (_sum(b, tx, ty and b.op("neg", b.op("mul", ty, b.op("floor_div", x, y)))),)


tangent_rules["mod"] = mod_tangent


def _choose(b: Builder, cond: Value, tx: Value | None, ty: Value | None, like: Value) -> Value:
    return b.op("select", cond, _zero_if_none(b, tx, like), _zero_if_none(b, ty, like))


def maximum_tangent(b, op, tangents):
    # the tangent of x where x >= y, else y's: ties go to x, as the adjoint rule
    return (_choose(b, b.op("ge", *op.operands), *tangents, op.result),)


tangent_rules["maximum"] = maximum_tangent


def minimum_tangent(b, op, tangents):
    # the tangent of x where x <= y, else y's: ties go to x, as the adjoint rule
    return (_choose(b, b.op("le", *op.operands), *tangents, op.result),)


tangent_rules["minimum"] = minimum_tangent


# ---------------------------------------------------------------- reductions

def _unreduce(b: Builder, op: Op, v: Value) -> Value:
    x, axes = op.operands[0], op.attrs["axes"]
    kept = [i for i in range(x.type.rank) if i not in axes]
    return b.op("broadcast", v, dims=kept, shape=x.type.shape)


def reduce_max_tangent(b, op, tangents):
    # the mean of the tangents at the tied extrema: the adjoint rule's share of a cotangent
    x, (t,) = op.operands[0], tangents
    ties = b.op("convert", b.op("eq", x, _unreduce(b, op, op.result)), dtype=x.type.dtype)
    total = b.op("reduce_sum", b.op("mul", t, ties), axes=op.attrs["axes"])
    return (b.op("div", total, b.op("reduce_sum", ties, axes=op.attrs["axes"])),)


tangent_rules["reduce_max"] = reduce_max_tangent
tangent_rules["reduce_min"] = reduce_max_tangent


def reduce_prod_tangent(b, op, tangents):
    # d prod(x) = y * sum(t / x) (nan where an element is exactly 0, as the adjoint rule)
    x, (t,) = op.operands[0], tangents
    return (b.op("mul", op.result, b.op("reduce_sum", b.op("div", t, x), axes=op.attrs["axes"])),)


tangent_rules["reduce_prod"] = reduce_prod_tangent


# ---------------------------------------------------------------- scans (cumsum is in LINEAR_IN)

def cumprod_tangent(b, op, tangents):
    # d cumprod(x)_i = Σ_{k scanned to i} t_k dy_i/dx_k = y * cumsum(t/x over nonzero x)
    #                  + (products without the first zero) * cumsum(t at the first zero)   (cumprod_zeros)
    (t,), x = tangents, op.operands[0]
    is_zero, first, nonzero, without_first = cumprod_zeros(b, op)
    zero = full(b, 0.0, x.type)
    scan = {k: op.attrs[k] for k in ("axis", "exclusive", "reverse")}
    ratios = b.op("cumsum", b.op("select", is_zero, zero, b.op("div", t, nonzero)), **scan)
    at_first = b.op("cumsum", b.op("select", first, t, zero), **scan)
    return (b.op("add", b.op("mul", op.result, ratios), b.op("mul", without_first, at_first)),)


tangent_rules["cumprod"] = cumprod_tangent


# ---------------------------------------------------------------- linear algebra

def cholesky_tangent(b, op, tangents):
    # dS = Φ(da) + Φ(da)ᵀ (a read from its lower triangle), dL = L Φ(L⁻¹ dS L⁻ᵀ)
    (t,), factor = tangents, op.result
    lower = phi(b, t)
    ds = b.op("add", lower, swap_last(b, lower))
    inner = solve_lower(b, factor, swap_last(b, solve_lower(b, factor, ds, False)), False)
    return (b.op("matmul", factor, phi(b, inner)),)


tangent_rules["cholesky"] = cholesky_tangent


def triangular_solve_tangent(b, op, tangents):
    # dx = op(a)⁻¹ (db - op(da) x), da read from a's triangle
    (ta, tb), a, x = tangents, op.operands[0], op.result
    moved = ta and solve_mask(b, op, ta)
    moved = moved and (swap_last(b, moved) if op.attrs["trans"] else moved)
    change = _sum(b, tb, moved and b.op("neg", b.op("matmul", moved, x)))
    return (b.op("triangular_solve", a, change, **op.attrs),)


tangent_rules["triangular_solve"] = triangular_solve_tangent


def lu_factor_tangent(b, op, tangents):
    # JAX's lu_jvp_rule: M = L⁻¹ P da U⁻¹, d(lu) = L tril₋(M) + triu(M) U; the pivots are piecewise constant
    (t,), lu = tangents, op.results[0]
    lower, upper = lu_factors(b, lu)
    m = solve_upper_right(b, lu, solve_unit_lower(b, lu, b.op("matmul", permutation_matrix(b, op), t), False), False)
    return (b.op("add", b.op("matmul", lower, triangle(b, m, True, 0.0)),
                 b.op("matmul", triangle(b, m, False, 1.0), upper)), None)


tangent_rules["lu_factor"] = lu_factor_tangent


# ---------------------------------------------------------------- custom gradients and external functions

def custom_gradient_tangent(b, op, tangents):
    # J t, where the user's backward computes Jᵀ ct: the backward transposed w.r.t. its cotangents
    # (a located error if it is not linear in them), at the values the op's forward saved. Integer
    # operands get no cotangent, so any value of their type seeds them: the operand itself.
    k = op.attrs["results"]
    transpose = transposed(b.funcs, op.attrs["backward"], k, op.loc)
    seeds = [_zero_if_none(b, t, v) if v.type.dtype.is_float else v for v, t in zip(op.operands, tangents)]
    cotangents = [full(b, 0.0, r.type) for r in op.results[:k]]
    outs = b.emit("call", *op.operands, *op.results[k:], *cotangents, *seeds, callee=FuncRef(transpose.name))
    return outs + (None,) * (len(op.results) - k)


tangent_rules["custom_gradient"] = custom_gradient_tangent


def extern_call_tangent(b, op, tangents):
    # d f(x1..xn) = Σ t_i * g(x1..xn, 1)_i: the attached elementwise VJP at cotangent 1 gives the partials
    partials = lift_elementwise(b, attached_gradient(b, op), (*op.operands, full(b, 1.0, op.result.type)))
    return (_sum(b, *(t and b.op("mul", t, d) for t, d in zip(tangents, partials))),)


tangent_rules["extern_call"] = extern_call_tangent



# ---------------------------------------------------------------- control flow
#
# The op over (value, tangent) pairs replaces the primal one (regions.extend): each region is its
# JVP w.r.t. the operands that move, and a loop carries the tangent of each float carried value
# next to it, zeros where the initial value has none (a carried value may start constant and
# move once it mixes with one that does).

def _moving(tangents, start: int) -> list[int]:
    return [j for j, t in enumerate(tangents[start:]) if t is not None]


def loop_tangent(b, op, tangents):
    # for and scan: a scan's body also returns the values it stacks, whose tangents it stacks too
    from adc.passes.jvp import region_jvp     # the pass differentiates the body

    k = op.attrs["carried"]
    count, inits, captured = op.operands[0], op.operands[1:1 + k], op.operands[1 + k:]
    floats = [j for j in range(k) if inits[j].type.dtype.is_float]
    moving = _moving(tangents, 1 + k)
    rows = b.funcs[op.attrs["body"]].result_types[k:]
    body = region_jvp(b.funcs, op.attrs["body"], [1 + j for j in floats] + [1 + k + j for j in moving])
    n, f, p, r = len(op.operands), len(floats), body.params, body.returns
    s = len(rows)
    params = [*p[:1 + k], *p[n:n + f], *p[1 + k:n], *p[n + f:]]
    returns = [*r[:k], *r[k + s:k + s + f], *r[k:k + s], *r[k + s + f:]]
    region = add_region(b.funcs, body.name, params, body, returns)
    seeds = [_zero_if_none(b, tangents[1 + j], inits[j]) for j in floats]
    outs = extend(b, op, [count, *inits, *seeds, *captured, *(tangents[1 + k + j] for j in moving)],
                  {**op.attrs, "body": FuncRef(region.name), "carried": k + f},
                  own=[*range(k), *range(k + f, k + f + s)])
    found = dict(zip(floats, outs[:f]))
    row_tangents = iter(outs[f:])
    return tuple(found.get(j) for j in range(k)) + tuple(next(row_tangents) if t.dtype.is_float else None
                                                         for t in rows)


def while_tangent(b, op, tangents):
    from adc.passes.jvp import region_jvp     # the pass differentiates the body

    k = op.attrs["carried"]
    inits, captured = op.operands[:k], op.operands[k:]
    floats = [j for j in range(k) if inits[j].type.dtype.is_float]
    moving = _moving(tangents, k)
    body = region_jvp(b.funcs, op.attrs["body"], floats + [k + j for j in moving])
    n, p = len(op.operands), body.params
    params = [*p[:k], *p[n:n + len(floats)], *p[k:n], *p[n + len(floats):]]
    region = add_region(b.funcs, body.name, params, body)
    cond = b.funcs[op.attrs["cond"]]
    extra = unused_params([v.type for v in p[n:]])
    cond_params = [*cond.params[:k], *extra[:len(floats)], *cond.params[k:], *extra[len(floats):]]
    cond_region = add_region(b.funcs, f"{cond.name}_jvp", cond_params, cond)
    seeds = [_zero_if_none(b, tangents[j], inits[j]) for j in floats]
    outs = extend(b, op, [*inits, *seeds, *captured, *(tangents[k + j] for j in moving)],
                  {**op.attrs, "body": FuncRef(region.name), "carried": k + len(floats),
                   "cond": FuncRef(cond_region.name)})
    found = dict(zip(floats, outs))
    return tuple(found.get(j) for j in range(k))


def if_tangent(b, op, tangents):
    from adc.passes.jvp import region_jvp     # the pass differentiates the branches

    moving = _moving(tangents, 1)
    branches = {key: region_jvp(b.funcs, op.attrs[key], moving) for key in ("then_branch", "else_branch")}
    names = {key: FuncRef(add_region(b.funcs, f.name, f.params, f).name) for key, f in branches.items()}
    outs = iter(extend(b, op, [*op.operands, *(tangents[1 + j] for j in moving)], names))
    return tuple(next(outs) if r.type.dtype.is_float else None for r in op.results)


tangent_rules["for"] = loop_tangent
tangent_rules["scan"] = loop_tangent
tangent_rules["while"] = while_tangent
tangent_rules["if"] = if_tangent
tangent_rules.update(orthogonal_tangent_rules)      # qr, eigh, svd
