"""The C header of a shared object (`adc compile --header k.h`): its kernels as C declarations.

Every kernel has the one C signature of the ABI (runtime/adc.h), so what a C caller
needs from the header is what the signature does not say: per kernel, a comment
giving its adc signature and the order and C element types of `dims`, `inputs` and
`outputs`. The header is self-contained (it declares the module's other exports too)
and may be included next to runtime/adc.h, whose declarations it repeats compatibly.

    /* sigmoid_shift(x: f32[N], delta: f32) -> f32[N]
     *   dims     int64_t[1]  {N}
     *   inputs   2 pointers  {x: float[N], delta: float (one value)}
     *   outputs  1 pointer   {float[N]}
     */
    int32_t adc_kernel_sigmoid_shift(const int64_t *dims, const void *const *inputs, void *const *outputs);

A sparse derivative (`--sparse-jacobian f:x`) is a kernel of the same signature, declared with
its pattern: int64 arrays in CSC order and the number of nonzeros, as CasADi's generated code
gives them.

    int32_t adc_kernel_f_sparse_jacobian_x(const int64_t *dims, const void *const *inputs, void *const *outputs);
    extern const int64_t adc_kernel_f_sparse_jacobian_x_colptr[9];
    extern const int64_t adc_kernel_f_sparse_jacobian_x_rowind[22];
    extern const int64_t adc_kernel_f_sparse_jacobian_x_nnz;
"""
from __future__ import annotations

import re

from adc.abi import (ABI_VERSION, METADATA_SYMBOL, SET_NUM_THREADS_SYMBOL, KernelSignature, ModuleInfo, SparseEntry,
                     pattern_symbols)
from adc.ir.types import DType, TensorType

C_TYPES = {DType.f32: "float", DType.f64: "double", DType.i32: "int32_t", DType.i64: "int64_t",
           DType.bool: "uint8_t"}


def c_header(info: ModuleInfo, library: str, header: str) -> str:
    """The header text declaring the kernels of `info`, the metadata of the shared object named
    `library`; `header` (the header's file name) gives its include guard."""
    guard = "ADC_" + re.sub(r"[^A-Za-z0-9]", "_", header).upper()
    vjp_of = {v.kernel.name: v for v in info.vjps if v.kernel}
    blocks = [_kernel_block(sig, _vjp_notes(vjp_of.get(sig.name), info)) for sig in _exported(info)]
    blocks += [_sparse_block(entry) for entry in info.sparse]
    return "\n".join([
        _comment(f"{header} — the kernels of {library}, compiled from {info.name}",
                 f"by `adc compile` (adc {info.adc_version}, C ABI version {ABI_VERSION}).", "",
                 "Every kernel k is int32_t adc_kernel_k(dims, inputs, outputs):",
                 "  dims     the sizes of its dimension symbols, in the order listed (NULL when none);",
                 "  inputs   one pointer per parameter to its C-contiguous, row-major data;",
                 "  outputs  one pointer per result to a caller-allocated C-contiguous buffer;",
                 "  returns  0, or 1 when a temporary could not be allocated.",
                 "Arrays must have exactly the listed shapes for the given dims: native code does not",
                 "check them. runtime/adc.h documents the ABI."),
        f"#ifndef {guard}", f"#define {guard}", "", "#include <stdint.h>", "",
        "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
        *blocks,
        _comment("The module's metadata as JSON: signatures, gradients, IR (see runtime/adc.h)."),
        f"const char *{METADATA_SYMBOL}(void);", "",
        _comment("Threads for large loop nests (n <= 0: the default, one per processor it may run on)."),
        f"void {SET_NUM_THREADS_SYMBOL}(int32_t n);", "",
        "#ifdef __cplusplus", "}", "#endif", "", f"#endif /* {guard} */", ""])


def _exported(info: ModuleInfo) -> list[KernelSignature]:
    return [*info.kernels, *(v.kernel for v in info.vjps if v.kernel)]


def _vjp_notes(vjp, info: ModuleInfo) -> list[str]:
    if vjp is None:
        return []
    of = next(k for k in info.kernels if k.name == vjp.of)
    return [f"  the VJP of {vjp.of}: the cotangents of {', '.join(of.param_names[i] for i in vjp.wrt)}"]


def _kernel_block(sig: KernelSignature, notes: list[str]) -> str:
    params = [f"{n}: {_c_array(t)}" for n, t in zip(sig.param_names, sig.param_types)]
    results = [_c_array(t) for t in sig.result_types]
    dims = f"{f'int64_t[{len(sig.dims)}]':<11} {{{', '.join(sig.dims)}}}" if sig.dims else "none (NULL)"
    lines = [str(sig), f"  dims     {dims}",
             f"  inputs   {_pointers(params):<11} {{{', '.join(params)}}}",
             f"  outputs  {_pointers(results):<11} {{{', '.join(results)}}}"]
    lines += [f"  requires {c} >= 0" for c in sig.constraints]
    lines += notes
    declaration = (f"int32_t {sig.symbol}(const int64_t *dims, const void *const *inputs, "
                   f"void *const *outputs);")
    return f"{_comment(*lines)}\n{declaration}\n"


def _sparse_block(entry: SparseEntry) -> str:
    """A sparse derivative's kernel, as any kernel's, then its pattern's arrays."""
    rows, columns = entry.shape
    what = "Hessian" if entry.hessian else "Jacobian"
    by = f"{entry.colors} seeds pushed forward" if entry.forward else f"{entry.colors} seeds pulled back"
    of = entry.kernel.param_names[entry.wrt]
    lines = [f"  the sparse {what} of {entry.of} w.r.t. {of}: {rows} x {columns}, {entry.nnz} nonzeros ({by});",
             "  outputs[0] receives the nonzeros in CSC order: column j's are at colptr[j] .. colptr[j+1] - 1,",
             "  their rows in rowind"]
    colptr, rowind, nnz = pattern_symbols(entry.kernel.symbol)
    return (f"{_kernel_block(entry.kernel, lines)}extern const int64_t {colptr}[{columns + 1}];\n"
            f"extern const int64_t {rowind}[{entry.nnz or ''}];\n"
            f"extern const int64_t {nnz};\n")


def _c_array(t: TensorType) -> str:
    """`float[B][N]`, or `float (one value)` for a scalar."""
    c_type = C_TYPES[t.dtype]
    return c_type + "".join(f"[{d}]" for d in t.shape) if t.shape else f"{c_type} (one value)"


def _pointers(items: list) -> str:
    return f"{len(items)} pointer{'s' if len(items) != 1 else ''}"


def _comment(*lines: str) -> str:
    """A C block comment; `*/` inside a line (a path may hold it) cannot end it early."""
    lines = [line.replace("*/", "* /") for line in lines]
    if len(lines) == 1:
        return f"/* {lines[0]} */"
    return "\n".join([f"/* {lines[0]}", *(f" * {line}".rstrip() for line in lines[1:]), " */"])
