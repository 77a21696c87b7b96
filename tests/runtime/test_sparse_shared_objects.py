"""Sparse derivatives in a shared object (`adc compile --sparse-jacobian/--sparse-hessian`): loaded
back, `adc.jacobian(..., sparse=True)` is the compiled kernel, equal to the in-process sparse
Jacobian and the dense one (forward and reverse, an integer parameter's pattern valid for every
index, a Hessian); symbolic sizes and bad options are refused with a message; patterns detected
in one process are read from the compile cache by the next."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import sparse

import adc
from adc.runtime.sparse_derivatives import CompiledSparseJacobian, SparseJacobian
from tests.passes.test_sparsity import BRUSSELATOR, brusselator_pattern

SOURCE = BRUSSELATOR + """
def stencil(x: f64[9], p: f64) -> f64[9]:
    y = x * x
    y[1:8] = x[:7] - p * sin(x[1:8]) + x[2:]
    return y

def rows(x: f64[3, 4]) -> f64[3]:
    return sum(x * x, axis=1)

def picked(x: f64[5], idx: i64[2]) -> f64[2]:
    return take(x, idx) * x[0]

def loss(x: f64[7]) -> f64:
    return sum(sin(x[1:] * x[:6])) + sum(x * x * x)

def brusselator6(x: f64[2, 6, 6]) -> f64[2, 6, 6]:
    return brusselator(x)
"""
OPTIONS = ["--sparse-jacobian", "stencil:x", "--sparse-jacobian", "rows:x", "--sparse-jacobian", "picked:x",
           "--sparse-hessian", "loss:x", "--sparse-jacobian", "brusselator6:x"]
RNG = np.random.default_rng(1)


def adc_compile(directory, *options):
    return subprocess.run([sys.executable, "-m", "adc", "compile", "k.adc", "-o", "k.so", "--header", "k.h",
                           *options], cwd=directory, capture_output=True, text=True)


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    """The module compiled to a .so with every sparse derivative, loaded; and the same source in process."""
    directory = tmp_path_factory.mktemp("sparse_so")
    (directory / "k.adc").write_text(SOURCE)
    done = adc_compile(directory, *OPTIONS)
    assert done.returncode == 0, done.stderr
    return adc.load(directory / "k.so"), adc.compile(SOURCE), directory


def check(compiled, in_process, dense, args):
    got = compiled(*args)
    assert isinstance(got, sparse.csc_matrix)
    np.testing.assert_allclose(got.toarray(), dense, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(got.toarray(), in_process(*args).toarray(), rtol=1e-13, atol=1e-14)
    assert (compiled.sparsity.toarray() | (dense != 0) == compiled.sparsity.toarray()).all()
    out = np.empty(got.nnz)
    assert compiled.values(*args, out=out) is out and (out == got.data).all()
    return got


@pytest.mark.parametrize("name, args, colors", [
    ("stencil", (RNG.uniform(-1, 1, 9), 0.7), 3),           # tridiagonal: 3 seeds pushed forward
    ("rows", (RNG.uniform(-1, 1, (3, 4)),), 1),              # rows share no column: 1 seed pulled back
    ("brusselator6", (RNG.uniform(0, 1, (2, 6, 6)),), None)])
def test_a_loaded_sparse_jacobian_equals_the_in_process_and_the_dense_one(modules, name, args, colors):
    so, jit, _ = modules
    compiled = adc.jacobian(so[name], wrt=0, sparse=True)
    assert isinstance(compiled, CompiledSparseJacobian)
    dense = np.asarray(adc.jacobian(jit[name], wrt=0)(*args)).reshape(compiled.compiled.entry.shape)
    check(compiled, adc.jacobian(jit[name], wrt=0, sparse=True), dense, args)
    if colors is not None:
        assert compiled.colors == colors
    if name == "rows":
        assert not compiled.compiled.entry.forward
    if name == "brusselator6":
        assert (compiled.sparsity.toarray() == brusselator_pattern(6)).all()


def test_an_integer_parameters_pattern_holds_for_every_index(modules):
    """Compiled without the indices, the pattern is what any index could read: x[0] and every x[i]."""
    so, jit, _ = modules
    compiled = adc.jacobian(so.picked, wrt="x", sparse=True)
    assert compiled.sparsity.toarray().all()
    x = RNG.uniform(1, 2, 5)
    for idx in (np.array([3, 4]), np.array([1, 1])):
        check(compiled, adc.jacobian(jit.picked, sparse=True), np.asarray(adc.jacobian(jit.picked)(x, idx)),
              (x, idx))


def test_a_loaded_sparse_hessian_equals_the_dense_one(modules):
    so, jit, _ = modules
    x = RNG.uniform(-1, 1, 7)
    compiled = adc.hessian(so.loss, wrt="x", sparse=True)
    assert isinstance(compiled, CompiledSparseJacobian) and compiled.colors == 3
    got = check(compiled, adc.hessian(jit.loss, sparse=True), np.asarray(adc.hessian(jit.loss)(x)), (x,))
    assert got.nnz == 7 + 2 * 6


def test_a_mode_the_compiled_one_does_not_use_derives_from_the_ir(modules):
    so, _, _ = modules
    assert isinstance(adc.jacobian(so.stencil, sparse=True, mode="reverse"), SparseJacobian)
    assert isinstance(adc.jacobian(so.stencil, sparse=True, mode="forward"), CompiledSparseJacobian)


def test_the_metadata_and_the_header_describe_them(modules):
    so, _, directory = modules
    entries = {(e.of, e.hessian): e for e in so.info.sparse}
    assert set(entries) == {("stencil", False), ("rows", False), ("picked", False), ("loss", True),
                            ("brusselator6", False)}
    header = (directory / "k.h").read_text()
    assert "int32_t adc_kernel_stencil_sparse_jacobian_x(const int64_t *dims" in header
    assert f"extern const int64_t adc_kernel_stencil_sparse_jacobian_x_rowind[{entries['stencil', False].nnz}];" in header
    assert "extern const int64_t adc_kernel_loss_sparse_hessian_x_colptr[8];" in header


def test_without_scipy_the_matrices_are_csc_arrays(modules, monkeypatch):
    so, _, _ = modules
    monkeypatch.setitem(sys.modules, "scipy", None)
    compiled = adc.jacobian(so.stencil, sparse=True)
    data, rowind, colptr = compiled(np.ones(9), 0.5)
    indptr, indices, shape = compiled.sparsity
    assert shape == (9, 9) and (indptr == colptr).all() and (indices == rowind).all() and len(data) == colptr[-1]


@pytest.mark.parametrize("options, code, message", [
    (["--sparse-jacobian", "free:x"], 1, "needs fixed sizes, but its parameters' types have the symbols N"),
    (["--sparse-jacobian", "stencil"], 2, "expected KERNEL:ARG"),
    (["--sparse-jacobian", "nope:x"], 2, "no kernel 'nope' (kernels: laplacian, brusselator, stencil"),
    (["--sparse-hessian", "picked:idx"], 2, "'idx' is not a float parameter of picked (float parameters: x)"),
    (["--sparse-hessian", "stencil:x"], 1, "needs a scalar result")])
def test_what_cannot_be_compiled_is_refused_with_a_message(tmp_path, options, code, message):
    (tmp_path / "k.adc").write_text(SOURCE + "\ndef free(x: f64[N]) -> f64[N]:\n    return x * x\n")
    done = adc_compile(tmp_path, *options)
    assert done.returncode == code and message in done.stderr and "Traceback" not in done.stderr


DETECT = """
import sys
import numpy as np
import adc
from adc.runtime import sparse_derivatives
if sys.argv[1] == "cached":      # the second process: detection must not run
    sparse_derivatives.jacobian_patterns = None
m = adc.compile("def f(x: f64[N]) -> f64[N]:\\n    y = x * x\\n    y[1:N-1] = x[:N-2] - sin(x[1:N-1]) + x[2:]\\n    return y\\n")
pattern = adc.jacobian_sparsity(m.f, np.zeros(40))
print(pattern.nnz, pattern.indptr.tolist() == sorted(pattern.indptr.tolist()))
"""


def test_a_second_process_reads_the_pattern_from_the_cache(tmp_path):
    env = {**os.environ, "ADC_CACHE_DIR": str(tmp_path / "cache")}
    first = subprocess.run([sys.executable, "-c", DETECT, "fresh"], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert len(list((tmp_path / "cache" / "sparsity").iterdir())) == 1
    second = subprocess.run([sys.executable, "-c", DETECT, "cached"], env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert first.stdout == second.stdout == f"{40 + 2 * 38} True\n"
    other = subprocess.run([sys.executable, "-c", DETECT, "cached"], env={**env, "ADC_CACHE": "0"},
                           capture_output=True, text=True)
    assert other.returncode != 0 and "NoneType" in other.stderr       # without the cache it must detect
