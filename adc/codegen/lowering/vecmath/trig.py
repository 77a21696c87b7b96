"""sin, cos, tan and atan2 as vecmath rules: argument reduction mod pi/2 and the polynomial kernels.

x = q pi/2 + r + r_lo: Cody-Waite in the fast range, Payne-Hanek beyond it with
two_over_pi.py's table (`call_fast`'s variants of sin, cos and tan skip it);
`sin_cos_reduced` (the fdlibm kernels) is shared with lgamma's reflection.

    sin x = +-sin r or +-cos r, by the quadrant q mod 4
    atan2(y, x) = r, pi - r, pi/2 -+ r with r = atan(min/max of |y|, |x|)
"""
from __future__ import annotations

import functools

import llvmlite.ir as ir

from adc.codegen.lowering.vecmath import two_over_pi
from adc.codegen.lowering.vecmath.emitter import CONSTS, F32, F64, Emitter, in_f64, vecmath_rule, via_f64

TWO_OVER_PI = 0.6366197723675814
PI_4 = (0.7853981633974483, 3.061616997868383e-17)
PI_2 = (1.5707963267948966, 6.123233995736766e-17)
PI = (3.141592653589793, 1.2246467991473532e-16)
TAN_PI_8 = 0.41421356237309503
# (atan u - u)/u^3 in z = u^2, |u| <= tan(pi/8): relative error 6e-18
ATAN_POLY = (-0.33333333333333115, 0.19999999999926069, -0.14285714277244324, 0.11111110629722333,
             -0.09090893241071799, 0.0769197933005003, -0.06662188232743571, 0.05841301842071552,
             -0.05010118461860937, 0.03733812100610128, -0.017129862290452644)


@functools.cache
def _pio2_table(ty: ir.Type) -> list[tuple[float, ...]]:
    """Windows of 2/pi for |x| from 2^trig_fast_exponent to the largest finite (two_over_pi.py)."""
    k = CONSTS[ty]
    return two_over_pi.reduction_table(k.mant_bits + 1, k.trig_fast_exponent, k.bias)


def _scaled_for_table(m: Emitter, x):
    """x = y 2^s, s = trig_fast_exponent + BUCKET row, |y| in [1, 2^BUCKET), for the table's row.

    The exponent field is clamped below so the row stays in the table for any
    finite x (x under the table's range gives a meaningless y, never used).
    """
    mb, low = m.i(m.k.mant_bits), m.i(m.k.bias + m.k.trig_fast_exponent)
    bits = m.to_bits(x)
    biased = m.b.and_(m.b.lshr(bits, mb), m.i(2 * m.k.bias + 1))
    biased = m.b.select(m.b.icmp_signed("<", biased, low), low, biased)
    row = m.b.lshr(m.b.sub(biased, low), m.i(two_over_pi.BUCKET.bit_length() - 1))
    scale = m.b.add(m.b.mul(row, m.i(two_over_pi.BUCKET)), m.i(m.k.trig_fast_exponent))
    return m.from_bits(m.b.sub(bits, m.b.shl(scale, mb))), row


def _reduce_large(m: Emitter, x):
    """x 2/pi = n + hi + lo (mod 4), n integral, |hi| <~ 1/2, for finite |x| >= 2^trig_fast_exponent.

    x 2/pi mod 4 = y (U0 + U1 + U2 + U3) mod 4 with y, U_i floats (two_over_pi.py):
    each product is split exactly (fma) and its integer part removed as it appears,
    which keeps every sum exact but the small tail's: an error below 2^(BUCKET+4-3p)
    absolute, against a fraction hi + lo never below 2^-61.5 (f64) or 2^-29.9 (f32)
    (the floats nearest to multiples of pi/2, found by continued fractions of
    2^e 2/pi). With d = the exponent of y and p the precision, the comments
    give each exact value's bound and the power of two it is a multiple of.
    """
    y, row = _scaled_for_table(m, x)
    u0, u1, u2, u3 = m.table_row("two_over_pi", _pio2_table(m.ty), row)
    h0, l0 = m.two_product(y, u0)                    # < 2^(p+2+d), multiple of 2^(2+d-p)
    n0 = m.intrinsic("roundeven", h0)
    a = m.add(m.sub(h0, n0), l0)                     # exact: |a| <= 1/2 + 2^(d+1)
    h1, l1 = m.two_product(y, u1)                    # < 2^(2+d), multiple of 2^(2+d-2p)
    n1 = m.intrinsic("roundeven", h1)
    s, s_err = m.two_sum(a, m.sub(h1, n1))
    n2 = m.intrinsic("roundeven", s)
    s = m.sub(s, n2)                                 # |s| <= 1/2
    t = m.add(s_err, l1)                             # exact: < 2^(2+d-p), multiple of 2^(2+d-2p)
    h2, l2 = m.two_product(y, u2)                    # < 2^(2+d-p)
    t, t_err = m.two_sum(t, h2)
    tail = m.add(m.add(t_err, l2), m.mul(y, u3))     # < 2^(4+d-2p): its rounding is the error
    hi, lo = m.two_sum(s, t)
    n0_mod4 = m.fma(m.c(-4.0), m.intrinsic("floor", m.mul(n0, m.c(0.25))), n0)
    return m.add(m.add(n0_mod4, n1), n2), hi, m.add(lo, tail)


def _trig_fast_range(m: Emitter, x):
    """|x| < 2^trig_fast_exponent, or NaN: where the fast variants of sin, cos and tan are exact."""
    return m.b.fcmp_unordered("<", m.intrinsic("fabs", x), m.c(2.0 ** m.k.trig_fast_exponent))


def _reduce_pio2(m: Emitter, x):
    """x = q pi/2 + r + r_lo, r_lo far below an ulp of r; returns r, r_lo and q mod 4 as an integer.

    Cody-Waite (three parts of pi/2, fma) in the fast range (r_lo None: zero), and
    beyond it, in the exact variant, Payne-Hanek reduction, whose fraction times
    pi/2 (as hi + lo) gives r + r_lo. Non-finite x gives a NaN r (callers return
    NaN) and quadrant 0. Only what the polynomials wait for is on the path from x
    to r: the quadrant's clean-ups (finite, +0) run beside it, which a loop
    carrying sin's result through its iterations waits for.
    """
    q = m.intrinsic("roundeven", m.mul(x, m.c(TWO_OVER_PI)))
    r, r_lo = x, None
    for part in m.k.pio2:
        r = m.fma(q, m.c(-part), r)
    q = m.select(m.isfinite(x), m.add(q, m.c(0.0)), m.c(0.0))
    if m.exact:
        n, f, f_lo = _reduce_large(m, m.select(m.isfinite(x), x, m.c(0.0)))
        pio2, pio2_lo = (m.c(part) for part in m.k.pio2[:2])
        r_large = m.mul(f, pio2)
        r_lo_large = m.add(m.fma(f, pio2, m.neg(r_large)), m.fma(f, pio2_lo, m.mul(f_lo, pio2)))
        fast = _trig_fast_range(m, x)
        r, r_lo, q = m.select(fast, r, r_large), m.select(fast, m.c(0.0), r_lo_large), m.select(fast, q, n)
    quadrant = m.fma(m.c(-4.0), m.intrinsic("floor", m.mul(q, m.c(0.25))), q)
    return r, r_lo, m.b.fptosi(quadrant, m.ity)


def sin_cos_reduced(m: Emitter, r, r_lo):
    """sin(r + r_lo) = (r + r z S(z)) + r_lo (1 - z/2), cos(r + r_lo) = 1 - z/2 + (z^2 C(z) - r r_lo).

    fdlibm's kernels with the tail of the reduced argument (None: zero, and its
    terms are left out); the 1 - z/2 of cos is a compensated sum. r + r z S(z) is
    one fma: 1 ulp where a separate sum reached 2.
    """
    z = m.mul(r, r)
    hz = m.mul(m.c(0.5), z)
    w = m.sub(m.c(1.0), hz)
    sin_r = m.fma(m.mul(r, z), m.poly_estrin(z, m.k.sin_poly), r)
    w_err = m.sub(m.sub(m.c(1.0), w), hz)
    if r_lo is not None:
        sin_r = m.add(sin_r, m.mul(r_lo, w))
        w_err = m.fma(m.neg(r), r_lo, w_err)
    return sin_r, m.add(w, m.fma(m.mul(z, z), m.poly_estrin(z, m.k.cos_poly), w_err))


def _quadrant_bit(m: Emitter, quadrant, bit: int):
    return m.b.icmp_signed("!=", m.b.and_(quadrant, m.i(bit)), m.i(0))


def _trig_result(m: Emitter, x, y):
    """NaN for inf and nan inputs; x itself at +-0 (keeps the sign of zero)."""
    y = m.select(m.cmp("==", x, m.c(0.0)), x, y)
    return m.select(m.isfinite(x), y, m.sub(x, x))


def _sin_or_cos(m: Emitter, x, shift: int):
    """sin(x + shift pi/2): quadrant picks sin or cos of r and the sign."""
    r, r_lo, quadrant = _reduce_pio2(m, x)
    quadrant = m.b.add(quadrant, m.i(shift))
    sin_r, cos_r = sin_cos_reduced(m, r, r_lo)
    y = m.select(_quadrant_bit(m, quadrant, 1), cos_r, sin_r)
    return m.select(_quadrant_bit(m, quadrant, 2), m.neg(y), y)


@vecmath_rule("sin", fast_range=_trig_fast_range)
def sin_vecmath(m: Emitter, x):
    """sin by reduction mod pi/2 and odd/even minimax polynomials.

    The reduction is Cody-Waite for |x| < 2^17 (f32), 2^40 (f64) (measured exact
    enough: f32 up to 205888, every float; f64 to 2^45), Payne-Hanek beyond; the
    fast variant is Cody-Waite alone. Measured: f32 <= 1 ulp, f64 <= 1 ulp over
    the whole range.
    """
    return _trig_result(m, x, _sin_or_cos(m, x, 0))


@vecmath_rule("cos", fast_range=_trig_fast_range)
def cos_vecmath(m: Emitter, x):
    """cos x = sin(x + pi/2) on the reduced argument; same bounds as sin."""
    y = _sin_or_cos(m, x, 1)
    return m.select(m.isfinite(x), y, m.sub(x, x))


def _tan_fast_range(m: Emitter, x):
    """f32 tan reduces in f64: f64's fast range."""
    if m.ty == F32:
        return _trig_fast_range(Emitter(m.b, F64), m.b.fpext(x, F64))
    return _trig_fast_range(m, x)


@vecmath_rule("tan", fast_range=_tan_fast_range)
def tan_vecmath(m: Emitter, x):
    """tan = sin r / cos r, or -cos r / sin r in odd quadrants (same reduction as sin).

    f32 runs the f64 algorithm and rounds once, as the quotient of two f32
    polynomials reaches 3-4 ulp; so its fast variant is exact for |x| < 2^40.
    Measured: f32 <= 1 ulp, f64 <= 3 ulp (2 beyond 2^40) over the whole range.
    """
    if m.ty == F32:
        return in_f64(m, tan_vecmath, x)
    r, r_lo, quadrant = _reduce_pio2(m, x)
    sin_r, cos_r = sin_cos_reduced(m, r, r_lo)
    y = m.select(_quadrant_bit(m, quadrant, 1), m.neg(m.div(cos_r, sin_r)), m.div(sin_r, cos_r))
    return _trig_result(m, x, y)


def _atan_ratio(m: Emitter, num, den):
    """atan(num/den) for 0 <= num <= den, den > 0: above tan(pi/8), pi/4 + atan((num-den)/(num+den))
    (no rounding of num/den in it); u + u^3 P(u^2) on the rest."""
    t = m.div(num, den)
    reduced = m.cmp(">", t, m.c(TAN_PI_8))
    half = m.select(m.cmp(">", den, m.c(1.0)), m.c(0.5), m.c(1.0))    # exact, and num + den stays finite
    num, den = m.mul(num, half), m.mul(den, half)
    u = m.select(reduced, m.div(m.sub(num, den), m.add(num, den)), t)
    z = m.mul(u, u)
    body = m.fma(m.mul(u, z), m.poly(z, ATAN_POLY), u)
    return m.select(reduced, m.add(m.c(PI_4[0]), m.add(body, m.c(PI_4[1]))), body)


def _plus(m: Emitter, c: tuple[float, float], r):
    """c + r with c = hi + lo."""
    return m.add(m.c(c[0]), m.add(r, m.c(c[1])))


@vecmath_rule("atan2", arity=2)
@via_f64
def atan2_vecmath(m: Emitter, y, x):
    """atan2(y, x) from r = atan(min/max of |y|, |x|): r, pi - r, pi/2 - r or pi/2 + r by which is larger
    and x's sign bit, then y's sign: C99's and NumPy's values at signed zeros and infinities.
    Measured: f32 <= 1 ulp, f64 <= 2 ulp.
    """
    a, b = m.intrinsic("fabs", y), m.intrinsic("fabs", x)
    inf = m.c(float("inf"))
    both_inf = m.b.and_(m.cmp("==", a, inf), m.cmp("==", b, inf))
    a, b = m.select(both_inf, m.c(1.0), a), m.select(both_inf, m.c(1.0), b)
    swap = m.cmp(">", a, b)
    num, den = m.select(swap, b, a), m.select(swap, a, b)
    zero = m.cmp("==", den, m.c(0.0))
    r = m.select(zero, m.c(0.0), _atan_ratio(m, num, m.select(zero, m.c(1.0), den)))
    left = m.b.icmp_signed("<", m.to_bits(x), m.i(0))
    r = m.select(left, m.neg(r), r)
    r = m.select(swap, _plus(m, PI_2, m.neg(r)), m.select(left, _plus(m, PI, r), r))
    r = m.intrinsic("copysign", r, y)
    return m.select(m.b.or_(m.isnan(x), m.isnan(y)), m.add(x, y), r)
