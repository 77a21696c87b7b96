"""Random straight-line IR functions of float64 matrices, for the transformations' tests: batch(f)
equals f stacked over examples, jacobian(f) equals finite differences.

    @given(programs())
    def test_...(program):
        module, flags = program        # @f(%x0, %x1: f64[M,N], %w: f64[N,N]) -> (f64[M,N], f64), batched params
"""
import itertools

from hypothesis import strategies as st

from adc.ir.builder import Builder
from adc.ir.core import Module
from adc.ir.types import F64, SymDim, TensorType


def flag_choices(n: int) -> list[tuple[bool, ...]]:
    """Every choice of which of `n` params are batched, at least one."""
    return [flags for flags in itertools.product([False, True], repeat=n) if any(flags)]


@st.composite
def programs(draw):
    """A random straight-line function of f64[M,N] values: elementwise ops, reductions broadcast
    back, transposes through a matmul with a square param, slices padded back; params batched at random."""
    unary, binary = ("sin", "tanh", "neg", "exp", "abs"), ("add", "mul", "sub", "maximum")
    b = Builder()
    mn = TensorType(F64, (SymDim.symbol("M"), SymDim.symbol("N")))
    pool = [b.param("x0", mn), b.param("x1", mn)]
    square = b.param("w", TensorType(F64, (mn.shape[1], mn.shape[1])))
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["unary", "binary", "reduce", "matmul", "slice"]))
        x = draw(st.sampled_from(pool))
        if kind == "unary":
            pool.append(b.op(draw(st.sampled_from(unary)), x))
        elif kind == "binary":
            pool.append(b.op(draw(st.sampled_from(binary)), x, draw(st.sampled_from(pool))))
        elif kind == "reduce":
            axis = draw(st.integers(0, 1))
            pool.append(b.op("broadcast", b.op("reduce_sum", x, axes=[axis]), dims=[1 - axis], shape=mn.shape))
        elif kind == "matmul":
            pool.append(b.op("matmul", x, square))
        else:
            cut = b.op("slice", x, start=[0, 1], stop=list(mn.shape), step=[1, 1])
            pool.append(b.op("pad", cut, b.op("constant", dtype=F64, value=0.5), low=[0, 1], high=[0, 0]))
    func = b.finish("f", [pool[-1], b.op("reduce_sum", pool[-1], axes=[0, 1])])
    flags = draw(st.sampled_from(flag_choices(3)))
    return Module({"f": func}, "random"), flags
