"""combine_sums keeps the value of random linear combinations of sums (within rounding: it
reassociates) and leaves one sum per combination."""
import numpy as np
import pytest

from adc.ir.builder import Builder
from adc.ir.core import Module
from adc.ir.interp import run
from adc.ir.types import F64, SymDim, TensorType
from adc.ir.verify import verify
from adc.passes.combine_sums import combine_sums

B, H = SymDim.symbol("B"), SymDim.symbol("H")


def combination(rng, axes):
    """@f(x, y, z: f64[B,H], c: f64 of the sums' type) -> a random tree of add/sub/neg/mul/div over
    sums of x, y, z along `axes` (each sum used once); returns the module and its number of sums."""
    b = Builder()
    xs = [b.param(name, TensorType(F64, (B, H))) for name in "xyz"]
    summed = TensorType(F64, tuple(d for k, d in enumerate((B, H)) if k not in axes))
    c = b.param("c", summed)
    terms = [b.op("reduce_sum", xs[rng.integers(3)], axes=list(axes)) for _ in range(rng.integers(2, 7))]
    while len(terms) > 1:
        kind = rng.integers(5)
        if kind == 0:
            terms[-1] = b.op("neg", terms[-1])
        elif kind == 1:
            terms[-1] = b.op("mul", c, terms[-1]) if rng.integers(2) else b.op("mul", terms[-1], c)
        elif kind == 2:
            terms[-1] = b.op("div", terms[-1], c)
        else:
            right, left = terms.pop(), terms.pop()
            terms.append(b.op("add" if kind == 3 else "sub", left, right))
    return Module({"f": b.finish("f", [b.op("neg", terms[0])])})


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1)])
def test_a_random_combination_of_sums_is_one_sum_of_the_same_value(seed, axes):
    rng = np.random.default_rng(seed)
    module = combination(rng, axes)
    after = combine_sums(module)
    verify(after)
    assert [op.name for op in after["f"].ops].count("reduce_sum") == 1
    assert after["f"].ops[-1].name == "neg"         # a scaling that ends it stays after the sum
    args = [rng.standard_normal((3, 5)) for _ in range(3)]
    args.append(rng.uniform(0.5, 2.0, size=(5,) if axes == (0,) else (3,) if axes == (1,) else ()))
    np.testing.assert_allclose(run(after, "f", *args)[0], run(module, "f", *args)[0], rtol=1e-12, atol=1e-12)
