"""Derivatives of a compiled module's kernels, as JIT modules.

`derive` runs a composition of passes (compiler.DERIVATIONS: the VJP, the batched VJP, the JVP,
the gradient, the Jacobians, the Hessian, the Hessian-vector product of a kernel) on the IR text
a compiled module carries — a JIT module's or a `.so`'s — so the runtime differentiates what it
loaded. The manifest is cached under the request, so a warm derivation parses no IR.

    derive(ir_text, "k.adc", "vjp", "f", None)      # Derived(library, "f_vjp", wrt=(0, 1), ...)
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from adc.driver.cache_keys import ir_key
from adc.driver.host import jit_target
from adc.driver.jit_module import JitModule
from adc.driver.manifests import build_manifest, cached_manifest


@dataclass(frozen=True)
class Derived:
    """A derivative of a kernel as a JIT module: `library` defines `function`, which returns the
    derivatives w.r.t. the params `wrt`; for VJPs, `passthrough[i]` (not None) says the i-th of them
    is that result's cotangent unchanged. No library: nothing to call (no param has a derivative,
    or a VJP only passes its cotangents through). A split VJP's `forward` (see
    passes/split_vjp.py) returns the kernel's results and the residuals `function` reads."""

    library: JitModule | None
    function: str
    wrt: tuple[int, ...]
    passthrough: tuple[int | None, ...] = ()
    forward: str | None = None


def derive(ir_text: str, module_name: str, derivation: str, kernel: str,
           wanted: tuple[int, ...] | None = None, check_bounds: bool = False) -> Derived:
    """A derivative of `kernel` from the IR text a compiled module carries, as a JIT module (checked
    when its module is, see `jit_target`). Cached by the request (IR text, derivation, kernel,
    wanted), so a warm call parses nothing."""
    key = ir_key("derive", module_name, ir_text, json.dumps([derivation, kernel, wanted]))

    def build() -> dict:
        from adc import compiler       # the pipeline: on a miss only

        made = compiler.derive(ir_text, module_name, derivation, kernel, wanted)
        through = made.passthrough
        found = {"function": made.function.name, "wrt": list(made.wrt),
                 "passthrough": None if through is None else list(through),
                 "forward": made.forward and made.forward.name}
        if not made.wrt or (through is not None and None not in through):
            return found                            # nothing to compile
        return {**found, **build_manifest(made.module)}

    manifest = cached_manifest(key, f"{module_name}: {derivation} of {kernel}", build)
    library = JitModule(manifest, jit_target(check_bounds)) if "kernels" in manifest else None
    return Derived(library, manifest["function"], tuple(manifest["wrt"]), tuple(manifest["passthrough"] or ()),
                   manifest.get("forward"))
