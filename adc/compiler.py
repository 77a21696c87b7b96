"""The compile pipeline: source → IR → passes → LLVM IR, and the derivations of a kernel's IR.

Each stage is a small function so the CLI can stop after any of them
(`adc ir --emit ...`); the driver (adc/driver/) runs them on a cache miss, and
only then imports this module with the passes and lowering behind it, so a
warm process never loads them; the language frontend is imported by `elaborate`
only, so a process deriving kernels from cached IR never loads it.

    module = elaborate(source, "k.adc")                   # verified IR, with locations
    sources = kernel_sources(module)                      # metadata, optimized IR text, kernel digests
    lower_kernel(sources.ir, "k.adc", "f", Target.host()) # f inlined and optimized: an LLVM module
    DERIVATIONS["vjp"](module, "f", None)                 # (module + f_vjp, f_vjp, wrt, passthrough)
"""
from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field, replace
from graphlib import CycleError, TopologicalSorter
from typing import Callable, TextIO

import llvmlite.ir
import numpy as np

from adc import compile_log
from adc.abi import (GRADIENTS_DERIVED, GRADIENTS_EMBEDDED, KERNEL_PREFIX, SparseEntry, VjpEntry, encode_metadata,
                     signature, sparse_symbol)
from adc.codegen.lowering import lower
from adc.codegen.lowering.sparse_export import lower_sparse_export
from adc.codegen.toolchain.target import Target
from adc.errors import CompileError
from adc.ir.core import Func, Module
from adc.ir.types import TensorType
from adc.ir.parser import parse_module
from adc.ir.printer import format_functions, format_module
from adc.passes import jacobian as compositions
from adc.passes.adjoint import passthrough, vjp
from adc.passes.inline import callees, inline_func
from adc.passes.jvp import jvp
from adc.passes.pipeline import DEFAULT_PIPELINE, LOWERING, SEPARATE_PIPELINE, Pass, run_pipeline
from adc.passes.sparsity.fixed_sizes import fixed_sparse
from adc.passes.sparsity.nonzeros import nonzeros
from adc.passes.specialize import specialize
from adc.passes.split_vjp import split_vjp
from adc.passes.vmap import vmap

# The modules this process printed or parsed, by (IR text, module name), newest last. The text of
# a module's kernels or of its metadata is parsed back when a kernel is compiled or differentiated;
# when this process printed it, the module it printed is used instead (IR objects never change once
# built), and a text parsed once is not parsed again for the module's next kernel. Parsing costs
# lark ~4 us a character (the mlp_loss VJP's text: 8 ms), and building the IR lexer ~15 ms once
# per process, so a cold compile of a kernel and its gradient parses nothing.
_PRINTED_KEPT = 64
_printed: dict[tuple[str, str], Module] = {}


def _remember(text: str, module: Module) -> str:
    _printed.pop((text, module.name), None)
    _printed[text, module.name] = module
    while len(_printed) > _PRINTED_KEPT:
        _printed.pop(next(iter(_printed)), None)
    return text


def _format(module: Module) -> str:
    return _remember(format_module(module), module)


def _parse(text: str, module_name: str) -> Module:
    printed = _printed.get((text, module_name))
    if printed is None:
        printed = parse_module(text, module_name)
        _remember(text, printed)
    return printed


@dataclass(frozen=True)
class Options:
    """What to observe while compiling: `--print-after-all`, `--print-after=PASS`."""

    print_after_all: bool = False
    print_after: frozenset[str] = field(default_factory=frozenset)
    out: TextIO | None = None

    @property
    def prints(self) -> bool:
        return self.print_after_all or bool(self.print_after)


def elaborate(source: str, filename: str) -> Module:
    """Parse and elaborate: the verified IR of the program, with locations. The language frontend is
    imported here (~20 ms): a process that only derives, optimizes or lowers cached IR never loads it."""
    from adc.frontend import compile_source

    with compile_log.stage(filename, "elaborate"):
        return compile_source(source, filename)


def optimize(module: Module, options: Options = Options(),
             pipeline: tuple[Pass, ...] = DEFAULT_PIPELINE) -> Module:
    with compile_log.stage(module.name, "passes"):
        return run_pipeline(module, pipeline, verify=True, print_after_all=options.print_after_all,
                            print_after=set(options.print_after), out=options.out or sys.stderr)


def to_llvm(module: Module, target: Target, options: Options = Options()) -> llvmlite.ir.Module:
    """The whole module as one LLVM module with its metadata (what `adc ir --emit llvm|asm` shows;
    the JIT and shared objects compile kernel by kernel, see `kernel_sources`)."""
    metadata = encode_metadata(module, format_module(module))
    optimized = optimize(module, options)
    with compile_log.stage(module.name, "lower"):
        return lower.lower_module(optimized, metadata, target.vector_bits, target.check_bounds, target.misindex,
                                  target.linalg_block)


@dataclass(frozen=True)
class KernelSources:
    """What compiling a module kernel by kernel needs: its metadata; `ir`, the text of its functions
    each optimized alone (SEPARATE_PIPELINE), from which `lower_kernel` compiles any of them; and
    per kernel symbol a digest of the code compiling that kernel inlines into it, what its object
    code is cached by."""

    metadata: str
    ir: str
    kernels: dict[str, str]
    sparse: tuple[SparseExport, ...] = ()


def kernel_sources(module: Module, gradients: str = GRADIENTS_DERIVED,
                   sparse: tuple[tuple[str, int, bool], ...] = ()) -> KernelSources:
    """The KernelSources of `module`; with `gradients="embedded"` (a shared object), each kernel's
    VJP kernel too (see `with_vjps`); per (kernel, param, hessian) of `sparse`, a sparse derivative's
    compressed kernel (see `with_sparse_derivatives`)."""
    full, vjps = with_vjps(module) if gradients == GRADIENTS_EMBEDDED else (module, ())
    full, exports = with_sparse_derivatives(full, sparse)
    metadata = encode_metadata(module, _format(full), gradients, vjps, tuple(e.entry for e in exports))
    optimized = optimize(full, pipeline=SEPARATE_PIPELINE)
    texts = format_functions(optimized)
    digests = _inlined_digests(optimized, texts)
    regions = full.regions()        # as the metadata lists them (expansion makes custom gradients calls)
    return KernelSources(metadata, _remember("\n".join(texts.values()), optimized),
                         {signature(f).symbol: digests[f.name] for f in optimized if f.name not in regions},
                         exports)


def _inlined_digests(module: Module, texts: dict[str, str]) -> dict[str, str]:
    """Per function, a digest of its text and of the digests of the functions it calls or runs as
    regions: it changes whenever any code compiled into the function's object code does, and each
    text is hashed once (a text per kernel of all it calls would grow with the square of a chain's
    length). The functions it only names (the gradients of external functions, which may name each
    other) are not compiled into it."""
    calls = {f.name: callees(f) + f.regions() for f in module}
    try:
        callees_first = tuple(TopologicalSorter(calls).static_order())
    except CycleError as err:
        raise CompileError(f"recursive call: {' -> '.join('@' + n for n in reversed(err.args[1]))}") from None
    digests: dict[str, str] = {}
    for name in callees_first:
        parts = (texts[name], *(digests[callee] for callee in calls[name]))
        digests[name] = hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
    return digests


def metadata_module(metadata: str) -> llvmlite.ir.Module:
    """The LLVM module a shared object's metadata and `adc_set_num_threads` live in."""
    return lower.lower_metadata(metadata)


def lower_kernel(ir_text: str, module_name: str, name: str, target: Target) -> llvmlite.ir.Module:
    """The LLVM module of kernel `name` from the `KernelSources.ir` text of its module."""
    return lowered_kernel(ir_text, module_name, name, target)[0]


def lowered_kernel(ir_text: str, module_name: str, name: str, target: Target) -> tuple[llvmlite.ir.Module, bool]:
    """The LLVM module of kernel `name`, and whether LLVM should unroll its loops: when its params
    bind no dimension symbol (a kernel of fixed sizes, adc.specialize's), its loops' trip counts are
    constants, and unrolling the short ones lets the vectorizer work across the loop around them
    (the [600, 5] cross-entropy's value and gradient: 3.9 -> 2.4 µs). With symbolic sizes it
    doubled LLVM's time and gained nothing measured (Target.optimize)."""
    kernel = inlined_kernel(ir_text, module_name, name)
    with compile_log.stage(f"{module_name}: {name}", "lower"):
        llvm_module = lower.lower_kernel(kernel, name, target.vector_bits, target.check_bounds, target.misindex,
                                         target.linalg_block)
    return llvm_module, not kernel[name].dim_symbols


def inlined_kernel(ir_text: str, module_name: str, name: str) -> Module:
    """What `lower_kernel` lowers: kernel `name` of a `KernelSources.ir` text and the regions it
    runs, callees inlined, optimized again (the functions whose loop nests codegen plans)."""
    with compile_log.stage(f"{module_name}: {name}", "inline"):
        return _inlined(_parse(ir_text, module_name), name)


def _inlined(module: Module, name: str) -> Module:
    """Function `name` of a SEPARATE_PIPELINE module and the region functions it runs, transitively,
    each with its callees inlined (the copies of regions inlining makes included), optimized again
    (LOWERING), with what they still reference (the gradients of external functions): its work
    grows with what `name` reaches, not with the module."""
    funcs = dict(module.funcs)
    inlined, pending = {}, [name]
    while pending:
        func = inline_func(funcs[pending.pop()], Module(dict(funcs)), funcs)
        inlined[func.name] = func
        pending += (r for r in func.regions() if r not in inlined)
    return run_pipeline(Module(funcs, module.name).replace(*inlined.values()).reachable(name), LOWERING)


def with_vjps(module: Module) -> tuple[Module, tuple[VjpEntry, ...]]:
    """`module` plus the VJP function of each kernel with float results (not the forward and
    backward parts of a custom gradient), w.r.t. all its params, and their metadata entries; a
    kernel the adjoint pass rejects (e.g. an external function with no gradient) gets an entry
    saying why, and the module still compiles."""
    full, entries = module, []
    parts = module.parts()
    for func in module:
        if func.name in parts or not any(t.dtype.is_float for t in func.result_types):
            continue    # a custom gradient's forward or backward, or never recorded on a tape
        try:
            extended, gradient = vjp(full, func.name)
        except CompileError as err:
            entries.append(VjpEntry(func.name, None, missing=str(err).splitlines()[0]))
            continue
        if not gradient.wrt:
            entries.append(VjpEntry(func.name, None))
            continue
        full = extended
        entries.append(VjpEntry(func.name, signature(gradient.func), gradient.wrt,
                                passthrough(gradient.func, len(func.returns))))
    return full, tuple(entries)


@dataclass(frozen=True)
class SparseExport:
    """A sparse derivative at fixed sizes as a shared object holds it: its metadata `entry`; the
    symbol of its `compressed` kernel (passes/jacobian.py `sparse_jacobian`), which takes the
    coloring `colors` and the decompression `index` after the params; its CSC pattern."""

    entry: SparseEntry
    compressed: str
    colors: np.ndarray
    index: np.ndarray
    colptr: np.ndarray
    rowind: np.ndarray

    def key(self) -> str:
        """What its LLVM module (`lower`) is made from, as text for a cache key."""
        arrays = hashlib.sha256(b"".join(a.astype("<i8").tobytes() + b"|" for a in
                                         (self.colors, self.index, self.colptr, self.rowind)))
        return f"{self.entry.kernel.symbol} {self.compressed} {len(self.entry.kernel.param_types)} {arrays.hexdigest()}"

    def lower(self) -> llvmlite.ir.Module:
        """Its pattern's arrays and the kernel of its params alone (codegen/lowering/sparse_export.py)."""
        return lower_sparse_export(self.entry.kernel.symbol, self.compressed, len(self.entry.kernel.param_types),
                                   self.colors, self.index, self.colptr, self.rowind)


def with_sparse_derivatives(module: Module, requests: tuple[tuple[str, int, bool], ...]
                            ) -> tuple[Module, tuple[SparseExport, ...]]:
    """`module` plus, per (kernel, param, hessian) requested, the compressed function of the sparse
    Jacobian (or Hessian) of the kernel w.r.t. that param at the fixed sizes of its types
    (passes/sparsity/fixed_sizes.py; CompileError for symbolic sizes), and what exports it."""
    exports = []
    for name, param, hessian in requests:
        func = module[name]
        symbol = sparse_symbol(name, func.params[param].name, hessian)
        exported = symbol[len(KERNEL_PREFIX):]
        if exported in module.funcs:
            raise CompileError(f"the sparse derivative's kernel {exported} has the name of a function of the "
                               f"module: rename that function", module[exported].loc)
        fixed = fixed_sparse(module, name, param, hessian, out_name=f"{exported}_compressed")
        module = fixed.module
        nonzeros = TensorType(module[fixed.function].result_types[0].dtype, (len(fixed.rowind),))
        kernel = replace(signature(func), name=exported, symbol=symbol, result_types=(nonzeros,))
        entry = SparseEntry(name, param, hessian, fixed.shape, len(fixed.rowind), fixed.compression.count,
                            fixed.compression.forward, kernel)
        exports.append(SparseExport(entry, KERNEL_PREFIX + fixed.function, fixed.compression.colors, fixed.index,
                                    fixed.colptr, fixed.rowind))
    return module, tuple(exports)


# ---------------------------------------------------------------- derivations

@dataclass(frozen=True)
class Derivation:
    """What a DERIVATIONS rule makes: `module` holds every function to compile, `function` the
    derivative, which differentiates w.r.t. the params `wrt`; for VJPs, which results'
    cotangents it passes through unchanged, for tangents-only JVPs, which of the `wrt` params'
    tangents (the VJP and the JVP of `x + y` need no call); for a split VJP, the `forward` saving
    residuals."""

    module: Module
    function: Func
    wrt: tuple[int, ...]
    passthrough: tuple[int | None, ...] | None = None
    forward: Func | None = None


def _vjp(module: Module, name: str, wanted) -> Derivation:
    extended, gradient = vjp(module, name, wanted)
    return Derivation(extended.reachable(gradient.func.name), gradient.func, gradient.wrt,
                      passthrough(gradient.func, len(module[name].returns)))


def _split_vjp(module: Module, name: str, wanted) -> Derivation:
    halves, split = split_vjp(module, name, wanted)
    return Derivation(halves, split.backward, split.wrt, passthrough(split.backward, len(module[name].returns)),
                      split.forward)


def _vjp_batched(module: Module, name: str, wanted) -> Derivation:
    extended, func, wrt = compositions.vjp_batched(module, name, wanted)
    return Derivation(extended.reachable(func.name), func, wrt, passthrough(func, len(module[name].returns)))


def _composition(compose: Callable, **options) -> Callable[..., Derivation]:
    def rule(module: Module, name: str, wanted) -> Derivation:
        extended, func, wrt = compose(module, name, wanted, **options)
        return Derivation(extended.reachable(func.name), func, wrt)
    return rule


def _jvp(primals: bool) -> Callable[..., Derivation]:
    def rule(module: Module, name: str, wanted) -> Derivation:
        extended, tangent = jvp(module, name, wanted, primals)
        if primals:     # adc.jvp: its tangent params, whatever the results depend on
            return Derivation(extended.reachable(tangent.func.name), tangent.func, tangent.wrt)
        through = passthrough(tangent.func, len(tangent.wrt))
        return Derivation(extended.reachable(tangent.func.name), tangent.func, tangent.connected, through)
    return rule


def _jvp_batched(module: Module, name: str, wanted) -> Derivation:
    extended, func, wrt = compositions.jvp_batched(module, name, wanted)
    tangents = len(func.params) - len(module[name].params)
    return Derivation(extended.reachable(func.name), func, wrt, passthrough(func, tangents))


def _vmap(module: Module, name: str, axes) -> Derivation:
    """`axes`: (in_axes, out_axes), one entry per param and per result; wrt: the batched params."""
    in_axes, out_axes = axes
    extended, func = vmap(module, name, in_axes, out_axes)
    return Derivation(extended.reachable(func.name), func, tuple(i for i, a in enumerate(in_axes) if a is not None))


def _specialize(module: Module, name: str, sizes) -> Derivation:
    """`sizes`: (symbol, size) pairs; wrt: every param (the kernel itself, at those sizes)."""
    extended, func = specialize(module, name, dict(sizes))
    return Derivation(extended.reachable(func.name), func, tuple(range(len(func.params))))


def _nonzeros(module: Module, name: str, request) -> Derivation:
    """`request`: (wrt, (symbol, size) pairs, rows): the weights of the diagonals of the Jacobian
    of the kernel's result w.r.t. param wrt at those sizes; or, `rows` a RowLayout's (width,
    sources) rather than None, its nonzeros laid out by the layout (passes/sparsity/nonzeros.py)."""
    wrt, sizes, rows = request
    extended, func = nonzeros(module, name, wrt, dict(sizes), rows)
    return Derivation(extended.reachable(func.name), func, (wrt,))


def _one_param(compose: Callable, **options) -> Callable[..., Derivation]:
    def rule(module: Module, name: str, wanted) -> Derivation:
        extended, func = compose(module, name, wanted[0], **options)
        return Derivation(extended.reachable(func.name), func, tuple(wanted))
    return rule


# name -> rule(module, kernel name, wanted params or None; for "vmap", its axes; for "specialize",
# its sizes; for "nonzeros", its request) -> Derivation
DERIVATIONS: dict[str, Callable[..., Derivation]] = {
    "vjp": _vjp, "split_vjp": _split_vjp, "vjp_batched": _vjp_batched,
    "jvp": _jvp(primals=True), "jvp_tangents": _jvp(primals=False),
    "jvp_batched": _jvp_batched,
    "gradient": _composition(compositions.gradient),
    "value_and_gradient": _composition(compositions.value_and_gradient),
    "jacobian": _composition(compositions.jacobian, mode="auto"),
    "jacfwd": _composition(compositions.jacobian, mode="forward"),
    "jacrev": _composition(compositions.jacobian, mode="reverse"),
    "hessian": _one_param(compositions.hessian, mode="forward"),
    "hessian_reverse": _one_param(compositions.hessian, mode="reverse"),
    "hvp": _one_param(compositions.hvp),
    "batch_jacobian": _one_param(compositions.batch_jacobian, mode="auto"),
    "batch_jacfwd": _one_param(compositions.batch_jacobian, mode="forward"),
    "batch_jacrev": _one_param(compositions.batch_jacobian, mode="reverse"),
    "vmap": _vmap, "specialize": _specialize, "nonzeros": _nonzeros}


def derive(ir_text: str, module_name: str, derivation: str, kernel: str,
           wanted: tuple[int, ...] | None) -> Derivation:
    """The DERIVATIONS rule `derivation` applied to `kernel` of the module whose IR text is given."""
    with compile_log.stage(f"{module_name}: {derivation} of {kernel}", "derive"):
        return DERIVATIONS[derivation](_parse(ir_text, module_name), kernel, wanted)
