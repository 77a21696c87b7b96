"""tanh, sigmoid, sinh, cosh, asinh, acosh, atanh as vecmath rules, from the exp and log family.

    tanh|x| = 1 - 2/(e^(2|x|) + 1)        (|x| >= 0.625)
    asinh|x| = log(2a + 1/(a + sqrt(a^2 + 1)))   (2 <= |x| < 2^28)
"""
from __future__ import annotations

from adc.codegen.lowering.vecmath.emitter import Emitter, vecmath_rule, via_f64
from adc.codegen.lowering.vecmath.exp_log import (LN2, exp_vecmath, expm1_reduced, expm1_vecmath, log1p_vecmath,
                                         log_vecmath, reduce_ln2, times_pow2)


@vecmath_rule("tanh")
def tanh_vecmath(m: Emitter, x):
    """tanh|x| = |x| + |x|^3 T(x^2) below 0.625, else 1 - 2/(e^(2|x|) + 1); sign copied.

    e^(2|x|) overflows to inf for large |x|, giving exactly 1.
    Measured: f32 <= 1 ulp, f64 <= 2 ulp over the whole range.
    """
    a = m.intrinsic("fabs", x)
    z = m.mul(a, a)
    small = m.fma(m.mul(a, z), m.poly(z, m.k.tanh_poly), a)
    e = exp_vecmath(m, m.add(a, a))
    big = m.sub(m.c(1.0), m.div(m.c(2.0), m.add(e, m.c(1.0))))
    y = m.select(m.cmp("<", a, m.c(0.625)), small, big)
    return m.intrinsic("copysign", y, x)


@vecmath_rule("sigmoid")
def sigmoid_vecmath(m: Emitter, x):
    """1/(1 + e) for x >= 0 and e/(1 + e) for x < 0, e = exp(-|x|) in (0, 1]: never overflows.

    The numerator is selected before the one division (divisions dominate the cost).

    Measured: f32 <= 2 ulp, f64 <= 2 ulp over the whole range, denormal results included.
    """
    e = exp_vecmath(m, m.neg(m.intrinsic("fabs", x)))
    numerator = m.select(m.cmp("<", x, m.c(0.0)), e, m.c(1.0))
    return m.div(numerator, m.add(m.c(1.0), e))


def _half_exp(m: Emitter, a):
    """e^a / 2 for a >= 0, scaled exactly: finite up to ln(2 max), as cosh (nan gives a number)."""
    n, r = reduce_ln2(m, m.clamp(a, 0.0, 711.0))
    return times_pow2(m, m.add(m.c(1.0), expm1_reduced(m, r)), m.b.sub(n, m.i(1)))


@vecmath_rule("sinh")
@via_f64
def sinh_vecmath(m: Emitter, x):
    """sinh|x| = (u + u/(u+1))/2, u = expm1|x|, below 1; else e^|x|/2 - 1/(4 e^|x|/2); sign copied.

    Measured: f32 <= 1 ulp, f64 <= 2 ulp; finite up to where NumPy's is.
    """
    a = m.intrinsic("fabs", x)
    u = expm1_vecmath(m, a)
    small = m.mul(m.c(0.5), m.add(u, m.div(u, m.add(u, m.c(1.0)))))
    e = _half_exp(m, a)
    big = m.sub(e, m.div(m.c(0.25), e))
    y = m.intrinsic("copysign", m.select(m.cmp("<", a, m.c(1.0)), small, big), x)
    return m.select(m.isnan(x), x, y)


@vecmath_rule("cosh")
@via_f64
def cosh_vecmath(m: Emitter, x):
    """cosh x = e^|x|/2 + 1/(4 e^|x|/2). Measured: f32 <= 1 ulp, f64 <= 1 ulp."""
    e = _half_exp(m, m.intrinsic("fabs", x))
    return m.select(m.isnan(x), x, m.add(e, m.div(m.c(0.25), e)))


@vecmath_rule("asinh")
@via_f64
def asinh_vecmath(m: Emitter, x):
    """fdlibm's forms on |x|, sign copied: log1p(a + a^2/(1 + sqrt(1 + a^2))) below 2,
    log(2a + 1/(a + sqrt(a^2 + 1))) below 2^28, log(a) + ln 2 beyond. Measured: f32 <= 1, f64 <= 3 ulp
    (2.6 from the exact value, near 0.42: log1p's 2 ulp and the rounding of its argument).
    """
    a = m.intrinsic("fabs", x)
    a2 = m.mul(a, a)
    root = m.intrinsic("sqrt", m.add(a2, m.c(1.0)))
    small = log1p_vecmath(m, m.add(a, m.div(a2, m.add(m.c(1.0), root))))
    huge = m.cmp(">=", a, m.c(2.0 ** 28))
    w = m.select(huge, a, m.add(m.add(a, a), m.div(m.c(1.0), m.add(a, root))))
    big = m.add(log_vecmath(m, w), m.select(huge, m.c(LN2[0]), m.c(0.0)))
    return m.intrinsic("copysign", m.select(m.cmp("<", a, m.c(2.0)), small, big), x)


@vecmath_rule("acosh")
@via_f64
def acosh_vecmath(m: Emitter, x):
    """fdlibm's forms: log1p(t + sqrt(2t + t^2)), t = x - 1 (exact), below 2; log(2x - 1/(x + sqrt(x^2 - 1)))
    below 2^28; log(x) + ln 2 beyond; nan below 1. Measured: f32 <= 1 ulp, f64 <= 2 ulp.
    """
    t = m.sub(x, m.c(1.0))
    small = log1p_vecmath(m, m.add(t, m.intrinsic("sqrt", m.fma(t, t, m.add(t, t)))))
    huge = m.cmp(">=", x, m.c(2.0 ** 28))
    root = m.intrinsic("sqrt", m.fma(x, x, m.c(-1.0)))
    w = m.select(huge, x, m.sub(m.add(x, x), m.div(m.c(1.0), m.add(x, root))))
    big = m.add(log_vecmath(m, w), m.select(huge, m.c(LN2[0]), m.c(0.0)))
    y = m.select(m.cmp("<", x, m.c(2.0)), small, big)
    return m.select(m.cmp("<", x, m.c(1.0)), m.c(float("nan")), y)


@vecmath_rule("atanh")
@via_f64
def atanh_vecmath(m: Emitter, x):
    """atanh|x| = log1p(2a + 2a a/(1 - a))/2 below 1/2, log1p(2a/(1 - a))/2 above; sign copied:
    +-inf at +-1, nan beyond. Measured: f32 <= 1 ulp, f64 <= 2 ulp.
    """
    a = m.intrinsic("fabs", x)
    two_a, one_minus = m.add(a, a), m.sub(m.c(1.0), a)
    w = m.select(m.cmp("<", a, m.c(0.5)), m.add(two_a, m.div(m.mul(two_a, a), one_minus)), m.div(two_a, one_minus))
    return m.intrinsic("copysign", m.mul(m.c(0.5), log1p_vecmath(m, w)), x)
