"""Direct nonzeros (adc/passes/sparsity/nonzeros.py): a Jacobian computed where its nonzeros lie.

Against the JVP pass run one tangent at a time (another route to the same numbers, both
interpreted), over random loop-free programs and the structured cases; the terms of a stencil
are its diagonals; two terms landing on one nonzero add; what reads several elements into one
is refused (NotDirect), so the coloring serves it.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from adc.frontend import compile_source
from adc.ir.interp import run
from adc.passes.jvp import jvp
from adc.passes.sparsity import Pattern, jacobian_patterns
from adc.passes.sparsity.nonzeros import MAX_TERMS, Diagonals, NotDirect, gather_sources, nonzeros, result_diagonals
from tests.fuzz.budget import fuzz_settings
from tests.support.programs import programs
from tests.support.sparse_problems import BRUSSELATOR, TRIDIAGONAL
from tests.support.vocabulary import Options

# loop-free programs of what moves elements one to one (and what does not, which must be refused)
ONE_TO_ONE = Options(floats=("f64",), smooth=True, forms=("take", "take_along_axis", "index", "binary", "unary",
                                                          "branch", "reduce", "matmul", "call"))


def jvp_jacobian(module, name: str, args, wrt: int) -> np.ndarray:
    """The dense Jacobian of `name`'s float result, one one-hot tangent at a time through the JVP."""
    extended, tangent = jvp(module, name, [wrt], primals=False)
    x = np.asarray(args[wrt])
    columns = []
    for j in range(x.size):
        seed = np.zeros(x.size, x.dtype)
        seed[j] = 1.0
        (out,) = run(extended, tangent.func.name, *args, seed.reshape(x.shape))
        columns.append(np.ravel(out))
    return np.stack(columns, axis=1) if columns else np.zeros((0, 0))


def direct_jacobian(module, name: str, args, wrt: int, sizes: dict[str, int]) -> np.ndarray:
    """The dense Jacobian the pass's function fills (its nonzeros placed at the pattern's positions)."""
    (pattern,) = jacobian_patterns(module, name, args, wrt)
    sources = gather_sources(result_diagonals(module, name, wrt, sizes), pattern)
    extended, func = nonzeros(module, name, wrt, sizes)
    (weights,) = run(extended, func.name, *args)
    out = np.zeros((pattern.rows, pattern.columns))
    out[pattern.row_ids(), pattern.indices] = sources.gather(np.ravel(weights), np.empty(pattern.nnz, weights.dtype))
    return out


def test_the_brusselator_is_six_diagonals_of_its_grid():
    module = compile_source(BRUSSELATOR)
    x = np.random.default_rng(0).uniform(0, 1, (2, 5, 5))
    diagonals = result_diagonals(module, "brusselator", 0, {"N": 5})
    assert len(diagonals.columns) == 6 and all((c >= 0).all() for c in diagonals.columns)
    assert sorted(c for c in diagonals.constants if c is not None) == [0.1] * 4      # the laplacian's
    np.testing.assert_allclose(direct_jacobian(module, "brusselator", [x], 0, {"N": 5}),
                               jvp_jacobian(module, "brusselator", [x], 0), rtol=1e-14, atol=1e-15)


def test_a_tridiagonal_residual_and_its_boundary_rows():
    module = compile_source(TRIDIAGONAL)
    x = np.random.default_rng(1).uniform(-1, 1, 7)
    diagonals = result_diagonals(module, "f", 0, {"N": 7})
    assert len(diagonals.columns) == 3
    np.testing.assert_allclose(direct_jacobian(module, "f", [x], 0, {"N": 7}), jvp_jacobian(module, "f", [x], 0),
                               rtol=1e-14, atol=1e-15)


def test_terms_landing_on_one_nonzero_add_in_a_second_layer():
    source = "def f(x: f64[N]) -> f64[N]:\n    return x * concat([x[:1], x[:N-1]], axis=0) + sin(x)\n"
    module = compile_source(source)
    x = np.random.default_rng(2).uniform(-1, 1, 5)
    (pattern,) = jacobian_patterns(module, "f", [x], 0)
    sources = gather_sources(result_diagonals(module, "f", 0, {"N": 5}), pattern)
    assert [p.tolist() for p, _ in sources.extra] == [[0]]      # x[0] reads x[0] through both factors
    np.testing.assert_allclose(direct_jacobian(module, "f", [x], 0, {"N": 5}), jvp_jacobian(module, "f", [x], 0),
                               rtol=1e-14, atol=1e-15)


def test_a_nonzero_no_term_reaches_is_a_structural_zero_and_terms_outside_are_refused():
    pattern = Pattern.from_pairs(np.array([0, 0, 1, 2]), np.array([0, 2, 1, 2]), (3, 3))
    diagonals = Diagonals((np.array([0, 1, 2]), np.array([-1, -1, 2]), np.array([-1, 1, -1])), (None, None, 5.0))
    sources = gather_sources(diagonals, pattern)
    weights = np.array([10.0, 11.0, 12.0, 20.0, 21.0, 22.0, 5.0])     # two varying diagonals, one constant
    assert sources.empty.tolist() == [1]                 # (0, 2): in the pattern, on no diagonal
    assert sources.gather(weights, np.full(4, np.nan)).tolist() == [10.0, 0.0, 16.0, 34.0]
    with pytest.raises(NotDirect, match="outside"):
        gather_sources(Diagonals((np.array([1, 1, 2]),), (None,)), pattern)


def test_stacks_transposes_broadcasts_reshapes_and_f32():
    source = """
def f(x: f32[N, M], s: f32) -> f32[3, N]:
    y = transpose(exp(x) * x[0:1, :] * s)
    return reshape(stack([y[3], y[0], y[3]]) * 2.0, [3, N])
"""
    module = compile_source(source)
    x = np.random.default_rng(3).uniform(-1, 1, (3, 4)).astype(np.float32)
    args = [x, np.float32(0.5)]
    for wrt, sizes in ((0, {"N": 3, "M": 4}), (1, {"N": 3, "M": 4})):
        got = direct_jacobian(module, "f", args, wrt, sizes)
        np.testing.assert_allclose(got, jvp_jacobian(module, "f", args, wrt).reshape(got.shape), rtol=1e-6)


@pytest.mark.parametrize("body, why", [
    ("return x @ x", "reads several"), ("return cumsum(x, axis=0)", "reads several"),
    ("y = x\n    for i in range(3):\n        y = y * x\n    return y", "region")])
# (an index argument is not read: its gather may read any element of the axis, so it reads several)
def test_what_reads_several_elements_into_one_is_refused(body, why):
    module = compile_source(f"def f(x: f64[N, N]) -> f64[N, N]:\n    {body}\n")
    with pytest.raises(NotDirect, match=why):
        result_diagonals(module, "f", 0, {"N": 3})


def test_a_gather_through_an_index_argument_is_refused():
    module = compile_source("def f(x: f64[N], idx: i64[K]) -> f64[K]:\n    return take(x, idx) * 2.0\n")
    with pytest.raises(NotDirect, match="reads several"):
        result_diagonals(module, "f", 0, {"N": 4, "K": 2})


def test_more_diagonals_than_the_budget_are_refused():
    shifts = " + ".join(f"x[{k}:{k} + 4]" for k in range(MAX_TERMS + 1))
    module = compile_source(f"def f(x: f64[N]) -> f64[4]:\n    return {shifts}\n")
    with pytest.raises(NotDirect, match="diagonals"):
        result_diagonals(module, "f", 0, {"N": MAX_TERMS + 4})


@fuzz_settings(40)
@given(program=programs(ONE_TO_ONE))
def test_random_programs_agree_with_the_jvp_or_are_refused(program):
    module = compile_source(program.source)
    args = program.arguments()
    try:
        run(module, "f", *args)
    except (ValueError, IndexError):    # sizes the program cannot run at
        return
    results = [t for t in program.main.results if t.is_float]
    floats = [i for i, (_, t) in enumerate(program.main.params) if t.is_float]
    if len(results) != 1 or len(program.main.results) != 1:
        return
    sizes = {s: program.sizes[s] for s in module["f"].dim_symbols}
    for wrt in floats:
        try:
            got = direct_jacobian(module, "f", args, wrt, sizes)
        except NotDirect:
            continue
        want = jvp_jacobian(module, "f", args, wrt)
        np.testing.assert_allclose(got, want.reshape(got.shape), rtol=1e-12, atol=1e-12, err_msg=program.source)
