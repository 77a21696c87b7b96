"""Expression forms that call: another kernel of the program (one result, or a tuple unpacked into
names) and extern functions of libm, arguments squashed into the bounds their bodies assume.

Mixed into `Expressions` (tests/support/expressions.py):

    g.call(Type("f64", ("N",)), 1)  ->  Expr("h0(x, (2.0 * tanh(y)))", "h0(x, (2.0 * np.tanh(y)))", ...)
"""
from __future__ import annotations

from hypothesis import strategies as st

from tests.support.vocabulary import EXTERNS, INPUT_BOUND, Expr, Signature, Type


class CallForms:
    """The forms that call kernels and extern functions the program declares."""

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


def unify(pattern, shape) -> dict | None:
    """The binding of `pattern`'s symbols that makes it `shape`, or None."""
    if len(pattern) != len(shape):
        return None
    env: dict = {}
    for p, d in zip(pattern, shape):
        if isinstance(p, int) and p != d or isinstance(p, str) and env.setdefault(p, d) != d:
            return None
    return env
