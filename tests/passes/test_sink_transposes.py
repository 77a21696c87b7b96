"""sink_transposes changes no value: each golden case, and long chains, give what they gave before."""
from pathlib import Path

import numpy as np
import pytest

from adc.ir.builder import Builder
from adc.ir.core import Module
from adc.ir.interp import run
from adc.ir.parser import parse_module
from adc.ir.types import F32, SymDim, TensorType
from adc.ir.verify import verify
from adc.passes.sink_transposes import MAX_REBUILT, sink_transposes

CASES = sorted(p for p in (Path(__file__).parent / "sink_transposes").glob("*.ir") if not p.name.endswith(".after.ir"))
SIZES = {"A": 3, "B": 4, "C": 5, "D": 2, "S": 3, "H": 6, "I": 2}


def _inputs(func, rng):
    return [rng.standard_normal([d if isinstance(d, int) else SIZES[str(d)] for d in p.type.shape]).astype(np.float32)
            for p in func.params]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_a_sunk_transpose_computes_the_same_values(path):
    before = parse_module(path.read_text(), path.name)
    after = sink_transposes(before)
    (name,) = before.funcs
    args = _inputs(before.funcs[name], np.random.default_rng(0))
    for got, want in zip(run(after, name, *args), run(before, name, *args)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("length", [3, MAX_REBUILT * 4])
def test_a_transpose_of_a_long_elementwise_chain_sinks_or_stays_without_deep_recursion(length):
    # tanh(...tanh(v + u)...)ᵀ, v and u broadcast: the transpose reaches the broadcasts through `length`
    # ops, or, past MAX_REBUILT, stays where it was (and a chain of any length is no recursion error)
    n, m = SymDim.symbol("N"), SymDim.symbol("M")
    b = Builder()
    v, u = b.param("v", TensorType(F32, (n,))), b.param("u", TensorType(F32, (m,)))
    x = b.op("add", b.op("broadcast", v, dims=[0], shape=[n, m]), b.op("broadcast", u, dims=[1], shape=[n, m]))
    for _ in range(length):
        x = b.op("tanh", x)
    module = Module({"f": b.finish("f", [b.op("transpose", x, perm=[1, 0])])})
    after = sink_transposes(module)
    verify(after)
    assert sum(op.name == "transpose" for op in after.funcs["f"].ops) == (0 if length < MAX_REBUILT else 1)
    args = np.linspace(-2, 2, 5, dtype=np.float32), np.linspace(-1, 1, 3, dtype=np.float32)
    np.testing.assert_array_equal(run(after, "f", *args)[0], run(module, "f", *args)[0])


def _random_program(seed: int) -> Module:
    """A random function of rank-3 values made elementwise from broadcasts, iotas, transposes and a
    matmul's rows, ending in a transpose (or several, read by the results)."""
    rng = np.random.default_rng(seed)
    dims = [SymDim.symbol(s) for s in "ABC"]
    b = Builder()
    small = [b.param(f"p{i}", TensorType(F32, tuple(dims[j] for j in axes)))
             for i, axes in enumerate([(0,), (1,), (2,), (0, 1), (1, 2), (0, 2)])]
    weight = b.param("w", TensorType(F32, (dims[2], dims[2])))
    pool = []

    def spread(v, axes):
        return b.op("broadcast", v, dims=list(axes), shape=dims)

    for axes, p in zip([(0,), (1,), (2,), (0, 1), (1, 2), (0, 2)], small):
        pool.append(spread(p, axes))
    pool.append(b.op("iota", axis=int(rng.integers(3)), dtype=F32, shape=dims))
    for _ in range(int(rng.integers(3, 9))):
        x, y = (pool[i] for i in rng.integers(len(pool), size=2))
        kind = rng.integers(5)
        if kind == 0:
            v = b.op(["add", "mul", "sub"][rng.integers(3)], x, y)
        elif kind == 1:
            v = b.op("sin", x)
        elif kind == 2:
            v = b.op("select", b.op("lt", x, y), x, y)
        elif kind == 3:     # transposed and back, or swapped axes of the same size
            perm = [int(a) for a in rng.permutation(3)]
            v = b.op("transpose", b.op("transpose", x, perm=perm), perm=list(np.argsort(perm)))
        else:               # a matmul over the last axis, rows [A, B]
            rows = b.op("reshape", x, shape=[dims[0] * dims[1], dims[2]])
            v = b.op("reshape", b.op("matmul", rows, weight), shape=dims)
        pool.append(v)
    last = pool[-1]
    outs = [b.op("transpose", last, perm=[1, 0, 2])]
    if rng.integers(2):
        outs.append(b.op("transpose", pool[int(rng.integers(len(pool)))], perm=[int(a) for a in rng.permutation(3)]))
    return Module({"f": b.finish("f", outs)})


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_keep_their_values(seed):
    module = _random_program(seed)
    verify(module)
    after = sink_transposes(module)
    verify(after, pass_name="sink_transposes")
    rng = np.random.default_rng(seed)
    a, b_, c = 3, 4, 5
    shapes = [(a,), (b_,), (c,), (a, b_), (b_, c), (a, c), (c, c)]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    for got, want in zip(run(after, "f", *args), run(module, "f", *args)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
