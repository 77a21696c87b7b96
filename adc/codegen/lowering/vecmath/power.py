"""pow as a vecmath rule: x**y from exp and log of |x|, with np.power's special values.

    f32: |x|^y = exp(y log|x|) in f64, rounded once
    f64: |x|^y = exp(p) (1 + p_lo), p + p_lo = y log|x| from a double-double log
"""
from __future__ import annotations

from adc.codegen.lowering.vecmath.emitter import F32, Emitter, in_f64, vecmath_rule
from adc.codegen.lowering.vecmath.exp_log import exp_vecmath, log_extended, log_vecmath


def _pow_magnitude(m: Emitter, a, y):
    """|x|^y = exp(y log|x|) in the emitter's type (f32 pow: in f64, exact enough)."""
    return exp_vecmath(m, m.mul(y, log_vecmath(m, a)))


def _pow_magnitude_extended(m: Emitter, a, y):
    """|x|^y = exp(p) (1 + p_lo), p + p_lo = y (hi + lo) (f64 pow)."""
    hi, lo = log_extended(m, a)
    p = m.mul(y, hi)
    p_lo = m.add(m.fma(y, hi, m.neg(p)), m.mul(y, lo))
    e = exp_vecmath(m, p)
    ok = m.b.and_(m.isfinite(e), m.isfinite(p))
    return m.select(ok, m.fma(e, p_lo, e), e)


def _is_odd_integer(m: Emitter, y):
    half = m.mul(y, m.c(0.5))
    is_int = m.cmp("==", m.intrinsic("floor", y), y)
    return m.b.and_(is_int, m.cmp("!=", m.intrinsic("floor", half), half))


def _pow_specials(m: Emitter, x, y, mag):
    """C99/NumPy pow rules around exp(y log|x|): sign for odd y, nan, and the 1 cases."""
    one = m.c(1.0)
    sign_bit = m.b.icmp_signed("<", m.to_bits(x), m.i(0))
    r = m.select(m.b.and_(sign_bit, _is_odd_integer(m, y)), m.neg(mag), mag)
    not_int = m.cmp("!=", m.intrinsic("floor", y), y)
    negative_finite = m.b.and_(m.cmp("<", x, m.c(0.0)), m.isfinite(x))
    r = m.select(m.b.and_(negative_finite, m.b.and_(not_int, m.isfinite(y))), m.c(float("nan")), r)
    unit_base_inf = m.b.and_(m.cmp("==", m.intrinsic("fabs", x), one),
                             m.cmp("==", m.intrinsic("fabs", y), m.c(float("inf"))))
    r = m.select(unit_base_inf, one, r)
    return m.select(m.b.or_(m.cmp("==", x, one), m.cmp("==", y, m.c(0.0))), one, r)


@vecmath_rule("pow", arity=2)
def pow_vecmath(m: Emitter, x, y):
    """x**y with np.power's special values, from exp and log of |x|.

    f32: exp(y log|x|) evaluated in f64, measured <= 1 ulp over the whole range.
    f64: log|x| as a double-double (about 2^-60 relative) times y, then
    exp(p)(1 + p_lo); measured <= 2 ulp up to overflow and into the denormals.
    """
    a = m.intrinsic("fabs", x)
    mag = in_f64(m, _pow_magnitude, a, y) if m.ty == F32 else _pow_magnitude_extended(m, a, y)
    return _pow_specials(m, x, y, mag)
