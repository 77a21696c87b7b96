"""The emitter and rule registry of vector math: what every vecmath module builds its functions with.

`Emitter` is float arithmetic of one type (f32 or f64) on an llvmlite IRBuilder,
limited to what the loop vectorizer widens (fma, fabs, floor, roundeven, sqrt,
copysign, integer ops on bit patterns, select, loads from constant tables);
`Consts` holds the per-type bit layout, reduction constants and the polynomial
tables of exp, log, sin/cos and tanh. Each function registers its emitter in
`vecmath_rules` with `@vecmath_rule(name)`; the package's entry (__init__.py) defines and calls them.
Functions with one f64 algorithm run it for f32 too (`via_f64`):

    @vecmath_rule("cbrt")
    @via_f64
    def cbrt_vecmath(m: Emitter, x): ...     # f32: fptrunc(cbrt_f64(fpext x))
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Sequence

import llvmlite.ir as ir

F32, F64 = ir.FloatType(), ir.DoubleType()


@dataclass(frozen=True)
class Consts:
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


CONSTS = {
    F32: Consts(
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
    F64: Consts(
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


class Emitter:
    """Float arithmetic of one type on an IRBuilder: constants, intrinsics, bit tricks.

    `exact=False` emits a function's fast variant, exact only in its fast range (`call_fast`).
    `scalef`: the target scales by powers of two in one instruction (AVX-512's vscalef), so
    `llvm.ldexp` is cheap in a vector loop; elsewhere it is a libm call per element.
    """

    def __init__(self, builder: ir.IRBuilder, ty: ir.Type, exact: bool = True, scalef: bool = False):
        self.b, self.ty, self.k, self.exact, self.scalef = builder, ty, CONSTS[ty], exact, scalef
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

    def poly_estrin(self, x, coeffs: Sequence[float]) -> ir.Value:
        """coeffs[0] + x*(coeffs[1] + ...) by Estrin's scheme: pairs joined by x, then by x^2,
        x^4, ...: log2(len) fmas deep, against Horner's len - 1, for a polynomial on the path a
        loop's iterations wait for (sin's in an ODE step), at a few more multiplies."""
        terms = [self.c(coeff) for coeff in coeffs]
        power = x
        while len(terms) > 1:
            terms = [self.fma(terms[i + 1], power, terms[i]) if i + 1 < len(terms) else terms[i]
                     for i in range(0, len(terms), 2)]
            power = self.mul(power, power) if len(terms) > 1 else power
        return terms[0]

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

    def ldexp(self, a, n):
        """a 2^n, rounded once (denormal or infinite where the exact product is)."""
        name = f"llvm.ldexp.{self.k.suffix}.i{self.ity.width}"
        fn = self.b.module.globals.get(name) or ir.Function(self.b.module, ir.FunctionType(self.ty, [self.ty, self.ity]),
                                                             name)
        return self.b.call(fn, [a, n])

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
class Rule:
    emit: VecmathRule
    arity: int
    fast_range: VecmathRule | None   # where the fast variant (m.exact False) is exact; None: no variant


vecmath_rules: dict[str, Rule] = {}
"""name -> emitter; `emit(m: Emitter, *args) -> value`, args and result of type m.ty;
`fast_range(m, *args) -> i1`."""


def vecmath_rule(name: str, arity: int = 1, fast_range: VecmathRule | None = None):
    def register(fn: VecmathRule) -> VecmathRule:
        vecmath_rules[name] = Rule(fn, arity, fast_range)
        return fn
    return register


def in_f64(m: Emitter, rule: VecmathRule, *args):
    """rule evaluated in f64 on f32 arguments, rounded once to f32."""
    wide = Emitter(m.b, F64, m.exact, m.scalef)
    return m.b.fptrunc(rule(wide, *(m.b.fpext(a, F64) for a in args)), F32)


def via_f64(rule: VecmathRule) -> VecmathRule:
    """rule as one f64 algorithm: f32 evaluates it on the widened arguments and rounds once,
    which is within 1 ulp of f32 since the f64 error is 2^-29 of an f32 ulp."""
    @functools.wraps(rule)
    def emit(m: Emitter, *args):
        return in_f64(m, rule, *args) if m.ty == F32 else rule(m, *args)
    return emit
