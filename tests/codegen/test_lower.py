"""Lowering, op by op and in fused combinations: JIT-compiled kernels against NumPy in float64.

Kernels are built with adc.ir.builder (tests/support/ir_kernels.py), compiled and called
through the C ABI by tests/support/native.py.
"""
from __future__ import annotations

import math
import re

import llvmlite.binding as llvm
import numpy as np
import pytest
import scipy.special

from adc.abi import parse_type
from adc.codegen.lowering.fusion import MAX_FUSED, RECOMPUTED, plan
from adc.codegen.lowering.loops import ROLLED_ABOVE
from adc.codegen.lowering.lower import lower_module
from adc.codegen.lowering.rules.table import lower_rules
from adc.codegen.toolchain.target import Target
from adc.errors import CompileError
from adc.ir.builder import Builder, full
from adc.ir.core import Module
from adc.ir.ops import OPS
from tests.support.accuracy import assert_close
from tests.support.ir_kernels import kernel
from tests.support.native import call, compile_module, run
from tests.support.random_arrays import RNG, randn


# ---------------------------------------------------------------- every elementwise op

UNARY = {  # op: (NumPy oracle in float64, input)
    "neg": (np.negative, randn(37)), "abs": (np.abs, randn(37)), "sign": (np.sign, np.r_[randn(9), 0, np.nan]),
    "exp": (np.exp, randn(37)), "log": (np.log, np.abs(randn(37)) + 0.1), "log1p": (np.log1p, np.abs(randn(37))),
    "expm1": (np.expm1, randn(37) * 1e-3), "sin": (np.sin, randn(37)), "cos": (np.cos, randn(37)),
    "tan": (np.tan, randn(37)), "tanh": (np.tanh, randn(37)), "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), randn(37)),
    "sqrt": (np.sqrt, np.abs(randn(37))), "rsqrt": (lambda x: 1 / np.sqrt(x), np.abs(randn(37)) + 0.1),
    "round": (np.round, np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6, 7.0], np.float32)),
    "floor": (np.floor, randn(37) * 4), "stop_gradient": (lambda x: x, randn(37)),
    "log2": (np.log2, np.abs(randn(37)) + 0.1), "log10": (np.log10, np.abs(randn(37)) + 0.1),
    "exp2": (np.exp2, randn(37)), "cbrt": (np.cbrt, randn(37)), "sinh": (np.sinh, randn(37)),
    "cosh": (np.cosh, randn(37)), "asinh": (np.arcsinh, randn(37)), "acosh": (np.arccosh, np.abs(randn(37)) + 1),
    "atanh": (np.arctanh, np.tanh(randn(37))), "erf": (np.vectorize(math.erf), randn(37)),
    "erfc": (np.vectorize(math.erfc), randn(37)), "lgamma": (np.vectorize(math.lgamma), np.abs(randn(37)) + 0.1),
    "digamma": (scipy.special.psi, randn(37) + 0.5), "trigamma": (lambda x: scipy.special.polygamma(1, x), randn(37) + 0.5),
}
BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal, "atan2": np.arctan2, "hypot": np.hypot,
}


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float(name, dtype):
    oracle, x = UNARY[name]
    (got,) = run(kernel(f"x: {dtype}[N]", lambda b, x: b.op(name, x)), x)
    assert_close(got, oracle(x.astype(np.float64)), got.dtype)


@pytest.mark.parametrize("name", ["neg", "abs", "sign"])
@pytest.mark.parametrize("dtype", ["i32", "i64"])
def test_unary_int(name, dtype):
    x = np.array([-7, -1, 0, 1, 5, 2**31 - 1 if dtype == "i32" else 2**40], dtype=parse_type(dtype).dtype.numpy)
    (got,) = run(kernel(f"x: {dtype}[N]", lambda b, x: b.op(name, x)), x)
    np.testing.assert_array_equal(got, UNARY[name][0](x))


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_float(name, dtype):
    x, y = np.r_[randn(30), np.nan, 1.0, np.inf], np.r_[randn(30), 1.0, np.nan, np.inf]
    if name == "pow":
        x = np.abs(x)
    (got,) = run(kernel(f"x: {dtype}[N], y: {dtype}[N]", lambda b, x, y: b.op(name, x, y)), x, y)
    with np.errstate(invalid="ignore"):
        want = BINARY[name](x.astype(np.float64), y.astype(np.float64))
    assert_close(got, want, got.dtype)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "maximum", "minimum", "lt", "le", "gt", "ge", "eq", "ne"])
def test_binary_int(name):
    x, y = RNG.integers(-50, 50, 41), RNG.integers(-50, 50, 41)
    (got,) = run(kernel("x: i64[N], y: i64[N]", lambda b, x, y: b.op(name, x, y)), x, y)
    np.testing.assert_array_equal(got, BINARY[name](x, y))


# every pair of a float divisor and dividend at the edges: signed zeros, infinities, nan, quotients
# that round (1e300 / 1e-300), large and tiny ones, both signs
FLOAT_EDGES = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.3, -7.0, 1e-300, 1e300, 3e38, -1e-40, np.inf, -np.inf,
                        np.nan])


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("name, oracle", [("mod", np.mod), ("floor_div", np.floor_divide)])
def test_floor_div_and_mod_of_floats_are_numpys_bit_for_bit(name, oracle, dtype):
    numpy_type = parse_type(dtype).dtype.numpy
    with np.errstate(all="ignore"):
        edges = FLOAT_EDGES.astype(numpy_type)
        x = np.r_[np.repeat(edges, len(edges)), randn(200, dtype=numpy_type) * 10].astype(numpy_type)
        y = np.r_[np.tile(edges, len(edges)), randn(200, dtype=numpy_type)].astype(numpy_type)
        want = oracle(x, y)
    (got,) = run(kernel(f"x: {dtype}[N], y: {dtype}[N]", lambda b, x, y: b.op(name, x, y)), x, y)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["i32", "i64"])
@pytest.mark.parametrize("name, oracle", [("mod", np.mod), ("floor_div", np.floor_divide)])
def test_floor_div_and_mod_of_integers_never_trap(name, oracle, dtype):
    # a zero divisor gives 0 and INT_MIN // -1 wraps to INT_MIN, as NumPy (LLVM's sdiv is undefined there)
    info = np.iinfo(parse_type(dtype).dtype.numpy)
    edges = np.array([0, 1, -1, 2, -2, 7, -7, info.min, info.max, info.min + 1], info.dtype)
    x = np.r_[np.repeat(edges, len(edges)), RNG.integers(-50, 50, 100)].astype(info.dtype)
    y = np.r_[np.tile(edges, len(edges)), RNG.integers(-9, 9, 100)].astype(info.dtype)
    with np.errstate(all="ignore"):
        want = oracle(x, y)
    (got,) = run(kernel(f"x: {dtype}[N], y: {dtype}[N]", lambda b, x, y: b.op(name, x, y)), x, y)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["bool", "i32", "i64"])
@pytest.mark.parametrize("name, oracle", [("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                                          ("bitwise_xor", np.bitwise_xor)])
def test_bitwise_binary(name, oracle, dtype):
    numpy_type = parse_type(dtype).dtype.numpy
    x, y = (RNG.integers(-2**20, 2**20, 37).astype(numpy_type) for _ in range(2))
    (got,) = run(kernel(f"x: {dtype}[N], y: {dtype}[N]", lambda b, x, y: b.op(name, x, y)), x, y)
    np.testing.assert_array_equal(got, oracle(x, y))


@pytest.mark.parametrize("dtype", ["bool", "i32", "i64"])
def test_bitwise_not(dtype):
    x = np.r_[RNG.integers(-2**20, 2**20, 35), 0, -1].astype(parse_type(dtype).dtype.numpy)
    (got,) = run(kernel(f"x: {dtype}[N]", lambda b, x: b.op("bitwise_not", x)), x)
    np.testing.assert_array_equal(got, np.invert(x))


def test_select_on_comparison():
    x, y = randn(33), randn(33)
    (got,) = run(kernel("x: f32[N], y: f32[N]", lambda b, x, y: b.op("select", b.op("gt", x, y), x, y)), x, y)
    np.testing.assert_array_equal(got, np.where(x > y, x, y))


def test_bool_parameters_and_results():
    c = np.array([True, False, True, True])
    (got,) = run(kernel("c: bool[N], d: bool[N]", lambda b, c, d: b.op("ne", c, d)), c, c[::-1])
    np.testing.assert_array_equal(got, c != c[::-1])


@pytest.mark.parametrize("source, dest", [("f32", "i32"), ("f64", "i64"), ("f32", "f64"), ("f64", "f32"),
                                          ("i32", "f64"), ("i64", "i32"), ("i32", "i64"), ("f32", "bool"),
                                          ("bool", "f32"), ("bool", "i64"), ("i64", "bool")])
def test_convert(source, dest):
    x = np.array([-2.7, -0.5, 0.0, 0.4, 1.0, 3.9, 100.2]).astype(parse_type(source).dtype.numpy)
    to = parse_type(dest).dtype
    (got,) = run(kernel(f"x: {source}[N]", lambda b, x: b.op("convert", x, dtype=to)), x)
    np.testing.assert_array_equal(got, x.astype(to.numpy))


def test_sources_constant_dim_iota():
    def body(b, x):
        n = b.op("broadcast", b.op("dim", dtype=parse_type("f32").dtype, value=x.type.shape[1]), dims=[],
                 shape=x.type.shape)
        i = b.op("iota", axis=0, dtype=parse_type("f32").dtype, shape=x.type.shape)
        c = b.op("broadcast", b.op("constant", dtype=parse_type("f32").dtype, value=0.5), dims=[], shape=x.type.shape)
        return b.op("add", b.op("mul", i, n), b.op("add", x, c))
    x = randn(4, 6)
    (got,) = run(kernel("x: f32[M,N]", body), x)
    assert_close(got, np.arange(4)[:, None] * 6.0 + x + 0.5, np.float32)


# ---------------------------------------------------------------- shapes: sizes, broadcasting, index maps

@pytest.mark.parametrize("n", [0, 1, 3, 17, 1000])
def test_fused_chain_at_several_sizes_including_empty(n):
    x = randn(n)
    module = kernel("x: f32[N], d: f32", lambda b, x, d: b.op("sigmoid", b.op(
        "add", x, b.op("broadcast", d, dims=[], shape=x.type.shape))))
    (got,) = run(module, x, np.float32(0.25))
    assert_close(got, 1 / (1 + np.exp(-(x.astype(np.float64) + 0.25))), np.float32)


def test_broadcast_row_and_column_vectors():
    def body(b, x, r, c):
        shape = x.type.shape
        return b.op("sub", b.op("add", x, b.op("broadcast", r, dims=[1], shape=shape)),
                    b.op("broadcast", c, dims=[0, 1], shape=shape))
    x, r, c = randn(5, 7), randn(7), randn(5, 1)
    (got,) = run(kernel("x: f32[B,N], r: f32[N], c: f32[B,1]", body), x, r, c)
    assert_close(got, x + r - c, np.float32)


def test_transpose_slice_reshape():
    def body(b, x):
        t = b.op("transpose", x, perm=[2, 0, 1])
        s = b.op("slice", t, start=[1, 0, 1], stop=[4, x.type.shape[0], 5], step=[2, 1, 3])
        return b.op("reshape", s, shape=[2 * x.type.shape[0] * 2])
    x = randn(3, 6, 4)
    (got,) = run(kernel("x: f32[A,6,4]", body), x)
    np.testing.assert_array_equal(got, x.transpose(2, 0, 1)[1:4:2, :, 1:5:3].reshape(-1))


def test_concat_and_pad():
    def body(b, x, y, v):
        joined = b.op("concat", x, y, x, axis=1)
        return b.op("pad", joined, v, low=[1, 0], high=[2, 3])
    x, y = randn(3, 2), randn(3, 5)
    (got,) = run(kernel("x: f32[M,N], y: f32[M,K], v: f32", body), x, y, np.float32(9))
    want = np.pad(np.concatenate([x, y, x], axis=1), [(1, 2), (0, 3)], constant_values=9)
    np.testing.assert_array_equal(got, want)


def test_concat_finds_each_operand_by_a_binary_search():
    sizes = [1, 2, 3, 1, 4, 2, 5]       # unequal parts: each split of the search falls elsewhere
    params = ", ".join(f"x{i}: f64[{size}]" for i, size in enumerate(sizes))
    xs = [np.arange(float(size)) + 10 * i for i, size in enumerate(sizes)]
    (got,) = run(kernel(params, lambda b, *xs: b.op("concat", *xs, axis=0)), *xs)
    np.testing.assert_array_equal(got, np.concatenate(xs))


def test_an_index_first_used_inside_one_arm_of_a_branch_serves_a_use_after_it():
    # (gather(e, 1, axis 2) * v)[m, b] reshaped and joined with zeros: the product's position is
    # first split into axes by the gather, inside its branch for an empty axis; the broadcast of v
    # reads the same axes after that branch (a reverse-mode batch Jacobian of a scatter made this)
    def body(b, e, v):
        m, n = e.type.shape[0], e.type.shape[1]
        one = b.op("constant", dtype=parse_type("i64").dtype, value=1)
        product = b.op("mul", b.op("gather", e, one, axis=2), b.op("broadcast", v, dims=[1], shape=[m, n]))
        column = b.op("reshape", product, shape=[m, n, 1])
        return b.op("concat", column, full(b, 0.0, parse_type("f64[M,N,K-1]")), axis=2)
    e, v = RNG.standard_normal((3, 2, 4)), RNG.standard_normal(2)
    (got,) = run(kernel("e: f64[M,N,K], v: f64[N]", body), e, v)
    np.testing.assert_array_equal(got, np.concatenate([(e[:, :, 1] * v)[:, :, None], np.zeros((3, 2, 3))], axis=2))


def lowers_to_valid_llvm(module: Module) -> str:
    """The LLVM IR `module` lowers to, after LLVM's verifier accepted it."""
    text = str(lower_module(module, "{}", Target.host().vector_bits))
    context = llvm.create_context()
    try:
        llvm.parse_assembly(text, context=context).verify()
    finally:
        context.close()
    return text


def test_a_concat_of_1000_operands_lowers():
    # lowering recurses once per level of the search (log2 of the operands), not once per operand
    module = kernel("x: f64[N]", lambda b, x: b.op("concat", *[x] * 1000, axis=0))
    lowers_to_valid_llvm(module)
    x = np.array([1.5, -2.0, 3.25])
    (got,) = run(module, x)
    np.testing.assert_array_equal(got, np.concatenate([x] * 1000))


def test_a_nest_of_300_loops_lowers():
    # a loop nest is as deep as a tensor's rank; lowering does not recurse per loop
    shape = ",".join(["2"] + ["1"] * 299)
    # (NumPy holds at most 64 axes, so the nest is checked by LLVM's verifier, not run against NumPy)
    text = lowers_to_valid_llvm(kernel(f"x: f64[{shape}]", lambda b, x: b.op("reduce_sum", x, axes=[0])))
    assert len(re.findall(r"^loop\.header[.\d]*:", text, re.MULTILINE)) >= 300


def test_multiple_results_returned_param_and_repeated_value():
    def body(b, x):
        y = b.op("exp", x)
        return [y, x, y, b.op("mul", y, y)]
    x = randn(2, 9)
    got = run(kernel("x: f32[B,N]", body), x)
    for g, w in zip(got, [np.exp(x), x, np.exp(x), np.exp(x) ** 2]):
        assert_close(g, w.astype(np.float64), np.float32)


# ---------------------------------------------------------------- reductions and matmul

AXES = [[0], [1], [2], [0, 1], [0, 2], [1, 2], [0, 1, 2]]


@pytest.mark.parametrize("axes", AXES)
@pytest.mark.parametrize("name, oracle", [("reduce_sum", np.sum), ("reduce_max", np.max),
                                          ("reduce_min", np.min), ("reduce_prod", np.prod)])
def test_reduction_over_axes(name, oracle, axes):
    x = randn(3, 4, 5, dtype=np.float64)
    (got,) = run(kernel("x: f64[A,B,C]", lambda b, x: b.op(name, x, axes=axes)), x)
    assert_close(got, oracle(x, axis=tuple(axes)), np.float64)


@pytest.mark.parametrize("shape", [(0, 5), (4, 0), (1, 1), (9, 130)])
def test_reductions_of_empty_and_tiny_inputs(shape):
    x = randn(*shape)
    for name, identity in [("reduce_sum", 0.0), ("reduce_max", -np.inf), ("reduce_min", np.inf)]:
        for axis in (0, 1):
            (got,) = run(kernel("x: f32[M,N]", lambda b, x: b.op(name, x, axes=[axis])), x)
            if name == "reduce_sum":    # f32 rounding grows with the magnitudes summed, not with their sum
                bound = 1e-6 * (np.abs(x).sum(axis, dtype=np.float64) + 1)
                np.testing.assert_array_less(np.abs(got - x.astype(np.float64).sum(axis)), bound)
            else:
                assert_close(got, getattr(np, name[7:])(x, axis=axis, initial=identity).astype(np.float64), np.float32)


def test_reduction_propagates_nan_and_fuses_its_producer():
    x = randn(4, 50)
    x[1, 7] = np.nan
    module = kernel("x: f32[B,N]", lambda b, x: [b.op("reduce_max", b.op("mul", x, x), axes=[1]),
                                                  b.op("reduce_sum", b.op("exp", x), axes=[0])])
    got = run(module, x)
    assert_close(got[0], np.max(x.astype(np.float64) ** 2, axis=1), np.float32)
    assert_close(got[1], np.exp(x.astype(np.float64)).sum(axis=0), np.float32)


def test_a_float_sum_over_rows_keeps_four_vector_accumulators():
    target = Target.host()
    module = llvm.parse_assembly(str(lower_module(kernel("x: f32[B,N]", lambda b, x: b.op("reduce_sum", x, axes=[1])),
                                                  '{"abi": 1}', target.vector_bits)))
    target.optimize(module)
    loop_bodies = [block for block in re.split(r"\n(?=[\w.]+:)", str(module)) if block.startswith("vector.body")]
    # two loops: a row of at most summation.BLOCK elements, and a longer row's blocks
    assert [len(re.findall(r"fadd reassoc <\d+ x float>", block)) for block in loop_bodies] == [4, 4]


@pytest.mark.parametrize("name", ["reduce_max", "reduce_min"])
def test_a_float_max_or_min_over_rows_keeps_four_vector_accumulators(name):
    """Interleaved (loops.loop_hints): the vector loop runs four independent max (min) chains, in
    the ordered loop (maxnum under no-NaN flags) and in the exact one that reruns rare rows."""
    target = Target.host()
    module = llvm.parse_assembly(str(lower_module(kernel("x: f32[B,N]", lambda b, x: b.op(name, x, axes=[1])),
                                                  '{"abi": 1}', target.vector_bits)))
    target.optimize(module)
    loop_bodies = [block for block in re.split(r"\n(?=[\w.]+:)", str(module)) if block.startswith("vector.body")]
    for intrinsic in (rf"@llvm\.{name[7:]}num\.v\d+f32\(", rf"@llvm\.{name[7:]}imum\.v\d+f32\("):
        assert [n for n in (len(re.findall(intrinsic, block)) for block in loop_bodies) if n] == [4]   # one chain: [1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["reduce_max", "reduce_min"])
def test_a_float_max_or_min_over_rows_gives_the_exact_bits_at_nan_zeros_and_inf(name, dtype):
    """The ordered loop's rows and the rows it reruns exactly (a NaN, or a zero extremum whose sign
    it cannot tell) agree with NaN-propagating, -0 < +0 semantics, bit for bit, at every lane."""
    rng = np.random.default_rng(0)
    width = 131
    rows = [rng.standard_normal(width), np.full(width, -np.inf), np.full(width, np.inf)]
    for position in (0, 17, 64, 130):
        for fill, special in [(-1.0, 0.0), (-1.0, -0.0), (1.0, -0.0), (1.0, 0.0), (0.5, np.nan)]:
            row = np.full(width, fill if name == "reduce_max" else -fill)
            row[position] = special
            rows.append(row)
    zeros = np.full(width, -0.0)
    zeros[77] = 0.0
    rows += [zeros, -zeros, np.full(width, -0.0), np.full(width, 0.0)]
    x = np.array(rows, dtype)
    extremum = np.max if name == "reduce_max" else np.min
    want = extremum(x, axis=1)
    for i, row in enumerate(x):     # a zero extremum: +0 when a +0 is there (max), -0 when a -0 is (min)
        if want[i] == 0:
            signs = np.signbit(row[row == 0])
            want[i] = 0.0 if (not signs.all() if name == "reduce_max" else not signs.any()) else -0.0
    ty = "f32" if dtype == np.float32 else "f64"
    (got,) = run(kernel(f"x: {ty}[B,N]", lambda b, x: b.op(name, x, axes=[1])), x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("name, oracle", [("reduce_max", np.max), ("reduce_min", np.min)])
def test_interleaved_max_and_min_propagate_a_nan_from_every_accumulator(name, oracle):
    """Rows with one NaN, at each position of the first 4 x 16 lanes and past them, and rows without."""
    x = randn(140, 203)
    x[np.arange(70), np.arange(70)] = np.nan
    (got,) = run(kernel("x: f32[B,N]", lambda b, x: b.op(name, x, axes=[1])), x)
    np.testing.assert_array_equal(got, oracle(x, axis=1))


@pytest.mark.parametrize("dtype, large", [("f32", 3e8), ("f64", 1e22)])
def test_trig_nests_rerun_exactly_where_an_argument_is_large(dtype, large):
    """Each kind of nest runs sin/cos/tan's fast variants, and again exactly when one argument is out of
    their range: then every result is right, and those of small arguments are the same bits as without."""
    def body(b, x, y):
        return [b.op("sin", x), b.op("reduce_sum", b.op("cos", x), axes=[1]),
                b.op("reduce_max", b.op("tan", x), axes=[0]), b.op("concat", b.op("sin", y), y, axis=1)]
    module = kernel(f"x: {dtype}[M,N], y: {dtype}[M,K]", body)
    x, y = randn(5, 40, dtype=parse_type(dtype).dtype.numpy), randn(5, 3, dtype=parse_type(dtype).dtype.numpy)
    small = run(module, x, y)
    x[2, 7], y[4, 1] = large, -large
    got = run(module, x, y)
    wide, wide_y = x.astype(np.float64), y.astype(np.float64)
    for g, w in zip(got, [np.sin(wide), np.cos(wide).sum(1), np.tan(wide).max(0),
                          np.concatenate([np.sin(wide_y), wide_y], axis=1)]):
        assert_close(g, w, g.dtype)
    np.testing.assert_array_equal(got[0][x != large], small[0][x != large])
    np.testing.assert_array_equal(got[1][[0, 1, 3, 4]], small[1][[0, 1, 3, 4]])


def test_a_trig_nest_runs_the_exact_function_only_when_the_fast_one_was_out_of_range():
    module = kernel("x: f32[N]", lambda b, x: b.op("sin", x))
    text = str(lower_module(module, '{"abi": 1}', Target.host().vector_bits))
    nest = text[text.index("define internal void @\"adc.sin."):]
    nest = nest[:nest.index("\n}\n")]
    fast, exact = nest.index("call float @\"adc.vm.sin.fast.f32\""), nest.index("call float @\"adc.vm.sin.f32\"")
    assert fast < exact and re.search(r"br i1 %\S+, label %\S+, label", nest[fast:exact])


def test_integer_reductions():
    x = RNG.integers(-9, 9, (6, 7)).astype(np.int32)
    module = kernel("x: i32[B,N]", lambda b, x: [b.op("reduce_sum", x, axes=[0]), b.op("reduce_max", x, axes=[1]),
                                                  b.op("reduce_min", x, axes=[0, 1])])
    for g, w in zip(run(module, x), [x.sum(0), x.max(1), x.min()]):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("m, k, n", [(3, 4, 5), (0, 4, 5), (3, 0, 5), (17, 33, 65)])
def test_matmul_dense_relu(m, k, n, dtype):
    def body(b, x, w, bias):
        y = b.op("add", b.op("matmul", x, w), b.op("broadcast", bias, dims=[1], shape=[x.type.shape[0], w.type.shape[1]]))
        return b.op("maximum", y, b.op("broadcast", b.op("constant", dtype=x.type.dtype, value=0.0), dims=[],
                                          shape=y.type.shape))
    np_dtype = parse_type(dtype).dtype.numpy
    x, w, bias = randn(m, k, dtype=np_dtype), randn(k, n, dtype=np_dtype), randn(n, dtype=np_dtype)
    (got,) = run(kernel(f"x: {dtype}[B,I], w: {dtype}[I,O], bias: {dtype}[O]", body), x, w, bias)
    want = np.maximum(x.astype(np.float64) @ w + bias, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == "f32" else 1e-12, atol=1e-4 if dtype == "f32" else 1e-12)


def test_batched_matmul_of_fused_operands():
    x, y = randn(2, 3, 4, 5, dtype=np.float64), randn(2, 3, 5, 6, dtype=np.float64)
    module = kernel("x: f64[P,Q,M,K], y: f64[P,Q,K,N]", lambda b, x, y: b.op("matmul", b.op("exp", x), y))
    (got,) = run(module, x, y)
    assert_close(got, np.exp(x) @ y, np.float64)


# ---------------------------------------------------------------- fusion decisions and coverage

def test_fusion_plan_of_sigmoid_shift_and_dense_relu():
    module = kernel("x: f32[N], d: f32", lambda b, x, d: b.op("sigmoid", b.op(
        "add", x, b.op("broadcast", d, dims=[], shape=x.type.shape))))
    func = next(iter(module))
    assert plan(func).materialized == frozenset(func.params) | {func.returns[0]}
    dense = kernel("x: f32[B,I], w: f32[I,O], c: f32[B,O]",
                   lambda b, x, w, c: b.op("exp", b.op("add", b.op("matmul", x, w), c)))
    func = next(iter(dense))
    assert len(plan(func).materialized - set(func.params)) == 2    # the gemm result and the output


def _relu_of_affine(b, x, w, c):
    a = b.op("add", b.op("matmul", x, w), c)
    zero = b.op("broadcast", b.op("constant", dtype=a.type.dtype, value=0.0), dims=[], shape=a.type.shape)
    return a, b.op("select", b.op("le", a, zero), zero, a)


def test_a_value_read_by_elementwise_ops_of_one_loop_is_computed_in_it():
    """relu(x @ w + c): the sum is read by the comparison and the select of one loop (and, squared,
    summed by a reduction's loop): no buffer of its own. Read by two loops, it is recomputed in each
    while it costs at most RECOMPUTED ops per element, and gets a buffer when it costs more."""
    params = "x: f64[B,I], w: f64[I,O], c: f64[B,O]"
    rng = np.random.default_rng(0)
    x, w, c = rng.standard_normal((4, 3)), rng.standard_normal((3, 5)), rng.standard_normal((4, 5))
    relu = kernel(params, lambda b, x, w, c: _relu_of_affine(b, x, w, c)[1])
    summed = kernel(params, lambda b, x, w, c: b.op("reduce_sum", b.op("mul", *[_relu_of_affine(b, x, w, c)[1]] * 2),
                                                      axes=[0, 1]))
    for module, want in ((relu, np.maximum(x @ w + c, 0)), (summed, (np.maximum(x @ w + c, 0) ** 2).sum())):
        func = next(iter(module))
        assert {op.name for op in func.ops if op.result in plan(func).materialized} == {"matmul", *(
            ["reduce_sum"] if module is summed else ["select"])}
        (got,) = run(module, x, w, c)
        assert_close(got, want, np.float64)

    def two_loops(b, x, w, c, extra_ops=0):
        a = b.op("add", b.op("matmul", x, w), c)
        for _ in range(extra_ops):
            a = b.op("tanh", a)
        return b.op("reduce_sum", a, axes=[0]), b.op("exp", a)

    for extra, buffered in ((0, False), (RECOMPUTED, True)):
        module = kernel(params, lambda b, x, w, c: two_loops(b, x, w, c, extra))
        func = next(iter(module))
        assert (func.ops[-3].result in plan(func).materialized) == buffered    # the last add or tanh
        a = x @ w + c
        for _ in range(extra):
            a = np.tanh(a)
        for got, want in zip(run(module, x, w, c), (a.sum(0), np.exp(a))):
            assert_close(got, want, np.float64)


def test_a_computed_value_read_through_a_reshape_by_two_loops_gets_a_buffer():
    """(x + y) reshaped [B, I] -> [I, B] and read by two loops: recomputing it at an element of either
    takes divisions to find the element it reshapes, so it is stored once and both read the buffer."""
    params = "x: f64[B,I], y: f64[B,I], z: f64[I,B]"
    rng = np.random.default_rng(0)
    x, y, z = rng.standard_normal((4, 3)), rng.standard_normal((4, 3)), rng.standard_normal((3, 4))

    def two_readers(b, x, y, z):
        s = b.op("reshape", b.op("add", x, y), shape=z.type.shape)
        return b.op("reduce_sum", b.op("mul", s, z), axes=[0]), b.op("sub", s, z)

    module = kernel(params, two_readers)
    func = next(iter(module))
    reshaped = next(op.result for op in func.ops if op.name == "reshape")
    assert reshaped in plan(func).materialized
    s = (x + y).reshape(3, 4)
    for got, want in zip(run(module, x, y, z), ((s * z).sum(0), s - z)):
        assert_close(got, want, np.float64)


def test_relu_saving_its_mask_and_result_is_one_loop_storing_both():
    """The forward half of a split VJP returns relu's mask and result: one loop computes x @ w + c
    once per element and stores both (a large B spans several threads)."""
    params = "x: f64[B,I], w: f64[I,O], c: f64[O]"

    def saved(b, x, w, c):
        a = b.op("add", b.op("matmul", x, w), b.op("broadcast", c, dims=[1], shape=[x.type.shape[0], w.type.shape[1]]))
        zero = b.op("broadcast", b.op("constant", dtype=a.type.dtype, value=0.0), dims=[], shape=a.type.shape)
        mask = b.op("le", a, zero)
        return mask, b.op("select", mask, zero, a)
    module = kernel(params, saved)
    func = next(iter(module))
    fusion = plan(func)
    assert fusion.stored_by == {func.returns[1]: (func.returns[0],)}
    assert not fusion.has_own_loop(func.returns[0])
    for batch in (0, 3, 4099):
        x, w, c = RNG.standard_normal((batch, 5)), RNG.standard_normal((5, 7)), RNG.standard_normal(7)
        mask, relu = run(module, x, w, c)
        np.testing.assert_array_equal(mask, x @ w + c <= 0)
        assert_close(relu, np.maximum(x @ w + c, 0), np.float64)


def test_a_value_read_by_a_loop_in_between_keeps_its_own_loop():
    """exp(x) is read by a matmul before the loop that reads it at each element: moving it into
    that loop would leave the matmul reading an unwritten buffer."""
    def body(b, x):
        e = b.op("exp", x)
        return e, b.op("add", e, b.op("matmul", e, e))
    module = kernel("x: f64[N,N]", body)
    func = next(iter(module))
    assert plan(func).stored_by == {}
    x = RNG.standard_normal((6, 6))
    e, y = run(module, x)
    assert_close(e, np.exp(x), np.float64)
    assert_close(y, np.exp(x) + np.exp(x) @ np.exp(x), np.float64)


def test_a_value_read_elsewhere_than_at_each_element_keeps_its_own_loop():
    """x + transpose(e) reads e across: e cannot be stored element by element by that loop."""
    def body(b, x):
        e = b.op("exp", x)
        return e, b.op("add", e, b.op("transpose", e, perm=[1, 0]))
    module = kernel("x: f64[N,N]", body)
    func = next(iter(module))
    assert plan(func).stored_by == {}
    x = RNG.standard_normal((5, 5))
    e, y = run(module, x)
    assert_close(y, np.exp(x) + np.exp(x).T, np.float64)


def test_sibling_loops_of_one_shape_are_one_loop():
    """sin x and cos x, returned (a VJP's forward saving its residuals): neither reads the other,
    yet one loop stores both, reading x once."""
    module = kernel("x: f64[N]", lambda b, x: [b.op("sin", x), b.op("cos", x)])
    func = next(iter(module))
    assert plan(func).stored_by == {func.returns[1]: (func.returns[0],)}
    x = np.linspace(-4, 4, 37)
    sin, cos = run(module, x)
    assert_close(sin, np.sin(x), np.float64)
    assert_close(cos, np.cos(x), np.float64)


def test_a_loop_read_after_a_reduction_of_an_earlier_loop_joins_that_loop():
    """e = exp(x) is summed, and y = e * x, after the sum, reads e at each element: e's loop cannot
    move past the sum, so y's computation moves up into it, reading e (that loop's own value) as
    it computes it."""
    def body(b, x):
        e = b.op("exp", x)
        s = b.op("reduce_sum", e, axes=[0])
        return e, s, b.op("mul", e, x)
    module = kernel("x: f64[N]", body)
    func = next(iter(module))
    e, s, y = func.returns
    assert plan(func).stored_by == {e: (y,)}
    x = np.linspace(-1, 1, 11)
    got = run(module, x)
    assert_close(got[0], np.exp(x), np.float64)
    assert_close(got[1], np.exp(x).sum(), np.float64)
    assert_close(got[2], np.exp(x) * x, np.float64)


def fused_ops(fusion, root) -> int:
    """The ops the loop nest of `root` computes per element (a fused value once per use)."""
    count, stack = 0, [root]
    while stack:
        op = stack.pop()
        count += op.name not in ("constant", "dim", "iota")
        stack += (fusion.producers[v] for v in op.operands if v not in fusion.materialized)
    return count


def test_a_chain_of_1000_ops_runs_in_loop_nests_of_at_most_max_fused_ops():
    def body(b, x):
        y = x
        for _ in range(1000):
            y = b.op("add", y, x)
        return y
    module = kernel("x: f64[N]", body)
    func = next(iter(module))
    fusion = plan(func)
    roots = [op for op in func.ops if op.result in fusion.materialized]
    assert 1000 / MAX_FUSED <= len(roots) <= 2 * 1000 / MAX_FUSED
    assert max(fused_ops(fusion, op) for op in roots) <= MAX_FUSED
    x = np.arange(5.0)
    (got,) = run(module, x)
    np.testing.assert_array_equal(got, 1001 * x)


def test_the_temporaries_of_a_kernel_share_one_allocation():
    def body(b, x):       # exp(x) is read by two loops and the sum is a reduction: both get a buffer
        y = b.op("exp", x)
        s = b.op("reduce_sum", y, axes=[0])
        return b.op("mul", y, b.op("broadcast", s, dims=[], shape=x.type.shape))
    module = kernel("x: f64[N]", body)
    text = str(lower_module(module, "{}", Target.host().vector_bits))
    assert text.count('call ptr @"aligned_alloc"') == 1
    x = np.linspace(-1, 1, 9)
    (got,) = run(module, x)
    assert_close(got, np.exp(x) * np.exp(x).sum(), np.float64)


def test_a_kernel_keeps_its_block_of_temporaries_for_its_next_calls():
    """The block is taken from and given back to a slot of the kernel's own (atomically: threads
    may call it at once); calls of growing, shrinking and again growing sizes, and threads calling
    at once with sizes of their own, each get their values."""
    def body(b, x):
        y = b.op("exp", x)
        return b.op("mul", y, b.op("broadcast", b.op("reduce_sum", y, axes=[0]), dims=[], shape=x.type.shape))
    module = kernel("x: f64[N]", body)
    text = str(lower_module(module, "{}", Target.host().vector_bits))
    assert '@"adc.kept.k" = internal global ptr null' in text and text.count("atomicrmw xchg") == 2
    lib = compile_module(module)
    address = lib.address("adc_kernel_k")
    func = next(iter(module))
    for n in (5, 3000, 17, 100_000, 2, 100_001):
        x = np.linspace(-1, 1, n)
        assert_close(call(address, func, x)[0], np.exp(x) * np.exp(x).sum(), np.float64)
    from concurrent.futures import ThreadPoolExecutor
    sizes = [10, 20_000, 33, 7_000, 1, 50_000] * 4
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda n: call(address, func, np.linspace(-1, 1, n))[0], sizes))
    for n, got in zip(sizes, results):
        x = np.linspace(-1, 1, n)
        assert_close(got, np.exp(x) * np.exp(x).sum(), np.float64)


def test_every_op_has_a_lowering_rule():
    missing = sorted(set(OPS) - set(lower_rules) - {"call", "custom_gradient"})   # expanded before codegen
    assert not missing, f"ops without a rule in lower_rules: {missing}"


def test_a_remaining_call_is_a_located_error():
    b = Builder()
    x = b.param("x", parse_type("f32[N]"))
    sq = b.finish("sq", [b.op("mul", x, x)])
    b2 = Builder({"sq": sq})
    y = b2.param("y", parse_type("f32[M]"))
    module = Module({"sq": sq, "k": b2.finish("k", [b2.op("call", y, callee="sq")])})
    with pytest.raises(CompileError, match="'call'"):
        lower_module(module, "{}", 256)


# ---------------------------------------------------------------- reshapes share buffers

def reshaped(b, v, *shape):
    return b.op("reshape", v, shape=list(shape))


@pytest.mark.parametrize("case", ["view_into_matmul", "matmul_into_output", "param_returned", "both_returned",
                                  "view_of_view", "view_read_twice"])
def test_reshapes_share_buffers_and_compute_the_same(case):
    """A reshape of a materialized value is a view of its buffer, or its operand is computed into the
    output buffer; a returned reshape of a parameter or of a returned value is still a copy.
    Oracle: NumPy on the same arrays."""
    dims = parse_type("f64[S,M,N]").shape
    s, m_, n = dims
    bodies = {
        "view_into_matmul": ("c: f64[S,M,N], w: f64[N,K]",
                             lambda b, c, w: b.op("exp", reshaped(b, b.op("matmul", reshaped(b, c, s * m_, n), w),
                                                                  *c.type.shape[:2], w.type.shape[1]))),
        "matmul_into_output": ("c: f64[S,M,N], w: f64[N,K]",
                               lambda b, c, w: reshaped(b, b.op("matmul", reshaped(b, c, s * m_, n), w),
                                                        *c.type.shape[:2], w.type.shape[1])),
        "param_returned": ("c: f64[S,M,N], w: f64[N,K]", lambda b, c, w: reshaped(b, c, s * m_, n)),
        "both_returned": ("c: f64[S,M,N], w: f64[N,K]",
                          lambda b, c, w: [(y := b.op("matmul", reshaped(b, c, s * m_, n), w)),
                                           reshaped(b, y, *c.type.shape[:2], w.type.shape[1])]),
        "view_of_view": ("c: f64[S,M,N], w: f64[N,K]",
                         lambda b, c, w: b.op("matmul", reshaped(b, reshaped(b, c, s, m_ * n), s * m_, n), w)),
        "view_read_twice": ("c: f64[S,M,N], w: f64[N,K]",
                            lambda b, c, w: [(y := reshaped(b, b.op("exp", c), s * m_, n)), b.op("matmul", y, w)]),
    }
    params, body = bodies[case]
    module = kernel(params, body)
    c, w = randn(2, 3, 4, dtype=np.float64), randn(4, 5, dtype=np.float64)
    rows = c.reshape(6, 4)
    want = {"view_into_matmul": [np.exp((rows @ w).reshape(2, 3, 5))],
            "matmul_into_output": [(rows @ w).reshape(2, 3, 5)], "param_returned": [rows],
            "both_returned": [rows @ w, (rows @ w).reshape(2, 3, 5)], "view_of_view": [rows @ w],
            "view_read_twice": [np.exp(rows), np.exp(rows) @ w]}[case]
    for got, expected in zip(run(module, c, w), want, strict=True):
        assert_close(got, expected, np.float64)


def test_the_batched_matmul_vjp_copies_nothing():
    """ct reshaped (a view), the matmul written straight into the output: the transpose of w is the
    one temporary besides the gemm's."""
    module = kernel("w: f32[K,N], ct: f32[S,M,N]", lambda b, w, ct: reshaped(
        b, b.op("matmul", reshaped(b, ct, ct.type.shape[0] * ct.type.shape[1], ct.type.shape[2]),
                b.op("transpose", w, perm=[1, 0])), *ct.type.shape[:2], w.type.shape[0]))
    func = next(iter(module))
    fusion = plan(func)
    flat_ct, product, result = (op.result for op in func.ops if op.name in ("reshape", "matmul"))
    assert fusion.views == {flat_ct: func.params[1]} and fusion.into == {product: result}


def test_a_reshape_read_by_a_matmul_is_a_view_of_its_operands_own_nest():
    """The batched JVP's tangent: a select over [S, B, H] reading a broadcast, flattened for the
    matmul. The select gets the nest (over its own shape), the reshape is a view of its buffer."""
    def body(b, t, mask, w):
        s, m, h = t.type.shape
        picked = b.op("select", b.op("broadcast", mask, dims=[1, 2], shape=[s, m, h]), t, b.op("neg", t))
        return b.op("matmul", b.op("reshape", picked, shape=[s * m, h]), w)
    module = kernel("t: f64[S,M,H], mask: bool[M,H], w: f64[H,N]", body)
    func = next(iter(module))
    picked, rows = (op.result for op in func.ops if op.name in ("select", "reshape"))
    assert plan(func).views == {rows: picked}
    t, mask, w = randn(3, 5, 17, dtype=np.float64), RNG.random((5, 17)) < 0.5, randn(17, 4, dtype=np.float64)
    (got,) = run(module, t, mask, w)
    assert_close(got, np.where(mask, t, -t).reshape(15, 17) @ w, np.float64)


def test_a_transpose_read_through_a_broadcast_is_stored_once():
    """wᵀ spread over S rows: read in place, every element of the [S, O, H] nest would stride across
    w's rows; stored once ([O, H], small), the nest reads it contiguously. A transpose keeping the
    last axis in place stays fused."""
    def body(b, w, t):
        s, o, h = t.type.shape
        spread = b.op("broadcast", b.op("transpose", w, perm=[1, 0]), dims=[1, 2], shape=[s, o, h])
        kept = b.op("broadcast", b.op("transpose", t, perm=[1, 0, 2]), dims=[0, 1, 2], shape=[o, s, h])
        return b.op("mul", spread, t), b.op("neg", kept)
    module = kernel("w: f64[H,O], t: f64[S,O,H]", body)
    func = next(iter(module))
    moved, kept = (op.result for op in func.ops if op.name == "transpose")
    fusion = plan(func)
    assert moved in fusion.materialized and kept not in fusion.materialized
    w, t = randn(17, 5, dtype=np.float64), randn(3, 5, 17, dtype=np.float64)
    got = run(module, w, t)
    assert_close(got[0], w.T * t, np.float64)
    assert_close(got[1], -t.transpose(1, 0, 2), np.float64)


@pytest.mark.parametrize("shape, perm", [((37, 45), (1, 0)), ((5, 19, 33), (1, 2, 0)), ((16, 3, 32), (2, 0, 1)),
                                         ((4, 7, 9, 40), (0, 3, 2, 1)), ((1, 1), (1, 0)), ((0, 5), (1, 0)),
                                         ((70, 300), (1, 0))])
def test_a_transpose_moving_the_rows_axis_walks_tiles_and_visits_every_element_once(shape, perm):
    """Tiles of TRANSPOSE_TILE x TRANSPOSE_TILE, partial at the edges; the elementwise work fused into
    the transpose's nest runs once per element."""
    module = kernel(f"x: f32[{','.join(map(str, shape))}]",
                    lambda b, x: b.op("transpose", b.op("add", b.op("exp", x), x), perm=list(perm)))
    x = randn(*shape)
    (got,) = run(module, x)
    assert_close(got, (np.exp(x) + x).transpose(perm), np.float32)


@pytest.mark.parametrize("shape", [(3, 0, 4, 5), (0, 3, 4, 5), (3, 4, 0, 5), (5, 7, 3, 9), (64, 300, 17, 33),
                                   (2, 1000, 64, 50)])
def test_batched_products_split_their_stacked_rows_across_threads(shape):
    """C[b] = A[b] @ B[b]: the rows of every C[b] stacked are one parallel range, so a thread's share
    can start and end inside a batch (64 x 300 rows in chunks of the gemm's row block)."""
    batches, m, k, n = shape
    module = kernel("a: f32[B,M,K], w: f32[B,K,N]", lambda b, a, w: b.op("matmul", a, w))
    a, w = RNG.standard_normal((batches, m, k)).astype(np.float32), RNG.standard_normal((batches, k, n)).astype(np.float32)
    (got,) = run(module, a, w)
    assert got.shape == (batches, m, n)
    np.testing.assert_allclose(got, a.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("row", [5, 32])
def test_a_kernel_of_fixed_sizes_unrolls_its_short_loops_only(row):
    """loops.ROLLED_ABOVE: a constant trip count of 5 is left to LLVM's unrolling (the loop around it
    then vectorizes across rows); one of 32 stays rolled, so it vectorizes itself: no scatter, no
    gather, every store a whole vector."""
    module = kernel(f"x: f64[2,32,{row}]", lambda b, x: b.op("concat", x, b.op("neg", x), axis=0))
    lowered = str(lower_module(module, '{"abi": 1}', Target.host().vector_bits))
    nodes = dict(re.findall(r"^(!\d+) = (?:distinct )?(.*)$", lowered, re.M))
    rolled = {name for name, node in nodes.items() if '"llvm.loop.unroll.disable"' in node}
    hinted = re.findall(r"br label \S+, !llvm.loop (!\d+)", lowered)
    disabled = [h for h in hinted if set(re.findall(r"!\d+", nodes[h])) & rolled]
    assert len(disabled) == 1 + (row > ROLLED_ABOVE)    # the rows' loop, and the row's (the outer: a task's range)
    optimized = llvm.parse_assembly(lowered)
    target = Target.host()
    target.optimize(optimized, unroll=True)
    text = str(optimized)
    if row > ROLLED_ABOVE:
        assert "scatter" not in text and "gather" not in text
    x = randn(2, 32, row, dtype=np.float64)
    (got,) = run(module, x)
    np.testing.assert_array_equal(got, np.concatenate([x, -x]))
