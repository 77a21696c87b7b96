"""Gradients survive `adc compile` → `adc.load`: the .so exports each kernel's VJP kernel, a fresh
process differentiates with it (no adjoint pass), a second order is derived from the IR the .so
carries, and a --no-gradients build raises the LookupError that says how to recompile.
Oracles: closed forms (the guide's 2.0 for half(v * v)), NumPy, and the in-process JIT."""
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import adc
from adc.abi import decode_metadata
from tests.support.repository import SAMPLES

SOURCE = """\
def half(y: f32) -> f32:
    return 0.5 * y

def cube(x: f32) -> f32:
    return x * x * x

def axpy(a: f32, x: f32[N], y: f32[N]) -> f32[N]:
    return a * x + y
"""


def compile_cli(source, tmp_path, *flags):
    src = tmp_path / "grads.adc"
    src.write_text(source)
    out = tmp_path / ("grads_ng.so" if flags else "grads.so")
    subprocess.run([sys.executable, "-m", "adc", "compile", str(src), "-o", str(out), *flags],
                   check=True, capture_output=True, text=True)
    return src, out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grads")
    src, so = compile_cli(SOURCE, tmp)
    _, so_ng = compile_cli(SOURCE, tmp, "--no-gradients")
    return src, so, so_ng


def run_fresh(script):
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.split("\n")


def test_fresh_process_differentiates_with_the_embedded_vjp_kernels(built):
    _, so, _ = built
    out = run_fresh(f"""
        import sys, adc
        m = adc.load({str(so)!r})
        x = adc.Variable(3.0)
        with adc.GradientTape() as t:
            y = m.cube(x)
        print(float(t.gradient(y, x)))
        print("adc.passes.adjoint" in sys.modules, m.cube.derivative().kernel.signature.symbol)
        v = adc.Variable(2.0)
        with adc.GradientTape() as t:
            output = m.half(v * v)
        print(float(t.gradient(output, v)))
    """)
    assert out[:3] == ["27.0", "False adc_kernel_cube_vjp", "2.0"]


def test_no_gradients_build_raises_lookup_error_naming_kernel_and_recompile(built):
    src, _, so_ng = built
    out = run_fresh(f"""
        import adc
        m = adc.load({str(so_ng)!r})
        v = adc.Variable(2.0)
        with adc.GradientTape() as t:
            output = m.half(v * v)
        try:
            t.gradient(output, v)
        except LookupError as err:
            print(err)
    """)
    assert out[0] == (f"No gradient defined for kernel 'half' in {so_ng}: it was compiled with "
                      f"--no-gradients; recompile without it: adc compile {src} -o {so_ng}")


def test_no_gradients_build_never_falls_back_to_its_ir(built):
    m = adc.load(built[2])
    assert m.info.gradients == "none" and "func @cube" in m.ir
    with pytest.raises(LookupError, match="'cube'.*--no-gradients"):
        m.cube.derivative()


ROWS = "def rows(a: f32, x: f32[B, N]) -> f32[B, N]:\n    return a * x * x + x\n"


@pytest.fixture(scope="module")
def rows_built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rows")
    return compile_cli(ROWS, tmp)[1], compile_cli(ROWS, tmp, "--no-gradients")[1]


@pytest.mark.parametrize("use_pfor", [True, False])
def test_no_gradients_build_refuses_jacobians_too(rows_built, use_pfor):
    m = adc.load(rows_built[1])
    x = adc.Variable(np.ones((2, 3), np.float32))
    with adc.GradientTape(persistent=True) as t:
        y = m.rows(2.0, x)
    for jacobian in (t.jacobian, t.batch_jacobian):
        with pytest.raises(LookupError, match="'rows'.*--no-gradients"):
            jacobian(y, x, experimental_use_pfor=use_pfor)


def test_jacobians_of_a_loaded_module_match_numpy_and_the_jit(rows_built):
    x0 = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    results = []
    for module in (adc.load(rows_built[0]), adc.compile(ROWS)):
        x = adc.Variable(x0)
        with adc.GradientTape(persistent=True) as t:
            y = module.rows(1.5, x)
        results.append((t.jacobian(y, x).numpy(), t.batch_jacobian(y, x).numpy()))
    want = np.diag((3.0 * x0 + 1.0).ravel()).reshape(3, 4, 3, 4)
    np.testing.assert_allclose(results[0][0], want, rtol=1e-6)
    np.testing.assert_allclose(results[0][1], np.einsum("bibj->bij", want), rtol=1e-6)
    for loaded, jitted in zip(*results):
        np.testing.assert_array_equal(loaded, jitted)


def test_second_order_of_a_loaded_module_is_derived_from_its_ir(built):
    m = adc.load(built[1])
    x = adc.Variable(2.0)
    with adc.GradientTape() as t2:
        with adc.GradientTape() as t1:
            y = m.cube(x)
        g = t1.gradient(y, x)
    assert (float(g), float(t2.gradient(g, x))) == (12.0, 12.0)
    assert "func @cube_vjp" in m.ir


def test_vector_kernel_gradients_match_numpy_and_the_jit(built):
    m, jit = adc.load(built[1]), adc.compile(SOURCE)
    rng = np.random.default_rng(0)
    x, y, ct = (rng.standard_normal(5).astype(np.float32) for _ in range(3))
    grads = []
    for module in (m, jit):
        a, xv, yv = adc.Variable(1.5), adc.Variable(x), adc.Variable(y)
        with adc.GradientTape() as t:
            out = module.axpy(a, xv, yv)
        grads.append([g.numpy() for g in t.gradient(out, [a, xv, yv], output_gradients=ct)])
    expected = [np.sum(ct * x), 1.5 * ct, ct]
    for loaded, jitted, want in zip(*grads, expected):
        np.testing.assert_allclose(loaded, want, rtol=1e-5)
        np.testing.assert_array_equal(loaded, jitted)


def test_embedded_vjp_covers_a_request_for_fewer_params_and_is_an_ordinary_kernel(built):
    m = adc.load(built[1])
    full, some = m.axpy.derivative(), m.axpy.derivative((1,))
    assert some.kernel is full.kernel and full.wrt == (0, 1, 2) and full.passthrough == (None, None, 0)
    vjp = m.cube.derivative().kernel
    assert str(vjp.signature) == "cube_vjp(x: f32, ct: f32) -> f32"
    x = adc.constant(2.0)
    with adc.GradientTape() as t:     # a VJP kernel records on a tape like any kernel
        t.watch(x)
        g = vjp(x, adc.constant(1.0))
    assert (float(g), float(t.gradient(g, x))) == (12.0, 12.0)


def test_metadata_lists_vjps_and_old_metadata_reads_as_derived(built):
    info = adc.load(built[1]).info
    assert info.gradients == "embedded"
    assert [(v.of, v.kernel.symbol, v.wrt) for v in info.vjps] == [
        ("half", "adc_kernel_half_vjp", (0,)), ("cube", "adc_kernel_cube_vjp", (0,)),
        ("axpy", "adc_kernel_axpy_vjp", (0, 1, 2))]
    old = {"abi": 1, "adc_version": "0.1.0", "module": "m", "kernels": [], "ir": ""}
    assert decode_metadata(json.dumps(old)).gradients == "derived"
    assert adc.compile(SOURCE).info.gradients == "derived"


def test_adc_info_shows_which_kernels_carry_gradients(built):
    _, so, so_ng = built
    info = subprocess.run([sys.executable, "-m", "adc", "info", str(so)], capture_output=True, text=True,
                          check=True).stdout.splitlines()
    assert info[0].endswith("gradients: embedded (VJP kernels exported next to the kernels)")
    assert info[1].startswith("  target: ") and " cpu " in info[1]
    assert info[2] == "  bounds checks: off"
    assert info[3:5] == ["  half(y: f32) -> f32", "      gradient w.r.t. y: half_vjp(y: f32, ct: f32) -> f32"]
    assert info[-1] == ("      gradient w.r.t. a, x, y: axpy_vjp(a: f32, x: f32[N], y: f32[N], ct: f32[N]) "
                        "-> (f32, f32[N], f32[N])")
    bare = subprocess.run([sys.executable, "-m", "adc", "info", str(so_ng)], capture_output=True, text=True,
                          check=True).stdout.splitlines()
    assert bare[0].endswith("gradients: none (compiled with --no-gradients)")
    assert bare[3:] == ["  half(y: f32) -> f32", "  cube(x: f32) -> f32",
                        "  axpy(a: f32, x: f32[N], y: f32[N]) -> f32[N]"]


def test_loaded_custom_gradients_keep_their_backward(tmp_path):
    _, so = compile_cli((SAMPLES / "custom_gradients.adc").read_text(), tmp_path)
    out = run_fresh(f"""
        import adc
        m = adc.load({str(so)!r})
        v = adc.Variable(2.0)
        with adc.GradientTape() as t:
            output = m.clip_gradients(v * v)
        print(float(t.gradient(output, v)))
        x = adc.Variable(100.0)
        with adc.GradientTape(persistent=True) as t:
            naive, stable = m.log1pexp_naive(x), m.log1pexp(x)
        print(float(t.gradient(naive, x)), float(t.gradient(stable, x)))
    """)
    assert out[:2] == ["2.0", "nan 1.0"]


def test_kernel_without_a_gradient_still_compiles_and_says_why_when_differentiated(tmp_path):
    from adc import compiler, driver

    source = "extern def erf(x: f64) -> f64\n\ndef f(x: f64) -> f64:\n    return erf(x) * 2.0\n"
    driver.write_shared_object(compiler.elaborate(source, "ext.adc"), tmp_path / "ext.so")
    m = adc.load(tmp_path / "ext.so")
    assert float(m.f(0.5)) == pytest.approx(2 * 0.5204998778130465, rel=1e-12)
    x = adc.Variable(0.5, dtype=np.float64)
    with adc.GradientTape() as t:
        y = m.f(x)
    with pytest.raises(LookupError, match=r"kernel 'f' in .*ext\.so: ext\.adc:4:12: error: no gradient for "
                                          r"external function 'erf'"):
        t.gradient(y, x)


def test_adc_info_shows_custom_gradients_and_kernels_without_a_gradient(tmp_path):
    source = (SAMPLES / "custom_gradients.adc").read_text() + (
        "\nextern def erfc(x: f64) -> f64\n\ndef tail(x: f64) -> f64:\n    return erfc(x)\n")
    _, so = compile_cli(source, tmp_path)
    info = subprocess.run([sys.executable, "-m", "adc", "info", str(so)], capture_output=True, text=True,
                          check=True).stdout.splitlines()
    at = info.index("  clip_gradients(y: f32) -> f32")
    assert info[at + 1:at + 3] == [
        "      custom gradient: forward clip_gradients_forward, backward clip_gradients_backward",
        "      gradient w.r.t. y: clip_gradients_vjp(y: f32, ct: f32) -> f32"]
    assert not any(line.startswith(("  clip_gradients_forward", "  clip_gradients_backward")) for line in info)
    line = source.splitlines().index("    return erfc(x)") + 1
    assert info[-2] == "  tail(x: f64) -> f64"
    assert info[-1].startswith("      no gradient: ") and info[-1].endswith(
        f"grads.adc:{line}:12: error: no gradient for external function 'erfc': attach one with @gradient(erfc)")
