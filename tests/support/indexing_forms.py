"""Expression forms that index: a static or computed integer index, take, take_along_axis, scatter and
scatter_add by computed indices (kept in [-5, 5] so the index rule clamps them), slices.

Mixed into `Expressions` (tests/support/expressions.py):

    g.take(Type("f64", (3,)), 1)  ->  Expr("take(x, (i % 11 - 5), axis=0)", "_take(x, (i % 11 - 5), 0)", ...)
"""
from __future__ import annotations

from hypothesis import strategies as st

from tests.support.vocabulary import INTS, MAX_RANK, Expr, Type, extent


class IndexingForms:
    """The forms that read or write elements at positions."""

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
