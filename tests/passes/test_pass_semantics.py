"""Every cleanup pass preserves meaning: interp(before) == interp(after), bit for bit, on random modules.

combine_sums and sink_sums reassociate sums, so they keep values within rounding, tested in
test_combine_sums.py and test_sink_sums.py; the modules here draw no sums.

The modules are random mixes of what the passes rewrite (constants 1, +0, -0, nan
broadcast or not; shape-op chains; double negations; duplicated ops; calls with
dimension symbols), run on inputs that include nan, ±inf and -0.0.
"""
import numpy as np
import pytest

from adc.ir.builder import Builder
from adc.ir.core import Func, FuncRef, Module
from adc.ir.interp import run
from adc.ir.printer import format_module
from adc.ir.parser import parse_module
from adc.ir.types import F32, SymDim, TensorType
from adc.ir.verify import verify
from adc.passes.pipeline import DEFAULT_PIPELINE, run_pipeline
from adc.passes.simplify import simplify

N, K = SymDim.symbol("N"), SymDim.symbol("K")
VEC = TensorType(F32, (N,))
SPECIAL = [1.0, 0.0, -0.0, 2.0, float("nan"), float("inf")]


def helper() -> Func:
    """@h(v: f32[K], c: f32) -> f32[K]: v * c, with a slice/pad round trip to exercise dimensions."""
    b = Builder()
    v, c = b.param("v", TensorType(F32, (K,))), b.param("c", TensorType(F32))
    scaled = b.op("mul", v, b.op("broadcast", c, dims=[], shape=[K]))
    head = b.op("slice", scaled, start=[0], stop=[K - 1], step=[1])
    return b.finish("h", [b.op("pad", head, c, low=[0], high=[1])])


def step(b: Builder, rng, pool, scalar):
    """Append one random op (or a small pattern) producing an f32[N] value."""
    x, y = (pool[i] for i in rng.integers(len(pool), size=2))
    kind = rng.integers(8)
    if kind == 0:
        return b.op(str(rng.choice(["sin", "tanh", "neg", "abs", "sigmoid"])), x)
    if kind == 1:
        return b.op(str(rng.choice(["add", "sub", "mul", "maximum", "div"])), x, y)
    if kind == 2:
        c = b.op("constant", dtype=F32, value=float(rng.choice(SPECIAL)))
        c = b.op("broadcast", c, dims=[], shape=[N])
        pair = (x, c) if rng.integers(2) else (c, x)
        return b.op(str(rng.choice(["add", "sub", "mul", "div"])), *pair)
    if kind == 3:
        c1, c2 = (b.op("constant", dtype=F32, value=float(rng.choice(SPECIAL))) for _ in range(2))
        s = b.op(str(rng.choice(["add", "mul", "sub", "minimum"])), c1, b.op("exp", c2))
        return b.op("mul", x, b.op("broadcast", b.op("mul", s, scalar), dims=[], shape=[N]))
    if kind == 4:
        m = b.op("reshape", b.op("broadcast", x, dims=[0], shape=[N, 1]), shape=[1, N])
        t = b.op("transpose", b.op("transpose", m, perm=[1, 0]), perm=[1, 0])
        return b.op("reshape", t, shape=[N])
    if kind == 5:
        return b.op("neg", b.op("neg", x))
    if kind == 6:
        return b.op("call", x, scalar, callee=FuncRef("h"))
    return b.op(b.ops[-1].name, *b.ops[-1].operands, **b.ops[-1].attrs) if b.ops and b.ops[-1].results[0].type == VEC else x


def random_module(seed: int) -> Module:
    rng = np.random.default_rng(seed)
    funcs = {"h": helper()}
    b = Builder(funcs)
    pool = [b.param("x", VEC), b.param("y", VEC)]
    scalar = b.param("s", TensorType(F32))
    for _ in range(int(rng.integers(6, 20))):
        pool.append(step(b, rng, pool, scalar))
    funcs["main"] = b.finish("main", [pool[-1], pool[int(rng.integers(len(pool)))]])
    return Module(funcs, f"random{seed}")


def inputs(seed: int):
    rng = np.random.default_rng(1000 + seed)
    x, y = (rng.standard_normal(7).astype(np.float32) for _ in range(2))
    x[:3], y[:3] = [-0.0, np.nan, np.inf], [-0.0, 0.0, -np.inf]
    return x, y, np.float32(rng.choice([0.5, -0.0, -2.0]))


def assert_same_bits(got, expected):
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(g, e)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(e))


PASSES = {p.name: p for p in DEFAULT_PIPELINE}


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("pass_name", [*PASSES, "pipeline"])
def test_pass_preserves_meaning(pass_name, seed):
    module = random_module(seed)
    verify(module)
    printed = format_module(module)
    passes = DEFAULT_PIPELINE if pass_name == "pipeline" else (PASSES[pass_name],)
    after = run_pipeline(module, passes, verify=True)
    assert format_module(module) == printed, "the pass mutated its input"
    assert_same_bits(run(after, "main", *inputs(seed)), run(module, "main", *inputs(seed)))
    assert format_module(parse_module(format_module(after))) == format_module(after)


def test_pipeline_inlines_every_call_and_is_idempotent():
    for seed in range(10):
        after = run_pipeline(random_module(seed))
        assert all(op.name != "call" for op in after["main"].ops)
        assert format_module(run_pipeline(after)) == format_module(after), "the pipeline is not idempotent"


@pytest.mark.parametrize("merged, perm, split, ops", [
    ("[I,B*O,P]", [1, 0, 2], "[B,O,I,P]", 1),           # one transpose of x
    ("[I*B,O,P]", [2, 1, 0], "[P,O,I,B]", 1),
    ("[I,B*O*P]", [1, 0], "[B,O,P,I]", 1),
    ("[I,B*O,P]", [1, 0, 2], "[O,B,I,P]", 3),           # split into other runs: kept
])
def test_regrouped_transposes_keep_their_values(merged, perm, split, ops):
    merged_shape = merged.strip("[]")
    text = (f"func @f(%x: f32[I,B,O,P]) -> f32{split} {{\n"
            f"  %0 = reshape %x {{shape = {merged}}} : f32{merged}\n"
            f"  %1 = transpose %0 {{perm = {perm}}} : f32[{_permuted(merged_shape, perm)}]\n"
            f"  %2 = reshape %1 {{shape = {split}}} : f32{split}\n"
            f"  return %2\n}}\n")
    before = parse_module(text)
    after = simplify(before)
    verify(after)
    assert len([op for op in after["f"].ops if op.result in _live(after["f"])]) == ops
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_array_equal(run(after, "f", x)[0], run(before, "f", x)[0])


def _live(func) -> set:
    live, ops = set(func.returns), list(func.ops)
    for op in reversed(ops):
        if op.result in live:
            live.update(op.operands)
    return live


def _permuted(shape: str, perm) -> str:
    dims = shape.split(",")
    return ",".join(dims[p] for p in perm)
