"""Sparsity detection (adc/passes/sparsity) against dense Jacobians.

Property: over random programs (tests/support/programs.py: loops, branches, takes and scatters by
computed indices, calls, custom gradients), no nonzero of the Jacobian is outside the detected
pattern: the interpreter's central differences at two random points, nonzero where a perturbed
input changes a result at all (an element that does not read the input is computed bit for bit
the same). Exact patterns on the structured cases (banded, block-diagonal, arrowhead, a 2-D
Brusselator); integer inputs specialize; loops walked or taken to a fixed point; every op has a rule.
"""
from __future__ import annotations

import numpy as np
from hypothesis import given

from adc.frontend import compile_source
from adc.ir.interp import run
from adc.ir.ops import OPS
from adc.ir.parser import parse_module
from adc.passes.sparsity import jacobian_patterns, sparsity_rules
from tests.fuzz.budget import fuzz_settings
from tests.support.programs import programs
from tests.support.sparse_problems import BRUSSELATOR, TRIDIAGONAL, brusselator_pattern, dense, differences
from tests.support.vocabulary import Options

SMOOTH = Options(floats=("f64",), smooth=True)
# programs drawn mostly of what moves elements: loops, gathers and scatters at computed indices, scans
MOVING = Options(floats=("f64",), smooth=True, forms=("loop", "take", "take_along_axis", "scatter", "scan", "index",
                                                      "branch", "binary", "unary", "reduce", "matmul", "call"))


def detected(source: str, name: str, args, wrt: int = 0) -> np.ndarray:
    (pattern,) = jacobian_patterns(compile_source(source), name, args, wrt)
    return dense(pattern)


def test_every_op_has_a_sparsity_rule():
    assert sorted(set(OPS) - set(sparsity_rules)) == []
    assert not set(sparsity_rules) - set(OPS)


@fuzz_settings(30)
@given(program=programs(SMOOTH))
def test_no_nonzero_of_the_jacobian_is_outside_the_pattern(program):
    assert_covers_the_jacobian(program)


@fuzz_settings(30)
@given(program=programs(MOVING))
def test_no_nonzero_is_outside_the_pattern_of_loops_gathers_and_scatters(program):
    assert_covers_the_jacobian(program)


def assert_covers_the_jacobian(program):
    module = compile_source(program.source)
    args = program.arguments()
    try:
        run(module, "f", *args)
    except (ValueError, IndexError):    # sizes the program cannot run at (an index into an empty axis)
        return
    floats = [i for i, (_, t) in enumerate(program.main.params) if t.is_float]
    rng = np.random.default_rng(program.seed)
    for wrt in floats:
        patterns = jacobian_patterns(module, "f", args, wrt)
        for point in range(2):
            at = list(args)
            if point:
                at[wrt] = rng.uniform(-1, 1, np.shape(args[wrt]))
            for k, t in enumerate(program.main.results):
                if t.is_float:
                    missed = differences(module, "f", at, wrt, k) & ~dense(patterns[k])
                    assert not missed.any(), f"result {k} moves with param {wrt} outside the pattern at " \
                                             f"{np.argwhere(missed)[:5].tolist()}\n{program.source}"


def test_a_stencil_is_banded():
    n = 7
    want = np.abs(np.subtract.outer(np.arange(n), np.arange(n))) <= 1
    want[0, 1] = want[n - 1, n - 2] = False
    assert (detected(TRIDIAGONAL, "f", [np.zeros(n)]) == want).all()


def test_blocks_of_a_batch_are_block_diagonal():
    source = "def f(x: f64[B, K], w: f64[K, K]) -> f64[B, K]:\n    return tanh(x @ w) * x\n"
    b, k = 4, 3
    want = np.kron(np.eye(b, dtype=bool), np.ones((k, k), bool))
    assert (detected(source, "f", [np.zeros((b, k)), np.zeros((k, k))]) == want).all()


def test_an_arrowhead():
    source = ("def f(x: f64[N]) -> f64[N]:\n    y = x * x[0]\n    y[0] = sum(x * x)\n    return y\n")
    n = 6
    want = np.eye(n, dtype=bool)
    want[0, :] = want[:, 0] = True
    assert (detected(source, "f", [np.zeros(n)]) == want).all()


def test_the_brusselator_has_six_nonzeros_a_row():
    n = 5
    got = detected(BRUSSELATOR, "brusselator", [np.zeros((2, n, n))])
    assert (got == brusselator_pattern(n)).all()
    assert got.sum() == 12 * n * n


def test_integer_inputs_specialize_gathers_and_trip_counts():
    source = ("def f(x: f64[N], idx: i64[K], n: i64) -> f64[K]:\n    y = take(x, idx)\n"
              "    for i in range(n):\n        y = y * x[i]\n    return y\n")
    got = detected(source, "f", [np.zeros(5), np.array([3, -1]), np.int64(2)])
    want = np.zeros((2, 5), bool)
    want[0, [0, 1, 3]] = want[1, [0, 1, 4]] = True
    assert (got == want).all()


def test_indices_computed_from_floats_read_their_whole_axis():
    source = "def f(x: f64[N, 2]) -> f64[2]:\n    return take(x, argmax(x[:, 0], axis=0), axis=0)\n"
    got = detected(source, "f", [np.zeros((3, 2))])
    assert (got == np.array([[1, 0, 1, 0, 1, 0], [0, 1, 0, 1, 0, 1]], bool)).all()


def test_a_loop_index_keeps_each_iteration_apart():
    source = ("def f(x: f64[N]) -> f64[N]:\n    y = x * 0.0\n    for i in range(N):\n"
              "        y[i] = sin(x[i]) * x[0]\n    return y\n")
    want = np.eye(4, dtype=bool)
    want[:, 0] = True
    assert (detected(source, "f", [np.zeros(4)]) == want).all()


def test_a_while_loop_on_floats_is_a_fixed_point():
    # r moves one neighbour further each round: its fixed point reads everything to its left
    source = ("def f(x: f64[N]) -> f64[N]:\n    r = x\n    while sum(r) < 10.0:\n"
              "        r = concat([r[:1], r[1:] + r[:N-1]], axis=0)\n    return r\n")
    assert (detected(source, "f", [np.zeros(4)]) == np.tril(np.ones((4, 4), bool))).all()


def test_a_branch_on_floats_joins_both_arms_and_a_known_one_takes_its_own():
    source = ("def f(x: f64[N], k: i64) -> f64[N]:\n    if x[0] > 0.0:\n        y = x * 2.0\n"
              "    else:\n        y = x * x[1]\n    if k > 0:\n        z = y\n    else:\n        z = y * x[2]\n"
              "    return z\n")
    got = detected(source, "f", [np.zeros(4), np.int64(1)])
    want = np.eye(4, dtype=bool)
    want[:, 1] = True
    assert (got == want).all()
    want[:, 2] = True
    assert (detected(source, "f", [np.zeros(4), np.int64(0)]) == want).all()


def test_running_sums_are_triangular_forwards_backwards_and_exclusive():
    text = ("func @f(%x: f64[N]) -> f64[N] {\n"
            "  %0 = cumsum %x {axis = 0, exclusive = {e}, reverse = {r}} : f64[N]\n  return %0\n}\n")
    for exclusive, reverse, want in (("false", "false", np.tril(np.ones((4, 4), bool))),
                                     ("true", "false", np.tril(np.ones((4, 4), bool), -1)),
                                     ("false", "true", np.triu(np.ones((4, 4), bool))),
                                     ("true", "true", np.triu(np.ones((4, 4), bool), 1))):
        module = parse_module(text.replace("{e}", exclusive).replace("{r}", reverse), "scan")
        (pattern,) = jacobian_patterns(module, "f", [np.zeros(4)], 0)
        assert (dense(pattern) == want).all(), (exclusive, reverse)


STACKED_SOLVES = """
def f(a: f64[B, 3, 3], b: f64[B, 3]) -> f64[B, 3]:
    l = cholesky(a)
    w, v = eigh(a)
    q, r = qr(a)
    u, s, vh = svd(a)
    return cho_solve(l, b) + sum(w, axis=1, keepdims=True) * s + sum(q * q, axis=2) + sum(r * vh, axis=2)
"""


def test_a_stack_of_factorizations_is_block_diagonal_and_covers_its_jacobian():
    rng = np.random.default_rng(0)
    g = rng.standard_normal((4, 3, 3))
    a = g @ np.swapaxes(g, 1, 2) + 3 * np.eye(3) + np.diag([0.0, 1.0, 2.0])     # SPD, distinct eigenvalues
    b = rng.standard_normal((4, 3))
    for wrt, block in ((0, (3, 9)), (1, (3, 3))):
        pattern = detected(STACKED_SOLVES, "f", [a, b], wrt)
        assert (pattern == np.kron(np.eye(4, dtype=bool), np.ones(block, bool))).all()
        moved = differences(compile_source(STACKED_SOLVES), "f", [a, b], wrt, 0)
        assert moved.any() and not (moved & ~pattern).any()
