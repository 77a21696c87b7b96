"""Module: the kernels of one compiled module, from the in-process JIT or a shared object.

There is one loader for every `NativeLibrary` — the driver's JIT modules and
shared objects alike: it reads the library's metadata, checks the ABI version,
applies the thread setting, and wraps each kernel — and the VJP kernels a shared
object embeds, which derivatives.py hands to the tape (`m.k.derivative()`). A
kernel asks its library for its entry point on its first call, so a JIT module
compiles only the kernels a program calls.

    m = adc.load("kernels.so")
    m.kernels            # ('dense_relu', 'mlp_loss', ...)
    m.sigmoid_shift(x, 0.5)
    m["sigmoid_shift"]   # the same kernel; item access reaches every kernel, even one named `info`

Modules and their kernels pickle by value, so a Dask worker or another machine runs
them without the user's files: a module opened from source travels as its text, one
loaded from a shared object as the file's bytes, each named by a SHA-256 digest
(`Shipment`). The receiving process opens each digest once — source through the
compile cache (so a machine compiles it once), a shared object written once per machine
to a file named by its digest and loaded — and a kernel arrives as (its module, its name).

    pickle.loads(pickle.dumps(m.sigmoid_shift))     # the same kernel, in any process
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import inspect
import operator
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from adc import cpus, locks
import numpy as np

from adc.abi import (METADATA_SYMBOL, KernelSignature, MetadataError, ModuleInfo, SparseEntry, decode_metadata,
                     pattern_symbols, read_target, unseal)
from adc.runtime import derivatives, threads
from adc.runtime.kernel import Kernel


_ABSENT = object()
_SHA256_SIZE = hashlib.sha256().digest_size     # a seal ends with the SHA-256 of what it seals
_shipped: dict[str, "Module"] = {}     # digest -> the module this process opened from a pickle
_shipped_lock = locks.lock()


class LoadError(ValueError):
    """A file is not a loadable adc module: foreign, truncated, damaged or of another ABI."""


class NativeLibrary(Protocol):
    def metadata(self) -> str:
        """The module's metadata (adc/abi.py)."""

    def defines(self, symbol: str) -> bool:
        """Whether `address(symbol)` will find it (cheap: compiles nothing)."""

    def address(self, symbol: str) -> int:
        """The address of an exported function, 0 when missing (a JIT module may compile it now)."""

    def settled(self, symbol: str) -> bool:
        """Whether `address(symbol)` stays what it is, so a caller may keep it (a JIT module's
        first-tier code is replaced by its full code, which a later `address` gives)."""


class SharedLibrary:
    """A shared object opened with the system's dynamic loader, once its seal and its target are
    checked (`check_cpu=False` skips the CPU check, for tools that only read the metadata)."""

    def __init__(self, path: str | os.PathLike, check_cpu: bool = True):
        self.path = Path(path)
        if not self.path.is_file():
            raise LoadError(f"{self.path}: no such file")
        try:
            self.target = read_target(self.path)
        except MetadataError as err:
            raise LoadError(f"{self.path}: {err}") from None
        if check_cpu:
            _check_cpu(self.path, self.target)
        try:
            self._lib = ctypes.CDLL(str(self.path.resolve()))
        except OSError as err:
            raise LoadError(f"{self.path}: not a loadable shared object ({err})") from None

    def address(self, symbol: str) -> int:
        try:
            return ctypes.cast(getattr(self._lib, symbol), ctypes.c_void_p).value or 0
        except AttributeError:
            return 0

    def defines(self, symbol: str) -> bool:
        return bool(self.address(symbol))

    def settled(self, symbol: str) -> bool:
        return True

    def metadata(self) -> str:
        address = self.address(METADATA_SYMBOL)
        if not address:
            raise LoadError(f"{self.path}: not an adc module (it does not export {METADATA_SYMBOL})")
        text = ctypes.CFUNCTYPE(ctypes.c_char_p)(address)()
        return text.decode("utf-8", errors="replace") if text else ""


class Module:
    """Compiled kernels as attributes (`m.dense_relu`) and items (`m["dense_relu"]`), listed in
    `m.kernels`. A kernel named like an attribute of the module (`info`, `ir`, `kernels`, `origin`,
    a method) is reached as `m["info"]` only; adc.compile and adc.load warn about it."""

    def __init__(self, library: NativeLibrary, origin: str, shipment: Shipment | None = None):
        self._library = library
        self.origin = origin
        self.shipment = shipment        # what pickle sends; None: a module that cannot leave this process
        info = _read_metadata(library, origin)
        self.info: ModuleInfo = info
        gradients = derivatives.GradientSource(origin, info, Module)
        self._kernels = {sig.name: _kernel(library, sig, origin, gradients, functools.partial(_by_name, self, sig.name))
                         for sig in info.kernels}
        gradients.embed({v.kernel.name: _kernel(library, v.kernel, origin, gradients) for v in info.vjps if v.kernel})
        gradients.sparse = {(e.of, e.wrt, e.hessian): _compiled_sparse(library, e, origin, gradients) for e in info.sparse}
        try:
            threads.attach(library)
        except ValueError as err:
            raise LoadError(str(err)) from None
        # each kernel an instance attribute too, unless an attribute has its name: `m.f` is then an
        # ordinary lookup, not __getattr__'s (~0.5 us, what a small kernel's whole call costs)
        self.__dict__.update({name: kernel for name, kernel in self._kernels.items()
                              if name not in self.__dict__ and not hasattr(type(self), name)})

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(self._kernels)

    @property
    def ir(self) -> str:
        """The module's IR text, as compiled (the .so carries it)."""
        return self.info.ir

    def __getattr__(self, name: str) -> Kernel:
        kernels = self.__dict__.get("_kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(self._no_kernel(name))

    def __getitem__(self, name: str) -> Kernel:
        """The kernel `name`, whatever its name: `m["info"]` is a kernel where `m.info` is not."""
        if not isinstance(name, str):
            raise TypeError(f"module '{self.origin}': kernels are looked up by name (a str), "
                            f"got {type(name).__name__}")
        if name not in self._kernels:
            raise KeyError(self._no_kernel(name))
        return self._kernels[name]

    def __contains__(self, name) -> bool:
        return name in self._kernels

    def _no_kernel(self, name: str) -> str:
        kernels = self.__dict__.get("_kernels", {})
        return (f"module '{self.__dict__.get('origin', '?')}' has no kernel '{name}'"
                f" (kernels: {', '.join(kernels) or 'none'})")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._kernels))

    def __reduce__(self):
        if self.shipment is None:
            raise TypeError(f"module '{self.origin}' cannot be pickled: only modules opened by adc.compile, "
                            f"adc.compile_file or adc.load travel by value")
        return open_shipment, (self.shipment.kind, self.origin, self.shipment.digest, self.shipment.payload)

    def __repr__(self) -> str:
        body = "".join(f"\n  {k.signature}" for k in self._kernels.values())
        return f"<adc module '{self.origin}':{body}>"


def _by_name(module: Module, name: str) -> tuple:
    """How a module's kernel pickles: its module (by value), then item access."""
    return operator.getitem, (module, name)


def _kernel(library: NativeLibrary, sig: KernelSignature, origin: str, gradients: derivatives.GradientSource,
            recipe=None) -> Kernel:
    if not library.defines(sig.symbol):
        raise LoadError(f"{origin}: kernel '{sig.name}' is listed but its symbol {sig.symbol} is missing")
    return Kernel(sig, library, gradients, recipe)


def _compiled_sparse(library: NativeLibrary, entry: SparseEntry, origin: str,
                     gradients: derivatives.GradientSource) -> derivatives.CompiledSparse:
    """A sparse derivative of the library: its kernel and its pattern, read from its arrays."""
    sizes = (entry.shape[1] + 1, entry.nnz, 1)
    colptr, rowind, nnz = (_int64s(library, symbol, n, origin)
                           for symbol, n in zip(pattern_symbols(entry.kernel.symbol), sizes))
    if nnz[0] != entry.nnz or colptr[-1] != entry.nnz:
        raise LoadError(f"{origin}: the pattern of {entry.kernel.name} disagrees with its metadata")
    return derivatives.CompiledSparse(entry, _kernel(library, entry.kernel, origin, gradients), colptr, rowind)


def _int64s(library: NativeLibrary, symbol: str, count: int, origin: str) -> np.ndarray:
    """A copy of the `count` int64 values the library exports as `symbol`."""
    address = library.address(symbol)
    if not address:
        raise LoadError(f"{origin}: the array {symbol} its metadata lists is missing")
    return np.ctypeslib.as_array((ctypes.c_int64 * count).from_address(address)).copy()


def _read_metadata(library: NativeLibrary, origin: str) -> ModuleInfo:
    try:
        return decode_metadata(library.metadata())
    except MetadataError as err:
        raise LoadError(f"{origin}: {err}") from None


def _check_cpu(path: Path, target: dict) -> None:
    """LoadError naming what this CPU lacks of the features `path` was built for. Where the host's
    features cannot be read (not x86-64 Linux) the loader cannot tell, and leaves it to the system."""
    try:
        missing = cpus.missing_features(target["features"])
    except OSError:
        return
    if missing:
        raise LoadError(f"{path}: compiled for CPU {target.get('cpu', '?')!r}, whose features this CPU lacks: "
                        f"{', '.join(missing)}. Recompile it here (adc compile --cpu native), or for a CPU "
                        f"both have (e.g. --cpu x86-64-v2)")


def load(path: str | os.PathLike) -> Module:
    """Open a shared object written by `adc compile`; no recompilation. LoadError when it is not a
    whole adc module, or was built for CPU features this machine lacks."""
    return warn_on_open(_shared_object_module(Path(path), str(path)), "adc.load")


def from_source(text: str, name: str, check_bounds: bool = False) -> Module:
    """adc source text compiled in process (through the on-disk cache); `name` labels diagnostics
    and locates the external libraries the program names; `check_bounds`: a bounds-checked build."""
    from adc import driver      # the compiler (llvmlite) is optional for loading .so files

    digest = hashlib.sha256(f"{name}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()
    return Module(driver.jit_source(text, name, check_bounds), name, Shipment("source", digest, text=text))


@dataclass(frozen=True)
class Shipment:
    """What a pickled module carries: its source `text`, or the bytes of the shared object at
    `path`, read on the first pickle and kept (a file changed since it was loaded is refused).
    `digest`, the SHA-256 of those bytes (a shared object's is its seal's), names the module in
    any process."""

    kind: str       # "source" or "shared_object"
    digest: str
    text: str | None = None
    path: Path | None = None

    @functools.cached_property
    def payload(self) -> str | bytes:
        if self.kind == "source":
            return self.text
        data = self.path.read_bytes()
        if _sealed_digest(data) != self.digest:
            raise ValueError(f"{self.path}: the shared object changed since it was loaded; load it again "
                             f"before sending it to another process")
        return data


def open_shipment(kind: str, origin: str, digest: str, payload: str | bytes) -> Module:
    """The module a pickle carries, opened once per process: source compiled through the cache,
    a shared object written to a file (`_stored`) and loaded."""
    if kind == "shared_object" and _sealed_digest(payload) != digest:
        raise LoadError(f"{origin}: the shared object received is damaged (its digest differs)")
    with _shipped_lock:
        if digest not in _shipped:
            _shipped[digest] = (from_source(payload, origin) if kind == "source" else
                                _shared_object_module(_stored(digest, payload), origin))
        return _shipped[digest]


def _shared_object_module(path: Path, origin: str) -> Module:
    library = SharedLibrary(path)
    with open(path, "rb") as f:
        f.seek(-_SHA256_SIZE, os.SEEK_END)
        digest = f.read().hex()
    return Module(library, origin, Shipment("shared_object", digest, path=path))


def _sealed_digest(data: bytes) -> str:
    """The seal of a shared object's bytes (abi.seal), once it is checked to match them."""
    try:
        unseal(data)
    except MetadataError:
        return ""
    return data[-_SHA256_SIZE:].hex()


def _stored(digest: str, data: bytes) -> Path:
    """A file holding a received shared object, named by its digest in this user's folder of the
    temporary directory, so the processes of a machine write it once (atomically) and share it."""
    folder = Path(tempfile.gettempdir()) / f"adc-shipped-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"{digest}.so"
    if path.is_file() and _sealed_digest(path.read_bytes()) == digest:
        return path
    fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{digest[:12]}.", suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(temp, path)
    return path


def warn_on_open(module: Module, opener: str) -> Module:
    """`module`, after the warnings opening it deserves, at the line that called `opener`
    (adc.load, adc.compile...): a module of no kernels (an empty file is a valid program, but
    rarely the one meant), and each kernel that attribute access gives to the module itself
    (`info`, `ir`, `kernels`, `origin`, a method): only `m[name]` reaches it. The language does
    not reserve these names (C calls such a kernel like any other), and a module written before
    a name was taken still loads."""
    if not module.kernels:
        warnings.warn(f"{opener}: '{module.origin}' defines no kernels", stacklevel=3)
    for name in module.kernels:
        if inspect.getattr_static(module, name, _ABSENT) in (_ABSENT, module[name]):
            continue
        warnings.warn(f"{opener}: kernel '{name}' of '{module.origin}' has the name of an attribute of "
                      f"adc.Module, so m.{name} is that attribute: call the kernel as m[{name!r}]",
                      stacklevel=3)
    return module
