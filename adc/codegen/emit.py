"""LLVM IR → optimized module → object code (or assembly, or optimized LLVM IR text).

The step between lowering and loading: the JIT loads the object code into this
process (jit.py), `adc compile` links it into a shared object (aot.py), and the
driver keeps it in the on-disk cache. Each compile parses the LLVM IR into an
LLVM context of its own and disposes of both afterwards: constants (such as the
metadata string every module embeds) are uniqued per context and would
otherwise stay in the global one for the life of the process.

    obj = emit_object(lower_module(module, metadata, target), target)   # ELF bytes
    first, full = emit_tiers(lower_module(module, metadata, target), target)   # the same, fast first
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Iterator

import llvmlite.binding as llvm
import llvmlite.ir

from adc import compile_log
from adc.codegen.toolchain.target import Target


@contextmanager
def optimized(llvm_ir: llvmlite.ir.Module | str, target: Target, subject: str = "",
              unroll: bool = False) -> Iterator[llvm.ModuleRef]:
    """The parsed, verified and optimized module (see `Target.optimize` for `unroll`), in a
    context that ends with the `with` block."""
    context = llvm.create_context()
    with compile_log.stage(subject, "llvm-parse"):
        module = llvm.parse_assembly(prepared_for_merging(str(llvm_ir)), context=context)
    try:
        with compile_log.stage(subject, "llvm-optimize"):
            target.optimize(module, unroll)
        yield module
    finally:
        module.close()
        context.close()


# An internal function's definition line: its name, its parameters up to their closing parenthesis
# (adc gives parameters no attribute with parentheses), then its attributes
_INTERNAL_DEFINITION = re.compile(r'^(define internal [^\n(@]*@(?:"([^"]+)"|([\w.$]+))\([^)\n]*\))([^\n]*)$', re.M)
_FOLDED_FIRST = ("noinline", "alwaysinline")    # an internal function with one of these may fold before the pipeline
OWN_ATTRIBUTE = '"adc.own"'                     # any other carries this, with its name as value


def prepared_for_merging(text: str) -> str:
    """The module's text ready for LLVM's MergeFunctions, before and after the pipeline
    (Target.optimize):

    - internal functions `unnamed_addr`: adc never compares their addresses (llvmlite's builder
      cannot say so), so identical loop nests' tasks, whose addresses go to the thread pool, fold
      into one, not a thunk each;
    - an internal function LLVM may inline (neither `noinline` nor `alwaysinline`) gets a string
      attribute naming it, which MergeFunctions compares, so that it is never folded into its twin:
      with a second caller LLVM inlines it less readily (folding every identical function first
      made the batch Jacobian benchmark ~10% slower). Those never inlined, and those always
      inlined, fold before the pipeline: each is optimized once, not once per copy."""
    def prepared(definition: re.Match) -> str:
        head, name, attributes = definition.group(1), definition.group(2) or definition.group(3), definition.group(4)
        if "unnamed_addr" not in attributes:
            attributes = " unnamed_addr" + attributes
        words = attributes.split()
        if not any(word in words for word in _FOLDED_FIRST) and OWN_ATTRIBUTE not in attributes:
            attributes += f' {OWN_ATTRIBUTE}="{name}"'
        return head + attributes

    return _INTERNAL_DEFINITION.sub(prepared, text)


def emit_object(llvm_ir: llvmlite.ir.Module | str, target: Target, subject: str = "",
                unroll: bool = False) -> bytes:
    """An ELF object of the optimized module (`target.pic` for code linked into a shared object);
    `subject` names it in the compile log."""
    with optimized(llvm_ir, target, subject, unroll) as module, compile_log.stage(subject, _codegen(target)):
        return target.target_machine().emit_object(module)


def emit_tiers(llvm_ir: llvmlite.ir.Module | str, target: Target, subject: str = "",
               unroll: bool = False) -> Iterator[bytes]:
    """The object code of `target.first_tier`, then of `target`, from one optimization of the
    module: each as soon as it is made (code generation rewrites the module's IR, so the first
    tier's runs on a copy)."""
    with optimized(llvm_ir, target, subject, unroll) as module:
        with compile_log.stage(subject, _codegen(target.first_tier)):
            first = module.clone()
            try:
                code = target.first_tier.target_machine().emit_object(first)
            finally:
                first.close()
        yield code
        with compile_log.stage(subject, _codegen(target)):
            code = target.target_machine().emit_object(module)
        yield code


def _codegen(target: Target) -> str:
    """The code generation stage's name in the compile log."""
    return "codegen (first tier)" if target.quick else "codegen"


def emit_assembly(llvm_ir: llvmlite.ir.Module | str, target: Target) -> str:
    with optimized(llvm_ir, target) as module:
        return target.target_machine().emit_assembly(module)


def emit_llvm(llvm_ir: llvmlite.ir.Module | str, target: Target) -> str:
    """The optimized LLVM IR text."""
    with optimized(llvm_ir, target) as module:
        return str(module)
