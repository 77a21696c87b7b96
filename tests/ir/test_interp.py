"""The reference interpreter agrees with direct NumPy computations, op by op, in each op's dtype."""
import warnings

import numpy as np
import pytest
import scipy.special

from adc.ir.builder import Builder
from adc.ir.core import Module
from adc.ir.interp import eval_rules, run
from adc.ir.ops import OPS
from adc.ir.parser import parse_module
from adc.ir.types import BOOL, F32, F64, I32, SymDim, TensorType, parse_dim

N, M = SymDim.symbol("N"), SymDim.symbol("M")
rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def positive(*shape):
    return (rng.random(shape) + 0.1).astype(np.float32)


def single_op(name, args, types, **attrs):
    b = Builder()
    params = [b.param(f"a{i}", t) for i, t in enumerate(types)]
    func = b.finish("f", [b.op(name, *params, **attrs)])
    return run(Module({"f": func}), "f", *args)[0]


# (op, arguments, parameter types, attrs, NumPy reference on float64 copies, rtol)
X, Y, P, C = f32(5), f32(5), positive(5), rng.random(5) < 0.5
V = TensorType(F32, (N,))
UNARY = {
    "sin": (X, np.sin), "cos": (X, np.cos), "tan": (X, np.tan), "exp": (X, np.exp), "log": (P, np.log),
    "log1p": (P, np.log1p), "expm1": (X, np.expm1), "sqrt": (P, np.sqrt), "rsqrt": (P, lambda v: v ** -0.5),
    "tanh": (X, np.tanh), "sigmoid": (X, lambda v: 1 / (1 + np.exp(-v))), "round": (X * 3, np.round),
    "floor": (X * 3, np.floor), "neg": (X, lambda v: -v), "abs": (X, np.abs), "sign": (X, np.sign),
    "stop_gradient": (X, lambda v: v),
    "log2": (P, np.log2), "log10": (P, np.log10), "exp2": (X, np.exp2), "cbrt": (X, np.cbrt), "sinh": (X, np.sinh),
    "cosh": (X, np.cosh), "asinh": (X, np.arcsinh), "acosh": (P + 1, np.arccosh), "atanh": (np.tanh(X), np.arctanh),
    "erf": (X, scipy.special.erf), "erfc": (X, scipy.special.erfc), "lgamma": (X, scipy.special.gammaln),
    "digamma": (X, scipy.special.psi), "trigamma": (X, lambda v: scipy.special.polygamma(1, v)),
}
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "minimum": np.minimum, "maximum": np.maximum, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal,
    "atan2": np.arctan2, "hypot": np.hypot,
}
A23, B34 = f32(2, 3), f32(3, 4)
CASES = [(name, [x], [V], {}, ref, 1e-6) for name, (x, ref) in UNARY.items()]
CASES += [(name, [X, np.where(C, X, Y)], [V, V], {}, ref, 1e-6) for name, ref in BINARY.items()]
CASES += [
    ("pow", [P, Y], [V, V], {}, np.power, 1e-6),
    ("select", [C, X, Y], [TensorType(BOOL, (N,)), V, V], {}, np.where, 0),
    ("convert", [X * 10], [V], {"dtype": I32}, lambda v: np.trunc(v).astype(np.int32), 0),
    ("broadcast", [X], [V], {"dims": (1,), "shape": (3, N)}, lambda v: np.stack([v] * 3), 0),
    ("broadcast", [f32(2, 1)], [TensorType(F32, (M, 1))], {"dims": (0, 2), "shape": (M, 3, 4)},
     lambda v: np.tile(v[:, None, :], (1, 3, 4)), 0),
    ("reshape", [A23], [TensorType(F32, (M, N))], {"shape": (N * M,)}, lambda v: v.ravel(), 0),
    ("transpose", [A23], [TensorType(F32, (M, N))], {"perm": (1, 0)}, lambda v: v.T, 0),
    ("slice", [f32(9)], [TensorType(F32, (9,))], {"start": (1,), "stop": (8,), "step": (3,)}, lambda v: v[1:8:3], 0),
    ("slice", [A23], [TensorType(F32, (M, N))], {"start": (1, 0), "stop": (M, parse_dim("N-1")), "step": (1, 1)},
     lambda v: v[1:, :-1], 0),
    ("concat", [X, A23[0]], [V, TensorType(F32, (M,))], {"axis": 0}, lambda a, b: np.r_[a, b], 0),
    ("pad", [X, np.float32(9)], [V, TensorType(F32)], {"low": (2,), "high": (1,)},
     lambda v, c: np.r_[[c, c], v, [c]], 0),
    ("reduce_sum", [A23], [TensorType(F32, (M, N))], {"axes": (1,)}, lambda v: v.sum(1), 1e-6),
    ("reduce_prod", [A23], [TensorType(F32, (M, N))], {"axes": (0, 1)}, np.prod, 1e-6),
    ("reduce_max", [A23], [TensorType(F32, (M, N))], {"axes": (0,)}, lambda v: v.max(0), 0),
    ("reduce_min", [A23], [TensorType(F32, (M, N))], {"axes": (1,)}, lambda v: v.min(1), 0),
    ("argmax", [A23], [TensorType(F32, (M, N))], {"axes": (1,)}, lambda v: v.argmax(1), 0),
    ("argmin", [A23], [TensorType(F32, (M, N))], {"axes": (0,)}, lambda v: v.argmin(0), 0),
    ("matmul", [A23, B34], [TensorType(F32, (M, N)), TensorType(F32, (N, 4))], {}, lambda a, b: a @ b, 1e-5),
]


@pytest.mark.parametrize("name, args, types, attrs, reference, rtol", CASES, ids=[c[0] for c in CASES])
def test_op_matches_numpy(name, args, types, attrs, reference, rtol):
    got = single_op(name, args, types, **attrs)
    expected = reference(*(np.asarray(a, np.float64) if a.dtype == np.float32 else a for a in map(np.asarray, args)))
    assert got.dtype == OPS[name].type_rule([t for t in types], attrs, {})[0].dtype.numpy
    np.testing.assert_allclose(got, np.asarray(expected).astype(got.dtype), rtol=rtol, atol=rtol)


def test_every_op_has_an_eval_rule():
    assert sorted(set(OPS) - set(eval_rules)) == []


SOURCES = """\
func @f(%x: f32[N,M]) -> (f32, i64, f32[N,M], f64[2,N]) {
  %0 = constant {dtype = f32, value = 0.5} : f32
  %1 = dim {dtype = i64, value = 2*N+M} : i64
  %2 = iota {axis = 1, dtype = f32, shape = [N,M]} : f32[N,M]
  %3 = call %x {callee = @g} : f64[2,N]
  return %0, %1, %2, %3
}

func @g(%y: f32[A,B]) -> f64[2,A] {
  %0 = reduce_sum %y {axes = [1]} : f32[A]
  %1 = convert %0 {dtype = f64} : f64[A]
  %2 = reshape %1 {shape = [1,A]} : f64[1,A]
  %3 = concat %2, %2 {axis = 0} : f64[2,A]
  return %3
}
"""


def test_constant_dim_iota_and_call():
    x = f32(3, 4)
    c, d, i, s = run(parse_module(SOURCES), "f", x)
    assert c == np.float32(0.5) and d.dtype == np.int64 and d == 2 * 3 + 4
    np.testing.assert_array_equal(i, np.tile(np.arange(4, dtype=np.float32), (3, 1)))
    np.testing.assert_allclose(s, np.stack([x.astype(np.float64).sum(1)] * 2), rtol=1e-6)


def test_ieee_corner_cases():
    nan, inf = np.float32(np.nan), np.float32(np.inf)
    v = np.array([nan, 1, -2.5, 0.5, 1.5, -0.0], np.float32)
    assert np.isnan(single_op("maximum", [v, np.zeros(6, np.float32)], [V, V])[0])
    assert np.isnan(single_op("minimum", [np.zeros(6, np.float32), v], [V, V])[0])
    np.testing.assert_array_equal(single_op("round", [v], [V])[1:5], [1, -2, 0, 2])
    assert np.isnan(single_op("sign", [v], [V])[0])
    np.testing.assert_array_equal(single_op("convert", [np.array([2.9, -2.9], np.float32)], [V], dtype=I32), [2, -2])
    empty = single_op("reduce_max", [np.zeros((3, 0), np.float32)], [TensorType(F32, (M, N))], axes=(1,))
    np.testing.assert_array_equal(empty, [-inf] * 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = single_op("sigmoid", [np.array([-1e4, 1e4, -inf, inf], np.float32)], [V])
        single_op("log", [np.array([0, -1], np.float32)], [V])
    np.testing.assert_array_equal(s, [0, 1, 0, 1])


def test_f32_ops_compute_in_float32():
    x = np.float32(16777216)
    assert single_op("add", [x, np.float32(1)], [TensorType(F32)] * 2) == x  # 2**24 + 1 rounds back in f32
    assert single_op("add", [np.float64(x), np.float64(1)], [TensorType(F64)] * 2) == 16777217


def test_arguments_are_checked():
    module = parse_module("func @f(%x: f32[N], %y: f32[N]) -> f32[N] {\n  %0 = add %x, %y : f32[N]\n  return %0\n}\n")
    with pytest.raises(ValueError, match=r"argument %y has shape \(4,\), expected f32\[N\] = \(3,\)"):
        run(module, "f", f32(3), f32(4))
    with pytest.raises(ValueError, match="argument %x has dtype float64"):
        run(module, "f", np.zeros(3), f32(3))
    with pytest.raises(ValueError, match="argument %x has rank 2"):
        run(module, "f", f32(3, 1), f32(3))
    with pytest.raises(ValueError, match="takes 2 arguments"):
        run(module, "f", f32(3))
    assert run(module, "f", [1.0, 2.0], f32(2))[0].dtype == np.float32


LAYOUTS = """
func @broadcast_operand(%a: f64[1,1,K], %column: f64[K]) -> f64[1,1,3] {
  %0 = broadcast %column {dims = [1], shape = [1,K,3]} : f64[1,K,3]
  %1 = matmul %a, %0 : f64[1,1,3]
  return %1
}

func @dense_operand(%a: f64[1,1,K], %b: f64[1,K,3]) -> f64[1,1,3] {
  %0 = matmul %a, %b : f64[1,1,3]
  return %0
}
"""


def test_a_products_bits_do_not_depend_on_how_its_operand_is_laid_out():
    """A broadcast operand (a view with zero strides) and the same values in a dense array give the
    same product to the last bit: the JVP of a program keeps its primal results bit for bit while
    rewriting a broadcast as a reshape, and NumPy sums the two layouts in different orders."""
    module, draws = parse_module(LAYOUTS), np.random.default_rng(11)
    for depth in [2, 3, 4, 5, 7, 8] * 20:
        a, column = draws.standard_normal((1, 1, depth)), draws.standard_normal(depth)
        dense = np.ascontiguousarray(np.broadcast_to(column[None, :, None], (1, depth, 3)))
        by_view, = run(module, "broadcast_operand", a, column)
        by_dense, = run(module, "dense_operand", a, dense)
        assert by_view.tobytes() == by_dense.tobytes(), depth
