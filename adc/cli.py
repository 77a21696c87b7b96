"""The `adc` command: compile, check, ir, info.

Exit codes: 0 success; 1 an error in the input (a diagnostic is printed as
`file:line:col: error: message` with the source line and a caret) or in the
toolchain; 2 a usage error. A user never sees a Python traceback.

    adc compile kernels.adc -o kernels.so
    adc compile kernels.adc -o kernels.so --header kernels.h  # and a C header declaring its kernels
    adc ir kernels.adc --print-after-all
    adc ir kernels.adc --emit asm
    adc ir kernels.adc --grad dense_relu
    adc ir kernels.adc --jacobian sigmoid_shift
    adc ir kernels.adc --batch-jacobian dense_relu          # d y[b] / d x[b], per-example seeds folded
    adc compile kernels.adc -o kernels.so --no-gradients   # forward kernels only
    adc compile kernels.adc -o kernels.so --check-bounds   # every access checked (adc.BoundsError)
    adc compile k.adc -o k.so --header k.h --sparse-jacobian residual:x --sparse-hessian loss:x
    adc info kernels.so                                     # kernels, and which carry gradients
    adc cache info                                          # the compile cache: location, entries, size
    adc cache clear
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from adc.errors import CompileError, ToolchainError
from adc.version import __version__

EMIT_STAGES = ("ir", "opt", "llvm", "asm")


class UsageError(Exception):
    """An option value the command cannot use (exit 2, like argparse's own errors)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="adc", description="Compile adc kernels to native code.")
    parser.add_argument("--version", action="version", version=f"adc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    compile_ = sub.add_parser("compile", help="compile FILE.adc to a shared object")
    compile_.add_argument("file")
    compile_.add_argument("-o", "--output", help="output path (default: FILE.so)")
    compile_.add_argument("--header", metavar="FILE.h",
                          help="also write a C header declaring the kernels, with the order and types of "
                               "their dims, inputs and outputs")
    compile_.add_argument("--no-gradients", action="store_true",
                          help="export the kernels only, not their VJP kernels: the loaded module "
                               "cannot be differentiated")
    compile_.add_argument("--cpu", metavar="NAME",
                          help="the CPU to build for: native (this machine, the default unless ADC_CPU names "
                               "another, as it does for the JIT), an x86-64 level "
                               "(x86-64, x86-64-v2, x86-64-v3, x86-64-v4) or an LLVM CPU name (znver3, "
                               "skylake-avx512, ...); adc.load refuses the file on a CPU lacking its features")
    compile_.add_argument("--check-bounds", action="store_true",
                          help="a bounds-checked build: every access checked against its buffer, every block "
                               "redzoned; a violation raises adc.BoundsError (docs/language.md)")
    compile_.add_argument("--sparse-jacobian", action="append", default=[], metavar="KERNEL:ARG",
                          help="also export the sparse Jacobian of KERNEL w.r.t. its parameter ARG, at the fixed "
                               "sizes of its types: adc_kernel_KERNEL_sparse_jacobian_ARG fills the nonzeros in "
                               "CSC order, its pattern in ..._colptr, ..._rowind, ..._nnz (repeatable)")
    compile_.add_argument("--sparse-hessian", action="append", default=[], metavar="KERNEL:ARG",
                          help="the same for the Hessian of a kernel with a scalar result "
                               "(adc_kernel_KERNEL_sparse_hessian_ARG)")
    compile_.add_argument("-v", "--verbose", action="store_true",
                          help="print each compile stage with its time, and cache hits (as ADC_LOG=compile)")

    check = sub.add_parser("check", help="report diagnostics only")
    check.add_argument("file")

    ir = sub.add_parser("ir", help="print the IR (or a later stage) of FILE.adc")
    ir.add_argument("file")
    ir.add_argument("--emit", choices=EMIT_STAGES, default="ir",
                    help="ir: after elaboration; opt: after the cleanup passes; llvm: optimized LLVM IR; "
                         "asm: assembly for this CPU")
    ir.add_argument("--check-bounds", action="store_true", help="llvm, asm: the bounds-checked build's")
    ir.add_argument("--print-after-all", action="store_true", help="print the IR after each pass (to stderr)")
    ir.add_argument("--print-after", action="append", default=[], metavar="PASS",
                    help="print the IR after the named pass (repeatable)")
    derivative = ir.add_mutually_exclusive_group()     # one derivative's IR at a time
    derivative.add_argument("--grad", metavar="KERNEL",
                    help="print the VJP function of KERNEL (reverse mode, after cleanup)")
    derivative.add_argument("--jvp", metavar="KERNEL",
                    help="print the JVP function of KERNEL (forward mode, after cleanup)")
    derivative.add_argument("--jacobian", metavar="KERNEL",
                    help="print the Jacobian function of KERNEL (its VJP batched over identity seeds)")
    derivative.add_argument("--batch-jacobian", metavar="KERNEL",
                    help="print the batch Jacobian function of KERNEL w.r.t. its first parameter (per-example "
                         "seeds through the batched JVP or VJP, as adc.batch_jacobian)")

    info = sub.add_parser("info", help="list the kernels of a compiled shared object")
    info.add_argument("file")

    cache = sub.add_parser("cache", help="the on-disk compile cache: where it is, how big, or empty it")
    cache.add_argument("action", choices=("info", "clear"))
    return parser


def _cmd_compile(args, driver) -> int:
    from adc import compile_log, compiler

    if args.verbose:
        compile_log.enable()

    from adc.codegen.toolchain.target import Target

    try:
        target = Target.for_cpu(args.cpu or os.environ.get("ADC_CPU", "").strip() or "native", pic=True)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if args.check_bounds:
        target = driver.checked(target)
    out = args.output or str(Path(args.file).with_suffix(".so"))
    module = _elaborated(compiler, driver, args.file)
    info = driver.write_shared_object(module, out, gradients=not args.no_gradients, target=target,
                                      sparse=_sparse_requests(module, args))
    if args.header:
        from adc.codegen.toolchain.c_header import c_header

        Path(args.header).write_text(c_header(info, Path(out).name, Path(args.header).name))
    return 0


def _sparse_requests(module, args) -> tuple[tuple[str, int, bool], ...]:
    """(kernel, param index, hessian) per --sparse-jacobian and --sparse-hessian KERNEL:ARG, in order,
    each once; UsageError naming what exists when a kernel or a float parameter is not found."""
    kernels = [name for name in module.funcs if name not in module.regions()]
    requests = {}
    for hessian, specs in ((False, args.sparse_jacobian), (True, args.sparse_hessian)):
        option = "--sparse-hessian" if hessian else "--sparse-jacobian"
        for spec in specs:
            kernel, _, param = spec.partition(":")
            if not kernel or not param:
                raise UsageError(f"{option} {spec}: expected KERNEL:ARG, a kernel and one of its parameters")
            if kernel not in kernels:
                raise UsageError(f"{option} {spec}: no kernel '{kernel}' (kernels: {', '.join(kernels) or 'none'})")
            floats = [p.name for p in module[kernel].params if p.type.dtype.is_float]
            if param not in floats:
                raise UsageError(f"{option} {spec}: '{param}' is not a float parameter of {kernel} "
                                 f"(float parameters: {', '.join(floats) or 'none'})")
            names = [p.name for p in module[kernel].params]
            requests[kernel, names.index(param), hessian] = None
    return tuple(requests)


def _cmd_check(args, driver) -> int:
    from adc import compiler
    from adc.codegen.toolchain import externs

    externs.resolve(_elaborated(compiler, driver, args.file))   # missing symbols too
    return 0


def _elaborated(compiler, driver, path: str):
    """The file's IR; a program with no kernel gets a warning (a .so of it exports nothing)."""
    module = compiler.elaborate(driver.read_source(path), path)
    if not list(module):
        print(f"{path}: warning: the program defines no kernels", file=sys.stderr)
    return module


def _with_regions(module, name: str, format_func) -> str:
    """Function `name` of `module` printed after the functions it runs (loop bodies, branches,
    callees), and theirs."""
    others = [func for func in module.reachable(name) if func.name != name]
    return "\n".join(format_func(func) for func in [*others, module[name]])


def _cmd_ir(args, driver) -> int:
    from adc import compiler
    from adc.codegen import emit
    from adc.ir.printer import format_func, format_module
    from adc.passes.adjoint import vjp
    from adc.passes.jacobian import batch_jacobian, jacobian
    from adc.passes.jvp import jvp
    from adc.passes.pipeline import DEFAULT_PIPELINE

    derived = next((flag for flag in ("grad", "jvp", "jacobian", "batch_jacobian") if getattr(args, flag)), None)
    if derived and (args.emit != "ir" or args.print_after_all or args.print_after):
        raise UsageError(f"--{derived.replace('_', '-')} prints the derivative's IR after cleanup; --emit and "
                         f"--print-after apply to the module itself, without it")
    passes = [p.name for p in DEFAULT_PIPELINE]
    unknown = sorted(set(args.print_after) - set(passes))
    if unknown:
        raise UsageError(f"--print-after {', '.join(unknown)}: no such pass; the passes: {', '.join(passes)}")
    options = compiler.Options(args.print_after_all, frozenset(args.print_after))
    module = compiler.elaborate(driver.read_source(args.file), args.file)
    if args.grad is not None:
        derived, grad = vjp(module, args.grad)
        text = _with_regions(derived, grad.func.name, format_func)
    elif args.jvp is not None:
        derived, tangent = jvp(module, args.jvp)
        text = _with_regions(derived, tangent.func.name, format_func)
    elif args.jacobian is not None:
        derived, func, _ = jacobian(module, args.jacobian)
        text = _with_regions(derived, func.name, format_func)
    elif args.batch_jacobian is not None:
        derived, func = batch_jacobian(module, args.batch_jacobian, 0)
        text = _with_regions(derived, func.name, format_func)
    elif args.emit == "ir" and not (args.print_after_all or args.print_after):
        text = format_module(module)
    elif args.emit in ("ir", "opt"):
        optimized = compiler.optimize(module, options)
        text = format_module(optimized if args.emit == "opt" else module)
    else:
        target = driver.checked(driver.host_target()) if args.check_bounds else driver.host_target()
        llvm_module = compiler.to_llvm(module, target, options)
        text = (emit.emit_llvm if args.emit == "llvm" else emit.emit_assembly)(llvm_module, target)
    sys.stdout.write(text)
    return 0


def _cmd_info(args, driver) -> int:
    from adc.ir.parser import parse_module
    from adc.runtime.module import Module, SharedLibrary

    library = SharedLibrary(args.file, check_cpu=False)      # a file for another CPU can be described
    info = Module(library, args.file).info
    print(f"{args.file}: adc module '{info.name}' (adc {info.adc_version}), gradients: "
          + GRADIENT_MODES.get(info.gradients, info.gradients))
    target = library.target
    print(f"  target: {target['triple']}, cpu {target['cpu']}, features: {' '.join(target['features']) or 'none'}")
    print(f"  bounds checks: {'on (compiled with --check-bounds)' if info.check_bounds else 'off'}")
    vjps = {v.of: v for v in info.vjps}
    custom = parse_module(info.ir).custom_gradients() if info.ir else {}
    parts = {name for pair in custom.values() for name in pair}
    for sig in (s for s in info.kernels if s.name not in parts):
        print(f"  {sig}")
        if sig.name in custom:
            print(f"      custom gradient: forward {custom[sig.name][0]}, backward {custom[sig.name][1]}")
        if sig.name in vjps:
            print(f"      {_gradient_line(sig, vjps[sig.name])}")
        for entry in (e for e in info.sparse if e.of == sig.name):
            what = "Hessian" if entry.hessian else "Jacobian"
            print(f"      sparse {what} w.r.t. {sig.param_names[entry.wrt]}: {entry.kernel.symbol}, "
                  f"{entry.shape[0]} x {entry.shape[1]}, {entry.nnz} nonzeros (CSC), {entry.colors} colors")
    return 0


GRADIENT_MODES = {"embedded": "embedded (VJP kernels exported next to the kernels)",
                  "none": "none (compiled with --no-gradients)",
                  "derived": "derived from the IR on demand"}


def _gradient_line(sig, vjp) -> str:
    if vjp.missing:
        return f"no gradient: {vjp.missing}"
    if vjp.kernel is None:
        return "gradient: none (no float parameter reaches a result)"
    wrt = ", ".join(sig.param_names[i] for i in vjp.wrt)
    return f"gradient w.r.t. {wrt}: {vjp.kernel}"


def _cmd_cache(args, driver) -> int:
    cache = driver.open_cache()
    if cache is None:
        print("the compile cache is off (ADC_CACHE=0)")
        return 0
    if args.action == "clear":
        cache.clear()
        print(f"cleared {cache.root}")
        return 0
    info = cache.info()
    print(f"location: {info.location}")
    print(f"entries:  {sum(info.entries.values())}"
          + "".join(f"\n  {namespace}: {count}" for namespace, count in sorted(info.entries.items())))
    print(f"size:     {info.size / 2**20:.1f} MiB of {info.max_size / 2**20:.0f} MiB "
          f"(least recently used entries are evicted past it; ADC_CACHE_MAX_MB)")
    return 0


COMMANDS = {"compile": _cmd_compile, "check": _cmd_check, "ir": _cmd_ir, "info": _cmd_info, "cache": _cmd_cache}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from adc import driver
    from adc.codegen.toolchain.cache import CacheConfigError
    from adc.runtime.module import LoadError

    try:
        return COMMANDS[args.command](args, driver)
    except UsageError as err:
        print(f"adc {args.command}: error: {err}", file=sys.stderr)
        return 2
    except CompileError as err:
        print(err.render(), file=sys.stderr)
    except (ToolchainError, LoadError, CacheConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
    except BrokenPipeError:      # `adc info k.so | head`: the reader left, nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # no error at interpreter exit
    except OSError as err:
        print(f"error: {err.filename or args.file}: {err.strerror or err}", file=sys.stderr)
    return 1
