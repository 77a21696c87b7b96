"""Expression forms that write statements around a value: augmented assignment, a loop carrying it,
a branch choosing it.

Mixed into `Expressions` (tests/support/expressions.py); each returns the name the statements
bind, in scope afterwards:

    t2 = x                           # the twin: the same loop, np.tanh
    for _ in range(2):
        t2 = tanh((t2 * y))
"""
from __future__ import annotations

from tests.support.vocabulary import Expr, Type, product


class ControlForms:
    """The forms that are statements: `+=`, `for`, `if`."""

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
