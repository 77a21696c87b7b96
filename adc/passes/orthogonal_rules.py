"""The derivative rules of the orthogonal factorizations qr, eigh and svd: a JVP rule each (the
tangent table, adc/passes/tangent_rules.py, takes them) and a VJP rule each, its transpose (the
adjoint table, adc/passes/adjoint_rules/__init__.py, takes them).

The JVPs are JAX's (jax/_src/lax/linalg.py: qr_jvp_rule, eigh_jvp_rule, svd_jvp_rule, for real
matrices); each VJP is the same linear map transposed, derived term by term in its comment.
Every rule is ordinary IR — matmuls, transposes of the last two axes, triangular solves, masks of
`iota` and `select` — so second order works unchanged. Where the derivative does not exist:
- `qr` needs r invertible (a of full column rank); it gives inf or NaN otherwise;
- `eigh`: F_ij = 1 / (w_j - w_i) is inf where two eigenvalues are equal, so the eigenvectors'
  derivative is inf or NaN there (JAX's convention), except that F_ij x_ij is taken as 0 where
  x_ij is exactly 0: a zero cotangent (or tangent) of the eigenvectors adds nothing, so the
  eigenvalues' derivative stays finite at repeated eigenvalues even when v is returned too;
- `svd`: F_ij = 1 / (s_j² - s_i²) is taken as 0 where two singular values are equal (JAX's
  convention: the derivative of u and vh is then that of one choice of basis), and 1 / s is inf
  for a zero singular value of a tall matrix.

    %w, %v = eigh %a        tangent %t  ==>   %s = Φ(t) + Φ(t)ᵀ ; %c = vᵀ s v
                                              dw = diag(c), dv = v (F ∘ c)
"""
from __future__ import annotations

from adc.ir.builder import Builder, full, sum_present as _sum
from adc.ir.core import Value
from adc.ir.types import I64
from adc.passes.adjoint_rules.linalg import phi, swap_last, triangle

adjoint_rules: dict = {}
tangent_rules: dict = {}


def _mm(b: Builder, *factors: Value) -> Value:
    product = factors[0]
    for f in factors[1:]:
        product = b.op("matmul", product, f)
    return product


def _identity_mask(b: Builder, like: Value) -> Value:
    rows, columns = (b.op("iota", axis=like.type.rank - k, dtype=I64, shape=like.type.shape) for k in (2, 1))
    return b.op("eq", rows, columns)


def _diagonal(b: Builder, x: Value) -> Value:
    """The diagonal [..., N] of each matrix of x."""
    masked = b.op("select", _identity_mask(b, x), x, full(b, 0.0, x.type))
    return b.op("reduce_sum", masked, axes=[x.type.rank - 1])


def _spread(b: Builder, v: Value, like: Value, axis: int) -> Value:
    """v [..., N] broadcast to like's [..., N, N]: along the columns (axis -1: element (i, j) is v_j)
    or the rows (axis -2: v_i)."""
    rank = like.type.rank
    return b.op("broadcast", v, dims=list(range(rank - 2)) + [rank + axis], shape=like.type.shape)


def _diagonal_matrix(b: Builder, v: Value, like: Value) -> Value:
    return b.op("select", _identity_mask(b, like), _spread(b, v, like, -1), full(b, 0.0, like.type))


def _sym(b: Builder, x: Value) -> Value:
    """The symmetric matrix the lower triangle of x stands for (what eigh reads): Φ(x) + Φ(x)ᵀ."""
    lower = phi(b, x)
    return b.op("add", lower, swap_last(b, lower))


def _right_solve_upper(b: Builder, x: Value, r: Value) -> Value:
    """x r⁻¹ for upper triangular r: (r⁻ᵀ xᵀ)ᵀ."""
    return swap_last(b, b.op("triangular_solve", r, swap_last(b, x), lower=False, trans=True, unit_diagonal=False))


# ---------------------------------------------------------------- qr

def qr_tangent(b, op, tangents):
    # X = da r⁻¹, C = qᵀ X, Ω = tril(C, -1) - tril(C, -1)ᵀ: dq = q (Ω - C) + X, dr = (C - Ω) r
    (t,), (q, r) = tangents, op.results
    x = _right_solve_upper(b, t, r)
    c = _mm(b, swap_last(b, q), x)
    below = triangle(b, c, True, 0.0)
    omega = b.op("sub", below, swap_last(b, below))
    dq = b.op("add", _mm(b, q, b.op("sub", omega, c)), x)
    return dq, _mm(b, b.op("sub", c, omega), r)


def qr_adjoint(b, op, cts):
    # ⟨q̄, dq⟩ + ⟨r̄, dr⟩ = ⟨G, Ω - C⟩ + ⟨q̄, X⟩ with G = qᵀq̄ - r̄rᵀ, and ⟨G, Ω⟩ = ⟨tril(G - Gᵀ, -1), C⟩:
    # ā = (q̄ + q (tril(G - Gᵀ, -1) - G)) r⁻ᵀ
    q, r = op.results
    q_ct = cts[0] or full(b, 0.0, q.type)
    g = b.op("neg", _mm(b, cts[1], swap_last(b, r))) if cts[1] is not None else None
    g = _sum(b, cts[0] and _mm(b, swap_last(b, q), cts[0]), g)
    inner = b.op("sub", triangle(b, b.op("sub", g, swap_last(b, g)), True, 0.0), g)
    h = b.op("add", q_ct, _mm(b, q, inner))
    return (swap_last(b, b.op("triangular_solve", r, swap_last(b, h), lower=False, trans=False, unit_diagonal=False)),)


tangent_rules["qr"] = qr_tangent
adjoint_rules["qr"] = qr_adjoint


# ---------------------------------------------------------------- eigh

def _over_gaps(b: Builder, w: Value, x: Value) -> Value:
    """F ∘ x, F_ij = 1 / (w_j - w_i): x_ij / (w_j - w_i) off the diagonal, 0 on it and where x_ij = 0
    (inf or NaN where eigenvalues repeat and x_ij is not 0). The gaps not divided by are replaced
    by 1 first, so no derivative of this division meets 0 * inf either."""
    skipped = b.op("bitwise_or", _identity_mask(b, x), b.op("eq", x, full(b, 0.0, x.type)))
    gaps = b.op("sub", _spread(b, w, x, -1), _spread(b, w, x, -2))
    quotient = b.op("div", x, b.op("select", skipped, full(b, 1.0, x.type), gaps))
    return b.op("select", skipped, full(b, 0.0, x.type), quotient)


def eigh_tangent(b, op, tangents):
    # C = vᵀ S v for S the symmetric matrix of da's lower triangle: dw = diag(C), dv = v (F ∘ C)
    (t,), (w, v) = tangents, op.results
    c = _mm(b, swap_last(b, v), _sym(b, t), v)
    return _diagonal(b, c), _mm(b, v, _over_gaps(b, w, c))


def eigh_adjoint(b, op, cts):
    # ⟨w̄, diag C⟩ + ⟨v̄, v (F ∘ C)⟩ = ⟨M, S⟩, M = v (diag(w̄) + F ∘ (vᵀv̄)) vᵀ; S = Φ(da) + Φ(da)ᵀ,
    # so ā = Φ(M + Mᵀ)
    w, v = op.results
    inner = _sum(b, cts[0] and _diagonal_matrix(b, cts[0], v),
                 cts[1] and _over_gaps(b, w, _mm(b, swap_last(b, v), cts[1])))
    m = _mm(b, v, inner, swap_last(b, v))
    return (phi(b, b.op("add", m, swap_last(b, m))),)


tangent_rules["eigh"] = eigh_tangent
adjoint_rules["eigh"] = eigh_adjoint


# ---------------------------------------------------------------- svd

def _svd_gaps(b: Builder, s: Value, like: Value) -> Value:
    """F_ij = 1 / (s_j² - s_i²), 0 where s_j² = s_i² (the diagonal, and repeated singular values)."""
    squares = b.op("mul", s, s)
    gaps = b.op("sub", _spread(b, squares, like, -1), _spread(b, squares, like, -2))
    zero = b.op("eq", gaps, full(b, 0.0, like.type))
    inverse = b.op("div", full(b, 1.0, like.type), b.op("select", zero, full(b, 1.0, like.type), gaps))
    return b.op("select", zero, full(b, 0.0, like.type), inverse)


def _columns_times(b: Builder, x: Value, s: Value) -> Value:
    """x diag(s): column j of x times s_j."""
    rank = x.type.rank
    return b.op("mul", x, b.op("broadcast", s, dims=list(range(rank - 2)) + [rank - 1], shape=x.type.shape))


def _rows_times(b: Builder, x: Value, s: Value) -> Value:
    """diag(s) x: row i of x times s_i."""
    rank = x.type.rank
    return b.op("mul", x, b.op("broadcast", s, dims=list(range(rank - 2)) + [rank - 2], shape=x.type.shape))


def _reciprocal(b: Builder, s: Value) -> Value:
    return b.op("div", full(b, 1.0, s.type), s)


def svd_tangent(b, op, tangents):
    # D = uᵀ da v: ds = diag(D), du = u (F ∘ (D S + S Dᵀ)) + (I - u uᵀ) da v S⁻¹,
    # dv = v (F ∘ (S D + Dᵀ S)), d(vh) = dvᵀ (S = diag(s), M >= N, real)
    (t,), (u, s, vh) = tangents, op.results
    v = swap_last(b, vh)
    f = _svd_gaps(b, s, vh)
    t_v = _mm(b, t, v)
    d = _mm(b, swap_last(b, u), t_v)
    ds_ = _columns_times(b, d, s)
    sd = _rows_times(b, d, s)
    outside = b.op("sub", t_v, _mm(b, u, swap_last(b, u), t_v))
    du = b.op("add", _mm(b, u, b.op("mul", f, b.op("add", ds_, swap_last(b, ds_)))),
              _columns_times(b, outside, _reciprocal(b, s)))
    dv = _mm(b, v, b.op("mul", f, b.op("add", sd, swap_last(b, sd))))
    return du, _diagonal(b, d), swap_last(b, dv)


def svd_adjoint(b, op, cts):
    # with J = F ∘ (uᵀū), K = F ∘ (vᵀv̄), v̄ = (vh̄)ᵀ: ⟨ū, du⟩ + ⟨s̄, ds⟩ + ⟨v̄, dv⟩ = ⟨X, D⟩ + ⟨(I - u uᵀ) ū S⁻¹ vᵀ, da⟩,
    # X = diag(s̄) + (J + Jᵀ) S + S (K + Kᵀ); ⟨X, uᵀ da v⟩ = ⟨u X vᵀ, da⟩
    (u, s, vh), (u_ct, s_ct, vh_ct) = op.results, cts
    f = _svd_gaps(b, s, vh)
    j = u_ct and b.op("mul", f, _mm(b, swap_last(b, u), u_ct))
    k = vh_ct and b.op("mul", f, _mm(b, vh, swap_last(b, vh_ct)))
    x = _sum(b, s_ct and _diagonal_matrix(b, s_ct, vh),
             j and _columns_times(b, b.op("add", j, swap_last(b, j)), s),
             k and _rows_times(b, b.op("add", k, swap_last(b, k)), s))
    outside = u_ct and b.op("sub", u_ct, _mm(b, u, swap_last(b, u), u_ct))
    return (_sum(b, x and _mm(b, u, x, vh), outside and _mm(b, _columns_times(b, outside, _reciprocal(b, s)), vh)),)


tangent_rules["svd"] = svd_tangent
adjoint_rules["svd"] = svd_adjoint
