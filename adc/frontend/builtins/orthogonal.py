"""The builtins of the orthogonal factorizations, NumPy's names and reduced forms, stacked over
leading axes: qr, lstsq (composed of qr and a triangular solve), eigh and eigvalsh, svd and svdvals.

Part of the builtins (`adc/frontend/builtins/__init__.py` gathers the families' tables). The
`qr` and `svd` ops take tall matrices; a wide matrix whose sizes are known is factored through a
tall one here (qr: of its first M columns, the rest of r is qᵀ times the rest of a; svd: of its
transpose), so every form has derivatives:

    lstsq(a, b)    %0, %1 = qr %a : f64[M,N], f64[N,N]
                   %2 = transpose %0 {perm = [1,0]} : f64[N,M]      ...   %3 = matmul %2, %b
                   %4 = triangular_solve %1, %3 {lower = false, trans = false, unit_diagonal = false}
"""
from __future__ import annotations

from adc.frontend.arguments import Args, Builtin, registrar
from adc.frontend.builtins.linalg import matmul, solve_triangular
from adc.frontend.scope import Results, Scope
from adc.ir.core import Value

builtin_rules: dict[str, Builtin] = {}
builtin = registrar(builtin_rules)


def _matrices(a: Args, key: str, square: bool = False) -> Value:
    """Argument `key` as float matrices [..., M, N] (square ones if told), or a located error."""
    x = a.float_tensor(key)
    if x.type.rank < 2 or (square and x.type.shape[-1] != x.type.shape[-2]):
        raise a.error(key, f"expected {'square ' if square else ''}matrices [..., {'N' if square else 'M'}, N], "
                           f"got {x.type}")
    return x


def _wide(x: Value) -> bool:
    m, n = x.type.shape[-2:]
    return isinstance(m, int) and isinstance(n, int) and m < n


def _swap(cx: Scope, x: Value) -> Value:
    rank = x.type.rank
    return cx.transpose(x, tuple(range(rank - 2)) + (rank - 1, rank - 2))


def _columns(cx: Scope, x: Value, start, stop) -> Value:
    rank = x.type.rank
    return cx.op("slice", x, start=[0] * (rank - 1) + [start], step=[1] * rank,
                 stop=list(x.type.shape[:-1]) + [stop])


def qr(cx: Scope, x: Value) -> tuple[Value, Value]:
    """NumPy's reduced QR: q [..., M, K], r [..., K, N], K = min(M, N)."""
    if not _wide(x):
        return cx.b.emit("qr", x)
    m, n = x.type.shape[-2:]
    q, r = cx.b.emit("qr", _columns(cx, x, 0, m))
    rest = cx.op("matmul", _swap(cx, q), _columns(cx, x, m, n))
    return q, cx.op("concat", r, rest, axis=x.type.rank - 1)


@builtin("qr", "a")
def qr_expand(cx, a):
    # q with orthonormal columns and upper triangular r, q @ r = a (np.linalg.qr(a, mode='reduced'))
    return Results(qr(cx, _matrices(a, "a")))


@builtin("lstsq", "a", "b")
def lstsq_expand(cx, a):
    # x minimizing |a x - b| for a of full column rank (M >= N): r x = qᵀ b, a triangular solve
    x = _matrices(a, "a")
    if _wide(x):
        raise a.error("a", f"expected matrices [..., M, N] with M >= N (full column rank), got {x.type}")
    q, r = qr(cx, x)
    b = a.tensor("b", x.type.dtype)
    vectors = b.type.rank == x.type.rank - 1
    qt_b = matmul(cx, _swap(cx, q), cx.reshape(b, b.type.shape + (1,)) if vectors else b)
    solution = solve_triangular(cx, a, r, False, False, False, rhs=qt_b)
    return cx.reshape(solution, solution.type.shape[:-1]) if vectors else solution


@builtin("eigh", "a")
def eigh_expand(cx, a):
    # eigenvalues ascending and eigenvectors (columns) of a symmetric a, read from its lower triangle
    return Results(cx.b.emit("eigh", _matrices(a, "a", square=True)))


@builtin("eigvalsh", "a")
def eigvalsh_expand(cx, a):
    return cx.b.emit("eigh", _matrices(a, "a", square=True))[0]


def svd(cx: Scope, x: Value) -> tuple[Value, Value, Value]:
    """NumPy's reduced SVD: u [..., M, K], s [..., K] descending, vh [..., K, N], K = min(M, N)."""
    if not _wide(x):
        return cx.b.emit("svd", x)
    u, s, vh = cx.b.emit("svd", _swap(cx, x))        # aᵀ = u s vh, so a = vhᵀ s uᵀ
    return _swap(cx, vh), s, _swap(cx, u)


@builtin("svd", "a")
def svd_expand(cx, a):
    return Results(svd(cx, _matrices(a, "a")))


@builtin("svdvals", "a")
def svdvals_expand(cx, a):
    return svd(cx, _matrices(a, "a"))[1]
