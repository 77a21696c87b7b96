"""C programs calling shared objects through the header `adc compile --header` writes.

runtime/example.c is built and run by the commands its comment and the README document, then
run again moved elsewhere; a program calling kernels of every element type — a scalar kernel with NULL
dims, a result size N-1, two results — prints NumPy's numbers; the header is strict C99 (and
C++ where a C++ compiler is installed). The C compiler is adc's own: $CC, else cc, here with
-Werror added so any warning fails.
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from adc.codegen.toolchain.aot import c_compiler
from adc.errors import ToolchainError
from tests.support import references
from tests.support.repository import ROOT

STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]


@pytest.fixture(scope="module")
def cc():
    try:
        return c_compiler()
    except ToolchainError as err:
        pytest.skip(str(err))


def compile_with_header(source: str, directory, name: str):
    """`adc compile NAME.adc -o NAME.so --header NAME.h` in `directory`: the header's text."""
    (directory / f"{name}.adc").write_text(source)
    subprocess.run([sys.executable, "-m", "adc", "compile", f"{name}.adc", "-o", f"{name}.so",
                    "--header", f"{name}.h"], cwd=directory, check=True, capture_output=True, text=True)
    return (directory / f"{name}.h").read_text()


def build(cc, args, cwd) -> str:
    """The compiler's diagnostics (stderr) of a build that succeeded."""
    result = subprocess.run([*cc, *args], cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stderr


def documented_commands(example: str = "example.c") -> list[str]:
    """The indented command lines of a C example's opening comment."""
    comment = (ROOT / "runtime" / example).read_text().split("*/")[0]
    return [line[len(" *     "):] for line in comment.splitlines() if line.startswith(" *     ")]


def test_example_builds_by_its_documented_commands_and_runs_from_anywhere(cc, kernels_so, tmp_path):
    """kernels_so compiled the same file by the same relative path: the documented compile is cached."""
    for folder in ("samples", "runtime"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    commands = documented_commands()
    assert commands[0].startswith("mkdir") and commands[-1] == "build/example"
    assert "\n".join(commands) in (ROOT / "README.md").read_text()
    script = 'adc() { "$PYTHON" -m adc "$@"; }\nset -e\n' + "\n".join(commands)
    env = {**os.environ, "PYTHON": sys.executable, "CC": " ".join([*cc, "-Werror", "-pedantic"])}
    here = subprocess.run(["sh", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert here.returncode == 0, here.stderr
    moved = tmp_path / "elsewhere" / "bin"         # the program and its .so, moved together
    moved.parent.mkdir()
    shutil.move(tmp_path / "build", moved)
    out = subprocess.run([str(moved / "example")], cwd="/", check=True, capture_output=True, text=True).stdout
    assert out == here.stdout
    numbers = np.array(out.split(), float)
    x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    np.testing.assert_allclose(numbers[:5], references.sigmoid_shift(x, 0.5), rtol=1e-6)
    m = np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 1000.0]])
    np.testing.assert_allclose(numbers[5:], references.logsumexp_rows(m), rtol=1e-14)


def bratu_jacobian(u: np.ndarray, lam: float) -> np.ndarray:
    """runtime/sparse_example.adc's bratu residual's Jacobian, by hand: rows 0 and 7 the identity's,
    interior rows u[i-1] - 2 u[i] + u[i+1] + lam/49 exp(u[i])."""
    jac = np.eye(8)
    for i in range(1, 7):
        jac[i, i - 1:i + 2] = [1.0, -2.0 + lam / 49.0 * np.exp(u[i]), 1.0]
    return jac


def bratu_energy_hessian(u: np.ndarray, lam: float) -> np.ndarray:
    """The Hessian of 0.5 sum(diff(u)**2) - lam/49 sum(exp(u)): the path Laplacian, less the exponentials."""
    laplacian = 2.0 * np.eye(8) - np.eye(8, k=1) - np.eye(8, k=-1)
    laplacian[0, 0] = laplacian[7, 7] = 1.0
    return laplacian - np.diag(lam / 49.0 * np.exp(u))


def read_csc(lines: list[str]) -> tuple[np.ndarray, list[str]]:
    """One matrix sparse_example.c printed (`nnz`, then `row column value` lines) as a dense 8 x 8,
    and the lines after it; each column's rows are printed in increasing order."""
    nnz = int(lines[0])
    dense = np.zeros((8, 8))
    entries = [line.split() for line in lines[1:1 + nnz]]
    for row, column, value in entries:
        dense[int(row), int(column)] = float(value)
    assert entries == sorted(entries, key=lambda e: (int(e[1]), int(e[0])))
    return dense, lines[1 + nnz:]


def test_sparse_example_fills_csc_matrices_equal_to_numpys(cc, tmp_path):
    """The documented commands (also in the README) build it; its Jacobian and Hessian, read from the
    CSC values and pattern the .so exports, equal the dense ones NumPy computes by hand."""
    (tmp_path / "runtime").symlink_to(ROOT / "runtime")
    commands = documented_commands("sparse_example.c")
    assert "\n".join(commands) in (ROOT / "README.md").read_text()
    script = 'adc() { "$PYTHON" -m adc "$@"; }\nset -e\n' + "\n".join(commands)
    env = {**os.environ, "PYTHON": sys.executable, "CC": " ".join([*cc, *STRICT[1:]])}
    run = subprocess.run(["sh", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    u, lam = 0.1 * np.arange(8) * (7 - np.arange(8)), 1.5
    jacobian, rest = read_csc(run.stdout.split("\n"))
    hessian, rest = read_csc(rest)
    assert rest == [""]
    np.testing.assert_allclose(jacobian, bratu_jacobian(u, lam), rtol=1e-14)
    np.testing.assert_allclose(hessian, bratu_energy_hessian(u, lam), rtol=1e-14)
    assert int(run.stdout.split("\n")[0]) == 8 * 3 - 4     # tridiagonal, rows 0 and 7 the identity's


SMALL = """\
def scale(a: f64, b: f64) -> f64:
    return a * b

def diffs(x: f64[N]) -> f64[N-1]:
    return x[1:] - x[:-1]

def moments(x: f32[B, N]) -> (f32[B], f32[B]):
    return mean(x, axis=1), max(x, axis=1)

def positive(x: f64[N]) -> bool[N]:
    return x > 0.0

def shift(k: i32[N], by: i64) -> i64[N]:
    return i64(k) + by
"""

PROGRAM = r"""
#include <stdio.h>

#include "adc.h"
#include "small.h"

int main(void) {
    double a = 1.5, b = -4.25, s;
    const void *in_scale[2] = {&a, &b};
    void *out_scale[1] = {&s};
    if (adc_kernel_scale(NULL, in_scale, out_scale) != ADC_OK) return 1;
    printf("%.17g\n", s);

    double x[5] = {0.5, -1.0, 2.25, 0.0, 3.0};
    double d[4];
    uint8_t pos[5];
    int64_t n = 5;
    const void *in_x[1] = {x};
    void *out_d[1] = {d}, *out_pos[1] = {pos};
    if (adc_kernel_diffs(&n, in_x, out_d) != ADC_OK || adc_kernel_positive(&n, in_x, out_pos) != ADC_OK) return 1;
    for (int i = 0; i < 4; i++) printf("%.17g\n", d[i]);
    for (int i = 0; i < 5; i++) printf("%d\n", pos[i]);

    float m[2][3] = {{1.0f, 2.0f, 4.5f}, {-3.0f, 0.25f, -1.0f}};
    float mean[2], max[2];
    int64_t bn[2] = {2, 3};
    const void *in_m[1] = {m};
    void *out_m[2] = {mean, max};
    if (adc_kernel_moments(bn, in_m, out_m) != ADC_OK) return 1;
    for (int i = 0; i < 2; i++) printf("%.9g %.9g\n", mean[i], max[i]);

    int32_t k[3] = {-7, 0, 2147483647};
    int64_t by = 5, shifted[3], three = 3;
    const void *in_k[2] = {k, &by};
    void *out_k[1] = {shifted};
    if (adc_kernel_shift(&three, in_k, out_k) != ADC_OK) return 1;
    for (int i = 0; i < 3; i++) printf("%lld\n", (long long)shifted[i]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    directory = tmp_path_factory.mktemp("small")
    return directory, compile_with_header(SMALL, directory, "small")


def test_header_documents_each_kernels_dims_inputs_and_outputs(small):
    header = small[1]
    for block in ["/* scale(a: f64, b: f64) -> f64\n"
                  " *   dims     none (NULL)\n"
                  " *   inputs   2 pointers  {a: double (one value), b: double (one value)}\n"
                  " *   outputs  1 pointer   {double (one value)}\n"
                  " */\n"
                  "int32_t adc_kernel_scale(const int64_t *dims, const void *const *inputs, void *const *outputs);\n",
                  "/* moments(x: f32[B,N]) -> (f32[B], f32[B])\n"
                  " *   dims     int64_t[2]  {B, N}\n"
                  " *   inputs   1 pointer   {x: float[B][N]}\n"
                  " *   outputs  2 pointers  {float[B], float[B]}\n",
                  " *   outputs  1 pointer   {double[N-1]}\n *   requires N-1 >= 0\n",
                  " *   inputs   2 pointers  {k: int32_t[N], by: int64_t (one value)}\n",
                  " *   outputs  1 pointer   {uint8_t[N]}\n",
                  " *   the VJP of diffs: the cotangents of x\n */\nint32_t adc_kernel_diffs_vjp(",
                  "const char *adc_module_metadata(void);\n", "void adc_set_num_threads(int32_t n);\n"]:
        assert block in header
    assert header.startswith("/* small.h — the kernels of small.so, compiled from small.adc\n")
    assert "#ifndef ADC_SMALL_H\n#define ADC_SMALL_H\n" in header and header.endswith("#endif /* ADC_SMALL_H */\n")


def test_header_is_strict_c_and_cxx(cc, small):
    directory = small[0]
    assert build(cc, [*STRICT, "-fsyntax-only", "-x", "c", "small.h"], directory) == ""    # not even a note
    cxx = shutil.which("c++")
    if cxx:
        assert build([cxx], ["-std=c++11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only", "-x", "c++",
                             "small.h"], directory) == ""


def test_c_program_calls_kernels_of_every_element_type(cc, small):
    directory = small[0]
    (directory / "main.c").write_text(PROGRAM)
    build(cc, [*STRICT, "-I", str(ROOT / "runtime"), "main.c", "small.so", "-Wl,-rpath,$ORIGIN", "-o", "main"],
          directory)
    lines = subprocess.run([str(directory / "main")], check=True, capture_output=True, text=True).stdout.split("\n")
    x = np.array([0.5, -1.0, 2.25, 0.0, 3.0])
    assert float(lines[0]) == 1.5 * -4.25
    np.testing.assert_array_equal(np.array(lines[1:5], float), np.diff(x))
    assert [int(v) for v in lines[5:10]] == (x > 0).astype(int).tolist()
    m = np.array([[1.0, 2.0, 4.5], [-3.0, 0.25, -1.0]], np.float32)
    got = np.array([line.split() for line in lines[10:12]], float)
    np.testing.assert_allclose(got[:, 0], m.astype(float).mean(axis=1), rtol=1e-7)
    np.testing.assert_array_equal(got[:, 1], m.max(axis=1))
    assert [int(v) for v in lines[12:15]] == [-2, 5, 2147483647 + 5]
