"""The linear-algebra builtins: matmul, which `@` shares; cholesky, solve_triangular and cho_solve
(SciPy's names and conventions, stacked over leading axes).

Part of the builtins (`adc/frontend/builtins/__init__.py` gathers the families' tables), and
of the elaborator's operators. NumPy's rules: a 1-D operand gains an axis and loses it after,
batch dimensions broadcast; the `matmul` op itself takes operands of one batch shape:

    v @ m          %0 = reshape %v {shape = [1,N]} : f32[1,N]           (v: f32[N], m: f32[N,M])
                   %1 = matmul %0, %m : f32[1,M]
                   %2 = reshape %1 {shape = [M]} : f32[M]

    cho_solve(l, b)  %0 = triangular_solve %l, %b {lower = true, trans = false, unit_diagonal = false} : f64[N,K]
                     %1 = triangular_solve %l, %0 {lower = true, trans = true, unit_diagonal = false} : f64[N,K]
"""
from __future__ import annotations

from adc.frontend.arguments import Args, Builtin, registrar
from adc.frontend.scope import Scope
from adc.ir.core import Value
from adc.ir.types import TensorType

builtin_rules: dict[str, Builtin] = {}
builtin = registrar(builtin_rules)


@builtin("matmul", "a", "b")
def matmul_expand(cx, a):
    return matmul(cx, a.tensor("a"), a.tensor("b"))


def matmul(cx: Scope, x: Value, y: Value) -> Value:
    """NumPy's matmul: 1-D operands gain then lose an axis; batch dimensions broadcast."""
    if x.type.rank == 0 or y.type.rank == 0:
        raise cx.error(f"matmul needs operands of rank >= 1, got {x.type} and {y.type}")
    cx.common_dtype([x, y])
    xs, ys = x.type.shape, y.type.shape
    x2 = cx.reshape(x, (1,) + xs) if x.type.rank == 1 else x
    y2 = cx.reshape(y, ys + (1,)) if y.type.rank == 1 else y
    if x2.type.shape[-1] != y2.type.shape[-2]:
        raise cx.error(f"matmul: contracted dimensions differ: {x.type} @ {y.type} ({x2.type.shape[-1]} "
                       f"against {y2.type.shape[-2]})")
    batch = cx.broadcast_shape([TensorType(x.type.dtype, x2.type.shape[:-2]), TensorType(x.type.dtype, y2.type.shape[:-2])])
    product = cx.op("matmul", cx.broadcast(x2, batch + x2.type.shape[-2:]), cx.broadcast(y2, batch + y2.type.shape[-2:]))
    out = batch + (xs[-2:-1] if x.type.rank > 1 else ()) + (ys[-1:] if y.type.rank > 1 else ())
    return cx.reshape(product, out)


# ---------------------------------------------------------------- factorizations and solves

def square_matrices(a: Args, key: str) -> Value:
    """Argument `key` as float square matrices [..., N, N], or a located error."""
    x = a.float_tensor(key)
    if x.type.rank < 2 or x.type.shape[-1] != x.type.shape[-2]:
        raise a.error(key, f"expected square matrices [..., N, N], got {x.type}")
    return x


@builtin("cholesky", "a")
def cholesky_expand(cx, a):
    # the lower factor, from a's lower triangle (NumPy's); NaN for a matrix not positive definite
    return cx.op("cholesky", square_matrices(a, "a"))


def solve_triangular(cx: Scope, a: Args, m: Value, lower: bool, trans: bool, unit_diagonal: bool,
                     rhs: Value | None = None) -> Value:
    """SciPy's solve_triangular of matrices `m` and argument "b" (or `rhs`): b a stack of vectors
    [..., N] when its rank is one less than m's, else of matrices [..., N, K]; the stacking axes of
    both broadcast."""
    b = a.tensor("b", m.type.dtype) if rhs is None else rhs
    cx.common_dtype([m, b])
    vectors = b.type.rank == m.type.rank - 1
    if b.type.rank < 2 and not vectors:
        raise a.error("b", f"expected right-hand sides [..., N] or [..., N, K] for matrices {m.type}, got {b.type}")
    columns = cx.reshape(b, b.type.shape + (1,)) if vectors else b
    if columns.type.shape[-2] != m.type.shape[-1]:
        raise a.error("b", f"expected {m.type.shape[-1]} rows of right-hand sides for matrices {m.type}, "
                           f"got {b.type}")
    batch = cx.broadcast_shape([TensorType(m.type.dtype, v.type.shape[:-2]) for v in (m, columns)])
    x = cx.op("triangular_solve", cx.broadcast(m, batch + m.type.shape[-2:]),
              cx.broadcast(columns, batch + columns.type.shape[-2:]),
              lower=lower, trans=trans, unit_diagonal=unit_diagonal)
    return cx.reshape(x, x.type.shape[:-1]) if vectors else x


def _trans(a: Args) -> bool:
    """SciPy's `trans`: 0 solves a x = b, 1 (and 2, the conjugate transpose of a real matrix) aᵀ x = b."""
    value = a.static_int("trans")
    if value not in (0, 1, 2):
        raise a.error("trans", f"'trans' must be 0, 1 or 2, got {value}")
    return value != 0


@builtin("solve_triangular", "a", "b", trans=0, lower=False, unit_diagonal=False)
def solve_triangular_expand(cx, a):
    return solve_triangular(cx, a, square_matrices(a, "a"), a.flag("lower"), _trans(a), a.flag("unit_diagonal"))


@builtin("cho_solve", "l", "b")
def cho_solve_expand(cx, a):
    # x = L⁻ᵀ (L⁻¹ b) for the lower Cholesky factor l: two triangular solves
    factor = square_matrices(a, "l")
    y = solve_triangular(cx, a, factor, True, False, False)
    return solve_triangular(cx, a, factor, True, True, False, rhs=y)
