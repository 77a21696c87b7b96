"""The vocabulary of generated adc programs: types, expressions, and the functions they apply.

Part of the fuzz generator (tests/support/expressions.py draws from these tables). Each
`Function` is an adc template with its NumPy twin (run by tests/support/twin.py), the
bound of its result from its operands' bounds, whether finite differences can check its
gradient (`smooth`), and the largest operand bound it accepts:

    Function("exp(tanh({0}))", "np.exp(np.tanh({0}))", lambda a: math.e)
    Function("sin({0})", "np.sin({0})", lambda a: 1.0, limit=TRIG_LIMIT)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

SYMBOLS = ("N", "M")
STATIC = (1, 2, 3, 5, 17)           # 17 and the symbols' sizes fill SIMD vectors and leave remainders
SIZES = (0, 1, 2, 3, 4, 9, 33)     # the run-time sizes of the symbols
MAX_SIZE = max(SIZES)
MAX_RANK = 3
FLOATS, INTS = ("f32", "f64"), ("i32", "i64")
NUMPY = {"f32": "np.float32", "f64": "np.float64", "i32": "np.int32", "i64": "np.int64", "bool": "np.bool_"}
INPUT_BOUND = {"f32": 2.0, "f64": 2.0, "i32": 3.0, "i64": 3.0, "bool": 1.0}
# adc's sin/cos/tan are accurate for |x| <= 1e4 (f32) and 1e5 (f64), tests/codegen/test_vecmath.py
TRIG_LIMIT = 1e3
EXP_LIMIT = 20.0
LITERALS = {"f32": ("0.5", "2.0", "(-1.5)", "3", "pi", "(-e)"), "f64": ("0.5", "2.0", "(-1.5)", "3", "pi", "(-e)"),
            "i32": ("2", "(-1)", "3"), "i64": ("2", "(-1)", "3"), "bool": ("True", "False")}


@dataclass(frozen=True)
class Options:
    """What programs may contain. `smooth`: only what finite differences can check gradients of."""

    floats: tuple[str, ...] = FLOATS
    others: tuple[str, ...] = INTS + ("bool",)
    smooth: bool = False
    max_depth: int = 4
    max_statements: int = 4
    max_helpers: int = 2
    custom_gradients: bool = True
    externs: bool = True
    stop_gradient: bool = True      # what a twin's finite differences freeze, but differences of the IR do not
    forms: tuple[str, ...] | None = None      # the forms of expressions.FORMS drawn (None: all)
    static: tuple[int, ...] = STATIC        # the static dimensions of types
    sizes: tuple[int, ...] = SIZES          # the run-time sizes of the symbols, at most MAX_SIZE


@dataclass(frozen=True)
class Type:
    dtype: str
    shape: tuple = ()

    def __str__(self) -> str:
        return self.dtype + (adc_dims(self.shape) if self.shape else "")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOATS

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(NUMPY[self.dtype].removeprefix("np."))

    def of(self, shape) -> Type:
        return Type(self.dtype, tuple(shape))


def adc_dims(shape) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def py_dims(shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def extent(d) -> int:
    """The largest size a dimension takes when the tests run it."""
    return d if isinstance(d, int) else MAX_SIZE


def broadcasts(shape, target) -> bool:
    """Whether NumPy broadcasts `shape` to `target` (aligned at the right)."""
    return len(shape) <= len(target) and all(d == 1 or d == t for d, t in zip(reversed(shape), reversed(target)))


@dataclass(frozen=True)
class Expr:
    adc: str
    py: str
    type: Type
    bound: float            # |value| <= bound (inf: no bound known)
    atom: bool = False      # a name or a literal, which a template may repeat

    def postfix(self) -> tuple[str, str]:
        """The texts to put before `[...]`."""
        return (self.adc, self.py) if self.atom else (f"({self.adc})", f"({self.py})")


@dataclass(frozen=True)
class Signature:
    """A kernel others may call: its parameters' types are what its body was drawn for."""

    name: str
    params: tuple[tuple[str, Type], ...]
    results: tuple[Type, ...]
    bounds: tuple[float, ...]


CONSTANTS = {"pi": math.pi, "e": math.e}   # the language's named constants, in the twin too


def magnitude(literal: str) -> float:
    if literal in ("True", "False"):
        return 1.0
    text = literal.strip("()").lstrip("-")
    return CONSTANTS[text] if text in CONSTANTS else abs(float(text))


def product(*bounds: float) -> float:
    return math.prod(bounds) if all(b < 1e150 for b in bounds) else math.inf


@dataclass(frozen=True)
class Function:
    """A template over operands {0}, {1}: adc and NumPy text, the result's bound from the operands',
    whether it is smooth on its whole domain, the largest operand bound it accepts, and whether an
    operand may be a weak literal (`x * 2.0`)."""

    adc: str
    py: str
    bound: Callable[..., float]
    smooth: bool = True
    limit: float = math.inf
    literal: bool = False

    def applies(self, bounds, smooth: bool) -> bool:
        return (self.smooth or not smooth) and all(b <= self.limit for b in bounds)


FLOAT_UNARY = (
    Function("sin({0})", "np.sin({0})", lambda a: 1.0, limit=TRIG_LIMIT),
    Function("cos({0})", "np.cos({0})", lambda a: 1.0, limit=TRIG_LIMIT),
    Function("tanh({0})", "np.tanh({0})", lambda a: 1.0),
    Function("sigmoid({0})", "_sigmoid({0})", lambda a: 1.0),
    Function("softplus({0})", "_softplus({0})", lambda a: a + 1.0),
    Function("exp(tanh({0}))", "np.exp(np.tanh({0}))", lambda a: math.e),
    Function("expm1(tanh({0}))", "np.expm1(np.tanh({0}))", lambda a: 2.0),
    Function("log(1.5 + {0} * {0})", "np.log(1.5 + {0} * {0})", lambda a: math.log(1.5 + product(a, a))),
    Function("log1p({0} * {0})", "np.log1p({0} * {0})", lambda a: math.log1p(product(a, a))),
    Function("sqrt(0.5 + {0} * {0})", "np.sqrt(0.5 + {0} * {0})", lambda a: math.sqrt(0.5 + product(a, a))),
    Function("rsqrt(1.0 + {0} * {0})", "(1 / np.sqrt(1.0 + {0} * {0}))", lambda a: 1.0),
    Function("tan(0.5 * tanh({0}))", "np.tan(0.5 * np.tanh({0}))", lambda a: 0.6),
    # the library functions, on domains where they are smooth
    Function("log2(1.5 + {0} * {0})", "np.log2(1.5 + {0} * {0})", lambda a: math.log2(1.5 + product(a, a))),
    Function("log10(1.5 + {0} * {0})", "np.log10(1.5 + {0} * {0})", lambda a: math.log10(1.5 + product(a, a))),
    Function("exp2(tanh({0}))", "np.exp2(np.tanh({0}))", lambda a: 2.0),
    Function("cbrt(1.5 + tanh({0}))", "np.cbrt(1.5 + np.tanh({0}))", lambda a: 1.4),
    Function("sinh(tanh({0}))", "np.sinh(np.tanh({0}))", lambda a: 1.2),
    Function("cosh(tanh({0}))", "np.cosh(np.tanh({0}))", lambda a: 1.6),
    Function("asinh({0})", "np.arcsinh({0})", lambda a: math.asinh(a) if a < 1e300 else math.inf),
    Function("acosh(1.5 + {0} * {0})", "np.arccosh(1.5 + {0} * {0})", lambda a: math.inf),
    Function("atanh(0.5 * tanh({0}))", "np.arctanh(0.5 * np.tanh({0}))", lambda a: 0.6),
    Function("atan({0})", "np.arctan({0})", lambda a: 1.6),
    Function("asin(0.5 * tanh({0}))", "np.arcsin(0.5 * np.tanh({0}))", lambda a: 0.6),
    Function("acos(0.5 * tanh({0}))", "np.arccos(0.5 * np.tanh({0}))", lambda a: 2.1),
    Function("erf({0})", "_erf({0})", lambda a: 1.0),
    Function("erfc({0})", "_erfc({0})", lambda a: 2.0),
    Function("lgamma(1.5 + {0} * {0})", "_lgamma(1.5 + {0} * {0})", lambda a: math.inf),
    Function("(-{0})", "(-{0})", lambda a: a),
    Function("({0} * {0})", "({0} * {0})", lambda a: product(a, a)),
    Function("({0} ** 2)", "({0} ** 2)", lambda a: product(a, a)),
    Function("({0} ** 3)", "({0} ** 3)", lambda a: product(a, a, a)),
    Function("elu({0})", "_elu({0})", lambda a: max(a, 1.0)),
    Function("stop_gradient({0})", "_sg({0})", lambda a: a),
    # over every axis (axis=None), so any rank, the scalar's too, takes them; rows shift by their max
    Function("softmax({0}, axis=None)", "_softmax({0})", lambda a: 1.0),
    Function("log_softmax({0}, axis=None)", "_log_softmax({0})", lambda a: 2 * a + MAX_RANK * math.log(MAX_SIZE)),
    # kinks and steps
    Function("abs({0})", "np.abs({0})", lambda a: a, smooth=False),
    Function("sign({0})", "np.sign({0})", lambda a: 1.0, smooth=False),
    Function("round({0})", "np.rint({0})", lambda a: a + 1, smooth=False),
    Function("floor({0})", "np.floor({0})", lambda a: a + 1, smooth=False),
    Function("relu({0})", "_relu({0})", lambda a: a, smooth=False),
    Function("clip({0}, -1.0, 0.5)", "np.clip({0}, -1.0, 0.5)", lambda a: 1.0, smooth=False),
    # unguarded domains: nan and inf are values too
    Function("exp({0})", "np.exp({0})", math.exp, smooth=False, limit=EXP_LIMIT),
    Function("expm1({0})", "np.expm1({0})", math.exp, smooth=False, limit=EXP_LIMIT),
    Function("log({0})", "np.log({0})", lambda a: math.inf, smooth=False),
    Function("log1p({0})", "np.log1p({0})", lambda a: math.inf, smooth=False),
    Function("sqrt({0})", "np.sqrt({0})", math.sqrt, smooth=False),
    Function("rsqrt({0})", "(1 / np.sqrt({0}))", lambda a: math.inf, smooth=False),
    Function("tan({0})", "np.tan({0})", lambda a: math.inf, smooth=False, limit=TRIG_LIMIT),
)
INT_UNARY = (
    Function("(-{0})", "(-{0})", lambda a: a),
    Function("abs({0})", "np.abs({0})", lambda a: a),
    Function("sign({0})", "np.sign({0})", lambda a: 1.0),
    Function("(~{0})", "(~{0})", lambda a: a + 1),
)
ARITHMETIC = (
    Function("({0} + {1})", "({0} + {1})", lambda a, b: a + b, literal=True),
    Function("({0} - {1})", "({0} - {1})", lambda a, b: a + b, literal=True),
    Function("({0} * {1})", "({0} * {1})", product, literal=True),
    Function("minimum({0}, {1})", "np.minimum({0}, {1})", max, smooth=False, literal=True),
    Function("maximum({0}, {1})", "np.maximum({0}, {1})", max, smooth=False, literal=True),
)
FLOAT_BINARY = ARITHMETIC + (
    Function("({0} / (1.5 + tanh({1})))", "({0} / (1.5 + np.tanh({1})))", lambda a, b: 2 * a),
    Function("((1.5 + tanh({0})) ** tanh({1}))", "((1.5 + np.tanh({0})) ** np.tanh({1}))", lambda a, b: 2.5),
    Function("({0} / {1})", "({0} / {1})", lambda a, b: math.inf, smooth=False, literal=True),
    Function("({0} ** {1})", "({0} ** {1})", lambda a, b: math.inf, smooth=False, literal=True),
    # NumPy's conventions: the remainder has the sign of the divisor, the quotient is floored; jumps
    Function("({0} % {1})", "np.mod({0}, {1})", lambda a, b: b, smooth=False, literal=True),
    Function("({0} // {1})", "np.floor_divide({0}, {1})", lambda a, b: math.inf, smooth=False, literal=True),
)
# integer // and % by 0 give 0 in adc and NumPy; the twin's literals are never both Python ints
INT_BINARY = ARITHMETIC + (
    Function("({0} % {1})", "np.mod({0}, {1})", lambda a, b: b, literal=True),
    Function("({0} // {1})", "np.floor_divide({0}, {1})", lambda a, b: a, literal=True),
    Function("({0} & {1})", "({0} & {1})", lambda a, b: 2 * max(a, b) + 1, literal=True),
    Function("({0} | {1})", "({0} | {1})", lambda a, b: 2 * max(a, b) + 1, literal=True),
    Function("({0} ^ {1})", "({0} ^ {1})", lambda a, b: 2 * max(a, b) + 1, literal=True),
)
COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
# operators of bools: adc's `and`/`or`/`not` are elementwise, NumPy's logical_and/or/not
BOOL_BINARY = (("&", "np.logical_and"), ("|", "np.logical_or"), ("^", "np.logical_xor"),
               ("and", "np.logical_and"), ("or", "np.logical_or"))
BOOL_UNARY = ("~", "not ")


@dataclass(frozen=True)
class Reduction:
    name: str
    py: str
    bound: Callable[[float, int], float]      # from the operand's bound and the reduced count
    floats_only: bool = False
    smooth: bool = True
    guard: Function | None = None              # what `smooth` applies to the operand first


REDUCTIONS = (
    Reduction("sum", "_sum", lambda b, n: b * n),
    Reduction("mean", "_mean", lambda b, n: b, floats_only=True),
    # adc's VJP of prod divides by the elements, nan at an exact 0 (adjoint_rules/reductions.py, reduce_prod_adjoint):
    # smooth programs take products of 1.5 + tanh(x), which no x - x makes 0
    Reduction("prod", "_prod", lambda b, n: product(*[b] * n),
              guard=Function("(1.5 + tanh({0}))", "(1.5 + np.tanh({0}))", lambda a: 2.5)),
    Reduction("max", "_max", lambda b, n: b, smooth=False),
    Reduction("min", "_min", lambda b, n: b, smooth=False),
    Reduction("logsumexp", "_logsumexp", lambda b, n: b + math.log(max(n, 1)), floats_only=True),
    Reduction("norm", "_norm", lambda b, n: b * math.sqrt(n), floats_only=True, smooth=False),   # a kink at 0
)


@dataclass(frozen=True)
class Extern:
    """A C function of libm declared `extern`, its NumPy twin and its `@gradient` in adc."""

    name: str
    dtype: str
    params: tuple[str, ...]
    py: str
    bound: Callable[..., float]
    gradient: tuple[str, ...]            # one cotangent per parameter, of the parameters and `dy`
    limit: float = math.inf
    calls: tuple[str, ...] = ()          # the externs its gradient calls
    smooth: bool = True


EXTERNS = {e.name: e for e in (
    Extern("atan", "f64", ("x",), "np.arctan({0})", lambda a: 1.6, ("dy / (1.0 + x * x)",)),
    Extern("atanf", "f32", ("x",), "np.arctan({0})", lambda a: 1.6, ("dy / (1.0 + x * x)",)),
    Extern("erf", "f64", ("x",), "_erf({0})", lambda a: 1.0, ("dy * 1.1283791670955126 * exp(-x * x)",)),
    Extern("sinh", "f64", ("x",), "np.sinh({0})", math.sinh, ("dy * cosh(x)",), EXP_LIMIT, ("cosh",)),
    Extern("cosh", "f64", ("x",), "np.cosh({0})", math.cosh, ("dy * sinh(x)",), EXP_LIMIT, ("sinh",)),
    Extern("hypot", "f64", ("x", "y"), "np.hypot({0}, {1})", lambda a, b: a + b,
           ("dy * x / hypot(x, y)", "dy * y / hypot(x, y)"), smooth=False),       # a kink at (0, 0)
)}
