"""sqrt, rsqrt, cbrt, hypot and the exact abs, sign, round, floor as vecmath rules.

sqrt, abs, round and floor are one intrinsic each; cbrt and hypot correct a
first root once in double-double.

    cbrt|x| = 2^q cbrt(y), |x| = 2^(3q) y, y in [1, 8)
"""
from __future__ import annotations

from adc.codegen.lowering.vecmath.emitter import Emitter, vecmath_rule, via_f64

# cbrt y on [1, 8]: a start within 1.8% for Halley's iteration
CBRT_START = (0.7214687145987759, 0.32889523423265266, -0.034725468204734475, 0.0017137144084611946)


@vecmath_rule("hypot", arity=2)
@via_f64
def hypot_vecmath(m: Emitter, x, y):
    """sqrt(x^2 + y^2) scaled by a power of two away from overflow and underflow, the sum of squares
    a double-double and the root corrected once; inf if either is inf (nan or not), as C99.
    Measured: f32 <= 1 ulp, f64 <= 1 ulp.
    """
    a, b = m.intrinsic("fabs", x), m.intrinsic("fabs", y)
    bigger = m.cmp(">", a, b)
    hi, lo = m.select(bigger, a, b), m.select(bigger, b, a)
    scale = m.select(m.cmp(">", hi, m.c(2.0 ** 500)), m.c(2.0 ** -600),
                     m.select(m.cmp("<", hi, m.c(2.0 ** -500)), m.c(2.0 ** 600), m.c(1.0)))
    hs, ls = m.mul(hi, scale), m.mul(lo, scale)
    p, p_err = m.two_product(hs, hs)
    q, q_err = m.two_product(ls, ls)
    s, s_err = m.two_sum(p, q)
    h = m.intrinsic("sqrt", s)
    residual = m.add(m.fma(m.neg(h), h, s), m.add(s_err, m.add(p_err, q_err)))
    h = m.div(m.fma(residual, m.div(m.c(0.5), h), h), scale)
    h = m.select(m.cmp("==", hi, m.c(0.0)), m.c(0.0), h)
    h = m.select(m.b.or_(m.isnan(x), m.isnan(y)), m.add(x, y), h)
    inf = m.c(float("inf"))
    return m.select(m.b.or_(m.cmp("==", a, inf), m.cmp("==", b, inf)), inf, h)


@vecmath_rule("cbrt")
@via_f64
def cbrt_vecmath(m: Emitter, x):
    """cbrt|x| = 2^q cbrt(y), |x| = 2^(3q) y, y in [1, 8): a cubic start, two Halley steps, and a Newton
    step on the residual y - t^3 in double-double; sign copied; +-0, +-inf and nan are themselves.
    Measured: f32 <= 1 ulp, f64 <= 1 ulp.
    """
    a = m.intrinsic("fabs", x)
    tiny = m.cmp("<", a, m.c(2.0 ** (1 - m.k.bias)))
    bits = m.to_bits(m.select(tiny, m.mul(a, m.c(2.0 ** 54)), a))
    e = m.b.sitofp(m.b.sub(m.b.ashr(bits, m.i(m.k.mant_bits)), m.i(m.k.bias)), m.ty)
    q = m.intrinsic("floor", m.div(e, m.c(3.0)))
    r = m.fma(q, m.c(-3.0), e)
    mant = m.from_bits(m.b.or_(m.b.and_(bits, m.i((1 << m.k.mant_bits) - 1)), m.to_bits(m.c(1.0))))
    y = m.mul(mant, m.select(m.cmp("==", r, m.c(0.0)), m.c(1.0), m.select(m.cmp("==", r, m.c(1.0)), m.c(2.0), m.c(4.0))))
    t = m.poly(y, CBRT_START)
    for _ in range(2):
        t3 = m.mul(m.mul(t, t), t)
        t = m.mul(t, m.div(m.add(t3, m.add(y, y)), m.add(m.add(t3, t3), y)))
    t2, t2_err = m.two_product(t, t)
    t3 = m.mul(t, t2)
    t3_err = m.fma(t, t2, m.neg(t3))
    residual = m.sub(m.sub(m.sub(y, t3), t3_err), m.mul(t, t2_err))
    t = m.fma(t, m.div(residual, m.mul(m.c(3.0), t3)), t)
    n = m.b.sub(m.b.fptosi(q, m.ity), m.b.select(tiny, m.i(18), m.i(0)))
    z = m.intrinsic("copysign", m.mul(t, m.pow2(n)), x)
    return m.select(m.b.and_(m.isfinite(x), m.cmp("!=", x, m.c(0.0))), z, x)


@vecmath_rule("sqrt")
def sqrt_vecmath(m: Emitter, x):
    """llvm.sqrt: correctly rounded."""
    return m.intrinsic("sqrt", x)


@vecmath_rule("rsqrt")
def rsqrt_vecmath(m: Emitter, x):
    """1/sqrt(x) with two roundings (<= 1 ulp): inf at +-0 (signed), 0 at inf, nan below 0."""
    return m.div(m.c(1.0), m.intrinsic("sqrt", x))


@vecmath_rule("abs")
def abs_vecmath(m: Emitter, x):
    """llvm.fabs: exact."""
    return m.intrinsic("fabs", x)


@vecmath_rule("sign")
def sign_vecmath(m: Emitter, x):
    """np.sign: 1, -1, +0 for either zero, nan for nan."""
    y = m.select(m.cmp("==", x, m.c(0.0)), m.c(0.0), x)
    y = m.select(m.cmp("<", x, m.c(0.0)), m.c(-1.0), y)
    return m.select(m.cmp(">", x, m.c(0.0)), m.c(1.0), y)


@vecmath_rule("round")
def round_vecmath(m: Emitter, x):
    """llvm.roundeven: round half to even, exact."""
    return m.intrinsic("roundeven", x)


@vecmath_rule("floor")
def floor_vecmath(m: Emitter, x):
    """llvm.floor: exact."""
    return m.intrinsic("floor", x)
