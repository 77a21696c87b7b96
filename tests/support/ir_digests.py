"""Digests of what the compiler makes of the samples: a refactor that should change no output
shows it by printing the same digests before and after.

For each `samples/*.adc` program: its optimized IR, its LLVM IR as lowered (before LLVM's own
passes, which are a function of it), and the same two for each derivation of each kernel that
has one (VJP, JVP, Jacobian, Hessian of a single-parameter kernel, batched Jacobian), in the
bounds-checked build too. The target is a fixed CPU, not the host, so two machines agree.

    python -m tests.support.ir_digests > before.txt     # ... refactor ...
    python -m tests.support.ir_digests | diff before.txt -
"""
from __future__ import annotations

import dataclasses
import hashlib
import sys

from adc import compiler
from adc.codegen.toolchain.target import Target
from adc.errors import CompileError
from adc.ir.printer import format_module
from tests.support.repository import SAMPLES

# derivation -> the params it is taken w.r.t. (None: all; the one-parameter ones, the first)
DERIVATIONS = {"vjp": None, "jvp": None, "jacobian": None, "hessian": (0,), "batch_jacobian": (0,)}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _lines(name: str, module, targets: tuple[Target, ...]) -> list[str]:
    optimized = compiler.optimize(module)
    lines = [f"{name} ir {_digest(format_module(optimized))}"]
    for target in targets:
        build = "checked" if target.check_bounds else "default"
        lines.append(f"{name} llvm/{build} {_digest(str(compiler.to_llvm(module, target)))}")
    return lines


def digests() -> list[str]:
    base = Target.for_cpu("x86-64-v3")
    targets = (base, dataclasses.replace(base, check_bounds=True))
    lines = []
    for path in sorted(SAMPLES.glob("*.adc")):
        module = compiler.elaborate(path.read_text(), path.name)
        lines += _lines(path.name, module, targets)
        text = format_module(module)
        for func in module:
            if func.name in module.parts() or func.name in module.regions():
                continue
            for derivation, wanted in DERIVATIONS.items():
                try:
                    derived = compiler.derive(text, module.name, derivation, func.name, wanted)
                except (CompileError, KeyError, IndexError, TypeError, ValueError) as refused:
                    lines.append(f"{path.name}:{func.name} {derivation} refused {type(refused).__name__}")
                    continue
                lines += _lines(f"{path.name}:{func.name} {derivation}", derived.module, targets)
    return lines


if __name__ == "__main__":
    for line in digests():
        print(line, flush=True)
    sys.exit(0)
