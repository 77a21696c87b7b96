"""Expression forms of linear algebra: cholesky, solve_triangular, cho_solve, lu_factor, lu_solve, solve,
inv, det, slogdet, qr, lstsq, eigh, eigvalsh, svd and svdvals, on matrices the program builds well
conditioned from drawn ones.

A drawn matrix is pressed into `c = tanh(a) / (m + 1)` (‖c‖₂ ≤ ‖c‖_F < 1, m ≥ n its
sizes; NaN made 0 outside smooth programs, as NumPy would refuse it) and built into:

    spd        c @ cᵀ + I                    eigenvalues in [1, 2]
    square     c + 2·I                       singular values in [1, 3]
    pivoted    square, rows reversed         partial pivoting swaps them back
    separated  (c + cᵀ)/2 + diag(3·k)        eigenvalues within 1 of 3k: 1 or more apart
    spread     c + I·3(k + 1)                singular values within 1 of 3(k + 1): 1 or more apart

so that every result is well conditioned and every derivative finite (distinct eigen- and
singular values, r invertible). Only what does not depend on the signs the algorithms pick
is used: l, x, w, s, q², r², q @ r, q @ qᵀ, (v·w) @ vᵀ, u @ (s·vh); v², u² and vh² only in
f64, as an eigenvector moves by about n·eps·‖a‖/gap, too much for f32's tolerance. Sizes are
the type's tokens, so any of them may be 0 at run time.

    t2 = (tanh(x) / (N + 1))               # the twin: (np.tanh(x) / (N + 1))
    t3 = ((t2 @ transpose(t2)) + t1)       # t1: the identity
    t4 = cholesky(t3)                      # np.linalg.cholesky(t3)
    return cho_solve(t4, y)                # _cho_solve(t4, y)
"""
from __future__ import annotations

import math

from hypothesis import strategies as st

from tests.support.vocabulary import NUMPY, Expr, Type, extent


class LinalgForms:
    """The forms that factor, solve and take spectra of built matrices (mixed into Expressions)."""

    # ------------------------------------------------------------ built matrices

    def arange(self, n) -> Expr:
        return self.assign(Expr(f"cumsum(ones([{n}], dtype=i64), exclusive=True)", f"np.arange({n}, dtype=np.int64)",
                                Type("i64", (n,)), extent(n)))

    def eye(self, dtype: str, m, n, k: Expr) -> Expr:
        """The [m, n] identity (m ≥ n): one_hot rows of k = 0..n-1, transposed when tall."""
        adc = f"one_hot({k.adc}, {m}, dtype={dtype})"
        return self.assign(Expr(adc if m == n else f"transpose({adc})", f"np.eye({m}, {n}, dtype={NUMPY[dtype]})",
                                Type(dtype, (m, n)), 1.0))

    def small(self, dtype: str, lead: tuple, m, n, depth: int) -> Expr:
        """A drawn [..., m, n] (m ≥ n) pressed to entries below 1/(m + 1): norm below 1."""
        a = self.finite(self.draw(Type(dtype, lead + (m, n)), depth))
        return self.assign(Expr(f"(tanh({a.adc}) / ({m} + 1))", f"(np.tanh({a.py}) / ({m} + 1))", a.type, 1.0))

    def spd(self, dtype: str, lead: tuple, n, depth: int) -> Expr:
        c = self.small(dtype, lead, n, n, depth)
        e = self.eye(dtype, n, n, self.arange(n))
        return self.assign(Expr(f"(({c.adc} @ {transposed(c.adc, lead)}) + {e.adc})",
                                f"(({c.py} @ np.swapaxes({c.py}, -1, -2)) + {e.py})", c.type, 2.0))

    def cholesky(self, dtype: str, lead: tuple, n, depth: int) -> Expr:
        a = self.spd(dtype, lead, n, depth)
        return self.assign(Expr(f"cholesky({a.adc})", f"np.linalg.cholesky({a.py})", a.type, 1.5))

    def square(self, dtype: str, lead: tuple, m, n, depth: int) -> Expr:
        c = self.small(dtype, lead, m, n, depth)
        e = self.eye(dtype, m, n, self.arange(n))
        return self.assign(Expr(f"({c.adc} + 2.0 * {e.adc})", f"({c.py} + 2.0 * {e.py})", c.type, 3.0))

    def pivoted(self, dtype: str, lead: tuple, n, depth: int) -> Expr:
        """`square` with its rows reversed: partial pivoting swaps them back, its pivots (column
        diagonally dominant: growth at most 2, |lu| ≤ 6) apart from the rest by more than 1."""
        a = self.square(dtype, lead, n, n, depth)
        k = self.arange(n)
        return self.assign(Expr(f"take({a.adc}, {n} - 1 - {k.adc}, axis=-2)", f"np.take({a.py}, {n} - 1 - {k.py}, axis=-2)",
                                a.type, a.bound))

    def separated(self, dtype: str, lead: tuple, n, depth: int) -> Expr:
        c = self.small(dtype, lead, n, n, depth)
        k = self.arange(n)
        e = self.eye(dtype, n, n, k)
        return self.assign(Expr(f"(({c.adc} + {transposed(c.adc, lead)}) * 0.5 + {e.adc} * (3.0 * {dtype}({k.adc})))",
                                f"(({c.py} + np.swapaxes({c.py}, -1, -2)) * 0.5 + {e.py} * (3.0 * "
                                f"_cast({k.py}, {NUMPY[dtype]})))", c.type, 3.0 * extent(n)))

    def spread(self, dtype: str, lead: tuple, m, n, depth: int) -> Expr:
        c = self.small(dtype, lead, m, n, depth)
        k = self.arange(n)
        e = self.eye(dtype, m, n, k)
        return self.assign(Expr(f"({c.adc} + {e.adc} * (3.0 * ({dtype}({k.adc}) + 1.0)))",
                                f"({c.py} + {e.py} * (3.0 * (_cast({k.py}, {NUMPY[dtype]}) + 1.0)))",
                                c.type, 3.0 * extent(n) + 1.0))

    def unpacked(self, adc: str, py: str, count: int) -> list[str]:
        """`tA, tB = call`: names of results whose signs are arbitrary, so kept out of the scope."""
        names = [f"t{self._names + i}" for i in range(count)]
        self._names += count
        self.statements.append((f"{', '.join(names)} = {adc}", f"{', '.join(names)} = {py}"))
        return names

    def finite(self, e: Expr) -> Expr:
        """`e` with NaN made 0 outside smooth programs (where none arises): NumPy refuses NaN matrices."""
        if self.options.smooth:
            return e
        e = self.hoist(e)
        return Expr(f"where(isnan({e.adc}), 0.0, {e.adc})", f"np.where(np.isnan({e.py}), 0.0, {e.py})", e.type, e.bound)

    # ------------------------------------------------------------ forms

    def factor(self, t: Type, depth: int) -> Expr | None:
        """A sign-free matrix from a factorization of a [..., p, q] matrix: l, q², r², q @ r, q @ qᵀ,
        (v·w) @ vᵀ, u @ (s·vh), and in f64 v², u², vh²."""
        lead, (p, q) = t.shape[:-2], t.shape[-2:]
        tall = p == q or isinstance(p, int) and isinstance(q, int) and p > q
        f64 = t.dtype == "f64"
        ways = ["cholesky", "eigh", "qr_r", "qr_projector", "inv", "lu"] * (p == q) + ["qr_q", "qr_product", "svd"] * tall
        ways += ["eigh_v"] * (p == q and f64) + ["svd_u"] * (tall and f64) + ["svd_vh"] * (p == q and f64)
        if not ways:
            return None
        way, d = self.pick(ways), t.dtype
        if way == "cholesky":
            return self.cholesky(d, lead, p, depth)
        if way == "inv":        # ‖a⁻¹‖₂ ≤ 1
            a = self.pivoted(d, lead, p, depth)
            return Expr(f"inv({a.adc})", f"np.linalg.inv({a.py})", t, 1.0)
        if way == "lu":
            a = self.pivoted(d, lead, p, depth)
            lu = self.unpacked(f"lu_factor({a.adc})", f"_lu_factor({a.py})", 2)[0]
            return Expr(lu, lu, t, 6.0, atom=True)
        if way.startswith("eigh"):
            a = self.separated(d, lead, p, depth)
            w, v = self.unpacked(f"eigh({a.adc})", f"np.linalg.eigh({a.py})", 2)
            if way == "eigh_v":
                return Expr(f"({v} * {v})", f"({v} * {v})", t, 1.0)
            return Expr(f"(({v} * {expanded(w, lead, -2)}) @ {transposed(v, lead)})",
                        f"(({v} * {expanded(w, lead, -2)}) @ np.swapaxes({v}, -1, -2))", t, a.bound)
        if way.startswith("qr"):
            a = self.square(d, lead, p, p if way in ("qr_r", "qr_projector") else q, depth)
            f, r = self.unpacked(f"qr({a.adc})", f"np.linalg.qr({a.py})", 2)
            if way == "qr_projector":
                return Expr(f"({f} @ {transposed(f, lead)})", f"({f} @ np.swapaxes({f}, -1, -2))", t, 1.0)
            text, bound = {"qr_q": (f"({f} * {f})", 1.0), "qr_r": (f"({r} * {r})", 9.0), "qr_product": (f"({f} @ {r})", 3.0)}[way]
            return Expr(text, text, t, bound)
        # close singular values would make u and vh, and the reconstruction's derivative, ill conditioned
        close = way == "svd" and not self.options.smooth and self.data(st.booleans())
        a = (self.square if close else self.spread)(d, lead, p, q, depth)
        u, s, vh = self.unpacked(f"svd({a.adc})", f"np.linalg.svd({a.py}, full_matrices=False)", 3)
        if way == "svd":
            return Expr(f"({u} @ ({expanded(s, lead, -1)} * {vh}))", f"({u} @ ({expanded(s, lead, -1)} * {vh}))", t,
                        a.bound)
        x = u if way == "svd_u" else vh
        return Expr(f"({x} * {x})", f"({x} * {x})", t, 1.0)

    def solve(self, t: Type, depth: int) -> Expr:
        """x of a x = b: a triangular (a Cholesky factor, or unit-diagonal and small off it), an spd
        one by cho_solve, or a tall one by lstsq; b a stack of vectors or of matrices."""
        vector = t.rank == 1 or t.rank == 2 and self.data(st.booleans())
        lead, n = (t.shape[:-1], t.shape[-1]) if vector else (t.shape[:-2], t.shape[-2])
        way, d = self.pick(["triangular", "unit", "cho_solve", "lstsq", "lu_solve", "solve"]), t.dtype
        # a stack of right-hand matrices may share one matrix: their stacking axes broadcast (vectors
        # need a's rank one more than theirs)
        alead = () if way not in ("lstsq", "lu_solve") and lead and not vector and self.data(st.booleans()) else lead
        if way in ("lu_solve", "solve") and (way == "lu_solve" or not vector or t.rank == 1):
            # NumPy 2's solve takes b as vectors only when it is 1-D
            a = self.pivoted(d, lead if way == "lu_solve" else alead, n, depth)
            b = self.finite(self.squash(self.draw(t, depth)))
            bound = b.bound * math.sqrt(extent(n))      # ‖x‖ ≤ ‖b‖: σ_min(a) ≥ 1
            if way == "solve":
                return Expr(f"solve({a.adc}, {b.adc})", f"np.linalg.solve({a.py}, {b.py})", t, bound)
            lu, piv = self.unpacked(f"lu_factor({a.adc})", f"_lu_factor({a.py})", 2)
            return Expr(f"lu_solve({lu}, {piv}, {b.adc})", f"_lu_solve({lu}, {piv}, {b.py})", t, bound)
        way = "cho_solve" if way in ("lu_solve", "solve") else way
        if way == "lstsq":
            m = self.pick([n] + [s for s in self.options.static if isinstance(n, int) and s > n])
            a = self.square(d, alead, m, n, depth)
            b = self.finite(self.squash(self.draw(t.of(lead + ((m,) if vector else (m, t.shape[-1]))), depth)))
            # ‖x‖ ≤ ‖b‖ / σ_min(a), σ_min ≥ 1
            return Expr(f"lstsq({a.adc}, {b.adc})", f"_lstsq({a.py}, {b.py})", t, b.bound * math.sqrt(extent(m)))
        lower, trans = self.data(st.booleans()), self.integer(0, 2)
        if way == "unit":
            a = self.small(d, alead, n, n, depth)
            b = self.finite(self.squash(self.draw(t, depth)))
            # ‖(I + E)⁻¹‖_∞ ≤ 1 / (1 - ‖E‖_∞) ≤ (n + 1) / 2
            return Expr(f"solve_triangular({a.adc}, {b.adc}, trans={trans}, lower={lower}, unit_diagonal=True)",
                        f"_solve_triangular({a.py}, {b.py}, {trans}, {lower}, True)", t, b.bound * (extent(n) + 1) / 2)
        l = self.cholesky(d, alead, n, depth)
        b = self.finite(self.squash(self.draw(t, depth)))
        bound = b.bound * math.sqrt(extent(n))        # ‖x‖ ≤ ‖b‖: the eigenvalues of l lᵀ are at least 1
        if way == "cho_solve":
            return Expr(f"cho_solve({l.adc}, {b.adc})", f"_cho_solve({l.py}, {b.py})", t, bound)
        a, py = (l.adc, l.py) if lower else (transposed(l.adc, alead), f"np.swapaxes({l.py}, -1, -2)")
        args = self.pick([f"{trans}, {lower}", f"trans={trans}, lower={lower}", f"lower={lower}, trans={trans}"])
        return Expr(f"solve_triangular({a}, {b.adc}, {args})", f"_solve_triangular({py}, {b.py}, {trans}, {lower}, False)",
                    t, bound)

    def spectrum(self, t: Type, depth: int) -> Expr:
        """Eigenvalues or singular values of a [..., n, n] (or tall [..., m, n]) matrix, or for a
        scalar (or a stack of them) a determinant: det, slogdet's sign or log|det|, or the
        log-determinant of an spd matrix from its Cholesky factor."""
        d = t.dtype
        if t.rank == 0 or t.rank == 1 and self.data(st.booleans()):
            n, way = self.token(), self.pick(["cholesky", "det", "slogdet", "sign"])
            if way == "det":        # of a / 2, singular values in [1/2, 3/2]
                a = self.pivoted(d, t.shape, n, depth)
                return Expr(f"det({a.adc} * 0.5)", f"np.linalg.det({a.py} * 0.5)", t, 1.5 ** extent(n))
            if way != "cholesky":
                a = self.pivoted(d, t.shape, n, depth)
                sign, logdet = self.unpacked(f"slogdet({a.adc})", f"np.linalg.slogdet({a.py})", 2)
                if way == "sign":
                    return Expr(sign, sign, t, 1.0, atom=True)
                return Expr(logdet, logdet, t, math.log(3.0) * extent(n), atom=True)      # σ in [1, 3]
            l = self.cholesky(d, t.shape, n, depth)
            # l * lᵀ is diag(l)² on the diagonal, 0 off it; the eigenvalues in [1, 2] bound log|a|
            return Expr(f"sum(log(sum({l.adc} * {transposed(l.adc, t.shape)}, axis=-1)), axis=-1)",
                        f"_sum(np.log(_sum({l.py} * np.swapaxes({l.py}, -1, -2), (-1,), False)), (-1,), False)",
                        t, math.log(2.0) * extent(n))
        lead, n = t.shape[:-1], t.shape[-1]
        way = self.pick(["eigvalsh", "eigh", "svdvals", "svd"])
        # values close together are not differentiable where they cross
        close = not self.options.smooth and self.data(st.booleans())
        if way.startswith("eig"):
            a = self.spd(d, lead, n, depth) if close else self.separated(d, lead, n, depth)
            if way == "eigvalsh":
                return Expr(f"eigvalsh({a.adc})", f"np.linalg.eigvalsh({a.py})", t, a.bound)
            w = self.unpacked(f"eigh({a.adc})", f"np.linalg.eigh({a.py})", 2)[0]
            return Expr(w, w, t, a.bound, atom=True)
        m = self.pick([n] + [s for s in self.options.static if isinstance(n, int) and s > n])
        a = (self.square if close else self.spread)(d, lead, m, n, depth)
        if way == "svdvals":
            return Expr(f"svdvals({a.adc})", f"np.linalg.svd({a.py}, compute_uv=False)", t, a.bound)
        s = self.unpacked(f"svd({a.adc})", f"np.linalg.svd({a.py}, full_matrices=False)", 3)[1]
        return Expr(s, s, t, a.bound, atom=True)

def transposed(x: str, lead: tuple) -> str:
    """adc's transpose of the matrices of a stack."""
    return f"transpose({x})" if not lead else f"transpose({x}, perm=[0, 2, 1])"


def expanded(x: str, lead: tuple, axis: int) -> str:
    """A stack of vectors x[..., k] as columns (axis -2: [..., 1, k]) or rows (-1: [..., k, 1])."""
    return f"{x}[{', '.join([':'] * len(lead) + (['None', ':'] if axis == -2 else [':', 'None']))}]"
