"""Control flow (for, while, if) compiled to native code, against the reference interpreter.

Each case is an IR module written by hand; it runs lowered whole (`lower_module`), through
the driver's per-kernel JIT (inlining, cleanup, digests), and once as a shared object.
"""
from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

from adc import driver
from adc.codegen import emit
from adc.codegen.toolchain import aot
from adc.codegen.lowering.lower import lower_module
from adc.codegen.toolchain.target import Target
from adc.compiler import kernel_sources
from adc.driver.runtime_library import runtime_object
from adc.ir import interp
from adc.ir.parser import parse_module
from adc.ir.verify import verify
from tests.support.native import KERNEL, call, compile_module, jit_module

RNG = np.random.default_rng(1)

# several carried values of different dtypes and shapes (f32[N], a f64 scalar, i32[2,N]), a capture
FOR = """
func @step(%i: i64, %acc: f32[N], %s: f64, %m: i32[2,N], %x: f32[N]) -> (f32[N], f64, i32[2,N]) {
  %0 = add %acc, %x : f32[N]
  %1 = convert %i {dtype = f64} : f64
  %2 = mul %s, %1 : f64
  %3 = add %2, %1 : f64
  %4 = convert %i {dtype = i32} : i32
  %5 = broadcast %4 {dims = [], shape = [2,N]} : i32[2,N]
  %6 = add %m, %5 : i32[2,N]
  return %0, %3, %6
}

func @k(%n: i64, %acc: f32[N], %s: f64, %m: i32[2,N], %x: f32[N]) -> (f32[N], f64, i32[2,N]) {
  %0, %1, %2 = for %n, %acc, %s, %m, %x {body = @step, carried = 3, checkpoint = 0} : f32[N], f64, i32[2,N]
  return %0, %1, %2
}
"""

# a body whose params do not bind N (a free symbol): iota and broadcast of shape [N], reduced
FREE_SYMBOL = """
func @grow(%i: i64, %t: f32) -> f32 {
  %0 = iota {axis = 0, dtype = f32, shape = [N]} : f32[N]
  %1 = broadcast %t {dims = [], shape = [N]} : f32[N]
  %2 = mul %0, %1 : f32[N]
  %3 = reduce_sum %2 {axes = [0]} : f32
  %4 = dim {dtype = f32, value = N} : f32
  %5 = div %3, %4 : f32
  return %5
}

func @k(%n: i64, %t: f32, %x: f32[N]) -> f32 {
  %0 = for %n, %t {body = @grow, carried = 1, checkpoint = 0} : f32
  return %0
}
"""

# nested loops: the inner body reads N, which neither body's params bind
NESTED = """
func @inner(%j: i64, %t: f32, %w: f32) -> f32 {
  %0 = iota {axis = 0, dtype = f32, shape = [N]} : f32[N]
  %1 = reduce_max %0 {axes = [0]} : f32
  %2 = mul %t, %w : f32
  %3 = add %2, %1 : f32
  return %3
}

func @outer(%i: i64, %t: f32, %w: f32) -> f32 {
  %0 = constant {dtype = i64, value = 3} : i64
  %1 = add %i, %0 : i64
  %2 = for %1, %t, %w {body = @inner, carried = 1, checkpoint = 0} : f32
  return %2
}

func @k(%n: i64, %t: f32, %w: f32, %x: f32[N]) -> f32 {
  %0 = for %n, %t, %w {body = @outer, carried = 1, checkpoint = 0} : f32
  return %0
}
"""

# a data-dependent trip count: halve until below the limit
WHILE = """
func @above(%x: f64[N], %steps: i64, %limit: f64) -> bool {
  %0 = mul %x, %x : f64[N]
  %1 = reduce_sum %0 {axes = [0]} : f64
  %2 = gt %1, %limit : bool
  return %2
}

func @halve(%x: f64[N], %steps: i64, %limit: f64) -> (f64[N], i64) {
  %0 = constant {dtype = f64, value = 0.5} : f64
  %1 = broadcast %0 {dims = [], shape = [N]} : f64[N]
  %2 = mul %x, %1 : f64[N]
  %3 = constant {dtype = i64, value = 1} : i64
  %4 = add %steps, %3 : i64
  return %2, %4
}

func @k(%x: f64[N], %limit: f64) -> (f64[N], i64) {
  %0 = constant {dtype = i64, value = 0} : i64
  %1, %2 = while %x, %0, %limit {body = @halve, carried = 2, cond = @above} : f64[N], i64
  return %1, %2
}
"""

IF = """
func @twice(%x: f32[N], %y: f32[N]) -> (f32[N], f32) {
  %0 = add %x, %y : f32[N]
  %1 = reduce_sum %0 {axes = [0]} : f32
  return %0, %1
}

func @same(%x: f32[N], %y: f32[N]) -> (f32[N], f32) {
  %0 = reduce_max %y {axes = [0]} : f32
  return %x, %0
}

func @k(%c: bool, %x: f32[N], %y: f32[N]) -> (f32[N], f32) {
  %0 = exp %x : f32[N]
  %1, %2 = if %c, %0, %y {else_branch = @same, then_branch = @twice} : f32[N], f32
  %3 = mul %1, %0 : f32[N]
  return %3, %2
}
"""

# a body with a matmul, a gather and a scatter into a carried array: y[i] = h[i] . (w @ x)
LINEAR = """
func @row(%i: i64, %y: f32[N], %w: f32[N,N], %x: f32[N,1], %h: f32[N]) -> f32[N] {
  %0 = matmul %w, %x : f32[N,1]
  %1 = reshape %0 {shape = [N]} : f32[N]
  %2 = reshape %i {shape = [1]} : i64[1]
  %3 = gather %h, %2 {axis = 0} : f32[1]
  %4 = broadcast %3 {dims = [0], shape = [N]} : f32[N]
  %5 = mul %1, %4 : f32[N]
  %6 = reduce_sum %5 {axes = [0]} : f32
  %7 = reshape %6 {shape = [1]} : f32[1]
  %8 = scatter %y, %2, %7 {axis = 0} : f32[N]
  return %8
}

func @k(%n: i64, %y: f32[N], %w: f32[N,N], %x: f32[N,1], %h: f32[N]) -> f32[N] {
  %0 = for %n, %y, %w, %x, %h {body = @row, carried = 1, checkpoint = 0} : f32[N]
  return %0
}
"""

# a body calling a function, inlined into the body when the kernel is compiled
CALL_IN_BODY = """
func @scaled(%v: f32[N], %c: f32) -> f32[N] {
  %0 = broadcast %c {dims = [], shape = [N]} : f32[N]
  %1 = mul %v, %0 : f32[N]
  return %1
}

func @decay(%i: i64, %v: f32[N], %c: f32) -> f32[N] {
  %0 = call %v, %c {callee = @scaled} : f32[N]
  %1 = tanh %0 : f32[N]
  return %1
}

func @k(%n: i64, %v: f32[N], %c: f32) -> f32[N] {
  %0 = for %n, %v, %c {body = @decay, carried = 1, checkpoint = 0} : f32[N]
  return %0
}
"""

# a body with a temporary of N^3 elements, which cannot be allocated for a large N
HUGE_TEMPORARY = """
func @big(%i: i64, %t: f32) -> f32 {
  %0 = iota {axis = 0, dtype = f32, shape = [N,N,N]} : f32[N,N,N]
  %1 = cumsum %0 {axis = 0, exclusive = false, reverse = false} : f32[N,N,N]
  %2 = reduce_max %1 {axes = [0, 1, 2]} : f32
  return %2
}

func @k(%n: i64, %t: f32, %x: f32[N]) -> f32 {
  %0 = for %n, %t {body = @big, carried = 1, checkpoint = 0} : f32
  %1 = exp %0 : f32
  return %1
}
"""

# a scan stacking the state before each step, and a 2-row copy of it; a second loop reads the
# stacks back (the pattern of a loop's adjoint), so they come out through a sum
SCAN = """
func @record(%i: i64, %x: f32[N], %w: f32[N]) -> (f32[N], f32[N], f32[2,N]) {
  %0 = mul %x, %w : f32[N]
  %1 = convert %i {dtype = f32} : f32
  %2 = broadcast %1 {dims = [], shape = [N]} : f32[N]
  %3 = add %0, %2 : f32[N]
  %4 = reshape %x {shape = [1,N]} : f32[1,N]
  %5 = broadcast %4 {dims = [0,1], shape = [2,N]} : f32[2,N]
  return %3, %x, %5
}

func @replay(%j: i64, %acc: f32[N], %rows: f32[L,N], %cols: f32[L,2,N]) -> f32[N] {
  %0 = gather %rows, %j {axis = 0} : f32[N]
  %1 = gather %cols, %j {axis = 0} : f32[2,N]
  %2 = reduce_sum %1 {axes = [0]} : f32[N]
  %3 = add %acc, %0 : f32[N]
  %4 = add %3, %2 : f32[N]
  return %4
}

func @k(%n: i64, %x: f32[N], %w: f32[N]) -> (f32[N], f32[N]) {
  %0, %1, %2 = scan %n, %x, %w {axis = 0, body = @record, carried = 1, length = "L"} : f32[N], f32[L,N], f32[L,2,N]
  %3 = constant {dtype = f32, value = 0.0} : f32
  %4 = broadcast %3 {dims = [], shape = [N]} : f32[N]
  %5 = constant {dtype = i64, value = 0} : i64
  %6 = maximum %n, %5 : i64
  %7 = for %6, %4, %1, %2 {body = @replay, carried = 1, checkpoint = 0} : f32[N]
  return %0, %7
}
"""

# the stacked rows of a scan read by nests over its length L (elementwise work of L×N, stored for
# two reductions over L): what a reverse pass over a loop's recorded states computes; the same
# again in a loop's body, which binds L every iteration
SUMS_OVER_SCAN_LENGTH = """  %0, %1 = scan %n, {h}, %x {{axis = 0, body = @record, carried = 1, length = "L"}} : f32[N], f32[L,N]
  %20 = tanh %1 : f32[L,N]
  %21 = cos %20 : f32[L,N]
  %22 = sin %21 : f32[L,N]
  %2 = exp %22 : f32[L,N]
  %3 = reduce_sum %2 {{axes = [0]}} : f32[N]
  %4 = reduce_sum %2 {{axes = [0, 1]}} : f32
"""
OVER_SCAN_LENGTH = f"""
func @record(%i: i64, %h: f32[N], %x: f32[N]) -> (f32[N], f32[N]) {{
  %0 = sin %h : f32[N]
  %1 = add %0, %x : f32[N]
  return %1, %0
}}

func @outer(%j: i64, %h: f32[N], %t: f32, %x: f32[N], %n: i64) -> (f32[N], f32) {{
{SUMS_OVER_SCAN_LENGTH.format(h="%h")}  %5 = constant {{dtype = f32, value = 0.01}} : f32
  %6 = broadcast %5 {{dims = [], shape = [N]}} : f32[N]
  %7 = mul %3, %6 : f32[N]
  %8 = add %t, %4 : f32
  return %7, %8
}}

func @k(%x: f32[N], %n: i64, %m: i64) -> (f32[N], f32, f32[N], f32) {{
{SUMS_OVER_SCAN_LENGTH.format(h="%x")}  %5 = add %3, %0 : f32[N]
  %6 = constant {{dtype = f32, value = 0.0}} : f32
  %7, %8 = for %m, %x, %6, %x, %n {{body = @outer, carried = 2, checkpoint = 0}} : f32[N], f32
  return %5, %4, %7, %8
}}
"""

def module_of(text: str):
    module = parse_module(text, "control_flow")
    verify(module)
    return module


def assert_routes_agree(text: str, *args) -> None:
    """lower_module and the driver's per-kernel JIT agree with the interpreter on kernel @k."""
    module = module_of(text)
    want = interp.run(module, "k", *args)
    whole = compile_module(module)
    got_whole = call(whole.address("adc_kernel_k"), module["k"], *args)
    got_jit = jit_module(module).k(*args)
    got_jit = got_jit if isinstance(got_jit, tuple) else (got_jit,)
    for w, a, b in zip(want, got_whole, got_jit, strict=True):
        np.testing.assert_allclose(a, w, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(b), w, rtol=1e-6)


def for_args(n: int, size: int = 5):
    return (np.int64(n), RNG.standard_normal(size).astype(np.float32), np.float64(0.5),
            RNG.integers(-5, 5, (2, size)).astype(np.int32), RNG.standard_normal(size).astype(np.float32))


@pytest.mark.parametrize("n, m", [(0, 2), (1, 0), (4, 3)])
def test_nests_over_a_scans_length_in_a_kernel_and_in_a_loop_body(n, m):
    assert_routes_agree(OVER_SCAN_LENGTH, RNG.standard_normal(5).astype(np.float32), np.int64(n), np.int64(m))


@pytest.mark.parametrize("n", [0, 1, 2, 7, -3])
def test_for_threads_carried_values_of_several_types(n):
    assert_routes_agree(FOR, *for_args(n))


def test_for_over_an_empty_axis():
    assert_routes_agree(FOR, *for_args(4, size=0))


@pytest.mark.parametrize("n", [0, 3])
def test_a_body_reads_a_symbol_its_params_do_not_bind(n):
    assert_routes_agree(FREE_SYMBOL, np.int64(n), np.float32(1.5), np.zeros(6, np.float32))


@pytest.mark.parametrize("n", [0, 1, 4])
def test_nested_loops(n):
    assert_routes_agree(NESTED, np.int64(n), np.float32(0.5), np.float32(1.25), np.zeros(4, np.float32))


@pytest.mark.parametrize("scale,limit", [(1.0, 1e9), (1.0, 0.5), (100.0, 0.01), (3.0, 1.0)])
def test_while_runs_a_data_dependent_number_of_times(scale, limit):
    assert_routes_agree(WHILE, scale * RNG.standard_normal(6), np.float64(limit))


@pytest.mark.parametrize("c", [True, False])
def test_if_runs_the_branch_taken(c):
    assert_routes_agree(IF, np.bool_(c), RNG.standard_normal(5).astype(np.float32),
                RNG.standard_normal(5).astype(np.float32))


@pytest.mark.parametrize("n", [0, 3, 6, 9])
def test_a_body_with_matmul_gather_and_scatter(n):
    size = 6
    assert_routes_agree(LINEAR, np.int64(n), np.zeros(size, np.float32),
                RNG.standard_normal((size, size)).astype(np.float32),
                RNG.standard_normal((size, 1)).astype(np.float32), RNG.standard_normal(size).astype(np.float32))


def test_calls_inside_a_body_are_inlined():
    module = module_of(CALL_IN_BODY)
    args = np.int64(3), RNG.standard_normal(7).astype(np.float32), np.float32(1.5)
    np.testing.assert_allclose(jit_module(module).k(*args), interp.run(module, "k", *args)[0], rtol=1e-6)


def test_a_body_that_cannot_allocate_fails_its_kernel():
    # the body's temporaries are part of the kernel's block, allocated once
    module = module_of(HUGE_TEMPORARY)
    lib = compile_module(module)
    dims, x = np.array([1 << 17], np.int64), np.zeros(1 << 17, np.float32)
    inputs = (ctypes.c_void_p * 3)(np.array(2, np.int64).ctypes.data, np.array(0, np.float32).ctypes.data,
                                   x.ctypes.data)
    out = np.zeros((), np.float32)
    outputs = (ctypes.c_void_p * 1)(out.ctypes.data)
    assert KERNEL(lib.address("adc_kernel_k"))(dims.ctypes.data, inputs, outputs) == 1


def test_regions_are_internal_functions_lowered_once():
    # @inner is run by @outer only, but @outer by two loops of @k: still one function each
    text = NESTED.replace("  return %0\n}\n", "  %1 = for %n, %0, %w {body = @outer, carried = 1, checkpoint = 0} : f32\n"
                          "  return %1\n}\n")
    llvm = str(lower_module(module_of(text), "{}", Target.host().vector_bits))
    defined = re.findall(r'^define .*@"?([\w.]+)"?\(', llvm, re.MULTILINE)
    assert [d for d in defined if d.startswith("adc.region.")] == ["adc.region.outer", "adc.region.inner"]
    assert [d for d in defined if d.startswith("adc_kernel_")] == ["adc_kernel_k"]
    assert re.search(r'define internal i32 @"adc.region.inner"', llvm)


def test_a_loop_iteration_stores_its_index_and_calls_the_body():
    # all else (the dims array, the pointer arrays, the initial copies, the body's temporaries) is
    # done before the loop
    llvm = str(lower_module(module_of(FOR), "{}", Target.host().vector_bits))
    assert llvm.count("call ptr @\"aligned_alloc\"") == 1
    kernel = llvm[llvm.index('define i32 @"adc_kernel_k"'):]
    (body,) = re.findall(r"^loop\.body:\n((?:  .*\n)*)", kernel[:kernel.index("\n}\n") + 1], re.MULTILINE)
    assert body.count("call ") == 1 and body.count("store ") == 1
    assert "alloca" not in body and "memcpy" not in body


def test_regions_are_not_kernels_and_their_code_is_in_the_digest():
    sources = kernel_sources(module_of(FOR))
    assert set(sources.kernels) == {"adc_kernel_k"}
    changed = kernel_sources(module_of(FOR.replace("%0 = add %acc, %x", "%0 = sub %acc, %x")))
    assert changed.kernels["adc_kernel_k"] != sources.kernels["adc_kernel_k"]


def test_shared_object_round_trip(tmp_path):
    module = module_of(LINEAR)
    path = tmp_path / "loops.so"
    info = driver.write_shared_object(module, path, gradients=False)
    assert [k.name for k in info.kernels] == ["k"]
    so = ctypes.CDLL(str(path))
    args = (np.int64(4), np.zeros(5, np.float32), RNG.standard_normal((5, 5)).astype(np.float32),
            RNG.standard_normal((5, 1)).astype(np.float32), RNG.standard_normal(5).astype(np.float32))
    (got,) = call(ctypes.cast(so.adc_kernel_k, ctypes.c_void_p).value, module["k"], *args)
    (want,) = interp.run(module, "k", *args)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_whole_module_object_links(tmp_path):
    target = Target.host(pic=True)
    objects = [emit.emit_object(lower_module(module_of(WHILE), '{"abi": 1}', target.vector_bits), target),
               runtime_object(target)]
    aot.link_shared_object(objects, tmp_path / "while.so")
    assert ctypes.CDLL(str(tmp_path / "while.so")).adc_kernel_k


@pytest.mark.parametrize("n", [0, 1, 2, 5, -1])
def test_scan_stacks_rows_a_later_loop_reads(n):
    assert_routes_agree(SCAN, np.int64(n), RNG.standard_normal(4).astype(np.float32),
                RNG.standard_normal(4).astype(np.float32))


def test_a_scans_stacks_are_kept_for_the_next_call():
    """Allocated once its trip count is known, a scan's stacks are taken from and given back to a
    slot of the kernel's own, as its block of temporaries is (kept_blocks.py): trip counts that
    grow, shrink, grow again, and threads calling at once, each get the interpreter's values."""
    module = module_of(SCAN)
    text = str(lower_module(module, "{}", Target.host().vector_bits))
    assert re.search(r'@"adc\.kept\.k\.\d+" = internal global ptr null', text)     # beside the temporaries' "adc.kept.k"
    lib = compile_module(module)                # its code lives as long as it does
    address = lib.address("adc_kernel_k")
    x, w = RNG.standard_normal(4).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    alone, together = (3, 2000, 0, 5, 30_000, 1), [7, 9000, 2, 40, 12_000, 0] * 3
    # the interpreter's values once per trip count, before the threads: it runs a step at a time
    wanted = {n: interp.run(module, "k", np.int64(n), x, w) for n in {*alone, *together}}

    def agrees(n: int) -> None:
        for got, want in zip(call(address, module["k"], np.int64(n), x, w), wanted[n], strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6)
    for n in alone:
        agrees(n)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(agrees, together))


@pytest.mark.parametrize("n", [0, 3])
def test_scan_stacks_along_a_later_axis(n):
    """Batched (adc.passes.batch), a scan stacks along axis 1: each row's parts are copied apart."""
    from adc.passes.batch import batch

    batched, func = batch(module_of(SCAN), "k", [False, True, False])
    x, w = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    want = interp.run(batched, func.name, np.int64(n), x, w)
    got = getattr(jit_module(batched.reachable(func.name)), func.name)(np.int64(n), x, w)
    for g, v in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), v, rtol=1e-6)
