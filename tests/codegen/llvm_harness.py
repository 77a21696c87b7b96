"""Test-only: JIT a loop `out[i] = f(in0[i], ...)` at O3 for the host CPU, callable on NumPy arrays.

Used by the vecmath tests before adc/codegen/toolchain/jit.py exists; the optimized
module's assembly is kept so tests can check that the loop was vectorized.
"""
from __future__ import annotations

import ctypes
from typing import Callable

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np

_LLVM_TYPES = {np.dtype(np.float32): ir.FloatType(), np.dtype(np.float64): ir.DoubleType()}

llvm.initialize_native_target()
llvm.initialize_native_asmprinter()


def _target_machine() -> llvm.TargetMachine:
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(), opt=3)


def _loop_module(body: Callable[[ir.IRBuilder, list[ir.Value]], ir.Value], ty: ir.Type,
                 arity: int) -> ir.Module:
    """define void @kernel(ty* out, ty* in0, ..., i64 n): for i < n: out[i] = body(in[i]...)."""
    module = ir.Module()
    i64, ptr = ir.IntType(64), ty.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr] * (arity + 1) + [i64]), "kernel")
    for arg in fn.args[:-1]:
        arg.add_attribute("noalias")
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    n = fn.args[-1]
    b.cbranch(b.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    ins = [b.load(b.gep(p, [i])) for p in fn.args[1:-1]]
    b.store(body(b, ins), b.gep(fn.args[0], [i]))
    nxt = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_signed("<", nxt, n), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return module


class LoopKernel:
    """A JIT-compiled elementwise loop; `asm` is the optimized machine code as text."""

    def __init__(self, module: ir.Module, dtype: np.dtype, arity: int):
        tm = _target_machine()
        ref = llvm.parse_assembly(str(module))
        ref.triple, ref.data_layout = tm.triple, str(tm.target_data)
        ref.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(ref, pb)
        ref.verify()
        self.llvm_ir = str(ref)
        self.asm = tm.emit_assembly(ref)
        self._engine = llvm.create_mcjit_compiler(ref, tm)
        self._engine.finalize_object()
        ptr = ctypes.c_void_p
        self._fn = ctypes.CFUNCTYPE(None, *([ptr] * (arity + 1)), ctypes.c_int64)(
            self._engine.get_function_address("kernel"))
        self.dtype, self.arity = dtype, arity

    def __call__(self, *arrays: np.ndarray) -> np.ndarray:
        ins = [np.ascontiguousarray(np.broadcast_to(a, np.broadcast(*arrays).shape), self.dtype)
               for a in arrays]
        out = np.empty_like(ins[0])
        self._fn(out.ctypes.data, *(a.ctypes.data for a in ins), out.size)
        return out


def compile_loop(body: Callable[[ir.IRBuilder, list[ir.Value]], ir.Value], dtype, arity: int = 1
                 ) -> LoopKernel:
    """JIT `out[i] = body(builder, [in0[i], ...])` for float32 or float64 arrays."""
    dtype = np.dtype(dtype)
    return LoopKernel(_loop_module(body, _LLVM_TYPES[dtype], arity), dtype, arity)
