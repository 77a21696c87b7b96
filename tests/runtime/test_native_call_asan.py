"""adc's C extension (adc/runtime/native_call.c) under AddressSanitizer: built with
`gcc -fsanitize=address` into a temporary folder, imported in a child Python in place of the
installed build, and driven through every route of a kernel call — every argument kind, more
arguments than its stack slots hold, empty and pooled results, calls on caller-owned memory
(run_at), argument errors, a failing status, a bounds error, an interrupt, threads, gradients
through a tape. An overflow or a use after free
in the extension is a report on the child's standard error and a non-zero exit.

The harness is tests/support/asan.py. A self-check shows it reports: a tiny extension built and
loaded the same way overflows a PyMem block by one byte.
"""
import pytest

from tests.support.asan import LIBASAN, build, run_with_asan
from tests.support.interrupts import INTERRUPTED
from tests.support.repository import ROOT

pytestmark = pytest.mark.skipif(LIBASAN is None, reason="gcc or its AddressSanitizer runtime is not installed")

KERNELS = """
def kinds(a: f64[N], i: i32[N], j: i64[N], t: bool[N], s: f64, k: i64, flag: bool) -> (f64[N], i32[N], i64[N], bool[N], f64):
    return where(t, a * s, a), i + i, j * k, ~t, s if flag else 0.0

def shapes(x: f32[N, M]) -> (f32[M, N], f32[N], f32):
    return transpose(x), sum(x, axis=1), sum(x)

def scaled(x: f32[N]) -> f32[N]:
    return x * 2.0

def fourth(x: f64[M]) -> f64:
    return x[3]

def walk(x: f64[T], k: f64) -> f64:
    s = 0.0
    for i in range(T):
        s = sin(s * k + x[i])
    return s

def forever(x: f64) -> f64:
    while x > 0.0:
        x = x + 1.0
    return x
"""
MANY = 70       # parameters: more argument slots than the extension keeps on its stack

DRIVE = f"""
import os, signal, threading
import numpy as np, adc
from adc.runtime import buffers, kernel
assert kernel.native_call is extension and kernel.Kernel.run_bound is kernel.Kernel._run_native

def raises(error, call, *args):
    try:
        call(*args)
    except error:
        return
    raise AssertionError(f"{{call}} did not raise {{error.__name__}}")

m = adc.compile({KERNELS!r}, "asan.adc")
n = 7
a, i, j, t = np.linspace(-1, 1, n), np.arange(n, dtype=np.int32), np.arange(n), np.arange(n) % 2 == 0
got = m.kinds(a, i, j, t, 2.0, 3, True)
np.testing.assert_array_equal(np.asarray(got[0]), np.where(t, a * 2.0, a))
assert np.asarray(got[1]).dtype == np.int32 and list(np.asarray(got[2])) == list(j * 3) and float(got[4]) == 2.0
x = np.arange(12, dtype=np.float32).reshape(3, 4)
transposed, rows, total = m.shapes(x)
np.testing.assert_array_equal(np.asarray(transposed), x.T)
assert float(total) == 66.0 and m.shapes(np.zeros((0, 5), np.float32))[0].shape == (5, 0)
assert m.scaled(np.zeros(0, np.float32)).shape == (0,)
large = m.scaled(np.ones(buffers.MIN_BYTES // 4 + 1, np.float32))        # a pooled block
assert float(np.asarray(large)[-1]) == 2.0
wide = adc.compile("def wide({', '.join(f'a{k}: f64' for k in range(MANY))}) -> f64:\\n"
                   "    return {' + '.join(f'a{k}' for k in range(MANY))}\\n", "wide.adc")
assert float(wide.wide(*map(float, range({MANY})))) == {MANY * (MANY - 1) // 2}

outs = [np.empty(shape, dtype) for dtype, shape in m.shapes.result_shapes(m.shapes.dims_of([x.shape]))]
m.shapes.run_at(m.shapes.dims_of([x.shape]), [x.ctypes.data] + [o.ctypes.data for o in outs])   # run_at
np.testing.assert_array_equal(outs[0], x.T)
slots = [np.array(float(k)) for k in range({MANY})] + [np.zeros(())]
wide.wide.run_at([], [s.ctypes.data for s in slots])
assert float(slots[-1]) == {MANY * (MANY - 1) // 2}
raises(ValueError, m.fourth.run_at, [2], [np.zeros(2).ctypes.data, slots[-1].ctypes.data])   # a failing status
wide.wide.run_into([], slots)                                            # run_into
assert float(slots[-1]) == {MANY * (MANY - 1) // 2}
raises(ValueError, m.scaled.run_into, [4], [np.ones(4, np.float32), np.zeros(8, np.float32)[::2]])
raises(ValueError, m.fourth.run_into, [2], [np.zeros(2), slots[-1]])      # a failing status

for _ in range(2):                                                       # the whole call in C
    got = wide.wide(*slots[:-1])
    assert float(got) == {MANY * (MANY - 1) // 2}
    assert float(np.asarray(m.shapes(adc.Tensor(x))[2])) == 66.0
    v = adc.Variable(x)
    assert float(np.asarray(m.shapes(v)[2])) == 66.0                     # a Variable's value, read in place
    v.assign(x + 1.0)
    assert float(np.asarray(m.shapes(v)[2])) == 78.0
    raises(ValueError, m.fourth, np.zeros(2))                            # a failing status
    raises(ValueError, m.scaled, np.ones((2, 2), np.float32))                # a rank: declined
    raises(ValueError, m.kinds, a, i[:3], j, t, np.array(2.0), np.array(3), np.array(True))  # N disagrees
    assert m.shapes(np.asfortranarray(x))[0].shape == (4, 3)             # declined: converted
raises(TypeError, m.kinds, a, j, j, t, 2.0, 3, True)                     # a dtype
raises(ValueError, m.kinds, a, i[:3], j, t, 2.0, 3, True)                # a shape
raises(ValueError, m.fourth, np.zeros(2))                                # a failing status
assert float(m.fourth(np.arange(5.0))) == 3.0

os.environ["ADC_BOUNDS_MISINDEX"] = "result"
checked = adc.compile({KERNELS!r}, "asan_checked.adc", check_bounds=True)
raises(adc.BoundsError, checked.scaled, np.ones(5, np.float32))
del os.environ["ADC_BOUNDS_MISINDEX"]

signal.signal(signal.SIGINT, lambda *args: None)
m.forever(-1.0)
{INTERRUPTED}
assert interrupted(m.forever, 1.0)

def calls():
    for _ in range(200):
        assert float(np.asarray(m.scaled(np.ones(64, np.float32)))[-1]) == 2.0
workers = [threading.Thread(target=calls) for _ in range(2)]
for w in workers:
    w.start()
for w in workers:
    w.join()

x = adc.Variable(np.linspace(-1, 1, 20))
with adc.GradientTape() as tape:
    y = m.walk(x, 0.7)
    z = m.scaled(np.ones(3, np.float32))
grad = np.asarray(tape.gradient(y, x))
assert grad.shape == (20,) and np.isfinite(grad).all()
print("asan child ran")
"""

OVERFLOW = """\
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *overflow(PyObject *module, PyObject *unused)
{
    volatile Py_ssize_t past = 8;
    char *block = PyMem_Malloc(8);
    block[past] = 1;
    PyMem_Free(block);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {{"overflow", overflow, METH_NOARGS, "write one byte past a PyMem block"},
                                {NULL, NULL, 0, NULL}};
static struct PyModuleDef definition = {PyModuleDef_HEAD_INIT, "overflow", NULL, -1, methods};

PyMODINIT_FUNC PyInit_overflow(void)
{
    return PyModule_Create(&definition);
}
"""


def test_the_c_call_path_is_clean_under_asan(tmp_path):
    path = build(ROOT / "adc" / "runtime" / "native_call.c", "native_call", tmp_path)
    done = run_with_asan(DRIVE, "adc.runtime.native_call", path)
    assert "AddressSanitizer" not in done.stderr, done.stderr[-6000:]
    assert done.returncode == 0 and "asan child ran" in done.stdout, done.stderr[-6000:]


def test_the_harness_reports_a_heap_overflow_in_an_extension(tmp_path):
    source = tmp_path / "overflow.c"
    source.write_text(OVERFLOW)
    done = run_with_asan("extension.overflow()\nprint('not caught')\n", "overflow", build(source, "overflow", tmp_path))
    assert done.returncode != 0 and "not caught" not in done.stdout
    assert "AddressSanitizer: heap-buffer-overflow" in done.stderr and "overflow.c" in done.stderr, done.stderr[-3000:]
