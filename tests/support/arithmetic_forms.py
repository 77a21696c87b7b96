"""Expression forms that compute: elementwise functions, comparisons and logic, `where`, reductions,
scans, matmul, arg-reductions, one_hot, casts, linspace and dimension symbols used as numbers.

Mixed into `Expressions` (tests/support/expressions.py), whose choices (`pick`, `draw`, ...)
they use; each form returns an `Expr` of the type asked for, or None when it cannot make one:

    g.matmul(Type("f64", ("N",)), 1)  ->  Expr("(x @ w)", "np.matmul(x, w)", Type("f64", ("N",)), 68.0)
"""
from __future__ import annotations

import math
import re

from hypothesis import strategies as st

from tests.support.vocabulary import (BOOL_BINARY, BOOL_UNARY, COMPARISONS, EXTERNS, FLOAT_BINARY, FLOAT_UNARY, FLOATS,
                                      INT_BINARY, INT_UNARY, INTS, MAX_RANK, MAX_SIZE, NUMPY, REDUCTIONS, Expr, Type,
                                      extent, product)


class ArithmeticForms:
    """The forms of computed values, and `apply` of a vocabulary template."""

    def apply(self, functions, operands: list[Expr], t: Type) -> Expr | None:
        # a builtin named like an extern function the program declares would call that function
        usable = [f for f in functions if f.applies([e.bound for e in operands], self.options.smooth)
                  and not set(_called(f.adc)) & self.externs]
        if not usable:
            return None
        f = self.pick(usable)
        self.externs.update(f"builtin {name}" for name in _called(f.adc) if name in EXTERNS)
        operands = [self.hoist(e) if f.adc.count(f"{{{i}}}") > 1 else e for i, e in enumerate(operands)]
        return Expr(f.adc.format(*(e.adc for e in operands)), f.py.format(*(e.py for e in operands)), t,
                    f.bound(*(e.bound for e in operands)))

    def unary(self, t: Type, depth: int) -> Expr | None:
        table = [f for f in FLOAT_UNARY if self.options.stop_gradient or "stop_gradient" not in f.adc]
        return self.apply(table if t.is_float else INT_UNARY, [self.draw(t, depth)], t)

    def binary(self, t: Type, depth: int) -> Expr | None:
        table = FLOAT_BINARY if t.is_float else INT_BINARY
        side = self.pick([None, None, 0, 1])
        if side is None:
            sa, sb = self.broadcast_pair(t.shape)
            return self.apply(table, [self.draw(t.of(sa), depth), self.draw(t.of(sb), depth)], t)
        operands = [self.draw(t, depth)]
        operands.insert(side, self.literal(t))
        return self.apply([f for f in table if f.literal], operands, t)

    def compare(self, t: Type, depth: int) -> Expr:
        dtypes = [d for d in self.dtypes if not (self.options.smooth and d in FLOATS)]
        d = self.pick(dtypes)
        op = self.pick(COMPARISONS if d != "bool" else ("==", "!="))
        literal = d != "bool" and self.pick([False, False, True])
        sa, sb = (t.shape, ()) if literal else self.broadcast_pair(t.shape)
        a = self.draw(Type(d, sa), depth)
        b = self.literal(Type(d)) if literal else self.draw(Type(d, sb), depth)
        return Expr(f"({a.adc} {op} {b.adc})", f"({a.py} {op} {b.py})", t, 1.0)

    def logic(self, t: Type, depth: int) -> Expr:
        """`a & b`, `a and b`, `not a`, ... of bools, elementwise and broadcasting."""
        if self.data(st.booleans()):
            op = self.pick(BOOL_UNARY)
            a = self.draw(t, depth)
            return Expr(f"({op}{a.adc})", f"np.logical_not({a.py})", t, 1.0)
        op, py = self.pick(BOOL_BINARY)
        sa, sb = self.broadcast_pair(t.shape)
        a, b = self.draw(t.of(sa), depth), self.draw(t.of(sb), depth)
        return Expr(f"({a.adc} {op} {b.adc})", f"{py}({a.py}, {b.py})", t, 1.0)

    def where(self, t: Type, depth: int) -> Expr:
        sc, sx = self.broadcast_pair(t.shape)
        literal = t.dtype != "bool" and self.pick([False, False, True])
        sa, sb = (sx, ()) if literal else self.broadcast_pair(sx)
        c = self.draw(Type("bool", sc), depth)
        a = self.draw(t.of(sa), depth)
        b = self.literal(t) if literal else self.draw(t.of(sb), depth)
        adc = self.pick([f"where({c.adc}, {a.adc}, {b.adc})", f"({a.adc} if {c.adc} else {b.adc})"])
        return Expr(adc, f"np.where({c.py}, {a.py}, {b.py})", t, max(a.bound, b.bound))

    def reduce(self, t: Type, depth: int) -> Expr:
        r = self.pick([r for r in REDUCTIONS
                       if (t.is_float or not r.floats_only) and (r.smooth or not self.options.smooth)])
        ones = [i for i, d in enumerate(t.shape) if d == 1]
        keepdims = bool(ones) and self.data(st.booleans())
        if keepdims:
            axes = sorted(self.data(st.lists(st.sampled_from(ones), min_size=1, max_size=2, unique=True)))
            shape = [self.token() if i in axes else d for i, d in enumerate(t.shape)]
        else:
            k = self.integer(1, MAX_RANK - t.rank)
            axes = sorted(self.data(st.lists(st.integers(0, t.rank + k - 1), min_size=k, max_size=k, unique=True)))
            rest = iter(t.shape)
            shape = [self.token() if i in axes else next(rest) for i in range(t.rank + k)]
        a = self.draw(t.of(shape), depth)
        if r.guard and self.options.smooth and t.is_float:
            a = self.apply([r.guard], [a], a.type)
        n = math.prod(extent(shape[i]) for i in axes)
        adc = f"{r.name}({a.adc}{self.axis_argument(axes, len(shape))}{', keepdims=True' if keepdims else ''})"
        return Expr(adc, f"{r.py}({a.py}, {tuple(axes)}, {keepdims})", t, r.bound(a.bound, n))

    def axis_argument(self, axes, rank: int) -> str:
        """`axes` spelled as adc allows: omitted for all of them, an int, a negative int, a list."""
        if len(axes) == rank and self.data(st.booleans()):
            return self.pick(["", ", axis=None"])
        spelled = [self.pick([a, a - rank]) for a in axes]
        return f", axis={spelled[0]}" if len(axes) == 1 and self.data(st.booleans()) else f", axis={spelled}"

    def matmul(self, t: Type, depth: int) -> Expr:
        k = self.token()
        if t.rank == 0:
            sa, sb = (k,), (k,)
        elif t.rank == 1:
            sa, sb = self.pick([(t.shape + (k,), (k,)), ((k,), (k,) + t.shape)])
        elif t.rank == 2:
            sa, sb = (t.shape[0], k), (k, t.shape[1])
        else:
            sa, sb = t.shape[:2] + (k,), self.pick([(k, t.shape[2]), (t.shape[0], k, t.shape[2]), (1, k, t.shape[2])])
        a, b = self.draw(t.of(sa), depth), self.draw(t.of(sb), depth)
        adc = self.pick([f"({a.adc} @ {b.adc})", f"matmul({a.adc}, {b.adc})"])
        return Expr(adc, f"np.matmul({a.py}, {b.py})", t, product(a.bound, b.bound, extent(k)))

    def scan(self, t: Type, depth: int) -> Expr:
        """cumsum(a, axis) along one axis, inclusive or exclusive, from either end."""
        p = self.integer(0, t.rank - 1)
        a = self.draw(t, depth)
        exclusive, reverse = self.data(st.booleans()), self.data(st.booleans())
        return Expr(f"cumsum({a.adc}, axis={self.pick([p, p - t.rank])}, exclusive={exclusive}, reverse={reverse})",
                    f"_cumsum({a.py}, {p}, {exclusive}, {reverse})", t, a.bound * extent(t.shape[p]))

    def argreduce(self, t: Type, depth: int) -> Expr:
        """argmax/argmin along one axis: the first extreme, 0 along an axis empty at run time."""
        p, d = self.integer(0, t.rank), self.token()
        a = self.draw(Type(self.pick([x for x in self.dtypes if not (self.options.smooth and x in FLOATS)]
                                     or self.dtypes), t.shape[:p] + (d,) + t.shape[p:]), depth)
        name = self.pick(["argmax", "argmin"])
        axis = self.pick([p, p - t.rank - 1])
        return Expr(f"{name}({a.adc}, axis={axis})", f"_{name}({a.py}, {p})", t, extent(d))

    def one_hot(self, t: Type, depth: int) -> Expr:
        """one_hot of integer indices, depth the last dimension of t (zero rows outside [0, depth))."""
        i = self.draw(Type(self.pick([x for x in self.dtypes if x in INTS]), t.shape[:-1]), depth)
        return Expr(f"one_hot({i.adc}, {t.shape[-1]}, dtype={t.dtype})",
                    f"_one_hot({i.py}, {t.shape[-1]}, {NUMPY[t.dtype]})", t, 1.0)

    def cast(self, t: Type, depth: int) -> Expr | None:
        sources = [d for d in self.dtypes if d != t.dtype and self.convertible(d, t.dtype)]
        if not sources:
            return None
        return self.convert(self.draw(Type(self.pick(sources), t.shape), depth), t.dtype)

    def linspace(self, t: Type, depth: int) -> Expr:
        start, stop = self.literal(t), self.literal(t)
        n = t.shape[0]
        return Expr(f"linspace({start.adc}, {stop.adc}, {n}, dtype={t.dtype})",
                    f"np.linspace({start.py}, {stop.py}, {n}, dtype={NUMPY[t.dtype]})", t, max(start.bound, stop.bound))

    def dimension(self, t: Type, depth: int) -> Expr:
        """A dimension symbol used as a number: `x / N`."""
        n, op = self.pick(self.symbols), self.pick(["*", "+", "-"] + ["/"] * t.is_float)
        a = self.draw(t, depth)
        bound = a.bound if op == "/" else a.bound + MAX_SIZE if op in "+-" else a.bound * MAX_SIZE
        spellings = [(f"({a.adc} {op} {n})", f"({a.py} {op} {n})")]
        if op != "/":
            spellings.append((f"({n} {op} {a.adc})", f"({n} {op} {a.py})"))
        adc, py = self.pick(spellings)
        return Expr(adc, py, t, bound)


def _called(template: str) -> list[str]:
    return re.findall(r"([A-Za-z_][A-Za-z_0-9]*)\(", template)
