"""Vector math: exp, log, sin, ... as branch-free scalar LLVM IR that LLVM widens to SIMD.

Where it sits: `lower.py` calls `call(builder, name, args)` for every elementwise
math op. LLVM's loop vectorizer cannot widen calls to `llvm.exp` & co. without a
vector math library, so each function is emitted here once per LLVM module as an
internal, always-inlined function built only from vectorizable pieces:
fadd/fmul/fdiv, `llvm.fma`, `llvm.fabs`, `llvm.floor`, `llvm.roundeven`,
`llvm.sqrt`, `llvm.copysign`, integer ops on the bit patterns, `select`, and
loads from constant tables (sin/cos/tan's bits of 2/pi), which become gathers.
After inlining, the loop body is straight-line code and the vectorizer turns it
into `<16 x float>` arithmetic. A function reads no memory (`readnone`) unless it
loads from a table (`readonly`).

sin, cos and tan also have a fast variant (`call_fast`) without the table: equal
to the exact function bit for bit in a stated range, which `call_fast` returns
as an i1 beside the value, so lowering can run a loop with it and rerun the loop
with the exact function only when an argument fell outside.

Invariants: no branches, no fast-math flags (NaN, inf and signed zeros behave as
in NumPy), the same algorithm for f32 and f64 with per-type constants. Each
emitter's docstring states its algorithm and its measured max error in ulps of
the result type against NumPy float64 rounded to the result type
(tests/codegen/test_vecmath.py asserts those bounds).

    %y = call float @adc.vm.exp.f32(float %x)
    ...
    define internal float @adc.vm.exp.f32(float %x) alwaysinline nounwind readnone {
      %n = call float @llvm.roundeven.f32(float ...)   ; x = n*ln2 + r
      ...                                              ; 2^n * poly(r)
    }

Polynomial coefficients are near-minimax fits (Lawson-reweighted least squares
in 50-digit mpmath) on the reduced ranges stated next to each table; erf and
erfc read the table of erfcx_table.py.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Sequence

import llvmlite.ir as ir

from adc.codegen import erfcx_table, two_over_pi

F32, F64 = ir.FloatType(), ir.DoubleType()


@dataclass(frozen=True)
class _Consts:
    """Per-type constants: bit layout, reduction constants and polynomial tables."""

    suffix: str
    int_type: ir.IntType
    mant_bits: int
    bias: int
    ln2_hi: float            # trailing zeros: k*ln2_hi is exact for |k| < 2048
    ln2_lo: float
    pio2: tuple[float, float, float]   # pi/2 = sum, Cody-Waite parts for fma; the first two: hi + lo
    exp_range: tuple[float, float]     # clamp of x: exp underflows/overflows beyond
    expm1_range: tuple[float, float]   # below: expm1 == -1; above: overflow
    expm1_cap: int                     # 2^n split as 2^min(n,cap) * 2^(n-cap)
    trig_fast_exponent: int            # |x| < 2^this: Cody-Waite reduction (measured); beyond: Payne-Hanek
    exp_poly: tuple[float, ...]        # (e^r-1-r)/r^2, |r| <= ln2/2
    log_poly: tuple[float, ...]        # (2atanh(s)/s-2)/s^2 in z=s^2, z <= 0.0295
    sin_poly: tuple[float, ...]        # (sin r - r)/r^3 in z=r^2, |r| <= pi/4
    cos_poly: tuple[float, ...]        # (cos r - 1 + z/2)/z^2, |r| <= pi/4
    tanh_poly: tuple[float, ...]       # (tanh x - x)/x^3 in z=x^2, |x| <= 0.625


_CONSTS = {
    F32: _Consts(
        "f32", ir.IntType(32), 23, 127,
        0.693115234375, 3.194618329871446e-05,
        (1.5707963705062866, -4.371138828673793e-08, -1.7151245100058819e-15),
        (-104.0, 89.0), (-24.0, 89.0), 64, 17,
        (0.499999935733347, 0.1666652106076317, 0.04166834012246332,
         0.008368667993399755, 0.001381765878179122),
        (0.6666677646087151, 0.3997754169524406, 0.29871610166739015),
        (-0.1666666664164818, 0.008333329385432273, -0.0001983933455551064,
         2.7183093742266065e-06),
        (0.041666666619575014, -0.0013888883505732356, 2.479946151792906e-05,
         -2.7205863531863187e-07),
        (-0.3333333091867599, 0.1333321000011148, -0.05394722454935532,
         0.021703052869455834, -0.008182848601524562, 0.0021476747867813593),
    ),
    F64: _Consts(
        "f64", ir.IntType(64), 52, 1023,
        0.6931467056274414, 4.7493250390316726e-07,
        (1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33),
        (-746.0, 710.0), (-45.0, 710.0), 512, 40,
        (0.5000000000000011, 0.16666666666666427, 0.041666666666530495,
         0.008333333333485004, 0.0013888888943562874, 0.00019841269527348288,
         2.4801493166717226e-05, 2.7557567904311306e-06, 2.7630222204071663e-07,
         2.500582293071081e-08),
        (0.6666666666666666, 0.4000000000000626, 0.2857142856908242, 0.22222222647326706,
         0.1818177562321341, 0.15387092545463543, 0.1325008023028857, 0.13251645736303588),
        (-0.16666666666666666, 0.008333333333333323, -0.000198412698412552,
         2.7557319214258363e-06, -2.5052104929146298e-08, 1.6058368843311667e-10,
         -7.578806688714833e-13),
        (0.041666666666666664, -0.0013888888888888872, 2.4801587301570568e-05,
         -2.755731921500358e-07, 2.087675428760988e-09, -1.1470284881482778e-11,
         4.7377519134725434e-14),
        (-0.33333333333333315, 0.13333333333329903, -0.05396825396613975,
         0.021869488470766644, -0.008863234342956945, 0.0035921142834024417,
         -0.0014557276840769368, 0.0005894588749985735, -0.00023703075490032178,
         9.15908194673473e-05, -3.0218912831714576e-05, 6.056021239758584e-06),
    ),
}

LOG2E = 1.4426950408889634
TWO_OVER_PI = 0.6366197723675814
SQRT_HALF = 0.7071067811865476


class _Emitter:
    """Float arithmetic of one type on an IRBuilder: constants, intrinsics, bit tricks.

    `exact=False` emits a function's fast variant, exact only in its fast range (`call_fast`).
    """

    def __init__(self, builder: ir.IRBuilder, ty: ir.Type, exact: bool = True):
        self.b, self.ty, self.k, self.exact = builder, ty, _CONSTS[ty], exact
        self.ity = self.k.int_type

    def c(self, value: float) -> ir.Constant:
        return ir.Constant(self.ty, value)

    def i(self, value: int) -> ir.Constant:
        return ir.Constant(self.ity, value)

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        module = self.b.module
        full = f"llvm.{name}.{self.k.suffix}"
        fn = module.globals.get(full)
        if fn is None:
            fn = ir.Function(module, ir.FunctionType(self.ty, [self.ty] * len(args)), full)
        return self.b.call(fn, args)

    def fma(self, a, b, c):
        return self.intrinsic("fma", a, b, c)

    def poly(self, x, coeffs: Sequence[float]) -> ir.Value:
        """Horner: coeffs[0] + x*(coeffs[1] + ...), fused."""
        acc = self.c(coeffs[-1])
        for coeff in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(coeff))
        return acc

    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    def neg(self, a):
        return self.b.fneg(a)

    def cmp(self, op: str, a, b):
        """Ordered comparison: false when either side is NaN."""
        return self.b.fcmp_ordered(op, a, b)

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def isfinite(self, a):
        return self.cmp("<", self.intrinsic("fabs", a), self.c(float("inf")))

    def select(self, cond, a, b):
        return self.b.select(cond, a, b)

    def to_bits(self, a):
        return self.b.bitcast(a, self.ity)

    def from_bits(self, n):
        return self.b.bitcast(n, self.ty)

    def pow2(self, n):
        """2^n for an integer n in the normal exponent range."""
        biased = self.b.add(n, self.i(self.k.bias))
        return self.from_bits(self.b.shl(biased, self.i(self.k.mant_bits)))

    def two_sum(self, a, b):
        """a + b = s + err exactly (Knuth)."""
        s = self.add(a, b)
        bb = self.sub(s, a)
        return s, self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))

    def two_product(self, a, b):
        """a b = p + err exactly (fma)."""
        p = self.mul(a, b)
        return p, self.fma(a, b, self.neg(p))

    def table_row(self, name: str, rows: Sequence[Sequence[float]], index) -> list[ir.Value]:
        """Row `index` of a constant table, an internal global defined once per module
        (the vectorizer makes the loads gathers)."""
        full = f"adc.vm.{name}.{self.k.suffix}"
        table = self.b.module.globals.get(full)
        if table is None:
            row_type = ir.ArrayType(self.ty, len(rows[0]))
            table_type = ir.ArrayType(row_type, len(rows))
            table = ir.GlobalVariable(self.b.module, table_type, full)
            table.linkage, table.global_constant = "internal", True
            table.initializer = ir.Constant(table_type, [ir.Constant(row_type, list(row)) for row in rows])
        zero = ir.Constant(ir.IntType(32), 0)
        return [self.b.load(self.b.gep(table, [zero, index, ir.Constant(ir.IntType(32), column)], inbounds=True))
                for column in range(len(rows[0]))]

    def clamp(self, x, lo: float, hi: float):
        """x limited to [lo, hi]; NaN becomes hi (callers restore NaN at the end)."""
        x = self.select(self.cmp("<", x, self.c(hi)), x, self.c(hi))
        return self.select(self.cmp(">", x, self.c(lo)), x, self.c(lo))


VecmathRule = Callable[..., ir.Value]


@dataclass(frozen=True)
class _Rule:
    emit: VecmathRule
    arity: int
    fast_range: VecmathRule | None   # where the fast variant (m.exact False) is exact; None: no variant


vecmath_rules: dict[str, _Rule] = {}
"""name -> emitter; `emit(m: _Emitter, *args) -> value`, args and result of type m.ty;
`fast_range(m, *args) -> i1`."""


def vecmath_rule(name: str, arity: int = 1, fast_range: VecmathRule | None = None):
    def register(fn: VecmathRule) -> VecmathRule:
        vecmath_rules[name] = _Rule(fn, arity, fast_range)
        return fn
    return register


# ------------------------------------------------------------ exp family

def _reduce_ln2(m: _Emitter, x):
    """x = n*ln2 + r with |r| <= ln2/2; n as float (+0.0 for n = 0) and as integer."""
    n = m.add(m.intrinsic("roundeven", m.mul(x, m.c(LOG2E))), m.c(0.0))
    r = m.fma(n, m.c(-m.k.ln2_hi), x)
    r = m.fma(n, m.c(-m.k.ln2_lo), r)
    return n, m.b.fptosi(n, m.ity), r


def _expm1_reduced(m: _Emitter, r):
    """e^r - 1 = r + r^2 q(r) on |r| <= ln2/2."""
    return m.fma(m.mul(r, r), m.poly(r, m.k.exp_poly), r)


@vecmath_rule("exp")
def exp_vecmath(m: _Emitter, x):
    """e^x = 2^n (1 + r + r^2 q(r)), x = n ln2 + r (Cody-Waite, fma), 2^n as two factors.

    Splitting 2^n = 2^(n>>1) 2^(n-(n>>1)) lets the last product round once into
    the denormal range and overflow to inf exactly where NumPy does. (`llvm.ldexp`
    is one instruction on AVX-512 but a libm call per element on AVX2 targets.)
    Measured: f32 <= 1 ulp, f64 <= 1 ulp over the whole range, denormals included.
    """
    xc = m.clamp(x, *m.k.exp_range)
    _, n, r = _reduce_ln2(m, xc)
    y = _times_pow2(m, m.add(m.c(1.0), _expm1_reduced(m, r)), n)
    return m.select(m.isnan(x), x, y)


def _times_pow2(m: _Emitter, p, n):
    """p 2^n for p near 1 and an integer |n| <= 2 (bias + 1): two exact factors, so the product
    rounds once, into the denormals or to inf exactly where the true value does."""
    half = m.b.ashr(n, m.i(1))
    return m.mul(m.mul(p, m.pow2(half)), m.pow2(m.b.sub(n, half)))


@vecmath_rule("expm1")
def expm1_vecmath(m: _Emitter, x):
    """e^x - 1 = 2^n u + (2^n - 1), u = expm1(r) by the exp polynomial (2^n - 1 exact).

    For n > cap the -1 is below rounding; 2^n is applied as 2^min(n,cap) 2^(n-min(n,cap))
    so the result overflows to inf like NumPy. x below the lower clamp gives -1.
    Measured: f32 <= 1 ulp, f64 <= 2 ulp over the whole range.
    """
    xc = m.clamp(x, *m.k.expm1_range)
    _, n, r = _reduce_ln2(m, xc)
    u = _expm1_reduced(m, r)
    cap = m.i(m.k.expm1_cap)
    low = m.select(m.b.icmp_signed("<", n, cap), n, cap)
    s = m.pow2(low)
    y = m.mul(m.fma(s, u, m.sub(s, m.c(1.0))), m.pow2(m.b.sub(n, low)))
    y = m.select(m.cmp("==", x, m.c(0.0)), x, y)
    return m.select(m.isnan(x), x, y)


# ------------------------------------------------------------ log family

def _split_mantissa(m: _Emitter, x):
    """x = 2^k (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)); x positive and normal."""
    one, sqrt_half = m.to_bits(m.c(1.0)), m.to_bits(m.c(SQRT_HALF))
    bits = m.b.add(m.to_bits(x), m.b.sub(one, sqrt_half))
    k = m.b.sub(m.b.ashr(bits, m.i(m.k.mant_bits)), m.i(m.k.bias))
    mant = m.b.and_(bits, m.i((1 << m.k.mant_bits) - 1))
    f = m.sub(m.from_bits(m.b.add(mant, sqrt_half)), m.c(1.0))
    return m.b.sitofp(k, m.ty), f


def _log1p_reduced(m: _Emitter, f):
    """log(1+f) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f/(2+f): returns (hfsq, s(hfsq+R))."""
    s = m.div(f, m.add(m.c(2.0), f))
    z = m.mul(s, s)
    hfsq = m.mul(m.c(0.5), m.mul(f, f))
    big_r = m.mul(z, m.poly(z, m.k.log_poly))
    return hfsq, m.mul(s, m.add(hfsq, big_r))


def _log_specials(m: _Emitter, x, y, pole):
    """NumPy's edge values: nan below the domain, -inf at the pole, inf at inf."""
    y = m.select(m.cmp("==", x, m.c(float("inf"))), x, y)
    y = m.select(m.cmp("==", x, m.c(pole)), m.c(float("-inf")), y)
    y = m.select(m.cmp("<", x, m.c(pole)), m.c(float("nan")), y)
    return m.select(m.isnan(x), x, y)


@vecmath_rule("log")
def log_vecmath(m: _Emitter, x):
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
def log1p_vecmath(m: _Emitter, x):
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


def _in_f64(m: _Emitter, rule: VecmathRule, *args):
    """rule evaluated in f64 on f32 arguments, rounded once to f32."""
    wide = _Emitter(m.b, F64, m.exact)
    return m.b.fptrunc(rule(wide, *(m.b.fpext(a, F64) for a in args)), F32)


# ------------------------------------------------------------ trigonometric

@functools.cache
def _pio2_table(ty: ir.Type) -> list[tuple[float, ...]]:
    """Windows of 2/pi for |x| from 2^trig_fast_exponent to the largest finite (two_over_pi.py)."""
    k = _CONSTS[ty]
    return two_over_pi.reduction_table(k.mant_bits + 1, k.trig_fast_exponent, k.bias)


def _scaled_for_table(m: _Emitter, x):
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


def _reduce_large(m: _Emitter, x):
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


def _trig_fast_range(m: _Emitter, x):
    """|x| < 2^trig_fast_exponent, or NaN: where the fast variants of sin, cos and tan are exact."""
    return m.b.fcmp_unordered("<", m.intrinsic("fabs", x), m.c(2.0 ** m.k.trig_fast_exponent))


def _reduce_pio2(m: _Emitter, x):
    """x = q pi/2 + r + r_lo, r_lo far below an ulp of r; returns r, r_lo and q mod 4 as an integer.

    Cody-Waite (three parts of pi/2, fma) in the fast range (r_lo = 0), and beyond
    it, in the exact variant, Payne-Hanek reduction, whose fraction times pi/2 (as
    hi + lo) gives r + r_lo. Non-finite x is replaced by 0 (callers return NaN).
    """
    xs = m.select(m.isfinite(x), x, m.c(0.0))
    q = m.add(m.intrinsic("roundeven", m.mul(xs, m.c(TWO_OVER_PI))), m.c(0.0))
    r, r_lo = xs, m.c(0.0)
    for part in m.k.pio2:
        r = m.fma(q, m.c(-part), r)
    if m.exact:
        n, f, f_lo = _reduce_large(m, xs)
        pio2, pio2_lo = (m.c(part) for part in m.k.pio2[:2])
        r_large = m.mul(f, pio2)
        r_lo_large = m.add(m.fma(f, pio2, m.neg(r_large)), m.fma(f, pio2_lo, m.mul(f_lo, pio2)))
        fast = _trig_fast_range(m, xs)
        r, r_lo, q = m.select(fast, r, r_large), m.select(fast, r_lo, r_lo_large), m.select(fast, q, n)
    quadrant = m.fma(m.c(-4.0), m.intrinsic("floor", m.mul(q, m.c(0.25))), q)
    return r, r_lo, m.b.fptosi(quadrant, m.ity)


def _sin_cos_reduced(m: _Emitter, r, r_lo):
    """sin(r + r_lo) = (r + r z S(z)) + r_lo (1 - z/2), cos(r + r_lo) = 1 - z/2 + (z^2 C(z) - r r_lo).

    fdlibm's kernels with the tail of the reduced argument; the 1 - z/2 of cos is a
    compensated sum. r + r z S(z) is one fma: 1 ulp where a separate sum reached 2.
    """
    z = m.mul(r, r)
    hz = m.mul(m.c(0.5), z)
    w = m.sub(m.c(1.0), hz)
    sin_r = m.add(m.fma(m.mul(r, z), m.poly(z, m.k.sin_poly), r), m.mul(r_lo, w))
    w_err = m.fma(m.neg(r), r_lo, m.sub(m.sub(m.c(1.0), w), hz))
    return sin_r, m.add(w, m.fma(m.mul(z, z), m.poly(z, m.k.cos_poly), w_err))


def _quadrant_bit(m: _Emitter, quadrant, bit: int):
    return m.b.icmp_signed("!=", m.b.and_(quadrant, m.i(bit)), m.i(0))


def _trig_result(m: _Emitter, x, y):
    """NaN for inf and nan inputs; x itself at +-0 (keeps the sign of zero)."""
    y = m.select(m.cmp("==", x, m.c(0.0)), x, y)
    return m.select(m.isfinite(x), y, m.sub(x, x))


def _sin_or_cos(m: _Emitter, x, shift: int):
    """sin(x + shift pi/2): quadrant picks sin or cos of r and the sign."""
    r, r_lo, quadrant = _reduce_pio2(m, x)
    quadrant = m.b.add(quadrant, m.i(shift))
    sin_r, cos_r = _sin_cos_reduced(m, r, r_lo)
    y = m.select(_quadrant_bit(m, quadrant, 1), cos_r, sin_r)
    return m.select(_quadrant_bit(m, quadrant, 2), m.neg(y), y)


@vecmath_rule("sin", fast_range=_trig_fast_range)
def sin_vecmath(m: _Emitter, x):
    """sin by reduction mod pi/2 and odd/even minimax polynomials.

    The reduction is Cody-Waite for |x| < 2^17 (f32), 2^40 (f64) (measured exact
    enough: f32 up to 205888, every float; f64 to 2^45), Payne-Hanek beyond; the
    fast variant is Cody-Waite alone. Measured: f32 <= 1 ulp, f64 <= 1 ulp over
    the whole range.
    """
    return _trig_result(m, x, _sin_or_cos(m, x, 0))


@vecmath_rule("cos", fast_range=_trig_fast_range)
def cos_vecmath(m: _Emitter, x):
    """cos x = sin(x + pi/2) on the reduced argument; same bounds as sin."""
    y = _sin_or_cos(m, x, 1)
    return m.select(m.isfinite(x), y, m.sub(x, x))


def _tan_fast_range(m: _Emitter, x):
    """f32 tan reduces in f64: f64's fast range."""
    if m.ty == F32:
        return _trig_fast_range(_Emitter(m.b, F64), m.b.fpext(x, F64))
    return _trig_fast_range(m, x)


@vecmath_rule("tan", fast_range=_tan_fast_range)
def tan_vecmath(m: _Emitter, x):
    """tan = sin r / cos r, or -cos r / sin r in odd quadrants (same reduction as sin).

    f32 runs the f64 algorithm and rounds once, as the quotient of two f32
    polynomials reaches 3-4 ulp; so its fast variant is exact for |x| < 2^40.
    Measured: f32 <= 1 ulp, f64 <= 3 ulp (2 beyond 2^40) over the whole range.
    """
    if m.ty == F32:
        return _in_f64(m, tan_vecmath, x)
    r, r_lo, quadrant = _reduce_pio2(m, x)
    sin_r, cos_r = _sin_cos_reduced(m, r, r_lo)
    y = m.select(_quadrant_bit(m, quadrant, 1), m.neg(m.div(cos_r, sin_r)), m.div(sin_r, cos_r))
    return _trig_result(m, x, y)


# ------------------------------------------------------------ hyperbolic, sigmoid

@vecmath_rule("tanh")
def tanh_vecmath(m: _Emitter, x):
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
def sigmoid_vecmath(m: _Emitter, x):
    """1/(1 + e) for x >= 0 and e/(1 + e) for x < 0, e = exp(-|x|) in (0, 1]: never overflows.

    The numerator is selected before the one division (divisions dominate the cost).

    Measured: f32 <= 2 ulp, f64 <= 2 ulp over the whole range, denormal results included.
    """
    e = exp_vecmath(m, m.neg(m.intrinsic("fabs", x)))
    numerator = m.select(m.cmp("<", x, m.c(0.0)), e, m.c(1.0))
    return m.div(numerator, m.add(m.c(1.0), e))


# ------------------------------------------------------------ pow

def _pow_magnitude(m: _Emitter, a, y):
    """|x|^y = exp(y log|x|) in the emitter's type (f32 pow: in f64, exact enough)."""
    return exp_vecmath(m, m.mul(y, log_vecmath(m, a)))


def _log_extended(m: _Emitter, a):
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


def _pow_magnitude_extended(m: _Emitter, a, y):
    """|x|^y = exp(p) (1 + p_lo), p + p_lo = y (hi + lo) (f64 pow)."""
    hi, lo = _log_extended(m, a)
    p = m.mul(y, hi)
    p_lo = m.add(m.fma(y, hi, m.neg(p)), m.mul(y, lo))
    e = exp_vecmath(m, p)
    ok = m.b.and_(m.isfinite(e), m.isfinite(p))
    return m.select(ok, m.fma(e, p_lo, e), e)


def _is_odd_integer(m: _Emitter, y):
    half = m.mul(y, m.c(0.5))
    is_int = m.cmp("==", m.intrinsic("floor", y), y)
    return m.b.and_(is_int, m.cmp("!=", m.intrinsic("floor", half), half))


def _pow_specials(m: _Emitter, x, y, mag):
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
def pow_vecmath(m: _Emitter, x, y):
    """x**y with np.power's special values, from exp and log of |x|.

    f32: exp(y log|x|) evaluated in f64, measured <= 1 ulp over the whole range.
    f64: log|x| as a double-double (about 2^-60 relative) times y, then
    exp(p)(1 + p_lo); measured <= 2 ulp up to overflow and into the denormals.
    """
    a = m.intrinsic("fabs", x)
    mag = _in_f64(m, _pow_magnitude, a, y) if m.ty == F32 else _pow_magnitude_extended(m, a, y)
    return _pow_specials(m, x, y, mag)


# ------------------------------------------------------------ functions in f64 only
#
# These run one f64 algorithm; f32 evaluates it on the widened argument and rounds once
# (`_via_f64`), which is within 1 ulp of f32 since the f64 error is 2^-29 of an f32 ulp.

def _via_f64(rule: VecmathRule) -> VecmathRule:
    @functools.wraps(rule)
    def emit(m: _Emitter, *args):
        return _in_f64(m, rule, *args) if m.ty == F32 else rule(m, *args)
    return emit


INV_LN2 = (1.4426950408889634, 2.0355273740931033e-17)     # 1/ln 2 = hi + lo
INV_LN10 = (0.4342944819032518, 1.098319650216765e-17)
LN2 = (0.6931471805599453, 2.3190468138462996e-17)
PI_4 = (0.7853981633974483, 3.061616997868383e-17)
PI_2 = (1.5707963267948966, 6.123233995736766e-17)
PI = (3.141592653589793, 1.2246467991473532e-16)
TAN_PI_8 = 0.41421356237309503
# (atan u - u)/u^3 in z = u^2, |u| <= tan(pi/8): relative error 6e-18
ATAN_POLY = (-0.33333333333333115, 0.19999999999926069, -0.14285714277244324, 0.11111110629722333,
             -0.09090893241071799, 0.0769197933005003, -0.06662188232743571, 0.05841301842071552,
             -0.05010118461860937, 0.03733812100610128, -0.017129862290452644)
# cbrt y on [1, 8]: a start within 1.8% for Halley's iteration
CBRT_START = (0.7214687145987759, 0.32889523423265266, -0.034725468204734475, 0.0017137144084611946)


def _log_times(m: _Emitter, x, c: tuple[float, float]):
    """log(x) c, the log a double-double (~2^-60) times c = hi + lo, rounded once: log2 and log10
    of a power of two or ten that is a float come out exact."""
    hi, lo = _log_extended(m, x)
    p = m.mul(hi, m.c(c[0]))
    p_lo = m.add(m.fma(hi, m.c(c[0]), m.neg(p)), m.fma(hi, m.c(c[1]), m.mul(lo, m.c(c[0]))))
    return m.select(m.isfinite(p), m.add(p, p_lo), p)


@vecmath_rule("log2")
@_via_f64
def log2_vecmath(m: _Emitter, x):
    """log2 x = log x / ln 2 in double-double: exactly k at 2^k. Measured: f32 <= 1 ulp, f64 <= 1 ulp."""
    return _log_times(m, x, INV_LN2)


@vecmath_rule("log10")
@_via_f64
def log10_vecmath(m: _Emitter, x):
    """log10 x = log x / ln 10 in double-double: exactly n at 10^n. Measured: f32 <= 1 ulp, f64 <= 1 ulp."""
    return _log_times(m, x, INV_LN10)


@vecmath_rule("exp2")
@_via_f64
def exp2_vecmath(m: _Emitter, x):
    """2^x = 2^n e^(r ln2), x = n + r exactly, r ln2 as a double-double: 2^n is exact for integer x.

    Measured: f32 <= 1 ulp, f64 <= 1 ulp over the whole range, denormals included.
    """
    xc = m.clamp(x, -1080.0, 1025.0)
    n = m.intrinsic("roundeven", xc)
    r = m.sub(xc, n)
    t = m.mul(r, m.c(LN2[0]))
    t_lo = m.fma(r, m.c(LN2[0]), m.fma(r, m.c(LN2[1]), m.neg(t)))
    p = m.add(m.c(1.0), m.add(_expm1_reduced(m, t), t_lo))
    return m.select(m.isnan(x), x, _times_pow2(m, p, m.b.fptosi(n, m.ity)))


def _half_exp(m: _Emitter, a):
    """e^a / 2 for a >= 0, scaled exactly: finite up to ln(2 max), as cosh (nan gives a number)."""
    _, n, r = _reduce_ln2(m, m.clamp(a, 0.0, 711.0))
    return _times_pow2(m, m.add(m.c(1.0), _expm1_reduced(m, r)), m.b.sub(n, m.i(1)))


@vecmath_rule("sinh")
@_via_f64
def sinh_vecmath(m: _Emitter, x):
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
@_via_f64
def cosh_vecmath(m: _Emitter, x):
    """cosh x = e^|x|/2 + 1/(4 e^|x|/2). Measured: f32 <= 1 ulp, f64 <= 1 ulp."""
    e = _half_exp(m, m.intrinsic("fabs", x))
    return m.select(m.isnan(x), x, m.add(e, m.div(m.c(0.25), e)))


@vecmath_rule("asinh")
@_via_f64
def asinh_vecmath(m: _Emitter, x):
    """fdlibm's forms on |x|, sign copied: log1p(a + a^2/(1 + sqrt(1 + a^2))) below 2,
    log(2a + 1/(a + sqrt(a^2 + 1))) below 2^28, log(a) + ln 2 beyond. Measured: f32 <= 1, f64 <= 2 ulp.
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
@_via_f64
def acosh_vecmath(m: _Emitter, x):
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
@_via_f64
def atanh_vecmath(m: _Emitter, x):
    """atanh|x| = log1p(2a + 2a a/(1 - a))/2 below 1/2, log1p(2a/(1 - a))/2 above; sign copied:
    +-inf at +-1, nan beyond. Measured: f32 <= 1 ulp, f64 <= 2 ulp.
    """
    a = m.intrinsic("fabs", x)
    two_a, one_minus = m.add(a, a), m.sub(m.c(1.0), a)
    w = m.select(m.cmp("<", a, m.c(0.5)), m.add(two_a, m.div(m.mul(two_a, a), one_minus)), m.div(two_a, one_minus))
    return m.intrinsic("copysign", m.mul(m.c(0.5), log1p_vecmath(m, w)), x)


def _atan_ratio(m: _Emitter, num, den):
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


def _plus(m: _Emitter, c: tuple[float, float], r):
    """c + r with c = hi + lo."""
    return m.add(m.c(c[0]), m.add(r, m.c(c[1])))


@vecmath_rule("atan2", arity=2)
@_via_f64
def atan2_vecmath(m: _Emitter, y, x):
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


@vecmath_rule("hypot", arity=2)
@_via_f64
def hypot_vecmath(m: _Emitter, x, y):
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
@_via_f64
def cbrt_vecmath(m: _Emitter, x):
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


# erf x = x Q(x^2) on |x| < 1: relative error 1.6e-17; Q(0) - 1 first, for x + x (Q - 1)
ERF_POLY = (0.1283791670955126, -0.3761263890318374, 0.11283791670954761, -0.026866170645058498,
            0.005223977624669912, -0.0008548326973727811, 0.00012055330895641804, -1.4925590968381455e-05,
            1.646094403318859e-06, -1.6349831467585127e-07, 1.4657242411501251e-08, -1.1365505659767875e-09,
            5.948498173850601e-11)


def _erfc_tail(m: _Emitter, a):
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
    _, n, r = _reduce_ln2(m, m.neg(h))
    return _times_pow2(m, m.fma(erfcx, _expm1_reduced(m, m.sub(r, l)), erfcx), n)


@vecmath_rule("erf")
@_via_f64
def erf_vecmath(m: _Emitter, x):
    """erf x = x + x (Q(x^2) - 1) below |x| = 1, else 1 - erfc|x| (`_erfc_tail`), sign copied.
    Measured: f32 <= 1 ulp, f64 <= 1 ulp.
    """
    a = m.intrinsic("fabs", x)
    small = m.fma(a, m.poly(m.mul(a, a), ERF_POLY), a)
    y = m.select(m.cmp("<", a, m.c(1.0)), small, m.sub(m.c(1.0), _erfc_tail(m, a)))
    return m.select(m.isnan(x), x, m.intrinsic("copysign", y, x))


@vecmath_rule("erfc")
@_via_f64
def erfc_vecmath(m: _Emitter, x):
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


def _sinpi(m: _Emitter, x):
    """(sin pi x, cos pi x) for finite x, from r = x - round(x) (exact) and pi r as a double-double."""
    r = m.sub(x, m.intrinsic("roundeven", x))
    a = m.intrinsic("fabs", r)
    flip = m.cmp(">", a, m.c(0.25))
    u = m.select(flip, m.sub(m.c(0.5), a), a)
    p = m.mul(u, m.c(PI[0]))
    p_lo = m.fma(u, m.c(PI[0]), m.fma(u, m.c(PI[1]), m.neg(p)))
    s, c = _sin_cos_reduced(m, p, p_lo)
    return m.intrinsic("copysign", m.select(flip, c, s), r), m.select(flip, s, c)


def _recurrence_steps(m: _Emitter, z, center: float):
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


def _lgamma_positive(m: _Emitter, z):
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
    hi, lo = _log_extended(m, z)
    h, w = m.sub(z, m.c(0.5)), m.div(m.c(1.0), z)
    tail = m.mul(w, m.poly(m.mul(w, w), STIRLING))
    big = m.add(m.fma(h, hi, m.neg(z)), m.fma(h, lo, m.add(m.c(HALF_LOG_2PI), tail)))
    return m.select(m.cmp("<", z, m.c(10.0)), small, big)


@vecmath_rule("lgamma")
@_via_f64
def lgamma_vecmath(m: _Emitter, x):
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


def _digamma_positive(m: _Emitter, z):
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


def _trigamma_positive(m: _Emitter, z):
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
@_via_f64
def digamma_vecmath(m: _Emitter, x):
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
@_via_f64
def trigamma_vecmath(m: _Emitter, x):
    """psi' = lgamma'': `_trigamma_positive` from 0 on, below it pi^2/sin^2(pi x) - psi'(1 - x); inf at 0 and
    the negative integers, nan at -inf (SciPy's). Measured for x > 0: f32 <= 1 ulp, f64 <= 4 ulp.
    """
    negative = m.cmp("<", x, m.c(0.0))
    positive = _trigamma_positive(m, m.select(negative, m.sub(m.c(1.0), x), x))
    s, _ = _sinpi(m, m.select(m.isfinite(x), x, m.c(0.0)))
    y = m.select(negative, m.sub(m.div(m.c(PI[0] ** 2), m.mul(s, s)), positive), positive)
    y = m.select(m.cmp("==", x, m.c(float("-inf"))), m.c(float("nan")), y)
    return m.select(m.isnan(x), x, y)


# ------------------------------------------------------------ thin wrappers

@vecmath_rule("sqrt")
def sqrt_vecmath(m: _Emitter, x):
    """llvm.sqrt: correctly rounded."""
    return m.intrinsic("sqrt", x)


@vecmath_rule("rsqrt")
def rsqrt_vecmath(m: _Emitter, x):
    """1/sqrt(x) with two roundings (<= 1 ulp): inf at +-0 (signed), 0 at inf, nan below 0."""
    return m.div(m.c(1.0), m.intrinsic("sqrt", x))


@vecmath_rule("abs")
def abs_vecmath(m: _Emitter, x):
    """llvm.fabs: exact."""
    return m.intrinsic("fabs", x)


@vecmath_rule("sign")
def sign_vecmath(m: _Emitter, x):
    """np.sign: 1, -1, +0 for either zero, nan for nan."""
    y = m.select(m.cmp("==", x, m.c(0.0)), m.c(0.0), x)
    y = m.select(m.cmp("<", x, m.c(0.0)), m.c(-1.0), y)
    return m.select(m.cmp(">", x, m.c(0.0)), m.c(1.0), y)


@vecmath_rule("round")
def round_vecmath(m: _Emitter, x):
    """llvm.roundeven: round half to even, exact."""
    return m.intrinsic("roundeven", x)


@vecmath_rule("floor")
def floor_vecmath(m: _Emitter, x):
    """llvm.floor: exact."""
    return m.intrinsic("floor", x)


FUNCTIONS: frozenset[str] = frozenset(vecmath_rules)


# ------------------------------------------------------------ entry point

def _define(module: ir.Module, symbol: str, rule: _Rule, ty: ir.Type, exact: bool) -> ir.Function:
    """The internal always-inline function `symbol`, built once per module."""
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * rule.arity), symbol)
    fn.linkage = "internal"
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    builder.ret(rule.emit(_Emitter(builder, ty, exact), *fn.args))
    loads = any(isinstance(i, ir.LoadInstr) for block in fn.blocks for i in block.instructions)
    for attr in ("alwaysinline", "nounwind", "readonly" if loads else "readnone"):
        fn.attributes.add(attr)
    return fn


def _checked_rule(name: str, args: Sequence[ir.Value]) -> tuple[_Rule, ir.Type]:
    if name not in vecmath_rules:
        raise ValueError(f"vecmath has no function {name!r}; it has {', '.join(sorted(FUNCTIONS))}")
    ty = args[0].type if args else None
    if ty not in _CONSTS or any(a.type != ty for a in args):
        raise TypeError(f"vecmath.{name} takes f32 or f64 scalars of one type, got "
                        f"{', '.join(str(a.type) for a in args)}")
    if len(args) != vecmath_rules[name].arity:
        raise TypeError(f"vecmath.{name} takes {vecmath_rules[name].arity} argument(s), got {len(args)}")
    return vecmath_rules[name], ty


def _call(builder: ir.IRBuilder, name: str, args: Sequence[ir.Value], exact: bool) -> ir.Value:
    rule, ty = _checked_rule(name, args)
    symbol = f"adc.vm.{name}.{'' if exact else 'fast.'}{_CONSTS[ty].suffix}"
    fn = builder.module.globals.get(symbol) or _define(builder.module, symbol, rule, ty, exact)
    return builder.call(fn, args)


def call(builder: ir.IRBuilder, name: str, args: Sequence[ir.Value]) -> ir.Value:
    """A call to the vector-math function `name` on f32 or f64 scalars; defines it on first use."""
    return _call(builder, name, args, exact=True)


def call_fast(builder: ir.IRBuilder, name: str, args: Sequence[ir.Value]) -> tuple[ir.Value, ir.Value | None]:
    """`name`'s fast variant and the i1 saying where it equals `call`'s result bit for bit (None: everywhere).

    sin, cos and tan have one: without the exact reduction of large arguments,
    it costs a third of the exact function (no table gathers) in a vector loop.
    """
    rule, ty = _checked_rule(name, args)
    if rule.fast_range is None:
        return call(builder, name, args), None
    return _call(builder, name, args, exact=False), rule.fast_range(_Emitter(builder, ty), *args)
