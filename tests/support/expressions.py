"""Random well-typed adc expressions with NumPy twins, drawn type-directed: the fuzz generator's core.

`Expressions.draw(type, depth)` returns an `Expr` of exactly that dtype and shape, made by
one of the forms that can give it (`FORMS`): a function of an expression of the same type,
a reduction of one with an extra axis, a matmul of two sharing a contracted axis, an index
dropping an axis, a take, take_along_axis or scatter by computed indices, a cumsum, a
slice, a concat of pieces, a call of another kernel, a factorization or a solve of a
matrix built well conditioned, ... The forms live by concept in arithmetic_forms.py,
control_forms.py, indexing_forms.py, layout_forms.py, call_forms.py and linalg_forms.py,
mixed into `Expressions`, which keeps the choices, the statements and the leaves. Each
`Expr` carries its adc text, the NumPy text of the same value (run by tests/support/twin.py)
and a bound on |value| over the arguments the tests draw. Bounds keep exp below overflow and
sin within the range where adc's vector math is accurate, and scale the tolerances.

    Expressions(draw, options, dtypes, params, callables, externs).draw(Type("f64", ("N",)), 2)
    -> Expr(adc="(sin(x) * sum(w, axis=1))", py="(np.sin(x) * _sum(w, (1,), False))",
            type=Type("f64", ("N",)), bound=6.0)

`Options.smooth` keeps to what finite differences can check a gradient of: ops with
continuous derivatives on guarded domains, and no float value reaching a bool or an int
(so a `where` never switches branches under a small perturbation).
"""
from __future__ import annotations

import math
from typing import Callable

from hypothesis import strategies as st

from tests.support.arithmetic_forms import ArithmeticForms
from tests.support.call_forms import CallForms
from tests.support.control_forms import ControlForms
from tests.support.indexing_forms import IndexingForms
from tests.support.layout_forms import LayoutForms
from tests.support.linalg_forms import LinalgForms
from tests.support.vocabulary import (FLOATS, INTS, LITERALS, MAX_RANK, NUMPY, Expr, Options, Signature, Type, adc_dims,
                                      broadcasts, extent, magnitude, py_dims)


class Expressions(ArithmeticForms, ControlForms, IndexingForms, LayoutForms, CallForms, LinalgForms):
    """Draws the expressions of one kernel; operands a template repeats become statements."""

    def __init__(self, draw, options: Options, dtypes: tuple[str, ...], params: list[Expr],
                 callables: list[Signature], externs: set[str]):
        self.data, self.options, self.dtypes = draw, options, dtypes
        self.symbols = tuple(dict.fromkeys(d for p in params for d in p.type.shape if isinstance(d, str)))
        self.scope = list(params)
        self.statements: list[tuple[str, str]] = []
        self.callables = callables
        self.externs = externs
        self._names = 0

    # ------------------------------------------------------------ choices

    def pick(self, options):
        return self.data(st.sampled_from(list(options)))

    def integer(self, lo: int, hi: int) -> int:
        return self.data(st.integers(lo, hi))

    def token(self):
        return self.pick(self.options.static + self.symbols)

    def random_type(self, dtypes=None) -> Type:
        dtype = self.pick(dtypes or (self.dtypes[0],) * 3 + self.dtypes)
        shapes = [p.type.shape for p in self.scope] + [tuple(self.token() for _ in range(self.integer(0, 2)))]
        return Type(dtype, self.pick(shapes))

    def broadcast_pair(self, shape) -> tuple[tuple, tuple]:
        """Two shapes whose NumPy broadcast is `shape`: each axis kept by one or both, the leading
        1s of one of them dropped."""
        a, b = list(shape), list(shape)
        for i, d in enumerate(shape):
            side = self.pick(["both", "a", "b"]) if d != 1 else "both"
            if side == "a":
                b[i] = 1
            elif side == "b":
                a[i] = 1
        lead = next((i for i, d in enumerate(b) if d != 1), len(b))
        b = b[self.integer(0, lead):]
        return (tuple(a), tuple(b)) if self.data(st.booleans()) else (tuple(b), tuple(a))

    # ------------------------------------------------------------ statements

    def assign(self, e: Expr) -> Expr:
        """`tK = e` as a statement; the name joins the scope."""
        name = f"t{self._names}"
        self._names += 1
        self.statements.append((f"{name} = {e.adc}", f"{name} = {e.py}"))
        v = Expr(name, name, e.type, e.bound, atom=True)
        self.scope.append(v)
        return v

    def hoist(self, e: Expr) -> Expr:
        return e if e.atom else self.assign(e)

    # ------------------------------------------------------------ expressions

    def draw(self, t: Type, depth: int) -> Expr:
        if depth > 0 and self.integer(0, 3):
            forms = [name for name, (weight, applies) in FORMS.items()
                     if applies(self, t) and name in (self.options.forms or FORMS) for _ in range(weight)]
            made = getattr(self, self.pick(forms))(t, depth - 1)
            if made is not None:
                return made
        return self.leaf(t)

    def leaf(self, t: Type) -> Expr:
        exact = [v for v in self.scope if v.type == t]
        others = [v for v in self.scope if v.type != t and self.convertible(v.type.dtype, t.dtype)]
        kind = self.pick(["name"] * 4 * bool(exact) + ["adapt"] * 3 * bool(others) + ["constant"])
        if kind == "name":
            return self.pick(exact)
        if kind == "adapt":     # mostly of the same dtype, so that results depend on float inputs
            return self.adapt(self.pick([v for v in others if v.type.dtype == t.dtype] * 3 + others), t)
        return self.constant(t)

    def adapt(self, v: Expr, t: Type) -> Expr:
        """`v` made of type `t`: reduced or indexed to a scalar unless it broadcasts, converted, broadcast."""
        if not broadcasts(v.type.shape, t.shape):
            index = ", ".join(str(self.pick([0, -1])) for _ in v.type.shape)
            ways = [(f"{v.adc}[{index}]", f"{v.py}[{index}]", v.bound)]
            if v.type.dtype != "bool":
                n = math.prod(extent(d) for d in v.type.shape)
                ways.append((f"sum({v.adc})", f"_sum({v.py}, None, False)", v.bound * n))
            adc, py, bound = self.pick(ways)
            v = Expr(adc, py, v.type.of(()), bound)
        if v.type.dtype != t.dtype:
            v = self.convert(v, t.dtype)
        if v.type.shape != t.shape:
            v = Expr(f"broadcast_to({v.adc}, {adc_dims(t.shape)})", f"np.broadcast_to({v.py}, {py_dims(t.shape)})",
                     t, v.bound)
        return v

    def convertible(self, source: str, target: str) -> bool:
        """Whether a value of dtype `source` may become one of `target` here: nothing converts to bool,
        and under `smooth` no float converts to anything else."""
        if target == "bool" or self.options.smooth and source in FLOATS:
            return source == target
        return True

    def convert(self, a: Expr, dtype: str) -> Expr:
        """`dtype(a)`; a float becomes an int only where it is finite and fits."""
        adc, py, bound = a.adc, a.py, a.bound
        if a.type.is_float and dtype not in FLOATS:
            a = self.hoist(a)
            adc, py = f"where(abs({a.adc}) < 1000.0, {a.adc}, 0.0)", f"np.where(np.abs({a.py}) < 1000.0, {a.py}, 0.0)"
            bound = min(bound, 1000.0)
        return Expr(f"{dtype}({adc})", f"_cast({py}, {NUMPY[dtype]})", Type(dtype, a.type.shape), bound)

    def constant(self, t: Type) -> Expr:
        value = self.pick(LITERALS[t.dtype])
        bound = magnitude(value)
        if not t.shape and t.dtype != "bool":
            return Expr(f"{t.dtype}({value})", f"{NUMPY[t.dtype]}({value})", t, bound, atom=True)
        return Expr(f"full({adc_dims(t.shape)}, {value}, dtype={t.dtype})",
                    f"np.full({py_dims(t.shape)}, {value}, {NUMPY[t.dtype]})", t, bound)

    def literal(self, t: Type) -> Expr:
        value = self.pick(LITERALS[t.dtype])
        return Expr(value, value, t.of(()), magnitude(value), atom=True)


def _static(t: Type, test) -> bool:
    return any(isinstance(d, int) and test(d) for d in t.shape)


# the forms an expression of type t can take: name -> (weight, applies(expressions, t)); arithmetic weighs
# most, so that most values are computed from the inputs
FORMS: dict[str, tuple[int, Callable[[Expressions, Type], bool]]] = {
    "unary": (4, lambda g, t: t.dtype != "bool"),
    "binary": (4, lambda g, t: t.dtype != "bool"),
    "compare": (1, lambda g, t: t.dtype == "bool"),
    "logic": (1, lambda g, t: t.dtype == "bool"),
    "where": (1, lambda g, t: "bool" in g.dtypes),
    "reduce": (2, lambda g, t: t.dtype != "bool" and t.rank < MAX_RANK),
    "matmul": (2, lambda g, t: t.is_float),
    "cast": (1, lambda g, t: t.dtype != "bool"),
    "argreduce": (1, lambda g, t: t.dtype == "i64" and t.rank < MAX_RANK),
    "one_hot": (1, lambda g, t: t.dtype != "bool" and t.rank >= 1 and any(x in INTS for x in g.dtypes)),
    "augmented": (1, lambda g, t: t.dtype != "bool"),
    "loop": (1, lambda g, t: t.is_float),
    "branch": (1, lambda g, t: g.dtypes[0] in FLOATS),
    "index": (1, lambda g, t: t.rank < MAX_RANK),
    "take": (1, lambda g, t: t.rank >= 1 and any(x in INTS for x in g.dtypes)),
    "scan": (1, lambda g, t: t.dtype != "bool" and t.rank >= 1),
    "take_along_axis": (1, lambda g, t: t.rank >= 1 and any(x in INTS for x in g.dtypes)),
    "scatter": (1, lambda g, t: t.rank >= 1 and any(x in INTS for x in g.dtypes)),
    "slice": (1, lambda g, t: _static(t, lambda d: True)),
    "transpose": (1, lambda g, t: t.rank >= 2),
    "reshape": (1, lambda g, t: t.rank < MAX_RANK or 1 in t.shape),
    "concat": (1, lambda g, t: _static(t, lambda d: d >= 2)),
    "stack": (1, lambda g, t: _static(t, lambda d: d <= 3)),
    "pad": (1, lambda g, t: _static(t, lambda d: d >= 2)),
    "broadcast": (1, lambda g, t: t.rank >= 1),
    "linspace": (1, lambda g, t: t.is_float and t.rank == 1),
    "dimension": (1, lambda g, t: t.dtype != "bool" and bool(g.symbols)),
    "call": (1, lambda g, t: bool(g.callables)),
    "extern": (1, lambda g, t: t.is_float and g.options.externs),
    "factor": (1, lambda g, t: t.is_float and t.rank >= 2),
    "solve": (1, lambda g, t: t.is_float and t.rank >= 1),
    "spectrum": (1, lambda g, t: t.is_float and t.rank <= 2),
}
