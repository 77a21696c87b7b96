"""Random well-typed adc expressions with NumPy twins, drawn type-directed: the fuzz generator's core.

`Expressions.draw(type, depth)` returns an `Expr` of exactly that dtype and shape, made by
one of the forms that can give it (`FORMS`): a function of an expression of the same type,
a reduction of one with an extra axis, a matmul of two sharing a contracted axis, an index
dropping an axis, a take, take_along_axis or scatter by computed indices, a cumsum, a
slice, a concat of pieces, a call of another kernel, ... Each `Expr` carries its adc text,
the NumPy text of the same value (run by tests/support/twin.py) and a bound on |value| over
the arguments the tests draw. Bounds keep exp below overflow and sin within the range where
adc's vector math is accurate, and scale the tolerances.

    Expressions(draw, options, dtypes, params, callables, externs).draw(Type("f64", ("N",)), 2)
    -> Expr(adc="(sin(x) * sum(w, axis=1))", py="(np.sin(x) * _sum(w, (1,), False))",
            type=Type("f64", ("N",)), bound=6.0)

`Options.smooth` keeps to what finite differences can check a gradient of: ops with
continuous derivatives on guarded domains, and no float value reaching a bool or an int
(so a `where` never switches branches under a small perturbation).
"""
from __future__ import annotations

import math
import re
from typing import Callable

from hypothesis import strategies as st

from tests.support.vocabulary import (BOOL_BINARY, BOOL_UNARY, COMPARISONS, EXTERNS, FLOAT_BINARY, FLOAT_UNARY,
                                      FLOATS, INPUT_BOUND, INT_BINARY, INT_UNARY, INTS, LITERALS, MAX_RANK, MAX_SIZE, NUMPY, REDUCTIONS, Expr, Options,
                                      Signature, Type, adc_dims, broadcasts, extent, magnitude, product, py_dims)


class Expressions:
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

    def unpack(self, depth: int) -> bool:
        """`tA, tB = h(...)` for a kernel returning a tuple; False when there is none."""
        tuples = [s for s in self.callables if len(s.results) > 1]
        if not tuples:
            return False
        sig = self.pick(tuples)
        call, env = self.call_text(sig, {}, depth)
        names = [f"t{self._names + i}" for i in range(len(sig.results))]
        self._names += len(names)
        self.statements.append((f"{', '.join(names)} = {call.adc}", f"{', '.join(names)} = {call.py}"))
        for name, t, bound in zip(names, sig.results, sig.bounds):
            self.scope.append(Expr(name, name, t.of(env.get(d, d) for d in t.shape), bound, atom=True))
        return True

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

    def augmented(self, t: Type, depth: int) -> Expr:
        """`tK = a` then `tK += b` (or -=, *=): b broadcasts to tK's type, which does not change."""
        a = self.assign(self.draw(t, depth))
        op = self.pick(["+", "-", "*"])
        b = self.draw(t.of(self.broadcast_pair(t.shape)[self.integer(0, 1)]) if t.rank else t, depth)
        self.statements.append((f"{a.adc} {op}= {b.adc}", f"{a.py} = {a.py} {op} {b.py}"))
        bound = product(a.bound, b.bound) if op == "*" else a.bound + b.bound
        self.scope[self.scope.index(a)] = updated = Expr(a.adc, a.py, t, bound, atom=True)
        return updated

    def loop(self, t: Type, depth: int) -> Expr:
        """`tK = a`, then `for _ in range(c): tK = tanh(b)` (b may read tK; c in 0..3): a carried value,
        bounded by tanh however many times the body runs."""
        a = self.assign(self.draw(t, depth))
        count = self.integer(0, 3)
        b = self.draw(t, depth)
        self.statements.append((f"for _ in range({count}):\n        {a.adc} = tanh({b.adc})",
                                f"for _ in range({count}):\n        {a.py} = np.tanh({b.py})"))
        self.scope[self.scope.index(a)] = updated = Expr(a.adc, a.py, t, max(a.bound, 1.0) if count else a.bound,
                                                         atom=True)
        return updated

    def branch(self, t: Type, depth: int) -> Expr:
        """`if c: tK = a else: tK = b` on a scalar comparison c of two drawn scalars. The twin marks
        the decision (`_taken`), which finite differences then keep: a gradient is the taken
        branch's, and two sides drawn equal (a mean of copies of x[-1] against x[-1]) tie within
        a difference step."""
        scalar = Type(self.dtypes[0], ())
        left, right = self.draw(scalar, depth), self.draw(scalar, depth)
        a, b = self.draw(t, depth), self.draw(t, depth)
        name = f"t{self._names}"
        self._names += 1
        op = self.pick(["<", ">="])
        self.statements.append((f"if {left.adc} {op} {right.adc}:\n        {name} = {a.adc}\n    else:\n"
                                f"        {name} = {b.adc}",
                                f"if _taken({left.py} {op} {right.py}):\n        {name} = {a.py}\n    else:\n"
                                f"        {name} = {b.py}"))
        v = Expr(name, name, t, max(a.bound, b.bound), atom=True)
        self.scope.append(v)
        return v

    def cast(self, t: Type, depth: int) -> Expr | None:
        sources = [d for d in self.dtypes if d != t.dtype and self.convertible(d, t.dtype)]
        if not sources:
            return None
        return self.convert(self.draw(Type(self.pick(sources), t.shape), depth), t.dtype)

    def index(self, t: Type, depth: int) -> Expr:
        """a[:, ..., i] with i a static integer, or an integer scalar the kernel computes (then under
        the index rule, and sometimes after a static integer on a leading axis: a[j, :, ..., i])."""
        p, d = self.integer(0, t.rank), self.token()
        if any(x in INTS for x in self.dtypes) and self.data(st.booleans()):
            return self.scalar_index(t, p, d, depth)
        i = self.static_position(d)
        a = self.draw(t.of(t.shape[:p] + (d,) + t.shape[p:]), depth)
        subscript = ", ".join([":"] * p + [str(i)])
        if p == t.rank and self.data(st.booleans()):       # the last axis: `...` stands for the others
            subscript = f"..., {i}"
        adc, py = a.postfix()
        return Expr(f"{adc}[{subscript}]", f"{py}[{subscript}]", t, a.bound)

    def static_position(self, d) -> int:
        return self.integer(-d, d - 1) if isinstance(d, int) else self.pick([0, -1])

    def scalar_index(self, t: Type, p: int, d, depth: int) -> Expr:
        lead = self.token() if t.rank + 2 <= MAX_RANK and self.data(st.booleans()) else None
        a = self.draw(t.of(((lead,) if lead is not None else ()) + t.shape[:p] + (d,) + t.shape[p:]), depth)
        i = self.indices((), depth)
        adc, py = a.postfix()
        items = [":"] * p + [i.adc]
        if lead is not None:
            j = self.static_position(lead)
            items, py = [str(j)] + items, f"{py}[{j}]"
        return Expr(f"{adc}[{', '.join(items)}]", f"_take({py}, {i.py}, {p})", t, a.bound)

    def indices(self, shape, depth: int) -> Expr:
        """Integer indices of `shape`, computed (`% 11 - 5`: in [-5, 5]) so that the kernel clamps them by the
        index rule, counting negative ones from the end once; a parameter taken unchanged would be
        checked at the call instead."""
        i = self.draw(Type(self.pick([x for x in self.dtypes if x in INTS]), tuple(shape)), depth)
        return Expr(f"({i.adc} % 11 - 5)", f"({i.py} % 11 - 5)", i.type, 5.0)

    def take(self, t: Type, depth: int) -> Expr:
        """take(a, indices, axis): a gather along one axis of a, zeros where that axis is empty."""
        p, d = self.integer(0, t.rank - 1), self.token()
        a = self.draw(t.of(t.shape[:p] + (d,) + t.shape[p + 1:]), depth)
        i = self.indices(t.shape[p:p + 1], depth)
        return Expr(f"take({a.adc}, {i.adc}, axis={self.pick([p, p - t.rank])})", f"_take({a.py}, {i.py}, {p})",
                    t, a.bound)

    def take_along_axis(self, t: Type, depth: int) -> Expr:
        """take_along_axis(a, indices, axis): indices of t's shape pick along one axis of a."""
        p, d = self.integer(0, t.rank - 1), self.token()
        a = self.draw(t.of(t.shape[:p] + (d,) + t.shape[p + 1:]), depth)
        i = self.indices(t.shape, depth)
        return Expr(f"take_along_axis({a.adc}, {i.adc}, {self.pick([p, p - t.rank])})",
                    f"_take_along_axis({a.py}, {i.py}, {p})", t, a.bound)

    def scan(self, t: Type, depth: int) -> Expr:
        """cumsum(a, axis) along one axis, inclusive or exclusive, from either end."""
        p = self.integer(0, t.rank - 1)
        a = self.draw(t, depth)
        exclusive, reverse = self.data(st.booleans()), self.data(st.booleans())
        return Expr(f"cumsum({a.adc}, axis={self.pick([p, p - t.rank])}, exclusive={exclusive}, reverse={reverse})",
                    f"_cumsum({a.py}, {p}, {exclusive}, {reverse})", t, a.bound * extent(t.shape[p]))

    def scatter(self, t: Type, depth: int) -> Expr:
        """scatter_add(base, indices, updates, axis) (duplicates accumulate) or scatter (the last one
        stays) along one axis of base; nothing lands where that axis is empty."""
        p, k = self.integer(0, t.rank - 1), self.token()
        name = self.pick(["scatter"] + ["scatter_add"] * (t.dtype != "bool"))
        base = self.draw(t, depth)
        i = self.indices((k,), depth)
        u = self.draw(t.of(t.shape[:p] + (k,) + t.shape[p + 1:]), depth)
        bound = base.bound + extent(k) * u.bound if name == "scatter_add" else max(base.bound, u.bound)
        return Expr(f"{name}({base.adc}, {i.adc}, {u.adc}, axis={self.pick([p, p - t.rank])})",
                    f"_{name}({base.py}, {i.py}, {u.py}, {p})", t, bound)

    def slice(self, t: Type, depth: int) -> Expr:
        p = self.pick([i for i, d in enumerate(t.shape) if isinstance(d, int)])
        s, step = t.shape[p], self.pick([1, 2])
        span = step * (s - 1) + 1
        size = self.integer(span, span + 3)
        start = self.integer(0, size - span)
        stop = self.integer(start + span, min(size, start + step * s))
        lo = self.pick(["" if start == 0 else str(start), str(start - size) if start else "0"])
        hi = self.pick(["" if stop == size else str(stop), str(stop - size) if stop < size else str(stop)])
        text = f"{lo}:{hi}" + self.pick(["" if step == 1 else f":{step}", f":{step}"])
        a = self.draw(t.of(t.shape[:p] + (size,) + t.shape[p + 1:]), depth)
        subscript = ", ".join([":"] * p + [text])
        adc, py = a.postfix()
        return Expr(f"{adc}[{subscript}]", f"{py}[{subscript}]", t, a.bound)

    def transpose(self, t: Type, depth: int) -> Expr:
        perm = self.data(st.permutations(range(t.rank)))
        shape = [None] * t.rank
        for i, p in enumerate(perm):
            shape[p] = t.shape[i]
        a = self.draw(t.of(shape), depth)
        reverse = list(perm) == list(reversed(range(t.rank)))
        spelled = "" if reverse and self.data(st.booleans()) else f", perm={list(perm)}"
        adc = f"{a.postfix()[0]}.T" if reverse and self.data(st.booleans()) else f"transpose({a.adc}{spelled})"
        return Expr(adc, f"np.transpose({a.py}, {tuple(perm)})", t, a.bound)

    def reshape(self, t: Type, depth: int) -> Expr:
        ones = [i for i, d in enumerate(t.shape) if d == 1]
        if ones and (t.rank == MAX_RANK or self.data(st.booleans())):
            p = self.pick(ones)
            shape = t.shape[:p] + t.shape[p + 1:]
        else:
            p = self.integer(0, t.rank)
            shape = t.shape[:p] + (1,) + t.shape[p:]
        a = self.draw(t.of(shape), depth)
        if len(shape) < t.rank and self.data(st.booleans()):     # a new axis of size 1: `a[:, None]`
            subscript = ", ".join([":"] * p + ["None"])
            adc, py = a.postfix()
            return Expr(f"{adc}[{subscript}]", f"{py}[{subscript}]", t, a.bound)
        dims = list(t.shape)
        if dims and self.data(st.booleans()):
            dims[self.integer(0, len(dims) - 1)] = -1
        return Expr(f"reshape({a.adc}, {adc_dims(dims)})", f"np.reshape({a.py}, {py_dims(t.shape)})", t, a.bound)

    def concat(self, t: Type, depth: int) -> Expr:
        p = self.pick([i for i, d in enumerate(t.shape) if isinstance(d, int) and d >= 2])
        first = self.integer(1, t.shape[p] - 1)
        parts = [self.draw(t.of(t.shape[:p] + (n,) + t.shape[p + 1:]), depth) for n in (first, t.shape[p] - first)]
        axis = self.pick([p, p - t.rank])
        return Expr(f"concat([{', '.join(e.adc for e in parts)}], axis={axis})",
                    f"np.concatenate([{', '.join(e.py for e in parts)}], axis={p})", t, max(e.bound for e in parts))

    def stack(self, t: Type, depth: int) -> Expr:
        p = self.pick([i for i, d in enumerate(t.shape) if d in (1, 2, 3)])
        parts = [self.draw(t.of(t.shape[:p] + t.shape[p + 1:]), depth) for _ in range(t.shape[p])]
        axis = self.pick([p, p - t.rank])
        return Expr(f"stack([{', '.join(e.adc for e in parts)}], axis={axis})",
                    f"np.stack([{', '.join(e.py for e in parts)}], axis={p})", t, max(e.bound for e in parts))

    def pad(self, t: Type, depth: int) -> Expr:
        p = self.pick([i for i, d in enumerate(t.shape) if isinstance(d, int) and d >= 2])
        low = self.integer(0, t.shape[p] - 1)
        high = self.integer(0 if low else 1, t.shape[p] - 1 - low)
        a = self.draw(t.of(t.shape[:p] + (t.shape[p] - low - high,) + t.shape[p + 1:]), depth)
        widths = [[low, high] if i == p else [0, 0] for i in range(t.rank)]
        value = self.literal(t) if self.data(st.booleans()) else None
        spelled = widths[0] if t.rank == 1 and self.data(st.booleans()) else widths
        adc = f"pad({a.adc}, {spelled}" + (f", value={value.adc})" if value else ")")
        py = f"np.pad({a.py}, {widths}, constant_values={value.py if value else 0})"
        return Expr(adc, py, t, max(a.bound, value.bound if value else 0.0))

    def broadcast(self, t: Type, depth: int) -> Expr:
        a = self.draw(t.of(self.broadcast_pair(t.shape)[0]), depth)
        return Expr(f"broadcast_to({a.adc}, {adc_dims(t.shape)})", f"np.broadcast_to({a.py}, {py_dims(t.shape)})",
                    t, a.bound)

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

    def call(self, t: Type, depth: int) -> Expr | None:
        found = [(s, env) for s in self.callables if len(s.results) == 1 and s.results[0].dtype == t.dtype
                 for env in [unify(s.results[0].shape, t.shape)] if env is not None]
        if not found:
            return None
        sig, env = self.pick(found)
        return self.call_text(sig, env, depth)[0]

    def call_text(self, sig: Signature, env: dict, depth: int) -> tuple[Expr, dict]:
        """A call of `sig` with its symbols bound by `env` (the rest drawn here), arguments squashed
        into the bounds its body was drawn for."""
        env = dict(env)
        args = []
        for name, p in sig.params:
            for d in p.shape:
                if isinstance(d, str) and d not in env:
                    env[d] = self.token()
            args.append((name, self.squash(self.draw(p.of(env.get(d, d) for d in p.shape), depth))))
        if self.data(st.booleans()):
            adc, py = ", ".join(a.adc for _, a in args), ", ".join(a.py for _, a in args)
        else:
            adc, py = (", ".join(f"{n}={getattr(a, attr)}" for n, a in args) for attr in ("adc", "py"))
        t = sig.results[0]
        return Expr(f"{sig.name}({adc})", f"{sig.name}({py})", t.of(env.get(d, d) for d in t.shape), sig.bounds[0]), env

    def squash(self, e: Expr) -> Expr:
        """`e`, or `e` pressed into the bound of a drawn argument of its dtype."""
        if e.bound <= INPUT_BOUND[e.type.dtype]:
            return e
        if e.type.is_float:
            return Expr(f"(2.0 * tanh({e.adc}))", f"(2.0 * np.tanh({e.py}))", e.type, 2.0)
        return Expr(f"clip({e.adc}, -3, 3)", f"np.clip({e.py}, -3, 3)", e.type, 3.0)

    def extern(self, t: Type, depth: int) -> Expr | None:
        usable = [e for e in EXTERNS.values() if e.dtype == t.dtype and (e.smooth or not self.options.smooth)
                  and not any(f"builtin {name}" in self.externs for name in (e.name, *e.calls))]
        if not usable:
            return None
        ext = self.pick(usable)
        shapes = [t.shape] if len(ext.params) == 1 else self.broadcast_pair(t.shape)
        args = [self.draw(t.of(s), depth) for s in shapes]
        args = [self.squash(a) if a.bound > ext.limit else a for a in args]
        self.externs.update((ext.name, *ext.calls))     # its gradient's callees are declared too
        return Expr(f"{ext.name}({', '.join(a.adc for a in args)})", ext.py.format(*(a.py for a in args)), t,
                    ext.bound(*(a.bound for a in args)))


def _called(template: str) -> list[str]:
    return re.findall(r"([A-Za-z_][A-Za-z_0-9]*)\(", template)


def unify(pattern, shape) -> dict | None:
    """The binding of `pattern`'s symbols that makes it `shape`, or None."""
    if len(pattern) != len(shape):
        return None
    env: dict = {}
    for p, d in zip(pattern, shape):
        if isinstance(p, int) and p != d or isinstance(p, str) and env.setdefault(p, d) != d:
            return None
    return env


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
}
