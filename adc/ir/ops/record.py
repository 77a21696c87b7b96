"""What an op is: one `OpDef` record holding every fact about it that is not a formula.

The engines read these facts instead of keeping lists of op names: the interpreter runs an
op's NumPy `reference`, lowering computes an element as its `scalar` spec says, fusion asks
whether it `materializes` or is `transcendental`, the derivative passes read its `linear`
operands, whether it is `differentiable` and the op that is its `derivative`, the frontend and
the eager library find it under its `builtin` name and the NumPy `ufunc` it answers. Formulas
(a type rule here; a VJP, a JVP, a batching rule, a vector-math emitter elsewhere) stay code.

    define("exp", "elementwise e**x", example, float_unary, 1, traits=("elementwise", "unary",
           "transcendental"), reference=np.exp, scalar=Scalar(vecmath="exp"), builtin="exp", ufunc="exp")
    with_trait("materializes")          # frozenset of op names
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from adc.ir.types import MAX_BYTES, TensorType, fits


class TypeRuleError(Exception):
    """An op's operands or attributes do not fit its type rule."""


TypeRule = Callable[[Sequence[TensorType], Mapping[str, Any], Mapping[str, Any]], tuple[TensorType, ...]]
ALL = "all"     # `linear`: every operand, however many (variadic ops)

# The traits an op may carry, and what each means to the engines that ask.
TRAITS = {
    "elementwise": "each result element depends on the operands' elements at its own index",
    "unary": "one operand", "binary": "two operands of one type",
    "compare": "a bool result", "commutative": "x op y == y op x, bit for bit",
    "source": "no operands: the same value in every example, every iteration, every batch entry",
    "reduction": "reduces `axes`", "scan": "a running combination along `axis`",
    "control_flow": "runs region functions named by its attributes",
    "materializes": "its result is computed into a buffer by a rule of its own, never fused into a consumer",
    "stacked_matrices": "acts on each matrix (or vector) of a stack on its own: the leading axes of its operands "
                        "and results are stacking axes, which a batch axis joins",
    "index_map": "reads one operand at an index computed from the result's (fused as a load, not a loop)",
    "selects": "each result element is an element of one of its operands, chosen by its index",
    "transcendental": "computed by vector math: tens of instructions an element, stored once rather than "
                      "recomputed in each loop nest reading it",
    "cheap": "recomputing it costs less than storing it (hoisting leaves it, a split VJP recomputes it)",
    "flat": "computable at a flat (row-major) index of its result",
    "non_differentiable": "piecewise constant, a constant, or stop_gradient: no cotangent for any operand",
    "index_result": "gives i64 indices, piecewise constant in its operand: no derivative flows through",
    "additive": "a signed sum of its operands (each enters with +1 or -1)",
    "indexing": "takes (x, indices, ...) {axis}, indices read by the index rule of adc/ir/ops/indexing.py",
    "scatter": "writes updates into a copy of its first operand at its indices",
    "updates": "its result is its first operand with some elements written or added to: lowering may compute "
               "the first operand straight into the result's buffer, then change only those elements",
    "calls": "calls another function of the module",
    "counted": "a loop whose first operand is its trip count",
}


@dataclass(frozen=True)
class Scalar:
    """How lowering computes one element of an elementwise op: by `vecmath`, a function of adc's
    vector math library (branch-free, so the loop vectorizer widens it); by `predicate`, an
    ordered comparison; by `intrinsic`, LLVM intrinsics named for (integer, float) operands; or by
    IRBuilder methods, `integer` for integer and bool operands and `float` for floats."""

    vecmath: str | None = None
    predicate: str | None = None
    intrinsic: tuple[str, str] | None = None
    integer: str | None = None
    float: str | None = None


@dataclass(frozen=True)
class OpDef:
    """One op: its type rule and every fact the engines read (see the module docstring)."""

    name: str
    summary: str
    example: str
    type_rule: TypeRule
    arity: int | None                      # None: variadic
    attrs: tuple[str, ...] = ()
    traits: frozenset[str] = field(default_factory=frozenset)
    reference: Callable | None = None      # the interpreter's result: reference(*operand arrays)
    scalar: Scalar | None = None           # lowering of one element (elementwise ops without a rule of their own)
    linear: tuple[int, ...] | str = ()     # operands the op is jointly linear in (ALL: every one)
    products: tuple[int, ...] = ()         # linear in any one of these while the others are held fixed
    buffered: tuple[int, ...] = ()         # operands native code reads from memory (the runtime library's routines)
    triangular: tuple[tuple[int, str], ...] = ()   # (result, "lower" or "upper"): its matrices are zero past that triangle
    derivative: str | None = None          # the op computing f' (unary f): d f(x) = ct * derivative(x)
    regions: tuple[str, ...] = ()          # control flow: the attributes naming its region functions
    body_leads: int | None = None          # a loop: its body's parameters before the carried values
    builtin: str | None = None             # the language builtin (and adc.math function) that is this op
    params: tuple[str, ...] = ()           # its builtin's parameter names, when not x (unary) or x, y (binary)
    ufunc: str | None = None               # the NumPy ufunc computing this op (np.<ufunc>)
    dtypes: str = "any"                    # its operands' dtypes: "float", "numeric", "bits" or "any"

    def has(self, trait: str) -> bool:
        return trait in self.traits

    @property
    def builtin_params(self) -> tuple[str, ...]:
        return self.params or ("x", "y")[:self.arity or 0]


OPS: dict[str, OpDef] = {}


def define(name: str, summary: str, example: str, type_rule: TypeRule, arity: int | None,
           attrs: Sequence[str] = (), traits: Sequence[str] = (), **facts) -> OpDef:
    """Register op `name` (each family module defines its ops with this)."""
    unknown = set(traits) - set(TRAITS)
    assert not unknown, f"{name}: unknown traits {sorted(unknown)}"
    OPS[name] = OpDef(name, summary, example, type_rule, arity, tuple(attrs), frozenset(traits), **facts)
    return OPS[name]


def with_trait(trait: str) -> frozenset[str]:
    """The names of the ops that carry `trait`."""
    assert trait in TRAITS, trait
    return frozenset(name for name, op in OPS.items() if trait in op.traits)


def require(cond: bool, message: str) -> None:
    if not cond:
        raise TypeRuleError(message)


def same_types(types) -> TensorType:
    first = types[0]
    for t in types[1:]:
        require(t == first, f"operand types differ: {first} vs {t}")
    return first


def example(params: str, body: str, result: str) -> str:
    return f"func @example({params}) -> {result} {{\n{body}\n}}\n"


def infer_types(name: str, operand_types: Sequence[TensorType], attrs: Mapping[str, Any],
                funcs: Mapping[str, Any]) -> tuple[TensorType, ...]:
    """Run the type rule of op `name`; raises TypeRuleError on misuse."""
    opdef = OPS.get(name)
    if opdef is None:
        raise TypeRuleError(f"unknown op '{name}'")
    if opdef.arity is not None and len(operand_types) != opdef.arity:
        raise TypeRuleError(f"'{name}' takes {opdef.arity} operands, got {len(operand_types)}")
    missing = [a for a in opdef.attrs if a not in attrs]
    extra = [a for a in attrs if a not in opdef.attrs]
    if missing or extra:
        raise TypeRuleError(f"'{name}' needs attributes {list(opdef.attrs)}, got {sorted(attrs)}")
    types = opdef.type_rule(operand_types, attrs, funcs)
    for t in types:
        require(fits(t), f"{t} has more than {MAX_BYTES} bytes")
    return types
