"""The native ABI's metadata: what a compiled module says about itself.

Every compiled module — in-process JIT or shared object — exports
`adc_module_metadata()`, a JSON document written by `encode_metadata` and read
back by `decode_metadata`, so the runtime treats both kinds the same:

    {"abi": 1, "adc_version": "0.1.0", "module": "kernels.adc",
     "kernels": [{"name": "sigmoid_shift", "symbol": "adc_kernel_sigmoid_shift",
                  "params": [{"name": "x", "type": "f32[N]"}, {"name": "delta", "type": "f32"}],
                  "results": ["f32[N]"], "dims": ["N"], "constraints": []}],
     "gradients": "embedded",
     "vjps": [{"of": "sigmoid_shift", "wrt": [0, 1], "passthrough": [null, null],
               "kernel": {"name": "sigmoid_shift_vjp", "symbol": "adc_kernel_sigmoid_shift_vjp", ...}}],
     "sparse": [{"of": "f", "wrt": 0, "hessian": false, "shape": [8, 8], "nnz": 22, "colors": 3,
                 "forward": true, "kernel": {"name": "f_sparse_jacobian_x", "symbol": ..., ...}}],
     "ir": "func @sigmoid_shift(...) ..."}

`gradients` says where the kernels' VJPs come from: `derived` (the JIT: the
runtime runs the adjoint pass on the IR when asked), `embedded` (`adc compile`:
`vjps` lists, per kernel with float results, its VJP kernel w.r.t. all its
float params — exported next to it and described like any kernel — or, under
`missing`, why it has none), `none` (`adc compile --no-gradients`: the module
cannot be differentiated). Metadata without the field reads as `derived`.

`sparse` lists the sparse Jacobians and Hessians compiled at fixed sizes (`adc compile
--sparse-jacobian KERNEL:ARG`, `--sparse-hessian`): each a kernel of `of`'s params filling the
nonzeros in CSC order, its pattern the exported arrays `<symbol>_colptr` (columns + 1 int64),
`<symbol>_rowind` (nnz int64) and the int64 `<symbol>_nnz`.

A shared object also ends with a target record and a seal, which dynamic loaders
ignore and `adc.load` checks before it lets the system loader map the file:

    ELF image | {"triple": ..., "cpu": "x86-64-v3", "features": ["avx", ...]} | u32 length | ADCTARG1
              | ADCSEAL1 | SHA-256 of everything before

A truncated or damaged file is rejected, never run, and one built for CPU
features this machine lacks is refused before any of its code is mapped.

The C side of the ABI is documented in runtime/adc.h.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass

from adc.ir.core import Func, Module
from adc.ir.shapes import constraints
from adc.ir.ops import with_trait
from adc.ir.types import Dim, DType, TensorType, parse_dim
from adc.version import __version__

ABI_VERSION = 1
ADC_VERSION = __version__

# Symbols a compiled module exports (runtime/adc.h is their C declaration).
KERNEL_PREFIX = "adc_kernel_"
METADATA_SYMBOL = "adc_module_metadata"
SET_NUM_THREADS_SYMBOL = "adc_set_num_threads"
WATCH_INTERRUPTS_SYMBOL = "adc_watch_interrupts"    # void (const volatile i32 *counter)

# Symbols of the shared native runtime library (adc/codegen/native/runtime_library.py): compiled once
# per target, called by every JIT module and linked (hidden) into every shared object.
# What a kernel returns (runtime/adc.h): a loop body, a branch or an inlined kernel checks its own
# shape constraints when it runs, so a call can fail on shapes after the checks before it
STATUS_OK, STATUS_NO_MEMORY, STATUS_SHAPES = 0, 1, 2
# A bounds-checked build's kernel (codegen/lowering/bounds.py) returns STATUS_BOUNDS when an access was out
# of its buffer or a block's redzone was damaged; `adc_bounds_<name>()` gives its error record.
STATUS_BOUNDS = 3
BOUNDS_PREFIX = "adc_bounds_"
BOUNDS_KIND_BITS = 3    # a buffer id's low bits: its kind (codegen/bounds.KINDS); the rest, its row in the table
# ... and a loop that saw the interrupt counter move since the kernel started (adc/codegen/lowering/interrupts.py)
STATUS_INTERRUPTED = 4

RUNTIME_PREFIX = "adc_rt_"
RUNTIME_PARALLEL_FOR = "adc_rt_parallel_for"        # void (ptr task, ptr ctx, i64 start, i64 end, i64 grain)
RUNTIME_SET_NUM_THREADS = "adc_rt_set_num_threads"  # void (i32 n); n <= 0: one per usable processor
RUNTIME_GET_NUM_THREADS = "adc_rt_get_num_threads"  # i32 ()
RUNTIME_INTERRUPTS = "adc_rt_interrupts"            # a global: ptr to the i32 counter loops watch
RUNTIME_WATCH_INTERRUPTS = "adc_rt_watch_interrupts"  # void (ptr counter); null: the library's own


RUNTIME_GEMM_DTYPES = (DType.f32, DType.f64)


def runtime_gemm_symbol(dtype: str) -> str:
    """`void adc_rt_gemm_<dtype>(i64 M, i64 N, i64 K, T* A, i64 rsa, i64 csa, T* B, i64 rsb, i64 csb, T* C,
    i64 ldc)`: C = A @ B with A[i, p] at A[i*rsa + p*csa], B[p, j] at B[p*rsb + j*csb], C[i, j] at C[i*ldc + j]."""
    return f"{RUNTIME_PREFIX}gemm_{dtype}"


# The runtime library's blocked factorizations and solves (adc/codegen/native/: triangular.py,
# cholesky.py, lu.py, householder.py, symmetric.py, singular.py), one per dtype of
# RUNTIME_GEMM_DTYPES, on row-major matrices, named as LAPACK's routines whose work they do
RUNTIME_FACTORIZATIONS = ("trsm", "potrf", "getrf", "geqrf", "syevr", "gesvdx")


def runtime_factorization_symbol(routine: str, dtype: str) -> str:
    """`adc_rt_<routine>_<dtype>`, e.g. `i64 adc_rt_potrf_f64(i64 n, double* a, i64 lda, i64 nb)`
    (each routine's signature is in its module's docstring)."""
    return f"{RUNTIME_PREFIX}{routine}_{dtype}"


# The steps of a float sum's cascade of block sums (codegen/lowering/summation.py), per float dtype:
#   void adc_rt_cascade_push_<dtype>(T* levels, i64 width, i64 carries, T* block, T identity)
#   void adc_rt_cascade_totals_<dtype>(T* levels, i64 width, i64 count, T* sums)
RUNTIME_CASCADE_STEPS = ("push", "totals")


def runtime_cascade_symbol(step: str, dtype: str) -> str:
    """`adc_rt_cascade_<step>_<dtype>`: one of RUNTIME_CASCADE_STEPS for f32 or f64 elements."""
    return f"{RUNTIME_PREFIX}cascade_{step}_{dtype}"


def runtime_symbols() -> tuple[str, ...]:
    """The runtime library's functions kernel modules may call (what the JIT publishes: known
    without importing the code generator that defines them)."""
    return (*(runtime_gemm_symbol(str(dtype)) for dtype in RUNTIME_GEMM_DTYPES),
            *(runtime_factorization_symbol(routine, str(dtype)) for routine in RUNTIME_FACTORIZATIONS
              for dtype in RUNTIME_GEMM_DTYPES),
            *(runtime_cascade_symbol(step, str(dtype)) for step in RUNTIME_CASCADE_STEPS for dtype in RUNTIME_GEMM_DTYPES),
            RUNTIME_PARALLEL_FOR, RUNTIME_SET_NUM_THREADS, RUNTIME_GET_NUM_THREADS, RUNTIME_INTERRUPTS,
            RUNTIME_WATCH_INTERRUPTS)
SEAL_MAGIC = b"ADCSEAL1"
TARGET_MAGIC = b"ADCTARG1"  # ends the JSON target record before the seal (see seal_file)
SEAL_SIZE = len(SEAL_MAGIC) + hashlib.sha256().digest_size


class MetadataError(ValueError):
    """A module's metadata is missing, malformed, or of another ABI version."""


def parse_type(text: str) -> TensorType:
    """Read a printed tensor type such as `f32[B,N-1]` or `f64`."""
    name, _, rest = text.partition("[")
    try:
        dtype = DType(name.strip())
    except ValueError:
        raise MetadataError(f"unknown dtype in type {text!r}") from None
    if not rest:
        return TensorType(dtype)
    dims: tuple[Dim, ...] = tuple(parse_dim(d) for d in rest.rstrip("]").split(","))
    return TensorType(dtype, dims)


@dataclass(frozen=True)
class KernelSignature:
    """A kernel's calling contract: parameters, results, dimension symbols, constraints."""

    name: str
    symbol: str
    param_names: tuple[str, ...]
    param_types: tuple[TensorType, ...]
    result_types: tuple[TensorType, ...]
    dims: tuple[str, ...]
    constraints: tuple[Dim, ...]
    # (param position, axis size): an integer parameter a gather or scatter uses as its indices as it
    # is; a call checks each index lies in [-size, size), as NumPy does, before native code clamps it
    index_bounds: tuple[tuple[int, Dim], ...] = ()

    def __str__(self) -> str:
        params = ", ".join(f"{n}: {t}" for n, t in zip(self.param_names, self.param_types))
        results = [str(t) for t in self.result_types]
        result = results[0] if len(results) == 1 else f"({', '.join(results)})"
        return f"{self.name}({params}) -> {result}"

    def to_json(self) -> dict:
        return {"name": self.name, "symbol": self.symbol,
                "params": [{"name": n, "type": str(t)} for n, t in zip(self.param_names, self.param_types)],
                "results": [str(t) for t in self.result_types], "dims": list(self.dims),
                "constraints": [str(c) for c in self.constraints],
                "index_bounds": [[k, str(d)] for k, d in self.index_bounds]}

    @staticmethod
    def from_json(entry: dict) -> "KernelSignature":
        return KernelSignature(
            name=entry["name"], symbol=entry["symbol"],
            param_names=tuple(p["name"] for p in entry["params"]),
            param_types=tuple(parse_type(p["type"]) for p in entry["params"]),
            result_types=tuple(parse_type(t) for t in entry["results"]),
            dims=tuple(entry["dims"]), constraints=tuple(parse_dim(c) for c in entry["constraints"]),
            index_bounds=tuple((k, parse_dim(d)) for k, d in entry.get("index_bounds", ())))


GRADIENTS_DERIVED, GRADIENTS_EMBEDDED, GRADIENTS_NONE = "derived", "embedded", "none"


@dataclass(frozen=True)
class VjpEntry:
    """The embedded VJP of kernel `of`: `kernel` takes of's params then one cotangent per
    result and returns the cotangents of the params in `wrt`; `passthrough[i]`, when not
    None, says the i-th of those is that result's cotangent unchanged. No `kernel`: no
    param has a cotangent, or `missing` says why there is no VJP."""

    of: str
    kernel: KernelSignature | None
    wrt: tuple[int, ...] = ()
    passthrough: tuple[int | None, ...] = ()
    missing: str = ""

    def to_json(self) -> dict:
        return {"of": self.of, "kernel": self.kernel.to_json() if self.kernel else None,
                "wrt": list(self.wrt), "passthrough": list(self.passthrough), "missing": self.missing}

    @staticmethod
    def from_json(entry: dict) -> "VjpEntry":
        kernel = KernelSignature.from_json(entry["kernel"]) if entry["kernel"] else None
        return VjpEntry(entry["of"], kernel, tuple(entry["wrt"]), tuple(entry["passthrough"]),
                        entry["missing"])


@dataclass(frozen=True)
class SparseEntry:
    """A sparse Jacobian (`hessian`: Hessian) of kernel `of` w.r.t. its param `wrt`, compiled at
    fixed sizes: `kernel` takes of's params and returns the `nnz` nonzeros of the `shape` (result
    size × wrt size) matrix in CSC order, computed with `colors` seeds pushed `forward` (or pulled);
    the pattern is in the arrays `pattern_symbols(kernel.symbol)` name."""

    of: str
    wrt: int
    hessian: bool
    shape: tuple[int, int]
    nnz: int
    colors: int
    forward: bool
    kernel: KernelSignature

    def to_json(self) -> dict:
        return {"of": self.of, "wrt": self.wrt, "hessian": self.hessian, "shape": list(self.shape),
                "nnz": self.nnz, "colors": self.colors, "forward": self.forward, "kernel": self.kernel.to_json()}

    @staticmethod
    def from_json(entry: dict) -> "SparseEntry":
        rows, columns = entry["shape"]
        return SparseEntry(entry["of"], int(entry["wrt"]), bool(entry["hessian"]), (int(rows), int(columns)),
                           int(entry["nnz"]), int(entry["colors"]), bool(entry["forward"]),
                           KernelSignature.from_json(entry["kernel"]))


def sparse_symbol(kernel: str, param: str, hessian: bool) -> str:
    """The symbol of a sparse derivative's kernel: `adc_kernel_<kernel>_sparse_jacobian_<param>`."""
    return f"{KERNEL_PREFIX}{kernel}_sparse_{'hessian' if hessian else 'jacobian'}_{param}"


def pattern_symbols(symbol: str) -> tuple[str, str, str]:
    """The exported pattern of the sparse derivative kernel `symbol`: colptr, rowind, nnz."""
    return f"{symbol}_colptr", f"{symbol}_rowind", f"{symbol}_nnz"


@dataclass(frozen=True)
class ModuleInfo:
    name: str
    kernels: tuple[KernelSignature, ...]
    ir: str
    adc_version: str
    gradients: str = GRADIENTS_DERIVED
    vjps: tuple[VjpEntry, ...] = ()
    check_bounds: bool = False      # compiled with bounds checks (with_check_bounds)
    sparse: tuple[SparseEntry, ...] = ()


def with_check_bounds(metadata: str) -> str:
    """The metadata of a bounds-checked build of the module `metadata` describes: it says so, so a
    loaded checked shared object reports it (`adc info`) and its derivatives are checked too."""
    doc = json.loads(metadata)
    doc["check_bounds"] = True
    return json.dumps(doc, sort_keys=True)


def bounds_symbol(kernel_symbol: str) -> str:
    """The error record's accessor of a checked build's kernel (`adc_kernel_f` -> `adc_bounds_f`)."""
    return BOUNDS_PREFIX + kernel_symbol[len(KERNEL_PREFIX):]


def signature(func: Func) -> KernelSignature:
    """The calling contract of one IR function."""
    return KernelSignature(func.name, KERNEL_PREFIX + func.name,
                           tuple(p.name or f"arg{i}" for i, p in enumerate(func.params)),
                           func.param_types, func.result_types, func.dim_symbols, constraints(func),
                           index_bounds(func))


INDEXING_OPS = with_trait("indexing")     # (x, indices, ...) {axis}


def index_bounds(func: Func) -> tuple[tuple[int, Dim], ...]:
    """(param position, axis size) for each parameter an indexing op takes as its indices unchanged."""
    position = {p: k for k, p in enumerate(func.params)}
    found = {(position[op.operands[1]], op.operands[0].type.shape[op.attrs["axis"]]): None
             for op in func.ops if op.name in INDEXING_OPS and op.operands[1] in position}
    return tuple(found)


def signatures(module: Module) -> tuple[KernelSignature, ...]:
    """The kernels of `module`: every function but the regions of control-flow ops, which only
    their parent runs."""
    regions = module.regions()
    return tuple(signature(f) for f in module if f.name not in regions)


def encode_metadata(module: Module, ir_text: str, gradients: str = GRADIENTS_DERIVED,
                    vjps: tuple[VjpEntry, ...] = (), sparse: tuple[SparseEntry, ...] = ()) -> str:
    """The metadata of `module`'s kernels; `ir_text` may hold more functions (the VJPs)."""
    doc = {"abi": ABI_VERSION, "adc_version": ADC_VERSION, "module": module.name,
           "kernels": [s.to_json() for s in signatures(module)], "ir": ir_text,
           "gradients": gradients, "vjps": [v.to_json() for v in vjps]}
    if sparse:      # absent otherwise: the metadata of every other module is as it was
        doc["sparse"] = [e.to_json() for e in sparse]
    return json.dumps(doc, sort_keys=True)


def decode_metadata(text: str) -> ModuleInfo:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise MetadataError(f"the module metadata is not valid JSON ({err})") from None
    if not isinstance(doc, dict) or "abi" not in doc:
        raise MetadataError("the module metadata has no ABI version")
    if doc["abi"] != ABI_VERSION:
        raise MetadataError(f"the module was compiled for adc ABI version {doc['abi']}, "
                            f"this runtime reads version {ABI_VERSION}: recompile it with this adc")
    try:
        kernels = tuple(KernelSignature.from_json(k) for k in doc["kernels"])
        vjps = tuple(VjpEntry.from_json(v) for v in doc.get("vjps", ()))
        sparse = tuple(SparseEntry.from_json(e) for e in doc.get("sparse", ()))
        return ModuleInfo(doc["module"], kernels, doc["ir"], doc["adc_version"],
                          doc.get("gradients", GRADIENTS_DERIVED), vjps, bool(doc.get("check_bounds", False)),
                          sparse)
    except (KeyError, TypeError, ValueError) as err:
        raise MetadataError(f"the module metadata is malformed ({err!r})") from None


def seal(data: bytes) -> bytes:
    """`data` followed by its seal."""
    return data + SEAL_MAGIC + hashlib.sha256(data).digest()


def unseal(data: bytes) -> bytes:
    """What `seal` sealed; MetadataError unless `data` ends with a seal matching its contents."""
    body, trailer = data[:-SEAL_SIZE], data[-SEAL_SIZE:]
    if len(data) < SEAL_SIZE or not trailer.startswith(SEAL_MAGIC):
        raise MetadataError("not an adc module, or a truncated one (it does not end with the seal "
                            "`adc compile` writes)")
    if hashlib.sha256(body).digest() != trailer[len(SEAL_MAGIC):]:
        raise MetadataError("the file is damaged: its contents do not match its seal")
    return body


def seal_file(path: str | os.PathLike, target: dict) -> None:
    """Append the target trailer and the seal to a freshly linked shared object. `target`
    ({"triple", "cpu", "features"}) is read back by `read_target` without loading the file."""
    trailer = json.dumps(target, sort_keys=True).encode()
    with open(path, "rb") as f:
        image = f.read()
    with open(path, "wb") as f:
        f.write(seal(image + trailer + struct.pack("<I", len(trailer)) + TARGET_MAGIC))


def read_target(path: str | os.PathLike) -> dict:
    """The target a sealed shared object was built for; MetadataError when the seal or the
    trailer is missing or damaged."""
    with open(path, "rb") as f:
        body = unseal(f.read())
    if not body.endswith(TARGET_MAGIC) or len(body) < len(TARGET_MAGIC) + 4:
        raise MetadataError("the file has no target record: it was written by an older adc, recompile it")
    (length,) = struct.unpack_from("<I", body, len(body) - len(TARGET_MAGIC) - 4)
    start = len(body) - len(TARGET_MAGIC) - 4 - length
    try:
        target = json.loads(body[start:start + length])
        if not isinstance(target, dict) or not isinstance(target.get("features"), list):
            raise ValueError("not a target")
    except ValueError:
        raise MetadataError("the file's target record is malformed") from None
    return target
