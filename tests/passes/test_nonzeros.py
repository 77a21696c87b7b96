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
from adc.passes.sparsity.nonzeros import (MAX_SOURCES, MAX_TERMS, Diagonals, NotDirect, gather_sources, nonzeros,
                                         result_diagonals, row_layout)
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


def rows_jacobian(module, name: str, args, wrt: int, sizes: dict[str, int]) -> np.ndarray | None:
    """The dense Jacobian the pass's function fills laid out in rows (its RowLayout's nonzeros,
    returned in the pattern's order), or None where the pattern has no RowLayout."""
    (pattern,) = jacobian_patterns(module, name, args, wrt)
    layout = row_layout(result_diagonals(module, name, wrt, sizes), pattern)
    if layout is None:
        return None
    extended, func = nonzeros(module, name, wrt, sizes, (layout.width, layout.sources))
    (values,) = run(extended, func.name, *args, layout.source)
    assert values.shape == (pattern.nnz,)
    out = np.zeros((pattern.rows, pattern.columns), values.dtype)
    out[pattern.row_ids(), pattern.indices] = values
    return out


def test_the_brusselator_is_six_diagonals_of_its_grid():
    module = compile_source(BRUSSELATOR)
    x = np.random.default_rng(0).uniform(0, 1, (2, 5, 5))
    diagonals = result_diagonals(module, "brusselator", 0, {"N": 5})
    assert len(diagonals.columns) == 6 and all((c >= 0).all() for c in diagonals.columns)
    assert sorted(c for c in diagonals.constants if c is not None) == [0.1] * 4      # the laplacian's
    want = jvp_jacobian(module, "brusselator", [x], 0)
    np.testing.assert_allclose(direct_jacobian(module, "brusselator", [x], 0, {"N": 5}), want, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(rows_jacobian(module, "brusselator", [x], 0, {"N": 5}), want, rtol=1e-14, atol=1e-15)


def test_the_brusselators_rows_take_three_sources():
    """Every row has six nonzeros: its own species' diagonal, the other's, and four neighbours
    whose coefficients are one constant 0.1, so one source, wherever the periodic wrap puts them."""
    module, n = compile_source(BRUSSELATOR), 6
    x = np.random.default_rng(4).uniform(0, 1, (2, n, n))
    (pattern,) = jacobian_patterns(module, "brusselator", [x], 0)
    diagonals = result_diagonals(module, "brusselator", 0, {"N": n})
    layout = row_layout(diagonals, pattern)
    assert layout.width == 6 and layout.source.shape == (2 * n * n, 6) and layout.source.dtype == np.int32
    constants = [t for t, c in enumerate(diagonals.constants) if c is not None]
    kinds = sorted((tuple(t for t in ids if t not in constants), len(ids)) for ids in layout.sources)
    assert kinds == [((), 1), ((0,), 1), ((1,), 1)]         # 0.1 (one of its four terms), each varying one
    counts = np.stack([(layout.source == k).sum(axis=1) for k in range(3)], axis=1)
    constant = next(k for k, ids in enumerate(layout.sources) if ids[0] in constants)
    assert (counts[:, constant] == 4).all() and (counts.sum(axis=1) == 6).all()


def test_a_row_layout_sums_terms_landing_together_and_keeps_structural_zeros():
    pattern = Pattern.from_pairs(np.array([0, 0, 1, 1, 2, 2]), np.array([0, 2, 0, 1, 1, 2]), (3, 3))
    diagonals = Diagonals((np.array([0, 1, 2]), np.array([-1, 0, 1]), np.array([0, -1, -1]),
                           np.array([2, -1, -1])), (None, None, 0.5, 0.5))
    layout = row_layout(diagonals, pattern)
    assert layout.width == 2
    table = [[layout.sources[k] for k in row] for row in layout.source.tolist()]
    # (0, 0): the first diagonal and the constant 0.5 of the third; (0, 2): the fourth's 0.5 alone;
    # (1, 0) the second, (1, 1) the first; (2, 1) the second, (2, 2) the first
    assert table == [[(0, 2), (3,)], [(1,), (0,)], [(1,), (0,)]]
    layout = row_layout(Diagonals((np.array([0, 1, 2]), np.array([2, -1, -1])), (None, None)), pattern)
    table = [[layout.sources[k] for k in row] for row in layout.source.tolist()]
    assert table == [[(0,), (1,)], [(), (0,)], [(), (0,)]]    # (1, 0), (2, 1): on no diagonal, zeros


def test_constants_of_one_value_share_a_source_and_signed_zeros_do_not():
    pattern = Pattern.from_pairs(np.repeat(np.arange(2), 3), np.tile(np.arange(3), 2), (2, 3))
    columns = tuple(np.array([k, k]) for k in range(3))
    assert len(row_layout(Diagonals(columns, (0.25, 0.25, 0.25)), pattern).sources) == 1
    assert len(row_layout(Diagonals(columns, (0.0, -0.0, 0.0)), pattern).sources) == 2


def test_rows_of_several_lengths_or_too_many_sources_are_gathered_instead():
    ragged = Pattern.from_pairs(np.array([0, 1, 1]), np.array([0, 0, 1]), (2, 2))
    assert row_layout(Diagonals((np.array([0, 1]), np.array([-1, 0])), (None, None)), ragged) is None
    width = MAX_SOURCES + 1
    wide = Pattern.from_pairs(np.repeat(np.arange(2), width), np.tile(np.arange(width), 2), (2, width))
    many = Diagonals(tuple(np.array([k, k]) for k in range(width)), (None,) * width)
    assert row_layout(many, wide) is None
    assert row_layout(Diagonals(many.columns[:MAX_SOURCES] + (np.array([-1, -1]),), (None,) * width),
                      Pattern.from_pairs(np.repeat(np.arange(2), MAX_SOURCES), np.tile(np.arange(MAX_SOURCES), 2),
                                         (2, width))).width == MAX_SOURCES
    with pytest.raises(NotDirect, match="outside"):
        row_layout(Diagonals((np.array([1, 1]),), (None,)), Pattern.from_pairs(np.array([0, 1]), np.array([0, 0]),
                                                                                 (2, 2)))


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
        laid = rows_jacobian(module, "f", args, wrt, sizes)
        if laid is not None:        # the same sums, where every row has as many nonzeros
            np.testing.assert_array_equal(laid, got, err_msg=program.source)
