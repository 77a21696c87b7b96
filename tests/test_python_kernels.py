"""@adc.kernel: kernels in .py files written to tmp_path and imported, as a user's module is —
calls between them, values against NumPy, transformations, pickling into a process without the
file; and the diagnostics, located at the file's own line and column."""
import importlib.util
import linecache
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import adc
from tests.support.repository import ROOT

KERNELS = '''
import adc
from adc import f32, f64, i64

B, N = adc.dims("B N")


@adc.kernel
def loss(x: f32[B, N], labels: i64["B"], w: f32["N"]) -> f32:
    """Mean squared error of a linear model; calls a kernel defined below it."""
    return mean((predict(x, w) - f32(labels)) ** 2)


@adc.kernel
def predict(x: f32[B, N], w: f32[N]) -> f32[B]:
    return x @ w


@adc.kernel
def both(x: f64["N"]) -> (f64["N"], f64):
    return exp(x), sum(x)


def make(scale):
    @adc.kernel
    def scaled(x: f64["N"]) -> f64["N"]:
        return x * 2.0
    return scaled
'''

rng = np.random.default_rng(0)
X, LABELS, W = rng.standard_normal((5, 3), np.float32), rng.integers(0, 3, 5), rng.standard_normal(3, np.float32)


def write_module(tmp_path, name: str, text: str):
    """`text` as the module `name` in tmp_path, imported as a user's module is (not yet compiled)."""
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


@pytest.fixture
def kernels(tmp_path):
    return write_module(tmp_path, "user_kernels", KERNELS)[0]


def test_kernels_call_each_other_and_match_numpy(kernels):
    want = np.mean((X @ W - LABELS.astype(np.float32)) ** 2)
    assert kernels.loss(X, LABELS, W).numpy() == pytest.approx(want, rel=1e-5)
    np.testing.assert_allclose(kernels.predict(X, W).numpy(), X @ W, rtol=1e-6)
    y, s = kernels.both(np.arange(3.0))
    np.testing.assert_allclose(y.numpy(), np.exp(np.arange(3.0)))
    assert s.numpy() == 3.0
    np.testing.assert_array_equal(kernels.make(2.0)(np.arange(3.0)).numpy(), [0.0, 2.0, 4.0])


def test_the_kernel_is_its_source_translated(kernels):
    assert kernels.predict.adc_source == "def predict(x: f32[B, N], w: f32[N]) -> f32[B]:\n    return x @ w\n"
    assert kernels.predict.__name__ == "predict" and "predict" in repr(kernels.predict)


def test_a_decorated_kernel_is_a_kernel_to_every_transformation(kernels):
    grad = adc.grad(kernels.loss, wrt="w")
    residual = X @ W - LABELS
    np.testing.assert_allclose(grad(X, LABELS, W).numpy(), 2 * X.T @ residual / 5, rtol=1e-4)
    per_row = adc.vmap(kernels.predict, in_axes=(0, None))
    np.testing.assert_allclose(per_row(X[:, None, :], W).numpy(), (X @ W)[:, None], rtol=1e-6)
    w = adc.Variable(W)
    with adc.GradientTape() as tape:
        value = kernels.loss(X, LABELS, w)
    np.testing.assert_allclose(tape.gradient(value, w).numpy(), 2 * X.T @ residual / 5, rtol=1e-4)


def test_a_kernel_pickles_with_its_source_into_a_process_without_the_file(kernels, tmp_path):
    payload = pickle.dumps(kernels.loss)
    (tmp_path / "user_kernels.py").unlink()
    run = subprocess.run([sys.executable, "-c", "import pickle, sys, numpy as np\n"
                          "k = pickle.loads(sys.stdin.buffer.read())\n"
                          "print(float(k(np.ones((2, 3), np.float32), np.zeros(2, np.int64), np.ones(3, np.float32))))"],
                         input=payload, capture_output=True, cwd="/", check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert float(run.stdout) == 9.0


def test_a_compile_error_points_at_the_files_line_and_column(tmp_path):
    module, path = write_module(tmp_path, "broken", '''
        import adc
        from adc import f32


        @adc.kernel
        def f(x: f32["N"]) -> f32["N"]:
            y = x * 2.0
            return y + undefined_thing
        ''')
    with pytest.raises(adc.CompileError) as caught:
        module.f(np.ones(3, np.float32))
    err = caught.value
    assert (err.file, err.line, err.col) == (str(path), 9, 16)
    assert err.render() == (f"{path}:9:16: error: unknown name 'undefined_thing'\n"
                            f"    return y + undefined_thing\n"
                            f"               ^")


def test_an_indented_kernel_reports_its_column_in_the_file(tmp_path):
    module, path = write_module(tmp_path, "nested", '''
        import adc
        from adc import f64


        class Models:
            @staticmethod
            def build():
                @adc.kernel
                def g(x: f64["N"], n: f64["N"]) -> f64["M"]:
                    return x + n
                return g
        ''')
    with pytest.raises(adc.CompileError) as caught:
        module.Models.build()(np.ones(3), np.ones(3))
    err = caught.value
    assert (err.file, err.line, err.col) == (str(path), 10, 48)      # at f64["M"], 8 columns in
    assert err.render().splitlines()[1] == '        def g(x: f64["N"], n: f64["N"]) -> f64["M"]:'


def test_an_error_inside_a_string_annotation_is_located_in_it(tmp_path):
    module, path = write_module(tmp_path, "bad_shape", '''
        import adc
        from adc import f32

        @adc.kernel
        def h(x: f32["N,, M"]) -> f32:
            return sum(x)
        ''')
    with pytest.raises(adc.CompileError) as caught:
        module.h(np.ones((2, 2), np.float32))
    assert caught.value.file == str(path) and caught.value.line == 6
    assert 10 <= caught.value.col <= 21       # within the annotation f32["N,, M"]


@pytest.mark.parametrize("signature, message, col", [
    ("def k(x: int) -> f32:", "parameter 'x' is annotated <class 'int'>, which is not an adc type", 10),
    ("def k(x: f32, y) -> f32:", "parameter 'y' needs an adc type", 1),
    ("def k(x: f32):", "the result needs an adc type", 1),
    ("def k(x: f32, y: f32 = 1.0) -> f32:", "plain positional ones", 1),
    ("def k(x: f32) -> (f32, 3):", "the result is annotated \\(f32, 3\\)", 18),
])
def test_a_def_that_is_no_kernel_is_refused_at_decoration(tmp_path, signature, message, col):
    with pytest.raises(adc.CompileError, match=message) as caught:
        write_module(tmp_path, "not_kernel", f"import adc\nfrom adc import f32\n\n@adc.kernel\n{signature}\n"
                                             f"    return x\n")
    assert (caught.value.file, caught.value.line, caught.value.col) == (str(tmp_path / "not_kernel.py"), 5, col)


def test_another_decorator_is_refused_not_dropped(tmp_path):
    with pytest.raises(adc.CompileError, match="@adc.kernel is a kernel's only decorator") as caught:
        write_module(tmp_path, "two_decorators", "import adc\nfrom adc import f32\ncustom_gradient = lambda f: f\n\n"
                                                 "@adc.kernel\n@custom_gradient\ndef k(x: f32) -> f32:\n    return x\n")
    assert (caught.value.line, caught.value.col) == (5, 1)


def test_an_annotation_that_is_no_dimension_fails_where_python_evaluates_it(tmp_path):
    with pytest.raises(TypeError, match=r"f32\[...\]: a dimension is a name"):
        write_module(tmp_path, "bad_dim", "import adc\nfrom adc import f32\n\n@adc.kernel\n"
                                          "def k(x: f32[1.5]) -> f32:\n    return sum(x)\n")


def test_postponed_annotations_are_evaluated(tmp_path):
    module, _ = write_module(tmp_path, "postponed", '''
        from __future__ import annotations
        import adc
        from adc import f64

        @adc.kernel
        def double(x: f64["N"]) -> f64["N"]:
            return 2.0 * x
        ''')
    np.testing.assert_array_equal(module.double(np.arange(3.0)).numpy(), [0.0, 2.0, 4.0])


def test_a_kernel_calls_only_kernels_of_its_own_file(tmp_path):
    write_module(tmp_path, "lib_kernels", "import adc\nfrom adc import f64\n\n@adc.kernel\n"
                                          "def helper(x: f64) -> f64:\n    return x\n")
    sys.path.insert(0, str(tmp_path))
    try:
        module, path = write_module(tmp_path, "uses_lib", "import adc\nfrom adc import f64\nfrom lib_kernels import helper\n\n"
                                                          "@adc.kernel\ndef k(x: f64) -> f64:\n    return helper(x)\n")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("lib_kernels", None)
    with pytest.raises(adc.CompileError, match="'helper' is an @adc.kernel of .*lib_kernels.py: a kernel calls the "
                                               "kernels of its own file") as caught:
        module.k(1.0)
    assert (caught.value.line, caught.value.col) == (7, 12)


def test_without_source_the_error_says_so_and_what_to_do():
    namespace = {"adc": adc, "f32": adc.f32}
    with pytest.raises(adc.CompileError, match=r"the source of 'k' is not available: it was defined in <stdin>, .*"
                                               r"adc.compile\(source\)"):
        exec(compile("@adc.kernel\ndef k(x: f32) -> f32:\n    return x\n", "<stdin>", "exec"), namespace)


def test_source_kept_in_linecache_is_read_as_ipython_and_python_3_13_keep_it():
    text = "@adc.kernel\ndef twice(x: f32) -> f32:\n    return 2.0 * x\n"
    linecache.cache["<python-input-7>"] = (len(text), None, text.splitlines(True), "<python-input-7>")
    namespace = {"adc": adc, "f32": adc.f32}
    exec(compile(text, "<python-input-7>", "exec"), namespace)
    assert namespace["twice"](1.5).numpy() == 3.0


def test_a_bounds_checked_kernel(tmp_path):
    module, _ = write_module(tmp_path, "checked", "import adc\nfrom adc import f64\n\n@adc.kernel(check_bounds=True)\n"
                                                  "def k(x: f64[\"N\"]) -> f64:\n    return sum(x)\n")
    assert module.k(np.ones(4)).numpy() == 4.0
    assert module.k.__adc_kernel__().gradient_source.info.check_bounds
