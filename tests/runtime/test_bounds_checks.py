"""Bounds-checked builds (adc/codegen/lowering/bounds.py): `adc.compile(..., check_bounds=True)`,
ADC_CHECK_BOUNDS=1 and `adc compile --check-bounds`. The stores one element past a temporary, a
result and a scan's stack come from the checked builds' test hook ADC_BOUNDS_MISINDEX
(Target.misindex); the expected messages name the op's source location by hand. Oracles: NumPy,
adc's index rule written in NumPy (tests/support/twin.py), central finite differences."""
import json
import subprocess
import sys

import numpy as np
import pytest

import adc
from adc import compiler
from adc.abi import GRADIENTS_EMBEDDED
from adc.codegen.lowering import lower, temporaries
from adc.codegen.lowering.loops import i64
from adc.codegen.toolchain.target import Target
from adc.runtime.kernel import Kernel
from tests.support import references
from tests.support.repository import ROOT, SAMPLES
from tests.support.twin import clamped

RESULT = """\
def scaled(x: f64[N]) -> f64[N]:
    return exp(x) * 2.0
"""
TEMPORARY = """\
def product(a: f64[N, K], b: f64[K, M]) -> f64[N, M]:
    return exp(a) @ b
"""
STACK = """\
def walk(x: f64[T], k: f64) -> f64:
    s = 0.0
    for i in range(T):
        s = sin(s * k + x[i])
    return s
"""


def walk(x, k):
    s = 0.0
    for v in x:
        s = np.sin(s * k + v)
    return s


def call_scaled(m):
    return m.scaled(np.ones(13))


def call_product(m):
    return m.product(np.ones((8, 8)), np.ones((8, 3)))


def walk_gradient(m, x=np.linspace(-1, 1, 20)):
    x = adc.Variable(x)
    with adc.GradientTape() as tape:
        y = m.walk(x, 0.7)
    return np.asarray(tape.gradient(y, x))


# kind of buffer -> (source, call, the error expected, with {file} for the source's name)
CASES = {
    "result": (RESULT, call_scaled, r"scaled: mul at {file}:2:12: store at index 13 is out of bounds of result 0 "
                                    r"\(extent 13\)"),
    "temporary": (TEMPORARY, call_product, r"product: exp at {file}:2:12: store at index 64 is out of bounds of the "
                                           r"temporary of exp at {file}:2:12 \(extent 64\)"),
    "stack": (STACK, walk_gradient, r"walk\w*( \(in @walk\w+\))?: \w+ at {file}:4:13: store at index \d+ is out of "
                                    r"bounds of stack \d+ of the scan at {file}:3:5 \(extent \d+\)"),
}


@pytest.fixture(params=["call", "c", "python"])
def route(request, monkeypatch):
    """Every route of a native call (native_call.c's whole call or its run_bound, and
    Kernel._run_in_python) maps its status."""
    if request.param != "call":
        monkeypatch.setattr(Kernel, "call_in_c", False)
    if request.param == "python":
        monkeypatch.setattr(Kernel, "run_bound", Kernel._run_in_python)
    return request.param


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_store_past_a_buffer_raises_bounds_error_naming_the_op_in_the_jit(kind, route, monkeypatch):
    monkeypatch.setenv("ADC_BOUNDS_MISINDEX", kind)
    source, call, expected = CASES[kind]
    m = adc.compile(source, f"jit_{kind}.adc", check_bounds=True)
    for _ in range(2):          # the record, read once, takes the next failure
        with pytest.raises(adc.BoundsError, match=expected.format(file=f"jit_{kind}.adc")):
            call(m)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_store_past_a_buffer_raises_bounds_error_from_a_checked_shared_object(kind, tmp_path, monkeypatch):
    source, call, expected = CASES[kind]
    path = tmp_path / f"so_{kind}.adc"
    path.write_text(source)
    monkeypatch.setenv("ADC_BOUNDS_MISINDEX", kind)
    subprocess.run([sys.executable, "-m", "adc", "compile", str(path), "--check-bounds", "-o",
                    str(tmp_path / "checked.so")], cwd=ROOT, check=True, capture_output=True, text=True)
    m = adc.load(tmp_path / "checked.so")
    assert m.info.check_bounds
    with pytest.raises(adc.BoundsError, match=expected.format(file=path)):
        call(m)


def test_adc_info_reports_a_checked_shared_object(tmp_path):
    path = tmp_path / "info.adc"
    path.write_text(RESULT)
    outputs = {}
    for flags in ([], ["--check-bounds"]):
        out = tmp_path / f"info{len(flags)}.so"
        subprocess.run([sys.executable, "-m", "adc", "compile", str(path), *flags, "-o", str(out)], cwd=ROOT,
                       check=True, capture_output=True, text=True)
        outputs[bool(flags)] = subprocess.run([sys.executable, "-m", "adc", "info", str(out)], cwd=ROOT, check=True,
                                              capture_output=True, text=True).stdout
    assert "bounds checks: on" in outputs[True]
    assert "bounds checks: off" in outputs[False]


def test_a_damaged_redzone_is_found_when_the_block_is_given_back(monkeypatch):
    """The hook's `redzone` writes one element past the only temporary, unchecked: 8 x 8 f64 fill the
    block to its end, so the write lands in the redzone after it."""
    monkeypatch.setenv("ADC_BOUNDS_MISINDEX", "redzone")
    m = adc.compile(TEMPORARY, "redzone.adc", check_bounds=True)
    with pytest.raises(adc.BoundsError, match=r"product: the redzone after the block of temporaries of @product "
                                              r"was damaged when it was given back \(byte 512 of its 512\)"):
        call_product(m)


def test_a_region_overrunning_its_part_of_the_parents_block_is_caught(monkeypatch):
    """The class of a region's block sized by its parent apart from the region's own layout: a
    parent giving each region 24 bytes less than it lays out (the body's two temporaries of 3 x 2
    f64, 48 bytes each at offsets 0 and 64: the second then has 40). The region checks its
    temporaries against the part it was given, so the overrun is an error where it happens."""
    block_sizes = temporaries._block_sizes

    def short(em, func, fusion):
        sizes = block_sizes(em, func, fusion)
        regions = len(func.regions())
        return sizes[:len(sizes) - regions] + [em.b.sub(s, i64(24)) for s in sizes[len(sizes) - regions:]]
    monkeypatch.setattr(temporaries, "_block_sizes", short)
    monkeypatch.setenv("ADC_IN_PROCESS_COMPILES", str(1 << 30))     # compiled here, where lowering is patched
    m = adc.compile("""\
def spin(x: f64[N, N], v: f64[N, K]) -> f64[N, K]:
    for i in range(3):
        v = tanh(x @ exp(v))
    return v
""", "short_region.adc", check_bounds=True)
    with pytest.raises(adc.BoundsError, match=r"spin \(in @spin_for0\): matmul at short_region.adc:3:18: gemm writes "
                                              r"C at index 5 is out of bounds of the temporary of matmul at "
                                              r"short_region.adc:3:18 \(extent 5\)"):
        m.spin(np.eye(3), np.ones((3, 2)))


def test_computed_indices_out_of_range_follow_the_index_rule_without_error():
    """take and scatter_add clamp what they are given (docs/language.md): a checked build raises
    nothing for them, and gives NumPy's values under that rule."""
    m = adc.compile("""\
def pick(x: f64[N], i: i64[M]) -> f64[M]:
    return x[i * 3 - 7]

def spread(x: f64[N], i: i64[M], u: f64[M]) -> f64[N]:
    return scatter_add(x, i * 3 - 7, u)
""", "indices.adc", check_bounds=True)
    x, i, u = np.arange(5.0), np.arange(8), np.linspace(1, 2, 8)
    np.testing.assert_array_equal(np.asarray(m.pick(x, i)), x[clamped(i * 3 - 7, 5)])
    expected = x.copy()
    np.add.at(expected, clamped(i * 3 - 7, 5), u)
    np.testing.assert_array_equal(np.asarray(m.spread(x, i, u)), expected)


def test_the_checked_build_gives_the_default_builds_values(monkeypatch):
    rng = np.random.default_rng(5)
    inputs = references.sample_inputs(rng, b=11, n=33)
    text = (SAMPLES / "kernels.adc").read_text()
    default, checked = adc.compile(text, "samples.adc"), adc.compile(text, "samples.adc", check_bounds=True)
    assert checked.info.check_bounds and not default.info.check_bounds
    for name, args in inputs.items():
        np.testing.assert_array_equal(np.asarray(getattr(checked, name)(*args)), np.asarray(getattr(default, name)(*args)))


def test_a_gradient_through_a_loop_in_a_checked_build_matches_finite_differences():
    x = np.random.default_rng(2).standard_normal(20)
    default, checked = adc.compile(STACK, "grad.adc"), adc.compile(STACK, "grad.adc", check_bounds=True)
    h = 1e-6
    differences = [(walk(x + h * e, 0.7) - walk(x - h * e, 0.7)) / (2 * h) for e in np.eye(len(x))]
    np.testing.assert_allclose(walk_gradient(checked, x), differences, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(walk_gradient(checked, x), walk_gradient(default, x))


def test_adc_check_bounds_checks_every_jit_compile_of_the_process(monkeypatch):
    monkeypatch.setenv("ADC_CHECK_BOUNDS", "1")
    assert adc.compile(RESULT, "env.adc").info.check_bounds
    monkeypatch.setenv("ADC_CHECK_BOUNDS", "0")
    assert not adc.compile(RESULT, "env.adc").info.check_bounds


def test_a_checked_build_is_a_target_of_its_own_and_the_default_is_unchanged():
    """The target is the compile cache's key; the default build's LLVM IR carries nothing of the checks."""
    host = Target.host(pic=True)
    checked = Target(host.triple, host.cpu, host.features, pic=True, check_bounds=True)
    assert checked.key() != host.key() and checked.key().startswith(host.key())
    assert "bounds" not in host.key()
    sources = compiler.kernel_sources(compiler.elaborate(STACK, "ir.adc"), GRADIENTS_EMBEDDED)
    default = str(compiler.lower_kernel(sources.ir, "ir.adc", "walk_vjp", host))
    assert "adc_bounds" not in default and "adc.bounds" not in default
    assert '@"adc_bounds_walk_vjp"()' in str(compiler.lower_kernel(sources.ir, "ir.adc", "walk_vjp", checked))


def test_the_test_hook_names_a_kind_of_buffer():
    with pytest.raises(ValueError, match="misindex: 'params' is none of"):
        lower.lower_kernel(compiler.elaborate(RESULT, "hook.adc"), "scaled", 256, check_bounds=True, misindex="params")


def test_the_table_of_a_checked_kernel_names_its_sites():
    sources = compiler.kernel_sources(compiler.elaborate(RESULT, "table.adc"))
    host = Target.host(pic=True)
    llvm = str(compiler.lower_kernel(sources.ir, "table.adc", "scaled",
                                     Target(host.triple, host.cpu, host.features, pic=True, check_bounds=True)))
    table = llvm.split('@"adc.bounds.table" = private constant [')[1].split('c"', 1)[1].split('\\00"')[0]
    found = json.loads(table.replace('\\22', '"'))
    assert ["scaled", "mul", "table.adc:2:12", "store"] in found["sites"]
    assert ["result 0", "result"] in found["buffers"] and ["parameter 'x'", "parameter"] in found["buffers"]
