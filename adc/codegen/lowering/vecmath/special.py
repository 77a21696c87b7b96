"""erf, erfc, lgamma, digamma and trigamma as vecmath rules (SciPy's special functions).

erf and erfc read erfcx_table.py's rows beyond 1/2; the gamma family shifts its
argument by Gamma's recurrence to a polynomial's interval, uses asymptotic series
from 10 on and reflects negative arguments with sin(pi x) and cos(pi x).

    erfc x = e^(-x^2) erfcx(x)        (x >= 1/2)
    lgamma x = log(pi/|sin pi x|) - lgamma(1 - x)   (x < 0)
"""
from __future__ import annotations

from adc.codegen.lowering.vecmath import erfcx_table
from adc.codegen.lowering.vecmath.emitter import Emitter, vecmath_rule, via_f64
from adc.codegen.lowering.vecmath.exp_log import expm1_reduced, log_extended, log_vecmath, reduce_ln2, times_pow2
from adc.codegen.lowering.vecmath.trig import PI, sin_cos_reduced


# erf x = x Q(x^2) on |x| < 1: relative error 1.6e-17; Q(0) - 1 first, for x + x (Q - 1)
ERF_POLY = (0.1283791670955126, -0.3761263890318374, 0.11283791670954761, -0.026866170645058498,
            0.005223977624669912, -0.0008548326973727811, 0.00012055330895641804, -1.4925590968381455e-05,
            1.646094403318859e-06, -1.6349831467585127e-07, 1.4657242411501251e-08, -1.1365505659767875e-09,
            5.948498173850601e-11)


def _erfc_tail(m: Emitter, a):
    """erfc a = e^(-a^2) erfcx(a) for a >= 1/2 (a > 28 as 28: 0), e^(-a^2) of the exact square
    a^2 = h + l, erfcx by the table row of a's quarter octave, 2^n applied last (one rounding
    into the denormals)."""
    ac = m.select(m.cmp("<", a, m.c(28.0)), a, m.c(28.0))
    rows = erfcx_table.ERFCX_ROWS
    row = m.b.sub(m.b.ashr(m.to_bits(ac), m.i(m.k.mant_bits - 2)), m.i((m.k.bias - 1) << 2))
    row = m.b.select(m.b.icmp_signed("<", row, m.i(0)), m.i(0), row)
    row = m.b.select(m.b.icmp_signed(">", row, m.i(len(rows) - 1)), m.i(len(rows) - 1), row)
    center, *coeffs = m.table_row("erfcx", rows, row)
    w = m.sub(ac, center)
    erfcx = coeffs[-1]
    for coeff in reversed(coeffs[:-1]):
        erfcx = m.fma(erfcx, w, coeff)
    h, l = m.two_product(ac, ac)
    n, r = reduce_ln2(m, m.neg(h))
    return times_pow2(m, m.fma(erfcx, expm1_reduced(m, m.sub(r, l)), erfcx), n)


@vecmath_rule("erf")
@via_f64
def erf_vecmath(m: Emitter, x):
    """erf x = x + x (Q(x^2) - 1) below |x| = 1, else 1 - erfc|x| (`_erfc_tail`), sign copied.
    Measured: f32 <= 1 ulp, f64 <= 1 ulp.
    """
    a = m.intrinsic("fabs", x)
    small = m.fma(a, m.poly(m.mul(a, a), ERF_POLY), a)
    y = m.select(m.cmp("<", a, m.c(1.0)), small, m.sub(m.c(1.0), _erfc_tail(m, a)))
    return m.select(m.isnan(x), x, m.intrinsic("copysign", y, x))


@vecmath_rule("erfc")
@via_f64
def erfc_vecmath(m: Emitter, x):
    """erfc x = e^(-x^2) erfcx(x) from 1/2 on (`_erfc_tail`), 1 - x Q(x^2) on (-1, 1/2), 2 - erfc|x|
    below: no cancellation anywhere. Measured: f32 <= 1 ulp, f64 <= 2 ulp, denormal results included.
    """
    tail = _erfc_tail(m, m.intrinsic("fabs", x))
    inner = m.sub(m.sub(m.c(1.0), x), m.mul(x, m.poly(m.mul(x, x), ERF_POLY)))
    y = m.select(m.cmp(">", x, m.c(-1.0)), inner, m.sub(m.c(2.0), tail))
    y = m.select(m.cmp(">=", x, m.c(0.5)), tail, y)
    return m.select(m.isnan(x), x, y)


# lgamma(2 + t)/t on |t| <= 1/2: relative error 2e-17
LGAMMA_POLY = (0.42278433509846713, 0.3224670334241132, -0.06735230105319809, 0.02058080842778451,
               -0.007385551028674156, 0.0028905103307459218, -0.0011927539117056005, 0.0005096695245453368,
               -0.00022315475792683367, 9.94575164851872e-05, -4.492625227715256e-05, 2.050718443669053e-05,
               -9.439290892396038e-06, 4.374894153875013e-06, -2.040514396842442e-06, 9.560327915689225e-07,
               -4.447154579969582e-07, 2.0647108994225788e-07, -1.0777255044035192e-07, 6.116149858127421e-08,
               -2.0841650021578806e-08)
# the asymptotic series beyond 10, Bernoulli numbers B_2k: lgamma's B_2k/(2k(2k-1)), psi's B_2k/(2k), psi''s B_2k
STIRLING = (0.08333333333333333, -0.002777777777777778, 0.0007936507936507937, -0.0005952380952380953,
            0.0008417508417508417, -0.0019175269175269176, 0.00641025641025641, -0.029550653594771242)
PSI_SERIES = (0.08333333333333333, -0.008333333333333333, 0.003968253968253968, -0.004166666666666667,
              0.007575757575757576, -0.021092796092796094, 0.08333333333333333, -0.4432598039215686,
              3.0539543302701198, -26.456212121212122)
PSI1_SERIES = (0.16666666666666666, -0.03333333333333333, 0.023809523809523808, -0.03333333333333333,
               0.07575757575757576, -0.2531135531135531, 1.1666666666666667, -7.092156862745098,
               54.971177944862156, -529.1242424242424, 6192.123188405797)
# psi(1.75 + t)/(1.75 + t - x0) on |t| <= 1/2, x0 = 1.4616... the root of psi: relative error 2e-17
DIGAMMA_POLY = (0.8581832171262995, -0.3262546278681057, 0.15712011335204326, -0.08228558635577919,
                0.04479965445264951, -0.024890048488586867, 0.013985786192461772, -0.007910468806404305,
                0.004491813452477345, -0.002556685578403862, 0.0014573787059667536, -0.0008315125314781018,
                0.00047464490279924306, -0.00027094301339840977, 0.00015501194391032413, -8.92453343600374e-05,
                5.011338189758228e-05, -2.6192849151169928e-05, 1.6663948610603113e-05, -1.4249123380994164e-05,
                6.753491866019177e-06)
DIGAMMA_ROOT = (0.28836785503163764, 1.5522348162858677e-17)     # 1.75 - x0 = hi + lo
HALF_LOG_2PI = 0.9189385332046728
LOG_PI = 1.1447298858494002
GAMMA_SHIFT = 8            # lgamma below 10 moves to [1.5, 2.5] by at most 8 steps of its recurrence


def _sinpi(m: Emitter, x):
    """(sin pi x, cos pi x) for finite x, from r = x - round(x) (exact) and pi r as a double-double."""
    r = m.sub(x, m.intrinsic("roundeven", x))
    a = m.intrinsic("fabs", r)
    flip = m.cmp(">", a, m.c(0.25))
    u = m.select(flip, m.sub(m.c(0.5), a), a)
    p = m.mul(u, m.c(PI[0]))
    p_lo = m.fma(u, m.c(PI[0]), m.fma(u, m.c(PI[1]), m.neg(p)))
    s, c = sin_cos_reduced(m, p, p_lo)
    return m.intrinsic("copysign", m.select(flip, c, s), r), m.select(flip, s, c)


def _recurrence_steps(m: Emitter, z, center: float):
    """z = y + k with y in [center - 1/2, center + 1/2], k = round(z - center), for 0 <= z < 10: k, t = y - center
    (exact), and the steps of Gamma's recurrence between y and z with the masks of those taken: y, ..., z - 1
    when k > 0, z, ..., y - 1 when k < 0 (1 where no step is taken), each exact."""
    k = m.intrinsic("roundeven", m.sub(z, m.c(center)))
    t = m.sub(z, m.add(k, m.c(center)))
    steps, taken = [], []
    for i in range(GAMMA_SHIFT):
        up, down = m.cmp("<", m.c(float(i)), k), m.cmp("<", m.c(float(i)), m.neg(k))
        steps.append(m.select(up, m.sub(z, m.sub(k, m.c(float(i)))), m.select(down, m.add(z, m.c(float(i))), m.c(1.0))))
        taken.append(m.b.or_(up, down))
    return k, t, steps, taken


def _lgamma_positive(m: Emitter, z):
    """lgamma z, z >= 0: below 10, lgamma(y) +- the log of the product of the recurrence's steps to
    y in [1.5, 2.5], lgamma(y) = t P(t), t = y - 2 (relative accuracy at the roots 1 and 2); from 10 on,
    Stirling's series with log z as a double-double."""
    k, t, steps, _ = _recurrence_steps(m, z, 2.0)
    near_two = m.mul(t, m.poly(t, LGAMMA_POLY))
    product = steps[0]
    for step in steps[1:]:
        product = m.mul(product, step)
    log_product = log_vecmath(m, product)
    small = m.select(m.cmp(">", k, m.c(0.0)), m.add(near_two, log_product), m.sub(near_two, log_product))
    hi, lo = log_extended(m, z)
    h, w = m.sub(z, m.c(0.5)), m.div(m.c(1.0), z)
    tail = m.mul(w, m.poly(m.mul(w, w), STIRLING))
    big = m.add(m.fma(h, hi, m.neg(z)), m.fma(h, lo, m.add(m.c(HALF_LOG_2PI), tail)))
    return m.select(m.cmp("<", z, m.c(10.0)), small, big)


@vecmath_rule("lgamma")
@via_f64
def lgamma_vecmath(m: Emitter, x):
    """log|Gamma(x)|: `_lgamma_positive` from 0 on, below it the reflection log(pi/|sin pi x|) - lgamma(1 - x);
    inf at 0, the negative integers and +-inf (C99's lgamma). Measured for x > 0: f32 <= 1 ulp, f64 <= 6 ulp
    (near its minimum at 1.46, where lgamma(x + 1) - log x cancels);
    below 0 the error is absolute near the roots (where |Gamma| = 1): <= 4e-15 (f64) on [-10, 0].
    """
    negative = m.cmp("<", x, m.c(0.0))
    z = m.select(negative, m.sub(m.c(1.0), x), x)
    positive = _lgamma_positive(m, z)
    s, _ = _sinpi(m, m.select(m.isfinite(x), x, m.c(0.5)))
    reflected = m.sub(m.sub(m.c(LOG_PI), log_vecmath(m, m.intrinsic("fabs", s))), positive)
    y = m.select(negative, reflected, positive)
    y = m.select(m.isfinite(x), y, m.intrinsic("fabs", x))
    return m.select(m.isnan(x), x, y)


def _digamma_positive(m: Emitter, z):
    """psi z, z >= 0: below 10, psi(y) +- the sum of 1/step over the recurrence's steps to y in [1.25, 2.25],
    psi(y) = (y - x0) R(y - 1.75), x0 its root (relative accuracy there); from 10 on, the asymptotic series."""
    k, t, steps, taken = _recurrence_steps(m, z, 1.75)
    near_root = m.mul(m.add(m.add(t, m.c(DIGAMMA_ROOT[0])), m.c(DIGAMMA_ROOT[1])), m.poly(t, DIGAMMA_POLY))
    shifts = m.c(0.0)
    for step, took in zip(steps, taken):
        shifts = m.add(shifts, m.select(took, m.div(m.c(1.0), step), m.c(0.0)))
    small = m.select(m.cmp(">", k, m.c(0.0)), m.add(near_root, shifts), m.sub(near_root, shifts))
    w = m.div(m.c(1.0), z)
    w2 = m.mul(w, w)
    big = m.sub(m.sub(log_vecmath(m, z), m.mul(m.c(0.5), w)), m.mul(w2, m.poly(w2, PSI_SERIES)))
    return m.select(m.cmp("<", z, m.c(10.0)), small, big)


def _trigamma_positive(m: Emitter, z):
    """psi' z, z >= 0: shifted up to 10 by psi'(z) = psi'(z+1) + 1/z^2 (positive terms), then the
    asymptotic series 1/v + 1/(2v^2) + sum B_2k / v^(2k+1)."""
    v, shifts = z, m.c(0.0)
    for _ in range(10):
        below = m.cmp("<", v, m.c(10.0))
        shifts = m.add(shifts, m.select(below, m.div(m.c(1.0), m.mul(v, v)), m.c(0.0)))
        v = m.select(below, m.add(v, m.c(1.0)), v)
    w = m.div(m.c(1.0), v)
    w2 = m.mul(w, w)
    return m.add(m.add(m.fma(m.c(0.5), w2, w), m.mul(m.mul(w, w2), m.poly(w2, PSI1_SERIES))), shifts)


@vecmath_rule("digamma")
@via_f64
def digamma_vecmath(m: Emitter, x):
    """psi = lgamma': `_digamma_positive` from 0 on, below it psi(x) = psi(1 - x) - pi cot(pi x); -inf at +0,
    +inf at -0, nan at the negative integers and -inf (SciPy's). Measured for x > 0: f32 <= 1 ulp,
    f64 <= 4 ulp; below 0 the error is absolute near its roots, <= 2e-13 on [-10, 0] (f64).
    """
    negative = m.cmp("<", x, m.c(0.0))
    positive = _digamma_positive(m, m.select(negative, m.sub(m.c(1.0), x), x))
    s, c = _sinpi(m, m.select(m.isfinite(x), x, m.c(0.5)))
    reflected = m.sub(positive, m.div(m.mul(m.c(PI[0]), c), s))
    pole = m.cmp("==", m.intrinsic("floor", x), x)
    y = m.select(negative, m.select(pole, m.c(float("nan")), reflected), positive)
    y = m.select(m.cmp("==", x, m.c(0.0)), m.neg(m.intrinsic("copysign", m.c(float("inf")), x)), y)
    return m.select(m.isnan(x), x, y)


@vecmath_rule("trigamma")
@via_f64
def trigamma_vecmath(m: Emitter, x):
    """psi' = lgamma'': `_trigamma_positive` from 0 on, below it pi^2/sin^2(pi x) - psi'(1 - x); inf at 0 and
    the negative integers, nan at -inf (SciPy's). Measured for x > 0: f32 <= 1 ulp, f64 <= 4 ulp.
    """
    negative = m.cmp("<", x, m.c(0.0))
    positive = _trigamma_positive(m, m.select(negative, m.sub(m.c(1.0), x), x))
    s, _ = _sinpi(m, m.select(m.isfinite(x), x, m.c(0.0)))
    y = m.select(negative, m.sub(m.div(m.c(PI[0] ** 2), m.mul(s, s)), positive), positive)
    y = m.select(m.cmp("==", x, m.c(float("-inf"))), m.c(float("nan")), y)
    return m.select(m.isnan(x), x, y)
