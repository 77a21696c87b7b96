"""The linear-algebra builtins' conventions (SciPy's) and their errors, each a CompileError located
at the argument at fault."""
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
