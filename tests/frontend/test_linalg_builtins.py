"""The linear-algebra builtins' conventions (SciPy's; NumPy's for solve) and their errors, each a
CompileError located at the argument at fault."""
import numpy as np
import pytest

from adc.errors import CompileError
from adc.frontend import compile_source
from adc.ir.interp import run

CASES = [
    ("def f(a: f64[N, M]) -> f64[N, M]:\n    return cholesky(a)\n", (2, 21), "expected square matrices"),
    ("def f(a: i64[N, N]) -> i64[N, N]:\n    return cholesky(a)\n", (2, 21), "expected a float tensor"),
    ("def f(a: f64[N]) -> f64[N]:\n    return cholesky(a)\n", (2, 21), "expected square matrices"),
    ("def f(a: f64[N, N], b: f64[M]) -> f64[M]:\n    return solve_triangular(a, b)\n", (2, 32),
     "expected N rows of right-hand sides"),
    ("def f(a: f64[2, N, N], b: f64[N]) -> f64[N]:\n    return solve_triangular(a, b)\n", (2, 32),
     "expected right-hand sides [..., N] or [..., N, K]"),
    ("def f(a: f64[N, N], b: f64[N]) -> f64[N]:\n    return solve_triangular(a, b, trans=3)\n", (2, 41),
     "'trans' must be 0, 1 or 2"),
    ("def f(a: f64[N, N], b: f64[N]) -> f64[N]:\n    return solve_triangular(a, b, lower=1)\n", (2, 41),
     "'lower' must be True or False"),
    ("def f(a: f64[N, N], b: f32[N]) -> f64[N]:\n    return cho_solve(a, b)\n", (2, 12), "dtype mismatch"),
]
CASES += [     # the LU family's; a kernel may not take a builtin's name
    ("def f(a: f64[N, M]) -> f64:\n    return det(a)\n", (2, 16), "expected square matrices"),
    ("def f(a: i64[N, N]) -> i64[N, N]:\n    return inv(a)\n", (2, 16), "expected a float tensor"),
    ("def f(a: f64[N, N], b: f64[M]) -> f64[M]:\n    return solve(a, b)\n", (2, 21),
     "expected N rows of right-hand sides"),
    ("def f(a: f64[B, N, N], b: f64[B, N]) -> f64[B, N]:\n    return solve(a, b)\n", (2, 21),
     "expected N rows of right-hand sides"),
    ("def f(a: f64[N, N], p: i64[M], b: f64[N]) -> f64[N]:\n    return lu_solve(a, p, b)\n", (2, 24),
     "expected pivots i64[N]"),
    ("def f(a: f64[N, N], p: f64[N], b: f64[N]) -> f64[N]:\n    return lu_solve(a, p, b)\n", (2, 24),
     "expected pivots"),
    ("def f(a: f64[N, N]) -> f64:\n    return slogdet(a)\n", (2, 12), "tuple of 2 results"),
    ("def solve(a: f64[N, N]) -> f64[N, N]:\n    return a\n", (1, 1), "has the name of a builtin"),
]


@pytest.mark.parametrize("source, where, message", CASES, ids=[c[2][:30] for c in CASES])
def test_misuse_is_located_at_its_argument(source, where, message):
    with pytest.raises(CompileError) as info:
        compile_source(source, "bad.adc")
    assert message in info.value.message
    assert (info.value.line, info.value.col) == where, info.value.render()


def test_vectors_and_stacks_broadcast_as_scipy_solves_them():
    import scipy.linalg as sl

    # b of rank one less than a: vectors, one per matrix; else matrices, a shared matrix broadcast
    source = ("def f(a: f64[N, N], b: f64[B, N], c: f64[B, N, K]) -> (f64[B, N], f64[B, N, K]):\n"
              "    return solve_triangular(broadcast_to(a, [B, N, N]), b, lower=True), solve_triangular(a, c, trans=1)\n")
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((4, 4)) + 4 * np.eye(4), rng.standard_normal((3, 4)), rng.standard_normal((3, 4, 2))
    vectors, matrices = run(compile_source(source, "t.adc"), "f", a, b, c)
    np.testing.assert_allclose(vectors, sl.solve_triangular(a, b.T, lower=True).T, rtol=1e-12)
    np.testing.assert_allclose(matrices, np.stack([sl.solve_triangular(a, m, trans=1) for m in c]), rtol=1e-12)


def test_lu_solve_takes_scipys_vectors_and_solve_numpys():
    # lu_solve: b vectors when its rank is one less than lu's (SciPy's); solve: b one vector only
    # when 1-D (NumPy 2's), else matrices [..., N, K] whose stacking axes broadcast
    source = ("def f(a: f64[B, N, N], b: f64[B, N], c: f64[N]) -> (f64[B, N], f64[B, N], f64[B, N, 1]):\n"
              "    lu, piv = lu_factor(a)\n"
              "    return lu_solve(lu, piv, b), solve(a, c), solve(a, b[:, :, None])\n")
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((3, 4, 4)) + 4 * np.eye(4), rng.standard_normal((3, 4)), rng.standard_normal(4)
    vectors, one, matrices = run(compile_source(source, "t.adc"), "f", a, b, c)
    np.testing.assert_allclose(vectors, np.linalg.solve(a, b[..., None])[..., 0], rtol=1e-12)
    np.testing.assert_allclose(one, np.linalg.solve(a, c), rtol=1e-12)
    np.testing.assert_allclose(matrices, np.linalg.solve(a, b[..., None]), rtol=1e-12)
