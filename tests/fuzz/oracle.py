"""What the fuzz tests accept of adc: a CompileError located in the text, or kernels computing what
the reference interpreter, NumPy and finite differences compute.

Anything else a program makes adc do — another exception, a crash, a wrong value or
gradient — fails the test with the program. Each outcome is counted in `outcomes` (the
tally the long run prints, tests/fuzz/conftest.py); CompileErrors by the kind of their
message, its names and numbers blanked:

    "unknown name 'zz'" and "unknown name 't3'"  ->  "CompileError: unknown name '…'"
"""
from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest

import adc
from adc.ir.interp import run
from adc.ir.parser import parse_module
from adc.ir.printer import format_module
from adc.ir.types import evaluate_dim
from adc.passes.pipeline import run_pipeline
from tests.support.vocabulary import INPUT_BOUND
from tests.support.gradcheck import assert_vjp_matches_differences
from tests.support.programs import MAIN, Program
from tests.support.twin import Twin

FILENAME = "fuzz.adc"
# error of the compiled kernel against the same computation in NumPy, relative to a bound of
# the values, beyond the rounding the computation shows when redone in float64
TOLERANCE = {"f32": 1e-5, "f64": 1e-10}


def compile_or_locate(source: str, outcomes, what: str) -> adc.Module | None:
    """The compiled module, or None after checking the CompileError points into `source`. Junk
    of comments and blank lines is a program of no kernels: its warning is an outcome here."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "adc.compile: '.*' defines no kernels", UserWarning)
            return adc.compile(source, FILENAME)
    except adc.CompileError as err:
        assert_located(err, source)
        outcomes.add(f"{what}: CompileError: {error_kind(err.message)}")
        return None


def assert_located(err: adc.CompileError, source: str, filename: str = FILENAME) -> None:
    """`file:line:col: error: message`, then the line of `source` at line:col and a caret under col."""
    loc = err.loc
    assert err.message.strip(), "a CompileError without a message"
    assert loc is not None and loc.file == filename, f"a CompileError without a location: {err.message}"
    lines = source.split("\n")
    assert 1 <= loc.line <= len(lines), f"line {loc.line} is outside the text ({len(lines)} lines): {err}"
    line = lines[loc.line - 1].removesuffix("\r").encode("utf-8", "replace").decode()    # a lone surrogate shows as ?
    assert 1 <= loc.col <= len(line) + 1, f"column {loc.col} is outside line {loc.line} {line!r}: {err}"
    expected = f"{loc}: error: {err.message}\n{line}\n{' ' * (loc.col - 1)}^"
    assert err.render() == expected, f"the excerpt is not line {loc.line} of the text:\n{err.render()}"


def error_kind(message: str) -> str:
    kind = re.sub(r"'[^']*'", "'…'", message.split("\n")[0])
    kind = re.sub(r"\b(f32|f64|i32|i64|bool)(\[[^\]]*\])?", "T", kind)
    return re.sub(r"-?\b\d+(\.\d*)?(e[-+]?\d+)?", "#", kind)[:80]


def check_program(program: Program, outcomes, gradients: bool = False, check_bounds: bool = False) -> None:
    """A well-typed program compiles; its main kernel agrees with the interpreter and the twin, and
    with `gradients`, its VJP with finite differences of the twin and its JVP with the VJP. With
    `check_bounds`, all of it runs in the bounds-checked build (a BoundsError fails the example),
    and so do its Jacobians by batched VJPs and JVPs."""
    module = adc.compile(program.source, FILENAME, check_bounds=check_bounds)
    args = program.arguments()
    twin = Twin(program.twin, MAIN)
    try:
        got = _results(module[MAIN](*args))
    except ValueError:          # a size of 0 that an index needs: so does NumPy
        with pytest.raises(IndexError):
            twin(*args)
        outcomes.add("generated: compiled, refused sizes NumPy cannot index either")
        return
    rounding = _rounding(program.source)
    try:
        want = twin(*args)
    except IndexError:
        _assert_unused_index(module, args, got, rounding, program.main.bounds)
        outcomes.add("generated: compiled, an index NumPy refuses was unused, in a branch or loop adc dropped it from")
        return
    exact = _in_float64(program, args)
    interpreted = run(parse_module(module.ir, FILENAME), MAIN, *args)
    for k, (t, bound) in enumerate(zip(program.main.results, program.main.bounds)):
        assert want[k].dtype == t.numpy, f"the twin's result {k} is {want[k].dtype}, not {t}"
        assert_agree(got[k], want[k], exact[k], rounding, bound, f"result {k} against NumPy")
        assert_agree(got[k], interpreted[k], exact[k], rounding, bound, f"result {k} against the interpreter")
    outcomes.add("generated: compiled, values agree with NumPy and the interpreter")
    if gradients:
        wrt = [i for i, (_, t) in enumerate(program.main.params) if t.is_float]
        # an empty axis or an infinite result: derivatives there may be 0·∞ or 0/0
        degenerate = 0 in program.sizes.values() or not all(np.isfinite(w).all() for w in want if w.dtype.kind == "f")
        assert_vjp_matches_differences(twin.frozen_at(args), lambda xs, cs: _tape_vjp(module[MAIN], xs, cs, wrt),
                                       args, wrt, np.random.default_rng(program.seed), 1e-4, 1e-6, "compiled VJP",
                                       nan_allowed=degenerate)
        _assert_forward_matches_reverse(module[MAIN], args, wrt, np.random.default_rng(program.seed + 1),
                                        nan_allowed=degenerate)
        outcomes.add("generated: compiled, gradients agree with finite differences and forward mode")
        if check_bounds:
            _assert_jacobians_agree(module[MAIN], args, wrt, program.main.results)
            outcomes.add("generated: checked build, no access out of bounds")


def _assert_jacobians_agree(kernel, args, wrt, results) -> None:
    """The Jacobian of the first result w.r.t. the first float param by batched JVPs (forward mode)
    and by batched VJPs (reverse mode) agree: both seed batches run through every op."""
    if not wrt or len(results) != 1:
        return
    with np.errstate(all="ignore"):
        forward = np.asarray(adc.jacobian(kernel, wrt=wrt[0], mode="forward")(*args))
        reverse = np.asarray(adc.jacobian(kernel, wrt=wrt[0], mode="reverse")(*args))
    same = np.isclose(forward, reverse, rtol=1e-6, atol=1e-9) | (np.isnan(forward) & np.isnan(reverse))
    assert same.all(), f"Jacobians: forward mode {forward!r} but reverse mode {reverse!r}"


def _assert_unused_index(module: adc.Module, args, got, rounding: str, bounds) -> None:
    """NumPy raised IndexError on an index the kernel ran without: adc drops an index whose value
    nothing uses from a loop body or a branch, so it needs no size there (the call boundary still
    asks the sizes of the kernel's own indexing, used or not). The optimized IR, interpreted with
    the checks compiled code makes where a region runs, gives the kernel's results: an index it
    still reads would raise there."""
    optimized = run_pipeline(parse_module(module.ir, FILENAME), verify=False)
    interpreted = run(optimized, MAIN, *args)
    for k, bound in enumerate(bounds):
        assert_agree(got[k], interpreted[k], interpreted[k], rounding, bound,
                     f"result {k} against the optimized IR (NumPy refused the index)")


def _rounding(text: str) -> str:
    """The least precise float dtype a program or IR text names: an f32 sum cast to f64 keeps f32's error."""
    return "f32" if "f32" in text else "f64"


def _in_float64(program: Program, args) -> tuple[np.ndarray, ...]:
    """The twin with every f32 computed in f64: how far rounding alone moves the results."""
    twin = Twin(program.twin.replace("np.float32", "np.float64"), MAIN)
    return twin(*(a.astype(np.float64) if a.dtype == np.float32 else a for a in args))


def _results(out) -> tuple[np.ndarray, ...]:
    return tuple(r.numpy() for r in (out if isinstance(out, tuple) else (out,)))


def _tape_vjp(kernel, args, cts, wrt) -> list[np.ndarray]:
    """The cotangents of the arguments in `wrt`, by the tape and the kernel's compiled VJP."""
    sources = [adc.constant(a) for a in args]
    with adc.GradientTape() as tape:
        tape.watch([sources[i] for i in wrt])
        outs = kernel(*sources)
    outs = outs if isinstance(outs, tuple) else (outs,)
    floats = [k for k, o in enumerate(outs) if o.dtype.kind == "f"]
    grads = tape.gradient([outs[k] for k in floats], [sources[i] for i in wrt],
                          output_gradients=[cts[k] for k in floats], unconnected_gradients="zero")
    return [g.numpy() for g in grads]


def _assert_forward_matches_reverse(kernel, args, wrt, rng: np.random.Generator, nan_allowed: bool) -> None:
    """The compiled JVP (adc.jvp) and the tape's VJP satisfy ⟨J·t, c⟩ = ⟨t, Jᵀ·c⟩ for random t and c
    (either may be NaN where `nan_allowed`, see assert_vjp_matches_differences)."""
    tangents = [rng.standard_normal(a.shape).astype(a.dtype) if i in wrt else None for i, a in enumerate(args)]
    outs, moved = adc.jvp(kernel, args, tangents)
    outs, moved = (outs, moved) if isinstance(outs, tuple) else ((outs,), (moved,))
    cts = [rng.standard_normal(o.shape).astype(o.dtype) if o.dtype.kind == "f" else None for o in outs]
    pulled = _tape_vjp(kernel, args, cts, wrt)
    forward = sum(np.vdot(c.astype(np.float64), m.numpy()) for c, m in zip(cts, moved) if m is not None)
    terms = [tangents[i].astype(np.float64) * g for i, g in zip(wrt, pulled)]
    reverse = sum(np.sum(t) for t in terms)
    scale = sum(np.sum(np.abs(t)) for t in terms) + sum(
        np.sum(np.abs(c.astype(np.float64) * m.numpy())) for c, m in zip(cts, moved) if m is not None)
    if nan_allowed and (np.isnan(forward) or np.isnan(reverse)):
        return
    # an infinite term (a derivative that overflows) leaves no tolerance: both sides must be that infinity
    atol = 1e-4 * (1 + scale) if np.isfinite(scale) else 0.0
    assert np.isclose(forward, reverse, rtol=1e-3, atol=atol), (
        f"compiled JVP: ⟨J·t, c⟩ = {forward!r} but the VJP gives ⟨t, Jᵀ·c⟩ = {reverse!r}")


def assert_agree(got, want, exact, rounding: str, bound: float, what: str) -> None:
    """`got` is `want` (the same computation in the same dtypes) up to rounding: exactly for ints and
    bools, else within TOLERANCE[rounding] (the least precise float the computation uses) × the
    bound of the values, plus 4 × the distance of `want` from `exact` (the computation in float64)
    where the computation is ill-conditioned."""
    want, exact = np.asarray(want), np.asarray(exact)
    assert got.shape == want.shape and got.dtype == want.dtype, (
        f"{what}: got {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}")
    unsettled = ~_same(want, exact, TOLERANCE[rounding] * _scale(want, bound))
    if got.dtype.kind != "f":
        bad = (got != want) & ~unsettled
    else:
        # inf - inf: a nan tolerance, which admits nothing; values near the float range: an inf one
        with np.errstate(invalid="ignore", over="ignore"):
            tol = TOLERANCE[rounding] * _scale(want, bound) + 4 * np.abs(want.astype(np.float64) - exact)
        bad = ~(_same(got, want, tol) | (unsettled & ~np.isfinite(want)))
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {bad.size} values differ; at "
                           f"{np.argwhere(bad)[:3].tolist()}: got {got[bad][:3]}, expected {want[bad][:3]}")


def _same(a, b, tol) -> np.ndarray:
    """Elementwise: equal (nan included), or within `tol` of each other."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind not in "fc" and b.dtype.kind not in "fc":
        return a == b
    a, b = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return (a == b) | (np.isnan(a) & np.isnan(b)) | (np.abs(a - b) <= tol)


def _scale(want: np.ndarray, bound: float) -> float:
    if math.isfinite(bound):
        return max(bound, 1.0)
    finite = np.abs(want[np.isfinite(want)]) if want.dtype.kind == "f" else np.abs(want)
    return max(float(finite.max()) if finite.size else 1.0, 1.0)


def check_against_interpreter(module: adc.Module, rng: np.random.Generator, outcomes, what: str) -> None:
    """Every kernel of a module of unknown meaning agrees with the interpreter on random arguments,
    or refuses them (a size a slice or an index needs) before running."""
    ir = parse_module(module.ir, FILENAME)
    if _largest_static_size(ir) > 10**6:
        outcomes.add(f"{what}: compiled, its static sizes are too large to run")
        return
    rounding = _rounding(module.ir)
    for name in module.kernels:
        kernel = module[name]
        sizes = {d: int(rng.integers(1, 5)) for d in kernel.signature.dims}
        shapes = [tuple(evaluate_dim(d, sizes) for d in t.shape) for t in kernel.signature.param_types]
        args = [_random_argument(rng, t, s) for t, s in zip(kernel.signature.param_types, shapes)]
        try:
            got = _results(kernel(*args))
        except (ValueError, IndexError):      # a size, or an index parameter out of range
            outcomes.add(f"{what}: compiled, a kernel refused its arguments")
            continue
        try:
            want = run(ir, name, *args)
            reference, text = ir, module.ir
        except ValueError:
            # a size only a loop body or branch needs whose results nothing reads: adc drops the
            # region with its check (_assert_unused_index); the optimized IR is then the reference
            reference = run_pipeline(parse_module(module.ir, FILENAME), verify=False)
            text = format_module(reference)
            want = run(reference, name, *args)
        exact = _reference_moved(text, reference, name, args, want, rounding)
        for k, (g, w, e) in enumerate(zip(got, want, exact, strict=True)):
            assert_agree(g, w, e, rounding, math.inf, f"@{name} result {k} against the interpreter")
    outcomes.add(f"{what}: compiled, values agree with the interpreter")


def _reference_moved(ir_text: str, ir, name: str, args, want, rounding: str) -> list[np.ndarray]:
    """`want` moved by the most rounding moves it, the reference `assert_agree` measures how
    unsettled each result is by, where no twin computes it in float64: the interpreter with every
    f32 computed in f64, and with every float argument nudged by -64 to 64 ulps (a product by
    2**63 fed to tan turns one ulp of tanh into another result)."""
    runs = [run(ir, name, *(a * (1 + ulps * np.finfo(a.dtype).eps) if a.dtype.kind == "f" else a for a in args))
            for ulps in (-64, -8, 8, 64)]
    if rounding == "f32":
        wide = parse_module(ir_text.replace("f32", "f64"), FILENAME)
        runs.append(run(wide, name, *(a.astype(np.float64) if a.dtype == np.float32 else a for a in args)))
    moved = []
    for k, w in enumerate(want):
        if w.dtype.kind != "f":
            moved.append(w)
            continue
        with np.errstate(invalid="ignore"):     # inf - inf: a nan, which moves `w` to nan (unsettled)
            spread = np.max([np.abs(r[k].astype(np.float64) - w) for r in runs], axis=0)
            moved.append(w + np.nan_to_num(spread, nan=np.inf))
    return moved


def _largest_static_size(ir) -> int:
    """The most elements the static dimensions of any value of `ir` hold (a mutated size can be 2**31)."""
    types = [v.type for f in ir.funcs.values() for v in f.params + tuple(r for op in f.ops for r in op.results)]
    return max((math.prod(d for d in t.shape if isinstance(d, int)) for t in types), default=0)


def _random_argument(rng: np.random.Generator, t, shape: tuple[int, ...]) -> np.ndarray:
    dtype = t.dtype.numpy
    if t.dtype.is_float:
        return rng.uniform(-INPUT_BOUND["f64"], INPUT_BOUND["f64"], shape).astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) < 0.5
    return rng.integers(-3, 4, shape).astype(dtype)
