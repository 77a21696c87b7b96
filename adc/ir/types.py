"""Types of IR values: a dtype and a shape whose dimensions may be symbolic.

A dimension is an `int` or a `SymDim`, a polynomial with integer coefficients
over the kernel's dimension symbols (`B`, `N-1`, `2*N`, `B*H`). Symbolic
dimensions let one compilation serve every size: symbols become run-time
integers bound from the arguments' shapes. Arithmetic on dimensions always
returns the canonical form, so equal dimensions compare equal:

    Dim.parse("N+1") - 1 == SymDim.symbol("N")        # True
    TensorType(F32, (SymDim.symbol("B"), 4))          # prints f32[B,4]
"""
from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, Union

import numpy as np


class DType(enum.Enum):
    """Element types; `bool` comes from comparisons, integers where indices need them."""

    f32 = "f32"
    f64 = "f64"
    i32 = "i32"
    i64 = "i64"
    bool = "bool"

    @property
    def is_float(self) -> bool:
        return self in (DType.f32, DType.f64)

    @property
    def is_int(self) -> bool:
        return self in (DType.i32, DType.i64)

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(_NUMPY_NAMES[self])

    @classmethod
    def from_numpy(cls, dtype: np.dtype) -> "DType":
        for dt, name in _NUMPY_NAMES.items():
            if np.dtype(name) == dtype:
                return dt
        raise TypeError(f"no adc dtype for NumPy dtype {dtype}")

    def __str__(self) -> str:
        return self.value


_NUMPY_NAMES = {DType.f32: "float32", DType.f64: "float64", DType.i32: "int32",
                DType.i64: "int64", DType.bool: "bool"}

F32, F64, I32, I64, BOOL = DType.f32, DType.f64, DType.i32, DType.i64, DType.bool
TRUTH_VALUES = {"true": True, "false": False}      # how the IR's text writes a bool attribute
# Words the IR's text reads as a dtype or a truth value wherever an attribute's atom may stand (a
# broadcast's `shape = [N]`): no dimension symbol may be one, or the IR would not read back
RESERVED_NAMES = frozenset({*(d.value for d in DType), *TRUTH_VALUES})

# A monomial is a sorted tuple of symbol names (with repetition for powers);
# the empty tuple is the constant term.
Monomial = tuple[str, ...]


@dataclass(frozen=True)
class SymDim:
    """A symbolic dimension: sum of coefficient * monomial, canonical and non-constant."""

    terms: tuple[tuple[Monomial, int], ...]

    @staticmethod
    def symbol(name: str) -> "SymDim":
        return SymDim((((name,), 1),))

    @staticmethod
    def of(terms: Mapping[Monomial, int]) -> "Dim":
        """The canonical dimension for `terms`: an int when no symbol survives."""
        kept = {m: c for m, c in terms.items() if c != 0}
        if not any(m for m in kept):
            return kept.get((), 0)
        return SymDim(tuple(sorted(kept.items(), key=_term_order)))

    @property
    def symbols(self) -> frozenset[str]:
        return frozenset(s for m, _ in self.terms for s in m)

    @property
    def is_symbol(self) -> bool:
        return len(self.terms) == 1 and len(self.terms[0][0]) == 1 and self.terms[0][1] == 1

    def evaluate(self, env: Mapping[str, int]) -> int:
        total = 0
        for mono, coeff in self.terms:
            value = coeff
            for name in mono:
                value *= env[name]
            total += value
        return total

    def _as_terms(self) -> dict[Monomial, int]:
        return dict(self.terms)

    def __add__(self, other: "Dim") -> "Dim":
        terms = self._as_terms()
        for mono, coeff in _terms_of(other).items():
            terms[mono] = terms.get(mono, 0) + coeff
        return SymDim.of(terms)

    __radd__ = __add__

    def __neg__(self) -> "Dim":
        return SymDim.of({m: -c for m, c in self.terms})

    def __sub__(self, other: "Dim") -> "Dim":
        return self + (-other)

    def __rsub__(self, other: "Dim") -> "Dim":
        return (-self) + other

    def __mul__(self, other: "Dim") -> "Dim":
        terms: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in _terms_of(other).items():
                mono = tuple(sorted(m1 + m2))
                terms[mono] = terms.get(mono, 0) + c1 * c2
        return SymDim.of(terms)

    __rmul__ = __mul__

    def __str__(self) -> str:
        out = ""
        for mono, coeff in self.terms:
            body = "*".join(mono)
            mag = abs(coeff)
            text = body if mono and mag == 1 else (f"{mag}*{body}" if mono else str(mag))
            if coeff < 0:
                out += "-" + text
            else:
                out += ("+" if out else "") + text
        return out

    def __repr__(self) -> str:
        return f"SymDim({str(self)!r})"


def _term_order(item: tuple[Monomial, int]) -> tuple:
    mono, _ = item
    return (not mono, -len(mono), mono)


def _terms_of(d: "Dim") -> dict[Monomial, int]:
    if isinstance(d, SymDim):
        return d._as_terms()
    return {(): int(d)}


Dim = Union[int, SymDim]

_DIM_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z_0-9]*)|(.))")


def parse_dim(text: str) -> Dim:
    """Parse the printed form of a dimension: `4`, `N`, `N-1`, `2*N+1`, `B*H`."""
    tokens = [m.group(1) or m.group(2) or m.group(3) for m in _DIM_TOKEN.finditer(text)
              if m.group(0).strip()]
    total: Dim = 0
    sign = 1
    term: Dim | None = None
    expect_factor = True
    for tok in tokens + ["+"]:
        if tok in "+-" and not expect_factor:
            total = total + sign * term
            sign, term, expect_factor = (1 if tok == "+" else -1), None, True
        elif tok == "-" and expect_factor and term is None:
            sign = -sign
        elif tok == "*" and not expect_factor:
            expect_factor = True
        elif expect_factor and (tok.isdigit() or tok.isidentifier()):
            factor: Dim = int(tok) if tok.isdigit() else SymDim.symbol(tok)
            term = factor if term is None else term * factor
            expect_factor = False
        else:
            raise ValueError(f"malformed dimension {text!r}")
    return total


def dim_str(d: Dim) -> str:
    return str(d)


def evaluate_dim(d: Dim, env: Mapping[str, int]) -> int:
    return d.evaluate(env) if isinstance(d, SymDim) else int(d)


def dim_symbols(d: Dim) -> frozenset[str]:
    return d.symbols if isinstance(d, SymDim) else frozenset()


@dataclass(frozen=True)
class TensorType:
    """A dtype and a shape; rank 0 is a scalar."""

    dtype: DType
    shape: tuple[Dim, ...] = ()

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def symbols(self) -> frozenset[str]:
        return frozenset().union(*(dim_symbols(d) for d in self.shape))

    def with_dtype(self, dtype: DType) -> "TensorType":
        return TensorType(dtype, self.shape)

    def with_shape(self, shape) -> "TensorType":
        return TensorType(self.dtype, tuple(shape))

    def __str__(self) -> str:
        return self.text

    @cached_property
    def text(self) -> str:
        """The printed form, made once: the printer and the type rules' messages ask for it per op."""
        if not self.shape:
            return str(self.dtype)
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"


MAX_BYTES = 2**63 - 1     # sizes are int64 at run time (the ABI's dims, loop counters, byte offsets)


def fits(t: "TensorType") -> bool:
    """Whether the static dimensions of `t` hold at most MAX_BYTES bytes: in elements the bound let
    an f32[2**62] through, whose 2**64 bytes wrapped to 0 in the kernel's i64 arithmetic, and the
    kernel wrote into a block of no bytes. Symbolic sizes are checked where they become known
    (codegen/lowering/sizes.py)."""
    return math.prod(d for d in t.shape if isinstance(d, int) and d > 0) * t.dtype.numpy.itemsize <= MAX_BYTES


def num_elements(shape: tuple[Dim, ...]) -> Dim:
    total: Dim = 1
    for d in shape:
        total = total * d
    return total
