"""The one-hot seed pass (adc/passes/one_hot.py): every rewrite computes what the dense IR computes
(the reference interpreter on random inputs, static and symbolic shapes), the rewrites that must not
happen do not, and goldens of one-hot-seeded Jacobians with no identity matrix in them.
ADC_UPDATE_GOLDEN=1 rewrites the goldens; review the diff."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adc.frontend import compile_source
from adc.ir.core import Module
from adc.ir.interp import run
from adc.ir.parser import parse_module
from adc.ir.printer import format_func
from adc.ir.types import SymDim
from adc.ir.verify import verify_func
from adc.passes import jacobian as compositions
from adc.ir.reshapes import common_digits, quotient
from adc.passes.one_hot import one_hot_func
from tests.support.goldens import assert_golden_functions

GOLDEN = Path(__file__).parent / "one_hot"
GOLDEN_CASES = sorted(GOLDEN.glob("*.adc"))
BATCH_GOLDEN_CASES = sorted((GOLDEN / "batch").glob("*.adc"))
N, M = SymDim.symbol("N"), SymDim.symbol("M")


def rewritten(text: str) -> tuple[Module, Module]:
    """The module of `text` (one function @f) and the module with @f through the pass, verified."""
    module = parse_module(text)
    func = one_hot_func(module["f"], module.funcs)
    verify_func(func, module.funcs, pass_name="one_hot")
    return module, module.replace(func)


def assert_same(text: str, *args, rewritten_ops=("matmul", "reduce_sum")) -> Module:
    """The pass removed every op named in rewritten_ops, and both IRs give the same values."""
    before, after = rewritten(text)
    assert not [op.name for op in after["f"].ops if op.name in rewritten_ops], format_func(after["f"])
    np.testing.assert_allclose(run(after, "f", *args), run(before, "f", *args), rtol=1e-12, atol=0)
    return after


def seeds(n, shape=None) -> str:
    """IR lines: %e = the identity [n, n] (identity_seeds' form), reshaped to `shape` when given."""
    lines = (f"  %r = iota {{axis = 0, dtype = i64, shape = [{n},{n}]}} : i64[{n},{n}]\n"
             f"  %c = iota {{axis = 1, dtype = i64, shape = [{n},{n}]}} : i64[{n},{n}]\n"
             f"  %q = eq %r, %c : bool[{n},{n}]\n"
             f"  %e = convert %q {{dtype = f64}} : f64[{n},{n}]\n")
    if shape:
        dims = ",".join(map(str, shape))
        lines += f"  %s = reshape %e {{shape = [{dims}]}} : f64[{dims}]\n"
    return lines


rng = np.random.default_rng(0)


@pytest.mark.parametrize("n", [5, "N"])
def test_matmul_with_the_identity_is_a_broadcast(n):
    # x @ I = x and I @ x = x, static and symbolic
    for product in ("%x, %e", "%e, %y"):
        text = (f"func @f(%x: f64[3,{n}], %y: f64[{n},4]) -> f64[{3 if product[1] == 'x' else n},"
                f"{n if product[1] == 'x' else 4}] {{\n" + seeds(n) +
                f"  %p = matmul {product} : f64[{3 if product[1] == 'x' else n},{n if product[1] == 'x' else 4}]\n"
                "  return %p\n}\n")
        assert_same(text, rng.standard_normal((3, 5)), rng.standard_normal((5, 4)))


@pytest.mark.parametrize("k, o", [(2, 3), ("N", "M")])
def test_batched_seeds_through_reshape_and_transpose(k, o):
    # the batched JVP's x @ seeds: seeds [k*o, k, o] transposed to [k, k*o, o] and merged to [k, k*o*o]
    s = f"{k}*{o}" if isinstance(k, str) else k * o
    text = (f"func @f(%x: f64[4,{k}], %y: f64[{o}]) -> f64[{s},4,{o}] {{\n" + seeds(s, (s, k, o)) +
            f"  %t = transpose %s {{perm = [1,0,2]}} : f64[{k},{s},{o}]\n"
            f"  %m = reshape %t {{shape = [{k},{s}*{o}]}} : f64[{k},{s}*{o}]\n"
            f"  %p = matmul %x, %m : f64[4,{s}*{o}]\n"
            f"  %u = reshape %p {{shape = [4,{s},{o}]}} : f64[4,{s},{o}]\n"
            f"  %v = transpose %u {{perm = [1,0,2]}} : f64[{s},4,{o}]\n"
            "  return %v\n}\n")
    x = rng.standard_normal((4, 2))
    after = assert_same(text, x, np.zeros(3))
    (got,) = run(after, "f", x, np.zeros(3))
    np.testing.assert_array_equal(got, _dense(x))


def _dense(x):
    """x @ seeds the dense way, in NumPy: seed (i, o) moves output column o by x[:, i]."""
    out = np.zeros((6, 4, 3))
    for i in range(2):
        for o in range(3):
            out[i * 3 + o, :, o] = x[:, i]
    return out


def test_masked_seeds_and_a_factor_read_at_the_partner():
    # (c ? 0 : I) @ ... in reverse mode: the bool factor moves to the partner's axis
    text = ("func @f(%x: f64[3,4], %z: f64[4]) -> f64[3,4] {\n" + seeds(4) +
            "  %0 = constant {dtype = f64, value = 0.0} : f64\n"
            "  %zero = broadcast %0 {dims = [], shape = [4,4]} : f64[4,4]\n"
            "  %zz = broadcast %0 {dims = [], shape = [4]} : f64[4]\n"
            "  %neg = le %z, %zz : bool[4]\n"
            "  %cc = broadcast %neg {dims = [1], shape = [4,4]} : bool[4,4]\n"
            "  %m = select %cc, %zero, %e : f64[4,4]\n"
            "  %zb = broadcast %z {dims = [0], shape = [4,4]} : f64[4,4]\n"
            "  %w = mul %m, %zb : f64[4,4]\n"
            "  %p = matmul %x, %w : f64[3,4]\n"
            "  return %p\n}\n")
    z = np.array([1.0, -2.0, 0.5, -0.1])
    assert_same(text, rng.standard_normal((3, 4)), z)


@pytest.mark.parametrize("combine", ["add", "sub"])
def test_a_sum_of_two_masked_seed_branches_stays_one_hot(combine):
    # elu's VJP: (c ? I : 0) ± (c ? 0 : I * z), then @ x: the two factors become one, no product with I
    text = ("func @f(%x: f64[4,3], %z: f64[4]) -> f64[4,3] {\n" + seeds(4) +
            "  %0 = constant {dtype = f64, value = 0.0} : f64\n"
            "  %zero = broadcast %0 {dims = [], shape = [4,4]} : f64[4,4]\n"
            "  %zz = broadcast %0 {dims = [], shape = [4]} : f64[4]\n"
            "  %pos = gt %z, %zz : bool[4]\n"
            "  %cc = broadcast %pos {dims = [0], shape = [4,4]} : bool[4,4]\n"
            "  %a = select %cc, %e, %zero : f64[4,4]\n"
            "  %zb = broadcast %z {dims = [0], shape = [4,4]} : f64[4,4]\n"
            "  %ez = mul %e, %zb : f64[4,4]\n"
            "  %b = select %cc, %zero, %ez : f64[4,4]\n"
            f"  %s = {combine} %a, %b : f64[4,4]\n"
            "  %p = matmul %s, %x : f64[4,3]\n"
            "  return %p\n}\n")
    z = np.array([1.0, -2.0, 0.5, -0.1])
    assert_same(text, rng.standard_normal((4, 3)), z)


def test_reduce_sum_of_seeds_reads_the_partner():
    # Σ_j I[i, j] v[j] = v[i]; Σ_j I[i, j] = 1
    text = ("func @f(%v: f64[5]) -> (f64[5], f64[5]) {\n" + seeds(5) +
            "  %vb = broadcast %v {dims = [1], shape = [5,5]} : f64[5,5]\n"
            "  %w = mul %e, %vb : f64[5,5]\n"
            "  %s = reduce_sum %w {axes = [1]} : f64[5]\n"
            "  %t = reduce_sum %e {axes = [0]} : f64[5]\n"
            "  return %s, %t\n}\n")
    v = rng.standard_normal(5)
    after = assert_same(text, v)
    s, t = run(after, "f", v)
    np.testing.assert_array_equal(s, v)
    np.testing.assert_array_equal(t, np.ones(5))


@pytest.mark.parametrize("why, body", [
    ("the diagonal of y is no broadcast",
     "  %w = mul %e, %y : f64[4,4]\n  %p = reduce_sum %w {axes = [1]} : f64[4]\n"),
    ("a sum over both paired axes has no partner left",
     "  %p = reduce_sum %e {axes = [0,1]} : f64\n"),
])
def test_what_is_left_alone(why, body):
    result = "f64[4]" if "axes = [1]" in body else "f64"
    text = f"func @f(%y: f64[4,4]) -> {result} {{\n" + seeds(4) + body + "  return %p\n}\n"
    before, after = rewritten(text)
    assert any(op.name == "reduce_sum" for op in after["f"].ops), why
    y = rng.standard_normal((4, 4))
    np.testing.assert_allclose(run(after, "f", y), run(before, "f", y))


def test_digits_that_do_not_nest_keep_the_matmul():
    # seeds [24, 4, 6] against a [6, 4] group: digit 4 of one straddles digits of the other
    text = ("func @f(%x: f64[3,6]) -> f64[3,96] {\n" + seeds(24, (24, 6, 4)) +
            "  %t = transpose %s {perm = [1,0,2]} : f64[6,24,4]\n"
            "  %m = reshape %t {shape = [6,96]} : f64[6,96]\n"
            "  %p = matmul %x, %m : f64[3,96]\n  return %p\n}\n")
    before, after = rewritten(text)
    x = rng.standard_normal((3, 6))
    np.testing.assert_allclose(run(after, "f", x), run(before, "f", x), rtol=1e-12)


def test_common_digits_and_exact_quotients():
    assert common_digits([2048], [32, 64]) == [(0, 0, 32), (0, 1, 64)]
    assert common_digits([4, 6], [6, 4]) is None
    assert common_digits([1, 6], [2, 1, 3]) == [(1, 0, 2), (1, 2, 3)]
    assert common_digits([N * M], [N, M]) == [(0, 0, N), (0, 1, M)]
    assert quotient(N * M, M) == N and quotient(2 * N, 2) == N and quotient(N + 1, N) is None
    assert quotient(12, 5) is None and quotient(N, N) == 1


# ---------------------------------------------------------------- Jacobians: the pass against its absence

JACOBIANS = {
    "dense": ("def f(x: f64[B, I], w: f64[I, O], b: f64[O]) -> f64[B, O]:\n    return relu(x @ w + b)\n",
              [(3, 2), (2, 4), (4,)]),
    "two_layers": ("def f(x: f64[B, I], w: f64[I, H], v: f64[H, O]) -> f64[B, O]:\n"
                   "    return tanh(tanh(x @ w) @ v)\n", [(3, 2), (2, 5), (5, 2)]),
    "sums": ("def f(x: f64[N, K], y: f64[K]) -> f64[N]:\n    return sum(x * y, axis=1) + sum(exp(x), axis=1)\n",
             [(4, 3), (3,)]),
}


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("name", JACOBIANS)
def test_jacobians_agree_with_and_without_the_pass(name, mode, monkeypatch):
    source, shapes = JACOBIANS[name]
    module = compile_source(source, f"{name}.adc")
    args = [rng.standard_normal(s) for s in shapes]
    extended, func, _ = compositions.jacobian(module, "f", mode=mode)
    monkeypatch.setattr(compositions, "one_hot_func", lambda f, funcs: f)
    dense_module, dense, _ = compositions.jacobian(module, "f", mode=mode)
    folded = compositions.all_seeds_at_once(extended, func)
    unfolded = compositions.all_seeds_at_once(dense_module, dense)
    assert sum(op.name == "matmul" for op in folded.ops) <= sum(op.name == "matmul" for op in unfolded.ops)
    for got, want in zip(run(extended, func.name, *args), run(dense_module, dense.name, *args)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_hessians_agree_with_and_without_the_pass(monkeypatch):
    source = "def f(x: f64[B, I], w: f64[I, H]) -> f64:\n    return sum(tanh(x @ w) ** 2)\n"
    module = compile_source(source, "loss.adc")
    args = [rng.standard_normal((3, 2)), rng.standard_normal((2, 4))]
    results = []
    for passes in (True, False):
        if not passes:
            monkeypatch.setattr(compositions, "one_hot_func", lambda f, funcs: f)
        for mode in ("forward", "reverse"):
            extended, func = compositions.hessian(module, "f", 1, mode=mode)
            results.append(run(extended, func.name, *args)[0])
    for r in results[1:]:
        np.testing.assert_allclose(r, results[0], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("path", GOLDEN_CASES, ids=[p.stem for p in GOLDEN_CASES])
def test_golden(path):
    assert_golden_functions(path, lambda module: [
        compositions.all_seeds_at_once(*compositions.jacobian(module, "f", mode=mode)[:2])
        for mode in ("forward", "reverse")])


def test_no_identity_in_the_one_hot_seeded_jacobian():
    # the seeds of x (B*I of them) and of w (I*O) are gone, and with them every product with the seeds:
    # only the primal matmul is left (b's Jacobian is an identity masked by relu's derivative: its output)
    module = compile_source(GOLDEN_CASES[0].read_text(), "dense_relu.adc")
    b, i, o = (SymDim.symbol(d) for d in "BIO")
    for mode in ("forward", "reverse"):
        func = compositions.all_seeds_at_once(*compositions.jacobian(module, "f", mode=mode)[:2])
        assert [op.name for op in func.ops].count("matmul") == 1
        assert not [op for op in func.ops if op.name == "iota" and {b * i, i * o} & set(op.result.type.shape)]


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("name", ["dense", "two_layers"])
def test_batch_jacobians_agree_with_and_without_the_pass(name, mode, monkeypatch):
    source, shapes = JACOBIANS[name]
    module = compile_source(source, f"{name}.adc")
    args = [rng.standard_normal(s) for s in shapes]
    extended, func = compositions.batch_jacobian(module, "f", 0, mode=mode)
    monkeypatch.setattr(compositions, "one_hot_func", lambda f, funcs: f)
    dense_module, dense = compositions.batch_jacobian(module, "f", 0, mode=mode)
    (got,), (want,) = run(extended, func.name, *args), run(dense_module, dense.name, *args)
    (y,) = run(module, "f", *args)
    assert got.shape == y.shape + shapes[0][1:]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("path", BATCH_GOLDEN_CASES, ids=[p.stem for p in BATCH_GOLDEN_CASES])
def test_batch_golden(path):
    assert_golden_functions(path, lambda module: [
        compositions.all_seeds_at_once(*compositions.batch_jacobian(module, "f", 0, mode=mode))
        for mode in ("forward", "reverse")])


def test_forward_batch_jacobian_never_multiplies_its_seeds():
    # x's per-example seeds (I of them for each of B examples) meet x @ w first: a broadcast of w, no product
    module = compile_source(JACOBIANS["dense"][0], "dense.adc")
    func = compositions.all_seeds_at_once(*compositions.batch_jacobian(module, "f", 0, mode="forward"))
    assert [op.name for op in func.ops].count("matmul") == 1       # the primal x @ w
