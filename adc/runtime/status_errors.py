"""The error a kernel's nonzero status names, raised by every route of a native call (kernel.py):
an interrupt, an access out of bounds, sizes a region or callee cannot take, or no memory."""
from __future__ import annotations

from adc.abi import STATUS_BOUNDS, STATUS_INTERRUPTED, STATUS_SHAPES, KernelSignature
from adc.ir.shapes import constraints, region_constraints
from adc.ir.types import SymDim, evaluate_dim
from adc.runtime.bounds_error import bounds_error


def status_error(signature: KernelSignature, status: int, sizes: list[int], library, gradient_source) -> BaseException:
    """The error of a native call of `signature` (a kernel of `library`) that returned `status` at
    the dims' `sizes`: an interrupt (SIGINT, adc/runtime/interrupts.py: a pending signal handler, as
    Python's own raising KeyboardInterrupt, runs first), an access out of bounds (a bounds-checked
    build: its module's error record, bounds_error.py), sizes that a loop body, a branch or a kernel this
    one calls cannot take (native code checks those where it reaches them; the constraint broken is
    found in the IR `gradient_source` carries), or no memory for the temporaries."""
    name = signature.name
    if status == STATUS_INTERRUPTED:
        return KeyboardInterrupt(f"{name}: interrupted")
    if status == STATUS_BOUNDS:
        return bounds_error(library, signature)
    if status != STATUS_SHAPES:
        return MemoryError(f"{name}: native code could not allocate its temporaries (the system had no "
                           f"memory for them, or a size passed 2**63 - 1 bytes)")
    env = dict(zip(signature.dims, sizes))
    shown = ", ".join(f"{s} = {v}" for s, v in env.items())
    broken = _broken_constraint(signature, gradient_source, env)
    need = f"{broken} >= 0" if broken is not None else "other sizes"
    return ValueError(f"{name}: a loop body or branch that ran, or a kernel it calls, needs {need}, but {shown}")


def _broken_constraint(signature: KernelSignature, gradient_source, env: dict[str, int]) -> SymDim | None:
    """A shape constraint of the kernel's regions or callees that `env` breaks, found in the IR its
    module carries (None where it carries none, as for a derived kernel's module)."""
    # the passes load with the first failure that needs them, not with every program
    from adc.passes.expand import expand_custom_gradients
    from adc.passes.inline import inline

    try:
        module = inline(expand_custom_gradients(gradient_source.parsed_ir()))
    except KeyError:
        return None
    func = module[signature.name]
    wanted = constraints(func) + region_constraints(module, func)
    return next((c for c in wanted if c.symbols <= env.keys() and evaluate_dim(c, env) < 0), None)
