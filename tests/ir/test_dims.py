"""Symbolic dimensions: canonical arithmetic, printing and parsing, and call-time constraints."""
import pytest
from hypothesis import given, strategies as st

from adc.ir.builder import Builder
from adc.ir.shapes import constraints
from adc.ir.types import F32, SymDim, TensorType, evaluate_dim, num_elements, parse_dim

N, M, B = (SymDim.symbol(s) for s in "NMB")


@pytest.mark.parametrize("dim, text", [
    (N - 1, "N-1"), (2 * N + 1, "2*N+1"), (B * N, "B*N"), (N * B, "B*N"), (3 - N, "-N+3"),
    (N + M, "M+N"), (N * N - M, "N*N-M"), (-(2 * N), "-2*N"),
])
def test_canonical_printing(dim, text):
    assert str(dim) == text
    assert parse_dim(text) == dim


def test_arithmetic_cancels_to_ints():
    assert (N + 1) - N == 1 and isinstance((N + 1) - N, int)
    assert N * 0 == 0
    assert num_elements((B, 4, N)) == 4 * B * N
    assert parse_dim("7") == 7


@pytest.mark.parametrize("bad", ["", "N+", "*N", "N**2", "2N", "N+(1)"])
def test_malformed_dimensions_are_rejected(bad):
    with pytest.raises(ValueError):
        parse_dim(bad)


polys = st.builds(lambda a, b, c, d: a * N + b * M + c * N * M + d,
                  *(st.integers(-5, 5) for _ in range(4)))


@given(polys, polys, st.integers(0, 50), st.integers(0, 50))
def test_arithmetic_agrees_with_evaluation(p, q, n, m):
    env = {"N": n, "M": m}
    assert evaluate_dim(p + q, env) == evaluate_dim(p, env) + evaluate_dim(q, env)
    assert evaluate_dim(p * q, env) == evaluate_dim(p, env) * evaluate_dim(q, env)
    assert evaluate_dim(parse_dim(str(p - q)), env) == evaluate_dim(p, env) - evaluate_dim(q, env)


def test_tensor_type_printing():
    assert str(TensorType(F32)) == "f32"
    assert str(TensorType(F32, (B, N - 1, 3))) == "f32[B,N-1,3]"


def test_slices_add_call_time_constraints():
    b = Builder()
    x = b.param("x", TensorType(F32, (N,)))
    y = b.op("slice", x, start=[1], stop=[3], step=[1])
    z = b.op("slice", x, start=[0], stop=[N - 1], step=[1])
    func = b.finish("f", [y, z])
    assert set(constraints(func)) == {N - 3, N - 1}
