"""exp, expm1, exp2, log, log1p, log2, log10, logaddexp as vecmath rules, and the reductions other families reuse.

x = n ln2 + r (`reduce_ln2`) and e^r - 1 by a polynomial (`expm1_reduced`), 2^n applied
in two exact factors (`times_pow2`); x = 2^k (1 + f) and log(1 + f) = 2 atanh(f/(2+f));
`log_extended` gives log as a double-double for pow, lgamma, log2 and log10.

    exp x  = 2^n (1 + r + r^2 q(r))
    log x  = k ln2 + log1p(f)
"""
from __future__ import annotations

from adc.codegen.lowering.vecmath.emitter import Emitter, vecmath_rule, via_f64

LOG2E = 1.4426950408889634
SQRT_HALF = 0.7071067811865476
INV_LN2 = (1.4426950408889634, 2.0355273740931033e-17)     # 1/ln 2 = hi + lo
INV_LN10 = (0.4342944819032518, 1.098319650216765e-17)
LN2 = (0.6931471805599453, 2.3190468138462996e-17)


# ------------------------------------------------------------ exp family

def reduce_ln2(m: Emitter, x):
    """x = n*ln2 + r with |r| <= ln2/2, n an integer. (n may be -0.0 as a float; r then differs
    only in the sign of a zero, where every caller adds it to 1 or scales it to 0 alike.)"""
    n = m.intrinsic("roundeven", m.mul(x, m.c(LOG2E)))
    r = m.fma(n, m.c(-m.k.ln2_hi), x)
    r = m.fma(n, m.c(-m.k.ln2_lo), r)
    return m.b.fptosi(n, m.ity), r


def expm1_reduced(m: Emitter, r):
    """e^r - 1 = r + r^2 q(r) on |r| <= ln2/2."""
    return m.fma(m.mul(r, r), m.poly(r, m.k.exp_poly), r)


@vecmath_rule("exp")
def exp_vecmath(m: Emitter, x):
    """e^x = 2^n (1 + r + r^2 q(r)), x = n ln2 + r (Cody-Waite, fma), 2^n as two factors.

    `times_pow2` applies 2^n so the product rounds once, into the denormal range
    and to inf exactly where NumPy's does.
    Measured: f32 <= 1 ulp, f64 <= 1 ulp over the whole range, denormals included.
    """
    xc = m.clamp(x, *m.k.exp_range)
    n, r = reduce_ln2(m, xc)
    y = times_pow2(m, m.add(m.c(1.0), expm1_reduced(m, r)), n)
    return m.select(m.isnan(x), x, y)


def times_pow2(m: Emitter, p, n):
    """p 2^n for p near 1 and an integer |n| <= 2 (bias + 1), rounded once, into the denormals or
    to inf exactly where the true value does: one ldexp where the target scales in one
    instruction (an f32 exp over a row: 0.184 -> 0.148 ns an element), else two exact factors."""
    if m.scalef:
        return m.ldexp(p, n)
    half = m.b.ashr(n, m.i(1))
    return m.mul(m.mul(p, m.pow2(half)), m.pow2(m.b.sub(n, half)))


@vecmath_rule("expm1")
def expm1_vecmath(m: Emitter, x):
    """e^x - 1 = 2^n u + (2^n - 1), u = expm1(r) by the exp polynomial (2^n - 1 exact).

    For n > cap the -1 is below rounding; 2^n is applied as 2^min(n,cap) 2^(n-min(n,cap))
    so the result overflows to inf like NumPy. x below the lower clamp gives -1.
    Measured: f32 <= 1 ulp, f64 <= 2 ulp over the whole range.
    """
    xc = m.clamp(x, *m.k.expm1_range)
    n, r = reduce_ln2(m, xc)
    u = expm1_reduced(m, r)
    cap = m.i(m.k.expm1_cap)
    low = m.select(m.b.icmp_signed("<", n, cap), n, cap)
    s = m.pow2(low)
    y = m.mul(m.fma(s, u, m.sub(s, m.c(1.0))), m.pow2(m.b.sub(n, low)))
    y = m.select(m.cmp("==", x, m.c(0.0)), x, y)
    return m.select(m.isnan(x), x, y)


# ------------------------------------------------------------ log family

def _split_mantissa(m: Emitter, x):
    """x = 2^k (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)); x positive and normal."""
    one, sqrt_half = m.to_bits(m.c(1.0)), m.to_bits(m.c(SQRT_HALF))
    bits = m.b.add(m.to_bits(x), m.b.sub(one, sqrt_half))
    k = m.b.sub(m.b.ashr(bits, m.i(m.k.mant_bits)), m.i(m.k.bias))
    mant = m.b.and_(bits, m.i((1 << m.k.mant_bits) - 1))
    f = m.sub(m.from_bits(m.b.add(mant, sqrt_half)), m.c(1.0))
    return m.b.sitofp(k, m.ty), f


def _log1p_reduced(m: Emitter, f):
    """log(1+f) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f/(2+f): returns (hfsq, s(hfsq+R))."""
    s = m.div(f, m.add(m.c(2.0), f))
    z = m.mul(s, s)
    hfsq = m.mul(m.c(0.5), m.mul(f, f))
    big_r = m.mul(z, m.poly(z, m.k.log_poly))
    return hfsq, m.mul(s, m.add(hfsq, big_r))


def _log_specials(m: Emitter, x, y, pole):
    """NumPy's edge values: nan below the domain, -inf at the pole, inf at inf."""
    y = m.select(m.cmp("==", x, m.c(float("inf"))), x, y)
    y = m.select(m.cmp("==", x, m.c(pole)), m.c(float("-inf")), y)
    y = m.select(m.cmp("<", x, m.c(pole)), m.c(float("nan")), y)
    return m.select(m.isnan(x), x, y)


@vecmath_rule("log")
def log_vecmath(m: Emitter, x):
    """log x = k ln2 + log1p(f), x = 2^k (1+f); log1p(f) = 2 atanh(f/(2+f)) (fdlibm form).

    Denormal inputs are scaled by 2^(mant_bits+2) first.
    Measured: f32 <= 1 ulp, f64 <= 1 ulp, denormals included.
    """
    scale = m.k.mant_bits + 2
    tiny = m.cmp("<", x, m.c(2.0 ** (1 - m.k.bias)))
    xs = m.select(tiny, m.mul(x, m.c(2.0 ** scale)), x)
    k, f = _split_mantissa(m, xs)
    k = m.sub(k, m.select(tiny, m.c(float(scale)), m.c(0.0)))
    hfsq, tail = _log1p_reduced(m, f)
    lo = m.sub(m.add(tail, m.mul(k, m.c(m.k.ln2_lo))), hfsq)
    y = m.add(m.add(lo, f), m.mul(k, m.c(m.k.ln2_hi)))
    return _log_specials(m, x, y, 0.0)


@vecmath_rule("log1p")
def log1p_vecmath(m: Emitter, x):
    """log(1+x) = log(u) + c/u, u = fl(1+x), c = the rounding error of u (fdlibm log1p).

    u is never denormal, so log's reduction applies directly.
    Measured: f32 <= 2 ulp, f64 <= 2 ulp, denormal x returned exactly.
    """
    one = m.c(1.0)
    u = m.add(one, x)
    k, f = _split_mantissa(m, u)
    c = m.select(m.cmp(">", k, m.c(0.0)), m.sub(one, m.sub(u, x)), m.sub(x, m.sub(u, one)))
    hfsq, tail = _log1p_reduced(m, f)
    lo = m.add(m.mul(k, m.c(m.k.ln2_lo)), m.div(c, u))
    y = m.add(m.mul(k, m.c(m.k.ln2_hi)), m.sub(f, m.sub(hfsq, m.add(tail, lo))))
    y = m.select(m.cmp("==", x, m.c(0.0)), x, y)
    return _log_specials(m, x, y, -1.0)


@vecmath_rule("logaddexp", arity=2)
def logaddexp_vecmath(m: Emitter, x, y):
    """log(e^x + e^y) = max(x, y) + log1p(e^-|x - y|): never overflows or underflows to -inf while an
    argument is finite; equal arguments (infinities of one sign included) give x + ln 2, a nan argument
    nan, as np.logaddexp.

    Measured: an error of at most 2.5 ulps of max(|x|, |y|, ln 2) in f32 and f64: where the result
    is near 0 the sum cancels and its relative error grows, as NumPy's (the same formula) does.
    """
    top = m.select(m.cmp(">", x, y), x, y)
    y_ = log1p_vecmath(m, exp_vecmath(m, m.neg(m.intrinsic("fabs", m.sub(x, y)))))
    z = m.select(m.cmp("==", x, y), m.add(x, m.c(LN2[0])), m.add(top, y_))
    return m.select(m.b.or_(m.isnan(x), m.isnan(y)), m.add(x, y), z)


def log_extended(m: Emitter, a):
    """log a = hi + lo to about 2^-60 relative: log's algorithm with f - f^2/2 and k ln2 kept exact."""
    scale = m.k.mant_bits + 2
    tiny = m.cmp("<", a, m.c(2.0 ** (1 - m.k.bias)))
    k, f = _split_mantissa(m, m.select(tiny, m.mul(a, m.c(2.0 ** scale)), a))
    k = m.sub(k, m.select(tiny, m.c(float(scale)), m.c(0.0)))
    hfsq, tail = _log1p_reduced(m, f)
    hfsq_err = m.fma(m.mul(m.c(0.5), f), f, m.neg(hfsq))
    t = m.sub(f, hfsq)
    t_err = m.sub(m.sub(f, t), hfsq)
    hi, hi_err = m.two_sum(m.mul(k, m.c(m.k.ln2_hi)), t)
    small = m.add(m.sub(tail, hfsq_err), m.mul(k, m.c(m.k.ln2_lo)))
    lo = m.add(m.add(hi_err, t_err), small)
    total = m.add(hi, lo)
    lo = m.sub(lo, m.sub(total, hi))
    hi = _log_specials(m, a, total, 0.0)
    return hi, m.select(m.isfinite(hi), lo, m.c(0.0))


def _log_times(m: Emitter, x, c: tuple[float, float]):
    """log(x) c, the log a double-double (~2^-60) times c = hi + lo, rounded once: log2 and log10
    of a power of two or ten that is a float come out exact."""
    hi, lo = log_extended(m, x)
    p = m.mul(hi, m.c(c[0]))
    p_lo = m.add(m.fma(hi, m.c(c[0]), m.neg(p)), m.fma(hi, m.c(c[1]), m.mul(lo, m.c(c[0]))))
    return m.select(m.isfinite(p), m.add(p, p_lo), p)


@vecmath_rule("log2")
@via_f64
def log2_vecmath(m: Emitter, x):
    """log2 x = log x / ln 2 in double-double: exactly k at 2^k. Measured: f32 <= 1 ulp, f64 <= 1 ulp."""
    return _log_times(m, x, INV_LN2)


@vecmath_rule("log10")
@via_f64
def log10_vecmath(m: Emitter, x):
    """log10 x = log x / ln 10 in double-double: exactly n at 10^n. Measured: f32 <= 1 ulp, f64 <= 1 ulp."""
    return _log_times(m, x, INV_LN10)


@vecmath_rule("exp2")
@via_f64
def exp2_vecmath(m: Emitter, x):
    """2^x = 2^n e^(r ln2), x = n + r exactly, r ln2 as a double-double: 2^n is exact for integer x.

    Measured: f32 <= 1 ulp, f64 <= 1 ulp over the whole range, denormals included.
    """
    xc = m.clamp(x, -1080.0, 1025.0)
    n = m.intrinsic("roundeven", xc)
    r = m.sub(xc, n)
    t = m.mul(r, m.c(LN2[0]))
    t_lo = m.fma(r, m.c(LN2[0]), m.fma(r, m.c(LN2[1]), m.neg(t)))
    p = m.add(m.c(1.0), m.add(expm1_reduced(m, t), t_lo))
    return m.select(m.isnan(x), x, times_pow2(m, p, m.b.fptosi(n, m.ity)))
