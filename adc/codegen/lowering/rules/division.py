"""Floor division and modulo of one element, with NumPy's conventions and no undefined behaviour.

Part of lowering (elementwise.py applies these to the elements of `floor_div` and
`mod`). Python and NumPy round the quotient toward -inf and give the remainder the
sign of the divisor; LLVM's `sdiv`/`srem` truncate toward 0 and are undefined for
a zero divisor and for INT_MIN / -1, `frem` is C's fmod. So:

- integers: the divisor is replaced by 1 where it is 0 or -1 (the quotient by -1 is
  then negated, wrapping INT_MIN to itself as NumPy does), the truncated results are
  moved down by one step where the remainder and the divisor differ in sign, and a
  zero divisor gives 0 for both, NumPy's values (without its warning);
- floats: NumPy's npy_divmod, step for step: fmod, the quotient (a - mod) / b snapped
  to the nearest integer, signed zeros, nan and inf as NumPy gives them.

    x // y  (i32)        %b = select (y == 0 | y == -1), 1, y
                         %q = sdiv x, %b   %r = srem x, %b   (never undefined)
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.ir.types import DType


def floor_div(b: ir.IRBuilder, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
    """x // y."""
    return _float_floor_div(b, x, y) if dtype.is_float else _int_floor_div(b, x, y)


def mod(b: ir.IRBuilder, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
    """x % y, with the sign of y."""
    return _float_mod(b, x, y) if dtype.is_float else _int_mod(b, x, y)


# ---------------------------------------------------------------- integers

def _int_parts(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(truncated quotient, remainder, whether they need a floor step), defined for every x, y;
    both are 0 where y is 0."""
    zero, one, minus_one = (ir.Constant(x.type, k) for k in (0, 1, -1))
    by_minus_one = b.icmp_signed("==", y, minus_one)
    safe = b.select(b.or_(b.icmp_signed("==", y, zero), by_minus_one), one, y)
    quotient = b.sdiv(x, safe)
    quotient = b.select(by_minus_one, b.sub(zero, quotient), quotient)
    remainder = b.srem(x, safe)
    # the truncated remainder and y differ in sign: floor is one step below
    signs_differ = b.icmp_signed("<", b.xor(remainder, y), zero)
    step = b.and_(b.icmp_signed("!=", remainder, zero), signs_differ)
    return b.select(b.icmp_signed("==", y, zero), zero, quotient), remainder, step


def _int_floor_div(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    quotient, _, step = _int_parts(b, x, y)
    return b.sub(quotient, b.zext(step, x.type))


def _int_mod(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    _, remainder, step = _int_parts(b, x, y)
    return b.select(step, b.add(remainder, y), remainder)


# ---------------------------------------------------------------- floats

def _intrinsic(b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    suffix = "f32" if args[0].type == ir.FloatType() else "f64"
    full = f"llvm.{name}.{suffix}"
    fn = b.module.globals.get(full) or ir.Function(b.module, ir.FunctionType(args[0].type, [a.type for a in args]),
                                                   full)
    return b.call(fn, args)


def _fmod(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(fmod(x, y), whether Python's remainder is fmod + y: nonzero and of the other sign than y;
    fmod's nan (y = 0, x = inf, a nan operand) counts as nonzero, as in NumPy)."""
    zero = ir.Constant(x.type, 0.0)
    fmod = b.frem(x, y)
    moved = b.and_(b.fcmp_unordered("!=", fmod, zero),
                   b.icmp_unsigned("!=", b.fcmp_ordered("<", y, zero), b.fcmp_ordered("<", fmod, zero)))
    return fmod, moved


def _float_mod(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """fmod, plus y where moved; a zero takes the sign of y; nan stays nan."""
    zero = ir.Constant(x.type, 0.0)
    fmod, moved = _fmod(b, x, y)
    adjusted = b.select(moved, b.fadd(fmod, y), fmod)
    return b.select(b.fcmp_ordered("==", fmod, zero), _intrinsic(b, "copysign", zero, y), adjusted)


def _float_floor_div(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """(x - fmod) / y, one less where the remainder was moved, snapped to the nearest integer;
    a zero quotient takes the sign of x / y, and y = 0 gives x / y (inf or nan)."""
    zero, one, half = (ir.Constant(x.type, k) for k in (0.0, 1.0, 0.5))
    fmod, moved = _fmod(b, x, y)
    quotient = b.fdiv(b.fsub(x, fmod), y)
    quotient = b.select(moved, b.fsub(quotient, one), quotient)
    floor = _intrinsic(b, "floor", quotient)
    snapped = b.select(b.fcmp_ordered(">", b.fsub(quotient, floor), half), b.fadd(floor, one), floor)
    ratio = b.fdiv(x, y)
    result = b.select(b.fcmp_ordered("==", quotient, zero), _intrinsic(b, "copysign", zero, ratio), snapped)
    return b.select(b.fcmp_ordered("==", y, zero), ratio, result)
