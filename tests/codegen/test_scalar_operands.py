"""A nest reads each scalar operand once, in its entry, whatever branch first reads it.

A gather by a scalar index inside a padded, concatenated nest read the index in a branch, per
element: the vectorizer made it a masked gather of one address, and LLVM's AVX-512 lowering took
an inactive lane of it for every lane's index (a wild address; a segfault on d34b01a). Read once
in the entry, the index is a loop-invariant scalar.
"""
import numpy as np
import pytest

from adc.ir.interp import run
from adc.ir.parser import parse_module
from tests.support.native import jit_module

PADDED_GATHER = """
func @g(%a: i64, %p8: f64[B,N], %p13: f64[B], %p28: f64[S,B,N-1,3], %p30: f64[S,B,N,2]) -> f64[S,B,N,3] {
  %0 = gather %p8, %a {axis = 1} : f64[B]
  %2 = constant {dtype = f64, value = 0.0} : f64
  %3 = broadcast %p13 {dims = [1], shape = [S,B]} : f64[S,B]
  %4 = reshape %3 {shape = [S,B,1,1]} : f64[S,B,1,1]
  %5 = pad %4, %2 {high = [0,0,0,0], low = [0,0,0,2]} : f64[S,B,1,3]
  %6 = concat %p28, %5 {axis = 2} : f64[S,B,N,3]
  %7 = broadcast %0 {dims = [1], shape = [S,B,N,2]} : f64[S,B,N,2]
  %8 = mul %p30, %7 : f64[S,B,N,2]
  %9 = pad %8, %2 {high = [0,0,0,0], low = [0,0,0,1]} : f64[S,B,N,3]
  %10 = add %6, %9 : f64[S,B,N,3]
  return %10
}
"""


@pytest.fixture(scope="module")
def padded_gather():
    module = parse_module(PADDED_GATHER, "padded_gather.ir")
    return module, jit_module(module)


@pytest.mark.parametrize("s, b, n", [(2, 3, 4), (1, 1, 2), (3, 5, 7), (4, 8, 16)])
@pytest.mark.parametrize("a", [0, 1, -1, -2])
def test_a_gather_by_a_scalar_in_a_padded_nest_matches_the_interpreter(padded_gather, s, b, n, a):
    module, compiled = padded_gather
    rng = np.random.default_rng(0)
    args = [np.int64(a), rng.standard_normal((b, n)), rng.standard_normal(b),
            rng.standard_normal((s, b, n - 1, 3)), rng.standard_normal((s, b, n, 2))]
    np.testing.assert_array_equal(compiled.g(*args).numpy(), run(module, "g", *args)[0])
