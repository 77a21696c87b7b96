"""adc/runtime/native_substitution.c, the loop recovering a sparse Hessian's entries from an
acyclic coloring's products: its values against the loop written in Python (and the matrix the
products came from), float64 and float32, more entries than its stack holds; a plan that does not
fit its arrays refused before any is read; and the whole of it under AddressSanitizer."""
import numpy as np
import pytest

from adc.runtime import native_substitution
from tests.support.asan import LIBASAN, build, run_with_asan
from tests.support.repository import ROOT
from tests.support.sparse_problems import symmetric_problem


def prepared(s, products, nnz):
    return native_substitution.prepare(s.gather, s.parent, s.first, s.second, products.size, nnz)


@pytest.mark.parametrize("n, density", [(1, 0.0), (40, 0.08), (300, 0.01), (3000, 0.0005)])
def test_the_entries_equal_the_matrix(n, density):
    h, pattern, s, products = symmetric_problem(n, density)
    out = np.full(pattern.nnz, np.nan)
    native_substitution.substitute(prepared(s, products, pattern.nnz), products, out)
    np.testing.assert_allclose(out, h[pattern.row_ids(), pattern.indices], rtol=1e-12, atol=1e-13)
    assert len(s.gather) > 4096 or n < 3000, "the largest case has more entries than the stack holds"


def test_float32_products_give_float32_entries():
    h, pattern, s, products = symmetric_problem(50, 0.06)
    out = np.empty(pattern.nnz, np.float32)
    native_substitution.substitute(prepared(s, products, pattern.nnz), products.astype(np.float32), out)
    np.testing.assert_allclose(out, h[pattern.row_ids(), pattern.indices], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("field, value, message", [
    ("gather", 10 ** 9, "entry 0 indexes outside"), ("gather", -1, "entry 0 indexes outside"),
    ("first", -1, "entry 0 indexes outside"), ("second", 10 ** 6, "entry 0 indexes outside"),
    ("parent", 0, r"its parent \(0\) is not after it"), ("parent", 10 ** 6, "not after it"),
])
def test_a_plan_indexing_outside_its_arrays_is_refused(field, value, message):
    _, pattern, s, products = symmetric_problem(20, 0.1)
    arrays = {name: getattr(s, name).copy() for name in ("gather", "parent", "first", "second")}
    arrays[field][0] = value
    with pytest.raises(ValueError, match=message):
        native_substitution.prepare(arrays["gather"], arrays["parent"], arrays["first"], arrays["second"],
                                    products.size, pattern.nnz)


def test_arguments_of_other_kinds_or_sizes_are_refused():
    _, pattern, s, products = symmetric_problem(20, 0.1)
    plan = prepared(s, products, pattern.nnz)
    with pytest.raises(TypeError, match="gather must be a contiguous int64 array"):
        native_substitution.prepare(s.gather.astype(np.int32), s.parent, s.first, s.second, products.size, 1)
    with pytest.raises(ValueError, match="differ in length"):
        native_substitution.prepare(s.gather, s.parent[:-1], s.first, s.second, products.size, pattern.nnz)
    with pytest.raises(ValueError, match=r"products must have \d+ elements and out \d+"):
        native_substitution.substitute(plan, products[:-1], np.empty(pattern.nnz))
    with pytest.raises(ValueError, match="out"):
        native_substitution.substitute(plan, products, np.empty(pattern.nnz + 1))
    with pytest.raises(TypeError, match="out must be a contiguous float64 array"):
        native_substitution.substitute(plan, products, np.empty(pattern.nnz, np.float32))
    with pytest.raises(TypeError, match="products must be a contiguous float64 array"):
        native_substitution.substitute(plan, products.reshape(-1, 1)[::2, 0], np.empty(pattern.nnz))
    read_only = np.empty(pattern.nnz)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        native_substitution.substitute(plan, products, read_only)
    with pytest.raises(ValueError):
        native_substitution.substitute(object(), products, np.empty(pattern.nnz))


DRIVE = """
import numpy as np
from adc.runtime import sparse_derivatives
from tests.support.sparse_problems import symmetric_problem
assert sparse_derivatives.native_substitution is extension
for n, density in ((1, 0.0), (60, 0.05), (3000, 0.0005)):
    h, pattern, s, products = symmetric_problem(n, density)
    for dtype in (np.float64, np.float32):
        plan = extension.prepare(s.gather, s.parent, s.first, s.second, products.size, pattern.nnz)
        out = np.empty(pattern.nnz, dtype)
        extension.substitute(plan, products.astype(dtype), out)
        np.testing.assert_allclose(out, h[pattern.row_ids(), pattern.indices], rtol=1e-4, atol=1e-5)
    bad = s.gather.copy()
    bad[-1] = products.size
    try:
        extension.prepare(bad, s.parent, s.first, s.second, products.size, pattern.nnz)
    except ValueError:
        pass
    else:
        raise AssertionError("an index past the products was prepared")
import adc
m = adc.compile("def loss(x: f64[N]) -> f64:\\n    return sum(sin(x[1:] * x[:N-1])) + sum(x * x * x)\\n")
hessian = adc.hessian(m.loss, sparse=True)
x = np.linspace(-1, 1, 5000)
values = hessian.values(x)
assert hessian.colors == 2 and np.isfinite(values).all()
print("asan child ran")
"""


@pytest.mark.skipif(LIBASAN is None, reason="gcc or its AddressSanitizer runtime is not installed")
def test_the_substitution_is_clean_under_asan(tmp_path):
    path = build(ROOT / "adc" / "runtime" / "native_substitution.c", "native_substitution", tmp_path)
    done = run_with_asan(DRIVE, "adc.runtime.native_substitution", path)
    assert "AddressSanitizer" not in done.stderr, done.stderr[-6000:]
    assert done.returncode == 0 and "asan child ran" in done.stdout, done.stderr[-6000:]
