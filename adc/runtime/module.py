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
"""
from __future__ import annotations

import ctypes
import inspect
import os
import warnings
from pathlib import Path
from typing import Protocol

from adc import cpus
from adc.abi import METADATA_SYMBOL, KernelSignature, MetadataError, ModuleInfo, decode_metadata, read_target
from adc.runtime import derivatives, threads
from adc.runtime.kernel import Kernel


_ABSENT = object()


class LoadError(ValueError):
    """A file is not a loadable adc module: foreign, truncated, damaged or of another ABI."""


class NativeLibrary(Protocol):
    def metadata(self) -> str:
        """The module's metadata (adc/abi.py)."""

    def defines(self, symbol: str) -> bool:
        """Whether `address(symbol)` will find it (cheap: compiles nothing)."""

    def address(self, symbol: str) -> int:
        """The address of an exported function, 0 when missing (a JIT module may compile it now)."""


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

    def __init__(self, library: NativeLibrary, origin: str):
        self._library = library
        self.origin = origin
        info = _read_metadata(library, origin)
        self.info: ModuleInfo = info
        self._kernels = {sig.name: _kernel(library, sig, origin) for sig in info.kernels}
        vjps = {v.kernel.name: _kernel(library, v.kernel, origin) for v in info.vjps if v.kernel}
        derivatives.register(library, origin, info, vjps, Module)
        try:
            threads.attach(library)
        except ValueError as err:
            raise LoadError(str(err)) from None

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

    def __repr__(self) -> str:
        body = "".join(f"\n  {k.signature}" for k in self._kernels.values())
        return f"<adc module '{self.origin}':{body}>"


def _kernel(library: NativeLibrary, sig: KernelSignature, origin: str) -> Kernel:
    if not library.defines(sig.symbol):
        raise LoadError(f"{origin}: kernel '{sig.name}' is listed but its symbol {sig.symbol} is missing")
    return Kernel(sig, library)


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
    return warn_on_open(Module(SharedLibrary(path), str(path)), "adc.load")


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
        if inspect.getattr_static(module, name, _ABSENT) is _ABSENT:
            continue
        warnings.warn(f"{opener}: kernel '{name}' of '{module.origin}' has the name of an attribute of "
                      f"adc.Module, so m.{name} is that attribute: call the kernel as m[{name!r}]",
                      stacklevel=3)
    return module
