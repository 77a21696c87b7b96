"""Fuzzing adc with random programs: every outcome is a located CompileError, or kernels that compute
what the interpreter and NumPy compute.

Well-typed programs (tests/support/programs.py: several kernels calling each other,
custom gradients, extern functions, every dtype, broadcasting, reductions, slicing,
matmul, where, comparisons, takes and scatters by computed indices, builtins) must
compile, and their main kernel agree with the reference interpreter and the program's
NumPy twin; in float64 with smooth ops, its gradient through the tape's compiled VJPs
agrees with central finite differences of the twin. Ill-typed programs (one of them with
a name, dtype or number replaced), junk (tokens dropped, duplicated, swapped; lines moved;
characters inserted; text cut) and garbage raise a CompileError located in the text, or
compile and agree with the interpreter. Generated programs, their VJPs, JVPs and Jacobians
also run in the bounds-checked build (codegen/lowering/bounds.py), where an access out of bounds is a
BoundsError, which fails the example.

CI runs a fixed sample (tests/fuzz/budget.py). A long run, with a table of outcomes:

    ADC_FUZZ_EXAMPLES=2000 python -m pytest tests/fuzz -p no:cacheprovider
"""
import numpy as np
from hypothesis import given, strategies as st

from tests.fuzz.budget import fuzz_settings
from tests.fuzz.oracle import check_against_interpreter, check_program, compile_or_locate
from tests.support.mutations import CHARACTERS, ILL_TYPED, SNIPPETS, mutated
from tests.support.outcomes import Outcomes
from tests.support.programs import Program, programs
from tests.support.vocabulary import Options, Signature, Type

SMOOTH = Options(floats=("f64",), smooth=True)


@fuzz_settings(30)
@given(program=programs())
def test_well_typed_programs_compute_what_numpy_computes(program, outcomes):
    check_program(program, outcomes)


@fuzz_settings(20)
@given(program=programs(SMOOTH))
def test_smooth_programs_have_the_gradients_of_finite_differences(program, outcomes):
    check_program(program, outcomes, gradients=True)


@fuzz_settings(15)
@given(program=programs(SMOOTH))
def test_programs_and_their_derivatives_stay_in_bounds_in_the_checked_build(program, outcomes):
    check_program(program, outcomes, gradients=True, check_bounds=True)


@fuzz_settings(15)
@given(program=programs())
def test_programs_of_every_dtype_stay_in_bounds_in_the_checked_build(program, outcomes):
    check_program(program, outcomes, check_bounds=True)


def test_a_branch_on_a_tie_is_differentiated_as_taken(outcomes):
    """Seed 179's program: the condition's two sides are the same number, x[-1] and a mean of copies
    of it, so a finite-difference step flipped the branch (45,290 against the VJP's -0.37) until the
    twin kept the decision taken at the point, as reverse mode does."""
    program = Program(
        source="def f(x: f64[2]) -> (f64, f64[2]):\n    t1 = x[0]\n"
               "    if mean(broadcast_to(x[-1], [5])) < x[-1]:\n        t2 = x\n    else:\n        t2 = sin(x)\n"
               "    return ((log(1.5 + t1 * t1) + t1) + t1), t2\n",
        twin="def f(x):\n    t1 = x[0]\n"
             "    if _taken(_mean(np.broadcast_to(x[-1], (5,)), (0,), False) < x[-1]):\n        t2 = x\n"
             "    else:\n        t2 = np.sin(x)\n    return ((np.log(1.5 + t1 * t1) + t1) + t1), t2\n",
        main=Signature("f", (("x", Type("f64", (2,))),), (Type("f64"), Type("f64", (2,))), (5.71, 2.0)),
        sizes={}, seed=195)
    check_program(program, outcomes, gradients=True)


def test_a_dead_loop_whose_index_adc_drops_is_checked_against_the_optimized_ir():
    """Seed 367's mutation, cut down: a loop body indexes x[0, -2**31], read only by a branch whose
    results nothing reads. adc drops both, and the index's check with them, as it drops an unused
    index from a region (oracle._assert_unused_index); the interpreter of the unoptimized IR runs
    the loop and raises, so the compiled kernel is checked against the optimized IR instead."""
    source = ("def f(x: f64[5, M], z: bool) -> f64[M]:\n    t1 = 0.0\n    for _ in range(1):\n"
              "        t1 = tanh(x[0, -2147483648])\n    if 0.5 < (M + t1):\n"
              "        t2 = take_along_axis(broadcast_to(z, [2, 5]), full([2, 5], 7, dtype=i64) % 11 - 5, 0)\n"
              "    else:\n        t2 = broadcast_to(z, [2, 5])\n    return x[0] * 2.0\n")
    seen = Outcomes()
    _assert_located_or_runs(source, 0, seen, "ill-typed")
    assert set(seen.counts) == {"ill-typed: compiled, values agree with the interpreter"}


def _assert_located_or_runs(source: str, seed: int, outcomes, what: str) -> None:
    """A located CompileError (oracle.assert_located), or kernels that agree with the interpreter."""
    module = compile_or_locate(source, outcomes, what)
    if module is not None:
        check_against_interpreter(module, np.random.default_rng(seed), outcomes, what)


@fuzz_settings(60)
@given(source=programs().flatmap(lambda p: mutated(p.source, ILL_TYPED)))
def test_ill_typed_programs_raise_located_errors_or_run(source, outcomes):
    _assert_located_or_runs(source, len(source), outcomes, "ill-typed")


@fuzz_settings(100)
@given(source=programs().flatmap(lambda p: mutated(p.source)))
def test_junk_raises_located_errors_or_runs(source, outcomes):
    _assert_located_or_runs(source, len(source), outcomes, "junk")


@fuzz_settings(100)
@given(source=st.lists(st.sampled_from(CHARACTERS + SNIPPETS + tuple("abxyzNB0129.:,()[]+-*/@<=>#\n _")),
                       max_size=40).map("".join))
def test_garbage_raises_located_errors_or_runs(source, outcomes):
    _assert_located_or_runs(source, len(source), outcomes, "garbage")
