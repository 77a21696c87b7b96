"""Sparse Jacobians and Hessians (adc/runtime/sparse_derivatives.py): the compressed evaluation
equals the dense Jacobian, forward and reverse, in the default and the bounds-checked build; the
pattern follows the integer arguments; the tape's sparse Jacobian composes the recorded calls."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy import sparse

import adc
from tests.support.sparse_problems import BRUSSELATOR, TRIDIAGONAL, brusselator_pattern

SOURCE = TRIDIAGONAL + BRUSSELATOR + """
def blocks(x: f64[B, K], w: f64[K, K]) -> f64[B, K]:
    return tanh(x @ w) * x

def loss(x: f64[N]) -> f64:
    return sum(sin(x[1:] * x[:N-1])) + sum(x * x * x)

def picked(x: f64[N], idx: i64[K]) -> f64[K]:
    return take(x, idx) * x[0]
"""


@pytest.fixture(scope="module", params=[False, True], ids=["default", "check_bounds"])
def module(request):
    return adc.compile(SOURCE, check_bounds=request.param)


RNG = np.random.default_rng(0)


@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
def test_sparse_values_equal_the_dense_jacobian(module, mode):
    cases = [(module.f, (RNG.uniform(-1, 1, 9),)), (module.brusselator, (RNG.uniform(0, 1, (2, 4, 4)),)),
             (module.blocks, (RNG.uniform(-1, 1, (3, 2)), RNG.uniform(-1, 1, (2, 2))))]
    for kernel, args in cases:
        jac = adc.jacobian(kernel, wrt=0, mode=mode, sparse=True)
        got = jac(*args)
        dense = np.asarray(adc.jacobian(kernel, wrt=0)(*args)).reshape(got.shape)
        assert isinstance(got, sparse.csr_matrix)
        np.testing.assert_allclose(got.toarray(), dense, rtol=1e-12, atol=1e-14)
        assert (jac.sparsity.toarray() == (got.toarray() != 0) | jac.sparsity.toarray()).all()
        out = np.empty(got.nnz)
        assert jac.values(*args, out=out) is out and (out == got.data).all()


def test_colors_and_patterns_of_the_structured_cases(module):
    jac = adc.jacobian(module.brusselator, sparse=True)
    jac(RNG.uniform(0, 1, (2, 6, 6)))
    assert (jac.sparsity.toarray() == brusselator_pattern(6)).all()
    assert jac.colors <= 12
    tridiagonal = adc.jacobian(module.f, sparse=True)
    tridiagonal(np.zeros(50))
    assert tridiagonal.colors == 3


def test_stencils_take_the_direct_route_and_agree_with_the_colored_one(module):
    """A Jacobian of index-mapped diagonals is computed where its nonzeros lie (passes/sparsity/
    nonzeros.py); a matmul's, a gather's through an index argument, are colored; a mode asked for
    is the coloring's."""
    cases = [(module.f, (RNG.uniform(-1, 1, 11),), "direct"),
             (module.brusselator, (RNG.uniform(0, 1, (2, 5, 5)),), "direct"),
             (module.blocks, (RNG.uniform(-1, 1, (4, 3)), RNG.uniform(-1, 1, (3, 3))), "forward"),
             (module.picked, (RNG.uniform(-1, 1, 6), np.array([5, 0, 5])), "forward")]
    for kernel, args, route in cases:
        jac = adc.jacobian(kernel, sparse=True)
        got = jac(*args)
        assert jac.route == route
        colored = adc.jacobian(kernel, mode="forward", sparse=True)
        np.testing.assert_allclose(got.toarray(), colored(*args).toarray(), rtol=1e-13, atol=1e-15)
        assert colored.route == "forward"
        out = np.full(got.nnz, np.nan)
        assert jac.values(*args, out=out) is out and (out == got.data).all()
        with pytest.raises(ValueError, match=rf"out must be a float64 array of shape \({got.nnz},\)"):
            jac.values(*args, out=np.empty(got.nnz, np.float32))
    x = RNG.uniform(0, 1, (2, 3, 3))
    jac = adc.jacobian(module.brusselator, sparse=True)
    values = jac.values(x)
    values[:] = 0.0                 # the caller's own array
    assert (jac.values(x) != 0).any()


def test_rows_of_one_length_are_written_in_place_and_bad_arguments_named(module):
    """The Brusselator's rows all have six nonzeros: its direct kernel writes them in the pattern's
    order into the caller's array (nonzeros.py RowLayout); the tridiagonal's boundary rows have
    two, so its weights are gathered. Either way the arguments are checked before native code."""
    x = RNG.uniform(0, 1, (2, 4, 4))
    jac = adc.jacobian(module.brusselator, sparse=True)
    want = adc.jacobian(module.brusselator, mode="forward", sparse=True)(x)
    assert jac._plan((x,)).direct.layout is not None
    assert adc.jacobian(module.f, sparse=True)._plan((np.ones(5),)).direct.layout is None
    strided = np.full(2 * want.nnz, np.nan)[::2]
    assert jac.values(x, out=strided) is strided
    np.testing.assert_allclose(strided, want.data, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(jac.values(x.tolist()), want.data, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(jac.values(np.asfortranarray(x)), want.data, rtol=1e-13, atol=1e-15)
    with pytest.raises(TypeError, match="parameter 'x' expects dtype f64"):
        jac.values(x.astype(np.float32))
    frozen = np.zeros(want.nnz)
    frozen.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        jac.values(x, out=frozen)


def test_a_direct_kernel_reading_an_index_argument_checks_it():
    """The index argument gathers a coefficient, off the path from x: the Jacobian is a diagonal,
    computed directly by a kernel that takes the index too, and checks it as a call would."""
    m = adc.compile("def g(x: f64[N], p: f64[M], idx: i64[N]) -> f64[N]:\n    return sin(x) * take(p, idx)\n")
    x, p = RNG.uniform(-1, 1, 5), RNG.uniform(1, 2, 3)
    jac = adc.jacobian(m.g, sparse=True)
    got = jac(x, p, np.array([0, 2, 1, 2, 0]))
    assert jac.route == "direct"
    np.testing.assert_allclose(got.toarray(), np.diag(np.cos(x) * p[[0, 2, 1, 2, 0]]), rtol=1e-14)
    with pytest.raises(IndexError, match="parameter 'idx': index 3 is out of bounds for an axis of size 3"):
        jac.values(x, p, np.array([0, 3, 1, 2, 0]))


def test_a_no_gradients_module_refuses_the_direct_route_too(tmp_path):
    src = tmp_path / "stencil.adc"
    src.write_text("def f(x: f64[N]) -> f64[N]:\n    return sin(x) * 2.0\n")
    subprocess.run([sys.executable, "-m", "adc", "compile", str(src), "-o", str(tmp_path / "stencil.so"),
                    "--no-gradients"], check=True)
    jac = adc.jacobian(adc.load(tmp_path / "stencil.so").f, sparse=True)
    with pytest.raises(LookupError, match="'f'.*--no-gradients"):
        jac(np.ones(4))


def test_a_direct_f32_jacobian_of_fixed_sizes():
    m = adc.compile("def g(x: f32[6], s: f32) -> f32[5]:\n    return exp(x[1:] * s) - x[:5] * x[:5]\n")
    x, s = RNG.uniform(-1, 1, 6).astype(np.float32), np.float32(0.7)
    jac = adc.jacobian(m.g, sparse=True)
    got = jac(x, s)
    assert jac.route == "direct" and got.dtype == np.float32 and got.nnz == 10
    np.testing.assert_allclose(got.toarray(), np.asarray(adc.jacobian(m.g, wrt=0)(x, s)), rtol=1e-6)


def test_a_sparse_hessian_equals_the_dense_one(module):
    """Tridiagonal: an acyclic coloring's 2 seeds, the entries recovered by substitution."""
    x = RNG.uniform(-1, 1, 12)
    hessian = adc.hessian(module.loss, sparse=True)
    got = hessian(x)
    dense = np.asarray(adc.hessian(module.loss)(x))
    np.testing.assert_allclose(got.toarray(), dense, rtol=1e-12, atol=1e-14)
    assert hessian.colors == 2 and got.nnz == 12 + 2 * 11
    out = np.full(got.nnz, np.nan)
    assert hessian.values(x, out=out) is out
    np.testing.assert_allclose(out, dense[got.nonzero()], rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match=r"out must be a float64 array of shape \(34,\)"):
        hessian.values(x, out=np.empty(33))


def test_without_the_substitution_loop_a_hessian_takes_the_star_coloring(module, monkeypatch):
    from adc.runtime import sparse_derivatives

    monkeypatch.setattr(sparse_derivatives, "native_substitution", None)
    x = RNG.uniform(-1, 1, 9)
    hessian = adc.hessian(module.loss, sparse=True)      # (9 elements: no other test's plan)
    np.testing.assert_allclose(hessian(x).toarray(), np.asarray(adc.hessian(module.loss)(x)), rtol=1e-12,
                               atol=1e-14)
    assert hessian.colors == 3


def test_the_pattern_follows_the_integer_arguments(module):
    x = np.zeros(5)
    first = adc.jacobian_sparsity(module.picked, x, np.array([3, 4]))
    second = adc.jacobian_sparsity(module.picked, x, np.array([1, 1]))
    assert first.toarray().tolist() == [[1, 0, 0, 1, 0], [1, 0, 0, 0, 1]]
    assert second.toarray().tolist() == [[1, 1, 0, 0, 0], [1, 1, 0, 0, 0]]
    jac = adc.jacobian(module.picked, sparse=True)
    x = RNG.uniform(1, 2, 5)
    for idx in (np.array([3, 4]), np.array([1, 1])):
        np.testing.assert_allclose(jac(x, idx).toarray(), np.asarray(adc.jacobian(module.picked)(x, idx)))


def test_the_tape_composes_the_patterns_of_its_calls(module):
    x = adc.constant(RNG.uniform(-1, 1, 7))
    with adc.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = module.f(adc.sin(module.f(x)))
    dense = np.asarray(tape.jacobian(y, x))
    one = adc.jacobian_sparsity(module.f, np.zeros(7)).astype(int)
    for mode in ("forward", "reverse"):
        got = tape.jacobian(y, x, sparse=True, mode=mode)
        np.testing.assert_allclose(got.toarray(), dense, rtol=1e-12, atol=1e-14)
        assert got.nnz == (one @ one).nnz      # the structural product of the two calls' patterns


def test_without_scipy_patterns_and_values_are_csr_arrays(module, monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy", None)
    indptr, indices, shape = adc.jacobian_sparsity(module.f, np.zeros(4))
    assert shape == (4, 4) and indptr.tolist() == [0, 1, 4, 7, 8] and indices.tolist() == [0, 0, 1, 2, 1, 2, 3, 3]
    data, indices, indptr = adc.jacobian(module.f, sparse=True)(np.ones(4))
    assert len(data) == 8 and indptr[-1] == 8


def test_attributes_before_the_first_call_say_what_to_do(module):
    with pytest.raises(ValueError, match="call it first"):
        adc.jacobian(module.f, sparse=True).colors


def test_an_arrowhead_is_computed_both_ways_with_three_seeds():
    m = adc.compile("def arrow(x: f64[N]) -> f64[N]:\n    y = sin(x) * x[0]\n    y[0] = sum(x * x)\n    return y\n")
    x = RNG.uniform(-1, 1, 40)
    jac = adc.jacobian(m.arrow, sparse=True)
    got = jac(x)
    assert jac.colors == 3
    dense = np.asarray(adc.jacobian(m.arrow)(x))
    np.testing.assert_allclose(got.toarray(), dense, rtol=1e-12, atol=1e-14)
    for mode in ("forward", "reverse"):
        one_sided = adc.jacobian(m.arrow, mode=mode, sparse=True)
        np.testing.assert_allclose(one_sided(x).toarray(), dense, rtol=1e-12, atol=1e-14)
        assert one_sided.colors == 40
