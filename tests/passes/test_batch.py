"""The batching pass: its rule table, its interface, and batch(f) == f stacked over the examples
(NumPy interpreter on the unbatched function as the oracle), op by op for every choice of
batched params, on random programs, and compiled; the matmul folding that keeps it one product.
"""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from adc.errors import CompileError
from adc.frontend import compile_source
from adc.ir.core import Module
from adc.ir.interp import run
from adc.ir.ops import OPS
from adc.ir.parser import parse_module
from adc.ir.printer import format_module
from adc.ir.types import TensorType
from adc.ir.verify import verify
from adc.passes.batch import batch
from adc.passes.batch_rules import NEVER_BATCHED, batch_rules
from tests.support.ir_programs import flag_choices, programs
from tests.support.native import jit_module

SIZES = {"N": 3, "M": 2, "B": 2, "I": 3, "O": 2, "H": 2, "P": 2, "K": 3}
EXAMPLES = 4

# cases the ops' own examples do not reach: batch axes of matmul, a stretched size-1 axis,
# padding on several axes, a strided slice, a reduction or scan over the leading axis, integer operands
EXTRA_CASES = {
    "matmul_batch_dims": "func @example(%x: f64[P,M,K], %y: f64[P,K,N]) -> f64[P,M,N] {\n"
                         "  %0 = matmul %x, %y : f64[P,M,N]\n  return %0\n}\n",
    "broadcast_stretch": "func @example(%x: f64[1,N]) -> f64[3,N] {\n"
                         "  %0 = broadcast %x {dims = [0,1], shape = [3,N]} : f64[3,N]\n  return %0\n}\n",
    "pad_two_axes": "func @example(%x: f64[M,N], %v: f64) -> f64[M+1,N+2] {\n"
                    "  %0 = pad %x, %v {high = [0,2], low = [1,0]} : f64[M+1,N+2]\n  return %0\n}\n",
    "slice_strided": "func @example(%x: f64[M,7]) -> f64[M,3] {\n"
                     "  %0 = slice %x {start = [0,1], step = [1,2], stop = [M,6]} : f64[M,3]\n  return %0\n}\n",
    "reduce_leading": "func @example(%x: f64[B,N]) -> f64[N] {\n"
                      "  %0 = reduce_max %x {axes = [0]} : f64[N]\n  return %0\n}\n",
    "argmin_leading_int": "func @example(%x: i32[B,N]) -> i64[N] {\n"
                          "  %0 = argmin %x {axes = [0]} : i64[N]\n  return %0\n}\n",
    "transpose_3d": "func @example(%x: f64[B,M,N]) -> f64[N,B,M] {\n"
                    "  %0 = transpose %x {perm = [2,0,1]} : f64[N,B,M]\n  return %0\n}\n",
    "select_condition": "func @example(%c: bool[N], %x: f64[N]) -> f64[N] {\n"
                        "  %0 = neg %x : f64[N]\n  %1 = select %c, %x, %0 : f64[N]\n  return %1\n}\n",
    # integer operands drawn in -3..3: divisors of 0 too
    "floor_div_mod_int": "func @example(%x: i32[N], %y: i32[N]) -> (i32[N], i32[N]) {\n"
                         "  %0 = floor_div %x, %y : i32[N]\n  %1 = mod %x, %y : i32[N]\n  return %0, %1\n}\n",
    "bitwise_int": "func @example(%x: i64[N], %y: i64[N]) -> i64[N] {\n"
                   "  %0 = bitwise_xor %x, %y : i64[N]\n  %1 = bitwise_not %0 : i64[N]\n  return %1\n}\n",
    "cumsum_leading_reverse": "func @example(%x: f64[B,N]) -> f64[B,N] {\n"
                              "  %0 = cumsum %x {axis = 0, exclusive = true, reverse = true} : f64[B,N]\n"
                              "  return %0\n}\n",
    "cumprod_int": "func @example(%x: i64[M,N]) -> i64[M,N] {\n"
                   "  %0 = cumprod %x {axis = 1, exclusive = false, reverse = true} : i64[M,N]\n  return %0\n}\n",
}
CASES = {**{name: opdef.example for name, opdef in OPS.items()}, **EXTRA_CASES}


def random_array(rng, type: TensorType, sizes, lead=()):
    shape = lead + tuple(d if isinstance(d, int) else d.evaluate(sizes) for d in type.shape)
    if type.dtype.is_float:
        return rng.standard_normal(shape).astype(type.dtype.numpy)
    if type.dtype.is_int:   # in range as indices of every axis of SIZES (a call checks index parameters)
        return rng.integers(-2, 2, shape).astype(type.dtype.numpy)
    return rng.random(shape) < 0.5


def batch_inputs(rng, func, flags, sizes=SIZES, examples=EXAMPLES):
    return [random_array(rng, p.type, sizes, (examples,) if flag else ()) for p, flag in zip(func.params, flags)]


def stacked(module, name, args, flags, examples=EXAMPLES):
    """The oracle: f run example by example, the results stacked."""
    per_example = [run(module, name, *[a[s] if flag else a for a, flag in zip(args, flags)])
                   for s in range(examples)]
    return [np.stack(outs) for outs in zip(*per_example)]


def assert_batches(module, name, flags, rng, sizes=SIZES):
    out, func = batch(module, name, flags)
    args = batch_inputs(rng, module[name], flags, sizes)
    got = run(out, func.name, *args)
    for g, want in zip(got, stacked(module, name, args, flags), strict=True):
        assert g.dtype == want.dtype
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-12, equal_nan=True)
    return out, func, args


def test_every_op_has_a_rule_or_is_never_batched():
    missing = sorted(set(OPS) - set(batch_rules) - set(NEVER_BATCHED))
    assert not missing, f"ops without an entry in batch_rules: {missing}"
    assert not (set(batch_rules) | set(NEVER_BATCHED)) - set(OPS), "batch_rules has entries for unknown ops"


@pytest.mark.parametrize("case", sorted(CASES))
def test_batch_equals_stacking_for_every_op(case):
    module = parse_module(CASES[case], f"{case}.ir")
    rng = np.random.default_rng(len(case))
    for flags in flag_choices(len(module["example"].params)):
        assert_batches(module, "example", flags, rng)


def test_interface_names_symbols_and_purity():
    source = "def f(x: f64[NB], y: f64) -> (f64[NB], f64):\n    return x * y, y\n"
    module = compile_source(source, "t.adc")
    before = format_module(module)
    out, func = batch(module, "f", [False, True])
    assert format_module(module) == before and "f_batched" not in module.funcs
    assert func.name == "f_batched" and out["f_batched"] is func
    # the batch symbol avoids the function's own; an unbatched result gets the batch axis too
    assert func.signature() == "f_batched(x: f64[NB], y: f64[NB1]) -> (f64[NB1,NB], f64[NB1])"
    again, second = batch(out, "f", [True, True], name_out="g")
    assert second.name == "g" and {"f", "f_batched", "g"} == set(again.funcs)
    verify(again)


@pytest.mark.parametrize("name, flags, error, message", [
    ("g", [True], CompileError, "no function @g to batch"),
    ("f", [True, True], ValueError, "1 params but 2 batched flags"),
    ("f", [False], ValueError, "at least one batched param"),
])
def test_misuse_is_a_clear_error(name, flags, error, message):
    module = compile_source("def f(x: f64) -> f64:\n    return x\n", "t.adc")
    with pytest.raises(error, match=message):
        batch(module, name, flags)


def test_calls_are_inlined_first():
    source = ("def sq(a: f64[N]) -> f64[N]:\n    return a * a\n\n"
              "def f(x: f64[M], w: f64[M]) -> f64:\n    return sum(sq(x) * w)\n")
    module = compile_source(source, "t.adc")
    _, func, _ = assert_batches(module, "f", [True, False], np.random.default_rng(0))
    assert all(op.name != "call" for op in func.ops)


def test_shared_work_is_done_once():
    # exp(w) does not depend on the example: it stays unbatched, computed once
    module = compile_source("def f(x: f64[N], w: f64[N]) -> f64[N]:\n    return x * exp(w)\n", "t.adc")
    _, func = batch(module, "f", [True, False])
    (exp,) = [op for op in func.ops if op.name == "exp"]
    assert str(exp.result.type) == "f64[N]"


@pytest.mark.parametrize("flags, fold", [((True, False), "rows"), ((False, True), "columns")])
def test_matmul_with_one_side_shared_is_one_product(flags, fold):
    # [S, M, K] @ [K, N] is [S*M, K] @ [K, N]; [M, K] @ [S, K, N] is [M, K] @ [K, S*N]: no copy of
    # the shared side, no batched matmul
    module = compile_source("def f(x: f64[M, K], y: f64[K, N]) -> f64[M, N]:\n    return x @ y\n", "t.adc")
    _, func, _ = assert_batches(module, "f", list(flags), np.random.default_rng(1))
    (matmul,) = [op for op in func.ops if op.name == "matmul"]
    assert [str(v.type) for v in matmul.operands] == (
        ["f64[M*NB,K]", "f64[K,N]"] if fold == "rows" else ["f64[M,K]", "f64[K,N*NB]"])
    assert not any(op.name == "broadcast" for op in func.ops)


def test_softmax_family_and_arg_reductions_batch_like_stacking():
    # the builtins' compositions (a stop_gradient shift, iota against broadcast indices, converted
    # bools) batched by the interpreter and natively, against a loop of single calls
    source = ("def f(x: f64[M, N], i: i32[N]) -> (f64[M, N], f64[N], i64[M], f32[N, M], bool[N], i64):\n"
              "    s = softmax(x, axis=0) + log_softmax(x)\n    hot = one_hot(i, M)\n"
              "    return s, logsumexp(x, axis=0), argmax(x, axis=1), hot, any(x > 0.5, axis=0), count_nonzero(x > 0.0)\n")
    module = compile_source(source, "softmax.adc")
    rng = np.random.default_rng(11)
    for flags in flag_choices(2):
        out, func, args = assert_batches(module, "f", flags, rng)
        native = getattr(jit_module(out), func.name)(*args)
        for g, want in zip(native, stacked(module, "f", args, flags), strict=True):
            np.testing.assert_allclose(g.numpy(), want, rtol=1e-12, atol=1e-12, err_msg=str(flags))


# ---------------------------------------------------------------- random programs

@settings(max_examples=40, deadline=None)
@given(programs(), st.integers(0, 2**16))
def test_random_programs_batch_like_stacking(program, seed):
    module, flags = program
    assert_batches(module, "f", flags, np.random.default_rng(seed))


# ---------------------------------------------------------------- compiled route

def test_compiled_batched_functions_match_the_interpreter():
    # every op case with all params batched, and each single-batched variant, natively; the
    # call-free results share one module, those calling batched callees (custom_gradient) get their own
    rng = np.random.default_rng(7)
    shared, own, inputs = {}, [], {}
    for case in sorted(CASES):
        module = parse_module(CASES[case], f"{case}.ir")
        n = len(module["example"].params)
        for flags in {(True,) * n, *(tuple(i == j for j in range(n)) for i in range(n))} - {()}:
            out, func = batch(module, "example", flags)
            name = f"{case}_{''.join('b' if f else 's' for f in flags)}"
            args = batch_inputs(rng, module["example"], flags)
            inputs[name] = (args, run(out, func.name, *args))
            if len(out.funcs) > len(module.funcs) + 1:
                own.append(Module({**out.funcs, name: dataclasses.replace(func, name=name)}, name))
            else:
                shared[name] = dataclasses.replace(func, name=name)
    natives = [jit_module(m) for m in [Module(shared, "batched")] + own]
    for name, (args, expected) in inputs.items():
        (native,) = [m for m in natives if name in m.kernels]
        got = getattr(native, name)(*args)
        got = got if isinstance(got, tuple) else (got,)
        for g, want in zip(got, expected, strict=True):
            np.testing.assert_allclose(_signs_as(g.numpy(), want), want, rtol=1e-5, atol=1e-6, equal_nan=True,
                                       err_msg=name)


def _signs_as(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """`got` with its matrices' columns (or rows) flipped to the signs of `want`'s where that makes
    them agree: eigenvectors and singular vectors are defined up to sign, which the interpreter
    (LAPACK through NumPy) and the compiled Jacobi sweeps choose differently."""
    if got.ndim < 2 or got.shape != want.shape or np.allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True):
        return got
    for axis in (-2, -1):       # columns, then rows
        flipped = got * np.where(np.sum(got * want, axis=axis, keepdims=True) < 0, -1.0, 1.0)
        if np.allclose(flipped, want, rtol=1e-5, atol=1e-6, equal_nan=True):
            return flipped
    return got
