"""Element rules of the elementwise ops: a scalar function applied at one index of every operand.

Arithmetic, bitwise and comparison ops are one LLVM instruction or intrinsic each (`_elementwise`
makes an element rule of a scalar function of the builder); float math functions call vecmath,
branch-free, so the loop vectorizer widens them; convert is NumPy's astype; constant, dim and
iota make their element from an attribute, a dimension or the index.

    %2 = add %0, %1 : f32[N]    ──▶   fadd float %x, %y    (at element i, in the consumer's loop)
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import llvmlite.ir as ir

from adc.codegen.lowering import vecmath
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.element_types import INT_SUFFIX, REGISTER_TYPES
from adc.codegen.lowering.loops import Index
from adc.codegen.lowering.rules import division
from adc.ir.core import Op
from adc.ir.ops import OPS, Scalar
from adc.ir.types import DType

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter
    from adc.codegen.lowering.rules.table import LowerRule

lower_rules: dict[str, LowerRule] = {}      # this family's rows of table.lower_rules


def _elementwise(scalar: Callable[..., ir.Value]) -> LowerRule:
    """An element rule applying `scalar(b, dtype, *operand_elements)` at the same index."""
    def rule(em: Emitter, op: Op, idx: Index) -> ir.Value:
        args = [em.value_at(v, idx) for v in op.operands]
        return scalar(em.b, op.operands[-1].type.dtype, *args)
    rule.__name__ = scalar.__name__
    return rule


def int_or_float(int_name: str | None, float_name: str | None) -> Callable[..., ir.Value]:
    """`scalar(b, dtype, *operands)` calling IRBuilder method `int_name` on integers and bools
    (on i1 `and_`, `or_`, `xor` and `not_` are the logical ones), `float_name` on floats."""
    def scalar(b: ir.IRBuilder, dtype: DType, *operands: ir.Value) -> ir.Value:
        return getattr(b, float_name if dtype.is_float else int_name)(*operands)
    scalar.__name__ = f"{float_name or int_name}_lower"
    return scalar


def _extremum(float_name: str, int_name: str) -> Callable[..., ir.Value]:
    # llvm.maximum/minimum propagate NaN, as np.maximum/np.minimum do
    def scalar(b: ir.IRBuilder, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
        return intrinsic(b, float_name if dtype.is_float else int_name, [x, y], dtype)
    return scalar


def _compare(predicate: str) -> Callable[..., ir.Value]:
    # ordered float compares are false on NaN, except `ne` (unordered), as in NumPy
    def scalar(b: ir.IRBuilder, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
        if dtype.is_float:
            compare = b.fcmp_unordered if predicate == "!=" else b.fcmp_ordered
            return compare(predicate, x, y)
        compare = b.icmp_unsigned if dtype is DType.bool else b.icmp_signed
        return compare(predicate, x, y)
    return scalar


def _math(name: str) -> LowerRule:
    """Float functions come from vecmath: branch-free, so the loop vectorizer widens them."""
    def rule(em: Emitter, op: Op, idx: Index) -> ir.Value:
        return em.math(name, [em.value_at(v, idx) for v in op.operands])
    rule.__name__ = f"{name}_lower"
    return rule


def _specified(spec: Scalar) -> LowerRule:
    """The element rule an op's record specifies (adc/ir/ops/record.py, `Scalar`)."""
    if spec.vecmath is not None:
        return _math(spec.vecmath)
    if spec.predicate is not None:
        return _elementwise(_compare(spec.predicate))
    if spec.intrinsic is not None:
        integer, floating = spec.intrinsic
        return _elementwise(_extremum(floating, integer))
    return _elementwise(int_or_float(spec.integer, spec.float))


for _name, _opdef in OPS.items():
    if _opdef.scalar is not None:
        lower_rules[_name] = _specified(_opdef.scalar)

lower_rules["floor_div"] = _elementwise(division.floor_div)
lower_rules["mod"] = _elementwise(division.mod)


def abs_lower(b: ir.IRBuilder, dtype: DType, x: ir.Value) -> ir.Value:
    if dtype.is_float:
        return vecmath.call(b, "abs", [x])
    return b.select(b.icmp_signed("<", x, ir.Constant(x.type, 0)), b.neg(x), x)


lower_rules["abs"] = _elementwise(abs_lower)


def sign_lower(b: ir.IRBuilder, dtype: DType, x: ir.Value) -> ir.Value:
    if dtype.is_float:
        return vecmath.call(b, "sign", [x])
    zero = ir.Constant(x.type, 0)
    # sign(x) = (x > 0) - (x < 0)
    return b.sub(b.zext(b.icmp_signed(">", x, zero), x.type), b.zext(b.icmp_signed("<", x, zero), x.type))


lower_rules["sign"] = _elementwise(sign_lower)


def select_lower(b: ir.IRBuilder, dtype: DType, cond: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(cond, x, y)


lower_rules["select"] = _elementwise(select_lower)


def stop_gradient_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    return em.value_at(op.operands[0], idx)


lower_rules["stop_gradient"] = stop_gradient_lower


def convert_scalar(b: ir.IRBuilder, x: ir.Value, source: DType, dest: DType) -> ir.Value:
    """NumPy's astype: float→int truncates (saturating, never poison), x→bool is x != 0."""
    to = REGISTER_TYPES[dest]
    if source is dest:
        return x
    if dest is DType.bool:
        zero = ir.Constant(x.type, 0)
        return b.fcmp_unordered("!=", x, zero) if source.is_float else b.icmp_unsigned("!=", x, zero)
    if source.is_float and dest.is_float:
        return b.fpext(x, to) if dest is DType.f64 else b.fptrunc(x, to)
    if source.is_float:
        fn = b.module.globals.get(f"llvm.fptosi.sat.{INT_SUFFIX[dest]}.{INT_SUFFIX[source]}")
        fn = fn or ir.Function(b.module, ir.FunctionType(to, [x.type]),
                               f"llvm.fptosi.sat.{INT_SUFFIX[dest]}.{INT_SUFFIX[source]}")
        return b.call(fn, [x])
    if dest.is_float:
        return b.uitofp(x, to) if source is DType.bool else b.sitofp(x, to)
    if source is DType.bool:
        return b.zext(x, to)
    return b.sext(x, to) if to.width > x.type.width else b.trunc(x, to)


def convert_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    (x,) = op.operands
    return convert_scalar(em.b, em.value_at(x, idx), x.type.dtype, op.attrs["dtype"])


lower_rules["convert"] = convert_lower


def constant_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    dtype = op.attrs["dtype"]
    value = op.attrs["value"]
    return ir.Constant(REGISTER_TYPES[dtype], float(value) if dtype.is_float else int(value))


lower_rules["constant"] = constant_lower


def dim_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    return convert_scalar(em.b, em.dim(op.attrs["value"]), DType.i64, op.attrs["dtype"])


lower_rules["dim"] = dim_lower


def iota_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    return convert_scalar(em.b, idx.axes[op.attrs["axis"]], DType.i64, op.attrs["dtype"])


lower_rules["iota"] = iota_lower
