"""First-tier code (Target.first_tier: the same optimized IR, instructions selected by LLVM's fast
path) computes the same bits as the full code, which replaces it once compiled: a tape's first
gradients run on it (JitModule.compile_ahead), and must not differ from the later ones.

Each case compiles its source twice, once under the test hook ADC_FIRST_TIER=1 (every JIT compile
to first-tier code only), and compares results bit for bit (NaNs alike)."""
import contextlib
import os

import numpy as np
import pytest
from hypothesis import given

import adc
from adc.driver.host import jit_target
from tests.fuzz.budget import fuzz_settings
from tests.support.programs import programs
from tests.support.vocabulary import Options

REDUCTIONS = """
def reduced(x: f32[N], w: f32[N, M], v: f64[N]) -> (f32, f32[M], f64, f64[N]):
    return sum(exp(x) * tanh(x)), sum(w * x[:, None], axis=0) / max(abs(w), axis=0), \\
        log(sum(exp(v - max(v)))) + max(v), sin(v) * sqrt(abs(v)) + v ** 3
"""


@contextlib.contextmanager
def first_tier():
    previous = os.environ.get("ADC_FIRST_TIER")
    os.environ["ADC_FIRST_TIER"] = "1"
    try:
        yield
    finally:
        if previous is None:
            del os.environ["ADC_FIRST_TIER"]
        else:
            os.environ["ADC_FIRST_TIER"] = previous


def both_tiers(source: str) -> tuple[adc.Module, adc.Module]:
    full = adc.compile(source, "tiers.adc")
    with first_tier():
        quick = adc.compile(source, "tiers.adc")
    return full, quick


def assert_same_bits(full, quick, what: str) -> None:
    full, quick = (r if isinstance(r, tuple) else (r,) for r in (full, quick))
    for k, (a, b) in enumerate(zip(full, quick, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, what
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), f"{what}: result {k} differs between the tiers"


def vjp(kernel, args, wrt):
    """The cotangents of the float params `wrt` for all-ones cotangents of the float results, by the tape."""
    sources = [adc.constant(a) for a in args]
    with adc.GradientTape() as tape:
        tape.watch([sources[i] for i in wrt])
        outs = kernel(*sources)
    outs = outs if isinstance(outs, tuple) else (outs,)
    floats = [o for o in outs if o.dtype.kind == "f"]
    return tuple(tape.gradient(floats, [sources[i] for i in wrt], output_gradients=[np.ones(o.shape, o.dtype) for o in floats],
                               unconnected_gradients="zero"))


def test_the_hook_compiles_first_tier_code_and_keys_it_apart():
    assert not jit_target().quick
    with first_tier():
        target = jit_target()
    assert target.quick and target == jit_target().first_tier and target.full_tier == jit_target()
    assert target.key() != jit_target().key()
    assert jit_target(check_bounds=True).first_tier.check_bounds


@pytest.mark.parametrize("n, m", [(1, 1), (7, 3), (33, 17), (1000, 40)])
def test_vectorized_reductions_and_math_give_the_same_bits(n, m):
    """Reductions carry `reassoc`: the vectorizer splits them into lanes before code generation, so
    both tiers add in the same order, at every remainder of the vector width."""
    full, quick = both_tiers(REDUCTIONS)
    rng = np.random.default_rng(n)
    args = (rng.standard_normal(n).astype(np.float32), rng.standard_normal((n, m)).astype(np.float32),
            rng.standard_normal(n) * 3)
    assert_same_bits(full.reduced(*args), quick.reduced(*args), "reduced")
    assert_same_bits(vjp(full.reduced, args, [0, 1, 2]), vjp(quick.reduced, args, [0, 1, 2]), "its VJP")


@fuzz_settings(12)
@given(program=programs())
def test_generated_programs_give_the_same_bits_in_both_tiers(program):
    full, quick = both_tiers(program.source)
    args = program.arguments()
    try:
        want = full.f(*args)
    except ValueError:          # sizes the program cannot take: the first tier refuses them alike
        with pytest.raises(ValueError):
            quick.f(*args)
        return
    assert_same_bits(want, quick.f(*args), "f")


@fuzz_settings(8)
@given(program=programs(Options(floats=("f64",), smooth=True)))
def test_generated_programs_gradients_give_the_same_bits_in_both_tiers(program):
    full, quick = both_tiers(program.source)
    args = program.arguments()
    wrt = [i for i, (_, t) in enumerate(program.main.params) if t.is_float]
    if not wrt or 0 in program.sizes.values():
        return
    with np.errstate(all="ignore"):
        assert_same_bits(vjp(full.f, args, wrt), vjp(quick.f, args, wrt), "the VJP of f")
