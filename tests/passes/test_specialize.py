"""Specialization: a kernel with dimension symbols bound to sizes is a verified function whose
types and dimension attributes hold the sizes, in its loops' and branches' regions too, and whose
values equal the kernel's at those sizes (NumPy interpreter as the oracle)."""
import numpy as np
import pytest

from adc.errors import CompileError
from adc.frontend import compile_source
from adc.ir.interp import run
from adc.ir.printer import format_func
from adc.ir.verify import verify
from adc.passes.pipeline import DEFAULT_PIPELINE, run_pipeline
from adc.passes.specialize import specialize

SOURCE = """
def scale(v: f64[K]) -> f64[K]:
    return v / f64(K)

def f(x: f64[B, C], n: i64) -> (f64[B], f64):
    y = scale(x[:, 0]) * f64(C)
    for i in range(n):
        y = y + mean(x, axis=1) / f64(B)
    if sum(y) > 0.0:
        y = y * 2.0
    s = x[:, 0] * 0.0
    for t in range(B):
        s = s + x[t, C - 1]
    return y, sum(s)
"""
rng = np.random.default_rng(0)


@pytest.fixture(scope="module")
def module():
    return compile_source(SOURCE, "f.adc")



@pytest.mark.parametrize("sizes", [{"B": 6, "C": 3}, {"C": 4}, {"B": 1, "C": 1}, {"B": 0, "C": 2}])
def test_bound_sizes_give_the_kernels_values(module, sizes):
    extended, func = specialize(module, "f", sizes)
    verify(extended)
    b, c = sizes.get("B", 5), sizes["C"]
    assert func.name == "f_" + "_".join(f"{s}{n}" for s, n in sorted(sizes.items()))
    assert [tuple(t.shape) for t in func.param_types] == [(sizes.get("B", func.param_types[0].shape[0]), c), ()]
    x = rng.standard_normal((b, c))
    for n in (0, 2):
        got, want = run(extended, func.name, x, np.int64(n)), run(module, "f", x, np.int64(n))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-13)


def test_every_type_and_dimension_attribute_of_the_specialized_nest_is_concrete(module):
    extended, func = specialize(module, "f", {"B": 6, "C": 3})
    texts = [format_func(func)] + [format_func(extended[r]) for r in func.regions()]
    assert func.regions(), "the kernel's loops and branch are regions of the specialized function"
    for text in texts:
        assert "[B" not in text and "C]" not in text and "value = C" not in text and "value = B" not in text, text
    assert set(func.regions()).isdisjoint(module["f"].regions()), "the kernel's own regions stay as they were"


def test_the_original_kernel_is_untouched_and_the_pipeline_runs(module):
    extended, func = specialize(module, "f", {"B": 4, "C": 3})
    assert extended["f"] is module["f"]
    optimized = run_pipeline(extended, DEFAULT_PIPELINE, verify=True)
    x = rng.standard_normal((4, 3))
    for g, w in zip(run(optimized, func.name, x, np.int64(3)), run(module, "f", x, np.int64(3))):
        np.testing.assert_allclose(g, w, rtol=1e-13)


def test_a_name_already_taken_gets_another(module):
    once, first = specialize(module, "f", {"C": 2})
    twice, second = specialize(once, "f", {"C": 2})
    assert first.name != second.name and first.name in twice.funcs


@pytest.mark.parametrize("sizes, message", [({"N": 3}, "no dimension symbol N"),
                                            ({"K": 3}, "no dimension symbol K"),
                                            ({"C": -1}, "non-negative")])
def test_sizes_that_do_not_fit_the_kernel(module, sizes, message):
    with pytest.raises(CompileError, match=message):
        specialize(module, "f", sizes)
