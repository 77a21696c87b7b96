"""External functions from a user's own shared object (`extern "libmy.so" def ...`): found in the JIT,
linked into a .so that loads in a fresh process, differentiated through the gradient attached in adc;
a missing symbol or library is a located CompileError at compile time, never a call through address 0.
Oracles: the C function's closed form and float64 central finite differences."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import adc

C_SOURCE = "double cube_plus(double x, double c) { return x * x * x + c; }\n"
ADC_SOURCE = textwrap.dedent('''\
    extern "../lib/libcube.so" def cube_plus(x: f64, c: f64) -> f64

    @gradient(cube_plus)
    def cube_plus_grad(x: f64, c: f64, dy: f64) -> (f64, f64):
        return dy * 3.0 * x * x, dy

    def f(x: f64[N], c: f64) -> f64:
        return sum(cube_plus(x, c) * x)
    ''')


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """lib/libcube.so built by cc, and src/k.adc naming it relative to its own folder."""
    root = tmp_path_factory.mktemp("externs")
    (root / "lib").mkdir()
    (root / "src").mkdir()
    (root / "lib" / "cube.c").write_text(C_SOURCE)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(root / "lib" / "libcube.so"), str(root / "lib" / "cube.c")],
                   check=True)
    (root / "src" / "k.adc").write_text(ADC_SOURCE)
    return root


def reference(x, c):
    return np.sum((x ** 3 + c) * x)


def central_difference(f, x, step=1e-6):
    grad = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = step
        grad[i] = (f(x + e) - f(x - e)) / (2 * step)
    return grad


def test_jit_calls_the_users_library_and_its_gradient(project):
    m = adc.compile_file(project / "src" / "k.adc")
    x = np.array([0.5, -1.5, 2.0])
    assert float(m.f(x, 0.25)) == pytest.approx(reference(x, 0.25), rel=1e-15)
    xv, cv = adc.Variable(x), adc.Variable(np.float64(0.25))
    with adc.GradientTape() as t:
        y = m.f(xv, cv)
    dx, dc = t.gradient(y, [xv, cv])
    np.testing.assert_allclose(dx.numpy(), central_difference(lambda v: reference(v, 0.25), x), rtol=1e-8)
    assert float(dc) == pytest.approx(x.sum(), rel=1e-15)


def test_shared_object_links_the_library_and_loads_in_a_fresh_process(project, tmp_path):
    out = tmp_path / "k.so"
    subprocess.run([sys.executable, "-m", "adc", "compile", str(project / "src" / "k.adc"), "-o", str(out)],
                   check=True, cwd=tmp_path)
    script = textwrap.dedent(f"""
        import numpy as np, adc
        m = adc.load({str(out)!r})
        x = adc.Variable(np.array([0.5, -1.5, 2.0]))
        with adc.GradientTape() as t:
            y = m.f(x, 0.25)
        print(float(y), *t.gradient(y, x).numpy())
        """)
    printed = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True,
                             cwd="/").stdout.split()
    x = np.array([0.5, -1.5, 2.0])
    assert float(printed[0]) == pytest.approx(reference(x, 0.25), rel=1e-15)
    np.testing.assert_allclose([float(v) for v in printed[1:]], 4 * x ** 3 + 0.25, rtol=1e-15)


@pytest.mark.parametrize("declaration, message", [
    ("extern def no_such_function(x: f64) -> f64",
     "external function 'no_such_function' is not defined in libm or this process"),
    ('extern "libm.so.6" def no_such_function(x: f64) -> f64',
     "external function 'no_such_function' is not defined in library 'libm.so.6'"),
    ('extern "./missing/libnothing.so" def no_such_function(x: f64) -> f64',
     "external function 'no_such_function': cannot load its library '/.*/missing/libnothing.so'"),
])
def test_a_missing_symbol_or_library_is_a_located_compile_error(tmp_path, declaration, message):
    source = tmp_path / "bad.adc"
    source.write_text(f"{declaration}\n\ndef f(x: f64) -> f64:\n    return no_such_function(x)\n")
    with pytest.raises(adc.CompileError, match=message) as err:
        adc.compile_file(source)
    assert str(err.value).splitlines()[1:] == ["    return no_such_function(x)", "           ^"]
    result = subprocess.run([sys.executable, "-m", "adc", "compile", str(source), "-o", str(tmp_path / "bad.so")],
                            capture_output=True, text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{source}:4:12: error: external function 'no_such_function'" in result.stderr
    assert not (tmp_path / "bad.so").exists()
    check = subprocess.run([sys.executable, "-m", "adc", "check", str(source)], capture_output=True, text=True)
    assert check.returncode == 1 and check.stderr == result.stderr


def test_the_ir_carries_the_library_as_an_absolute_path(project):
    text = subprocess.run([sys.executable, "-m", "adc", "ir", str(project / "src" / "k.adc")], check=True,
                          capture_output=True, text=True).stdout
    assert f'library = "{project / "lib" / "libcube.so"}", symbol = "cube_plus"' in text
