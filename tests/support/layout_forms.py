"""Expression forms that move elements without computing: transpose, reshape, concat, stack, pad and
broadcast_to.

Mixed into `Expressions` (tests/support/expressions.py):

    g.transpose(Type("f64", (2, "N")), 1)  ->  Expr("w.T", "np.transpose(w, (1, 0))", ...)
"""
from __future__ import annotations

from hypothesis import strategies as st

from tests.support.vocabulary import MAX_RANK, Expr, Type, adc_dims, py_dims


class LayoutForms:
    """The forms that rearrange a drawn value into the shape asked for."""

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
