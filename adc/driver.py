"""The compiler driver: compiled code for the runtime and the CLI, through the on-disk cache.

The driver sits under the runtime and knows nothing of it: it returns native
libraries (anything with `address(symbol) -> int`) and the runtime wraps them.
The JIT and `adc compile` differ only in the `Target` (position-independent code
for a `.so`) and in what happens to the object code: loaded into this process
(codegen/jit.py) or linked with the runtime library's object code into a shared
object (codegen/aot.py).

Object code is kept in the on-disk cache (codegen/cache.py), keyed by what it is
compiled from, the target and the versions of everything that compiles it
(`fingerprint`, `llvm_versions`), so a second process never runs LLVM. A JIT
module's manifest (its metadata and optimized IR, see JitModule) is IR, not
machine code: its key holds adc's fingerprint but neither the target nor LLVM's
version (`ir_key`):

    jit_source(text, "k.adc")                  # key: the source text and file   -> a JitModule
    jit(ir_module)                             # key: the IR text                -> a JitModule
    derive(ir_text, "k.adc", "vjp", "f", None) # key: the IR text and the request -> a JitModule
    JitModule.address("adc_kernel_f")          # key: a digest of f and all it calls, the target -> object code
    runtime_object(target)                     # the shared runtime library, once per target

`derive` runs a composition of passes (compiler.DERIVATIONS: the VJP, the batched
VJP, the JVP, the gradient, the Jacobians, the Hessian, the Hessian-vector product of
a kernel) on the IR a compiled module carries; its key is the request, so a warm
derivation parses no IR. The
pipeline itself (compiler.py: frontend, passes, lowering) is imported on the first
miss only, so a process whose code is all cached starts in milliseconds. LLVM
(llvmlite.binding, its library and the codegen modules built on it: ~35 ms) is
imported only to compile or to load fresh object code: a kernel compiled once is
also kept as a shared object, linked by the C compiler on a thread while the process
goes on, which later processes map with the dynamic loader (see JitModule). So a
process whose kernels are all cached loads no LLVM at all.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import threading
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NamedTuple

from adc import compile_log, locks
from adc.abi import (ADC_VERSION, BOUNDS_PREFIX, GRADIENTS_EMBEDDED, GRADIENTS_NONE, KERNEL_PREFIX,
                     RUNTIME_SET_NUM_THREADS, RUNTIME_WATCH_INTERRUPTS, SET_NUM_THREADS_SYMBOL,
                     WATCH_INTERRUPTS_SYMBOL, ModuleInfo, decode_metadata, runtime_symbols, seal_file,
                     with_check_bounds)
from adc.codegen.cache import Cache
from adc.codegen.source_digest import source_digest
from adc.errors import CompileError, Location
from adc.ir.core import Module
from adc.ir.printer import format_module

if TYPE_CHECKING:       # imported where object code is made or loaded (see the module docstring)
    from adc.codegen.dynamic import DynamicLibrary
    from adc.codegen.jit import JitLibrary
    from adc.codegen.target import Target

compile_log.enable_from_environment()


def read_source(path: str | os.PathLike) -> str:
    """A source file's text; a file that is not UTF-8 is a CompileError at its first bad byte."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        col = len(data[data.rfind(b"\n", 0, err.start) + 1:err.start].decode("utf-8")) + 1   # in characters
        raise CompileError(f"the file is not UTF-8 text: byte 0x{data[err.start]:02x} cannot be decoded",
                           Location(str(path), line, col, data.decode("utf-8", "replace"))) from None


def require_llvm() -> None:
    """ImportError when llvmlite, which makes object code, is not installed: for callers that can do
    without compiling (a shared object's embedded gradients) to ask before anything is derived.
    It is looked up, not imported: a process whose code is all cached never loads it."""
    import importlib.util

    if importlib.util.find_spec("llvmlite") is None:
        raise ImportError("No module named 'llvmlite'")


def _compiler():
    """The compile pipeline, imported on the first cache miss (see the module docstring)."""
    from adc import compiler

    return compiler


# ---------------------------------------------------------------- the cache

SOURCE_SUFFIXES = (".py", ".lark")     # the files of adc that decide what it compiles


@functools.lru_cache(maxsize=None)
def fingerprint() -> str:
    """What compiles the IR, as text: adc's version and the content of its sources, so a changed
    compiler never reuses another's entries, version bump or not, and a reinstall of the same adc
    (new modification times, same files) reuses them all (codegen/source_digest.py)."""
    package = os.path.dirname(os.path.abspath(__file__))
    return f"adc {ADC_VERSION} {source_digest(package, SOURCE_SUFFIXES, open_cache())[:16]}"


@functools.lru_cache(maxsize=None)
def llvm_versions() -> str:
    """What else compiles object code: llvmlite's and LLVM's versions."""
    import llvmlite
    import llvmlite.binding as llvm

    return f"llvmlite {llvmlite.__version__} llvm {'.'.join(map(str, llvm.llvm_version_info))}"


def ir_key(*parts: str) -> str:
    """The key of IR compiled from `parts` (a manifest): IR depends on adc only."""
    return _digest(fingerprint(), parts)


def cache_key(target: Target, *parts: str) -> str:
    """The key of object code compiled from `parts` for `target`."""
    return _digest(f"{fingerprint()}\0{_host().compiler}\0{target.key()}", parts)


def _digest(compiler: str, parts: tuple[str, ...]) -> str:
    digest = hashlib.sha256(compiler.encode())
    for part in parts:
        digest.update(b"\0" + part.encode("utf-8", "surrogatepass"))   # invalid text is reported by the parser
    return digest.hexdigest()


def open_cache() -> Cache | None:
    """The cache the environment asks for (read on every compile, so tests and tools may change it)."""
    return Cache.from_environment()


def _cached(key: str, subject: str, build: Callable[[], bytes], accept=lambda data: True,
            namespace: str = "modules") -> bytes:
    """The bytes cached under `key`, built and stored on a miss; an entry `accept` rejects counts
    as a miss."""
    cache = open_cache()
    data = cache.get(namespace, key) if cache else None
    if data is not None and accept(data):
        compile_log.event(subject, f"cache hit {key[:12]}")
        return data
    compile_log.event(subject, f"cache miss {key[:12]}" if cache else "cache off")
    data = build()
    if cache:
        cache.put(namespace, key, data)
    return data


def _cached_manifest(key: str, subject: str, build: Callable[[], dict]) -> dict:
    """A JIT module's manifest (see JitModule), decoded once. One whose external functions no
    longer resolve counts as a miss, so building it reports the located error."""
    manifest: dict = {}

    def accept(data: bytes) -> bool:
        manifest.update(json.loads(data))
        pairs = manifest.get("externs", ())
        return not pairs or _externs().bind(pairs)

    def encoded() -> bytes:
        manifest.clear()
        manifest.update(build())
        return json.dumps(manifest, sort_keys=True).encode()
    _cached(key, subject, encoded, accept)
    return manifest


def _externs():
    """codegen/externs.py, which loads LLVM: only for modules calling external functions."""
    from adc.codegen import externs

    return externs


def runtime_object(target: Target) -> bytes:
    """The runtime library's object code for `target`: from the cache, else compiled once and stored."""
    def build() -> bytes:
        from adc.codegen import emit, runtime_library    # llvmlite.ir and the code generator: on a miss only

        return emit.emit_object(runtime_library.runtime_module(target), target, "runtime library", unroll=True)
    return _cached(cache_key(target, "runtime"), "runtime library", build, namespace="runtime")


# ---------------------------------------------------------------- in-process loading

_runtime = None                 # this process's runtime library, loaded once (see _runtime_library)
_runtime_lock = locks.lock()
_published = False              # whether LLVM's linker knows the runtime library's functions
_loads = 0


def load_count() -> int:
    """How many kernels this process has loaded (a kernel is loaded once for every size)."""
    return _loads


def runtime_library():
    """The runtime library every JIT kernel of this process calls, loaded on first use: the shared
    object the cache keeps (its symbols global, so kernels loaded as shared objects bind to it),
    else — cache off, no C compiler to link one — its object code through the JIT linker (jit.py)."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            target = host_target()
            _runtime = _shared_runtime(target) or _jit_library(runtime_object(target), target)
        return _runtime


def _shared_runtime(target: Target) -> DynamicLibrary | None:
    from adc.codegen.dynamic import DynamicLibrary

    cache = open_cache()
    if cache is None:
        return None
    key = cache_key(target, "runtime", "shared object")
    path = cache.locate("runtime", key)
    if path is None:
        compile_log.event("runtime library", f"cache miss {key[:12]} (shared object)")
        image = _link([runtime_object(target)], runtime_symbols(), "runtime library", runtime_loaded=False)
        if image is None:
            return None
        cache.put("runtime", key, image)
        path = cache.locate("runtime", key)
    try:
        return DynamicLibrary(path, runtime=True) if path else None
    except OSError:
        return None


def _link(objects: list[bytes], exports, subject: str, runtime_loaded: bool = True) -> bytes | None:
    """A shared object linked from `objects` (see aot.link_shared_object), or None when this
    machine cannot link one (no C compiler): the JIT then keeps to object code."""
    import tempfile

    from adc.codegen import aot
    from adc.errors import ToolchainError

    with tempfile.TemporaryDirectory(prefix="adc-") as folder:
        out = Path(folder) / "library.so"
        try:
            with compile_log.stage(subject, "link"):
                aot.link_shared_object(objects, out, exports=exports, runtime_loaded=runtime_loaded)
            return out.read_bytes()
        except (ToolchainError, OSError) as err:
            compile_log.event(subject, f"not linked, object code only: {err}")
            return None


def _link_later(object_code: bytes, symbol: str, key: str, subject: str) -> None:
    """Link a kernel's object code into the shared object a later process loads without LLVM, on a
    thread whose C compiler runs as another process at the lowest CPU priority, in the time this
    process's own work leaves (it slowed the kernels running beside it by up to a third); the
    interpreter waits for it at exit."""
    def link() -> None:
        _lowest_priority()
        image = _link([object_code], [symbol, f"{BOUNDS_PREFIX}*"], subject)
        cache = open_cache()
        if image is not None and cache is not None:
            cache.put("shared", key, image)
    threading.Thread(target=link, name=f"adc-link-{symbol}").start()


def _lowest_priority() -> None:
    """Run this thread and the processes it starts only when the CPU is otherwise idle: on Linux a
    thread's scheduling policy is its own (set through its thread id), and a child inherits it.
    SCHED_IDLE, not nice 19: a nice-19 linker still took its time slices from the kernels running
    beside it (a pool thread waking behind it waited), and the first call at a new batch size
    right after a compile took 9-23 ms instead of 7 ms."""
    if sys.platform.startswith("linux"):
        try:
            os.sched_setscheduler(threading.get_native_id(), os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            pass


def _jit_library(object_code: bytes, target: Target) -> JitLibrary:
    """Object code through the JIT linker; llvmlite is imported here, only when this loader is needed."""
    from adc.codegen.jit import JitLibrary

    return JitLibrary(object_code, target)


def load_object(object_code: bytes, target: Target) -> JitLibrary:
    """Link object code into this process (jit.py), after the runtime library it calls."""
    global _loads, _published
    from adc.codegen import jit

    runtime = runtime_library()
    with _runtime_lock:
        if not _published:
            jit.publish({name: _require(runtime, name) for name in runtime_symbols()})
            _published = True
    _loads += 1
    return jit.JitLibrary(object_code, target)


def _require(library, symbol: str) -> int:
    address = library.address(symbol)
    if not address:
        raise RuntimeError(f"the adc runtime library does not define {symbol}")
    return address


class _Host(NamedTuple):
    target: Target          # this machine, for the JIT
    compiler: str           # llvm_versions(): what compiles for it


@functools.cache
def _host() -> _Host:
    """This machine's JIT target and what compiles for it, which every object-code key holds.
    LLVM answers both (loading it takes ~35 ms), once per machine: the answers are kept in the
    cache under what they depend on, read without LLVM (`_machine_identity`), so a process whose
    code is all cached never loads LLVM. The JIT's code is position-independent: the object code
    the JIT linker loads is the code the cache links into a shared object."""
    from adc.codegen.target import Target

    cache, identity = open_cache(), _machine_identity()
    key = ir_key("host", identity) if identity else None
    remembered = cache.get("host", key) if cache and key else None
    if remembered is not None:
        fields = json.loads(remembered)
        return _Host(Target(**fields["target"], pic=True), fields["compiler"])
    host = _Host(Target.host(pic=True), llvm_versions())
    if cache and key:
        target = {"triple": host.target.triple, "cpu": host.target.cpu, "features": host.target.features}
        cache.put("host", key, json.dumps({"target": target, "compiler": host.compiler}).encode())
    return host


def _machine_identity() -> str | None:
    """What LLVM's answers about this machine depend on, read without LLVM: the CPU as the kernel
    describes it (/proc/cpuinfo's first processor, but for its clock) and llvmlite's installation
    (its package file's path, size and modification time, as Python tells sources apart); None
    where either is unknown, and LLVM is asked."""
    import importlib.util

    try:
        cpu = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
        spec = importlib.util.find_spec("llvmlite")
        package = os.stat(spec.origin) if spec and spec.origin else None
    except OSError:
        return None
    if package is None:
        return None
    described = [line for line in cpu.splitlines() if not line.startswith(("processor", "cpu MHz"))]
    return "\n".join([os.uname().machine, spec.origin, f"{package.st_size} {package.st_mtime_ns}", *described])


def host_target() -> Target:
    """The JIT's target: this machine's (see _host), or the CPU `ADC_CPU` names as `adc compile
    --cpu` takes it (an x86-64 level such as x86-64-v3, or an LLVM CPU name), so that a tool which
    cannot decode this machine's widest instructions (valgrind 3.19 and AVX-512) runs the JIT's code."""
    cpu = os.environ.get("ADC_CPU", "").strip()
    return _host().target if cpu in ("", "native") else _target_for_cpu(cpu)


@functools.cache
def _target_for_cpu(cpu: str) -> Target:
    from adc.codegen.target import Target

    try:
        return Target.for_cpu(cpu, pic=True)
    except ValueError as error:
        raise ValueError(f"ADC_CPU={cpu}: {error}") from None


def jit_target(check_bounds: bool = False) -> Target:
    """The JIT's target: the host's, bounds-checked when asked, or for every JIT compile of the
    process under ADC_CHECK_BOUNDS=1."""
    wanted = check_bounds or os.environ.get("ADC_CHECK_BOUNDS", "0") not in ("", "0")
    return checked(host_target()) if wanted else host_target()


def checked(target: Target) -> Target:
    """`target`'s bounds-checked build (codegen/lowering/bounds.py), with ADC_BOUNDS_MISINDEX, the test hook
    of checked builds (bounds.MISINDEX_KINDS: stores into such buffers go one element further)."""
    import dataclasses

    return dataclasses.replace(target, check_bounds=True, misindex=os.environ.get("ADC_BOUNDS_MISINDEX", ""))


# what a shared object exports (lower.lower_metadata) -> the runtime library's function JIT modules share
_RUNTIME_SETTERS = {SET_NUM_THREADS_SYMBOL: RUNTIME_SET_NUM_THREADS, WATCH_INTERRUPTS_SYMBOL: RUNTIME_WATCH_INTERRUPTS}


class JitModule:
    """A module compiled into this process kernel by kernel, each on its first use.

    Its manifest — built by elaborating and optimizing the module, or read from the cache — holds
    the module's metadata, its optimized IR text once and, per kernel symbol, the digest of the
    kernel and all it calls (`compiler.KernelSources`); `address(symbol)` loads the kernel the
    first time it is asked for: its shared object from the cache, with no LLVM, else its object
    code (from the cache, or compiled from the IR text) through the JIT linker, linking the shared object
    for the next process meanwhile. So opening a module of twenty kernels compiles none, a
    process pays LLVM only for the kernels it compiles, and one whose kernels are all cached
    loads no LLVM. JIT modules share the process's runtime library, so `adc_set_num_threads` and
    `adc_watch_interrupts` are the runtime's. (Kernels calling external functions keep to the JIT linker, which binds them.)
    """

    def __init__(self, manifest: dict, target: Target):
        self.target = target            # what its kernels compile for (a bounds-checked build's, say)
        self._metadata = with_check_bounds(manifest["metadata"]) if target.check_bounds else manifest["metadata"]
        self._name = json.loads(self._metadata)["module"]
        self._ir: str = manifest["ir"]
        self._kernels: dict[str, str] = manifest["kernels"]
        self._calls_externs = bool(manifest.get("externs"))
        self._loaded: dict[str, JitLibrary | DynamicLibrary] = {}
        self._lock = locks.lock()
        self._ahead: dict[str, int] = {}     # symbol -> the child process compiling it (compile_ahead)

    def metadata(self) -> str:
        return self._metadata

    def defines(self, symbol: str) -> bool:
        return symbol in self._kernels or symbol in _RUNTIME_SETTERS

    def address(self, symbol: str) -> int:
        if symbol in _RUNTIME_SETTERS:
            return _require(runtime_library(), _RUNTIME_SETTERS[symbol])
        if symbol.startswith(BOUNDS_PREFIX):        # a checked kernel's error record: in its library
            kernel = self._loaded.get(KERNEL_PREFIX + symbol[len(BOUNDS_PREFIX):])
            return kernel.address(symbol) if kernel is not None else 0
        if symbol not in self._kernels:
            return 0
        with self._lock:
            if symbol not in self._loaded:
                self._loaded[symbol] = self._load(symbol)
            return self._loaded[symbol].address(symbol)

    def compile_ahead(self, symbol: str) -> None:
        """Start compiling kernel `symbol`, which the caller needs next (the tape: a split VJP's
        backward, while the forward compiles and runs), in a forked child that leaves its object
        code in the cache: llvmlite runs one LLVM call at a time in a process, so only another
        process overlaps two compiles. Only where it is safe and pays: a fork copies the calling
        thread alone, so this process must run no other Python thread (one may hold a lock the
        child needs); several cores; the cache on; the code not cached yet. `address` waits for
        the child, and compiles the kernel itself if the child left nothing."""
        if symbol not in self._kernels or symbol in self._loaded or symbol in self._ahead:
            return
        cache = open_cache()
        if cache is None or not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2 \
                or threading.active_count() != 1:
            return
        target = self.target
        key = _kernel_key(symbol, self._kernels[symbol], target)
        if not cache.path("modules", key).exists():
            self._ahead[symbol] = _compile_in_child(cache, key, symbol, self._ir, self._name, target)

    def _load(self, symbol: str):
        global _loads
        from adc.codegen.dynamic import DynamicLibrary

        ahead = self._ahead.pop(symbol, None)
        if ahead is not None:
            _wait_for(ahead)
        target, subject = self.target, f"{self._name}: {symbol}"
        key = _kernel_key(symbol, self._kernels[symbol], target)
        cache = open_cache()
        shared = cache is not None and not self._calls_externs and isinstance(runtime_library(), DynamicLibrary)
        path = cache.locate("shared", key) if shared else None
        if path is not None:
            try:
                library = DynamicLibrary(path)
                compile_log.event(subject, f"cache hit {key[:12]} (shared object)")
                _loads += 1
                return library
            except OSError:
                pass                # removed or replaced meanwhile: load the object code
        object_code = _cached(key, subject, lambda: kernel_object(symbol, self._ir, self._name, target))
        library = load_object(object_code, target)
        if shared:
            _link_later(object_code, symbol, key, subject)
        return library


_children: set[int] = set()    # compile_ahead's children not waited for yet


def _compile_in_child(cache: Cache, key: str, symbol: str, ir_text: str, module_name: str, target: Target) -> int:
    """The id of a forked child that compiles a kernel into `cache` under `key`, then exits
    without running anything of this process's (os._exit: no atexit handlers, no buffered output).
    A fork while native threads run draws warnings (Python 3.12's, at any; JAX's, at its own): the
    child runs only the compile, which takes none of those threads' locks (malloc's are held
    across a fork), so they are not shown."""
    import warnings

    for pid in list(_children):     # reap those whose kernels were never asked for
        _wait_for(pid, os.WNOHANG)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        pid = os.fork()
    if pid == 0:
        status = 1
        try:
            from adc import compile_worker

            cache.put("modules", key, compile_worker.kernel_object(symbol, ir_text, module_name, target))
            status = 0
        finally:
            os._exit(status)
    _children.add(pid)
    return pid


def _wait_for(pid: int, options: int = 0) -> None:
    """Wait for (or, with WNOHANG, reap if done) a compile_ahead child not reaped yet (a reaped
    one's id may be another process's by now)."""
    if pid not in _children:
        return
    try:
        done, _ = os.waitpid(pid, options)
    except ChildProcessError:       # reaped already (SIGCHLD ignored, say)
        done = pid
    if done:
        _children.discard(pid)


def _kernel_key(symbol: str, digest: str, target: Target) -> str:
    """Object code of a kernel (and the shared object linked from it) is cached by the digest of
    its IR and all it calls: kernels of the same code share it, whatever module they are in."""
    return cache_key(target, "kernel", symbol, digest)


def kernel_object(symbol: str, ir_text: str, module_name: str, target: Target) -> bytes:
    """Compile one kernel from its module's `KernelSources.ir` text: in this process or in its
    compile worker (compile_worker.py, imported on a miss only: it imports subprocess)."""
    from adc import compile_worker

    return compile_worker.object_code(symbol, ir_text, module_name, target)


def _manifest(module: Module) -> dict:
    externs = _externs()
    externs.resolve(module)
    sources = _compiler().kernel_sources(module)
    return {"metadata": sources.metadata, "externs": externs.symbols(module), "ir": sources.ir,
            "kernels": sources.kernels}


def jit_source(source: str, filename: str, check_bounds: bool = False) -> JitModule:
    """adc source text as a JIT module (cached by the text, the file's absolute path — external
    libraries are found relative to it). Every error in the program is reported here; machine code
    is made on each kernel's first call (bounds-checked: see `jit_target`)."""
    key = ir_key("source", os.path.abspath(filename), source)
    return JitModule(_cached_manifest(key, filename, lambda: _manifest(_compiler().elaborate(source, filename))),
                     jit_target(check_bounds))


def jit(module: Module, check_bounds: bool = False) -> JitModule:
    """An IR module as a JIT module (cached by its IR text)."""
    key = ir_key("ir", module.name, format_module(module))
    return JitModule(_cached_manifest(key, module.name, lambda: _manifest(module)), jit_target(check_bounds))


# ---------------------------------------------------------------- derived kernels

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
        made = _compiler().derive(ir_text, module_name, derivation, kernel, wanted)
        through = made.passthrough
        found = {"function": made.function.name, "wrt": list(made.wrt),
                 "passthrough": None if through is None else list(through),
                 "forward": made.forward and made.forward.name}
        if not made.wrt or (through is not None and None not in through):
            return found                            # nothing to compile
        return {**found, **_manifest(made.module)}

    manifest = _cached_manifest(key, f"{module_name}: {derivation} of {kernel}", build)
    library = JitModule(manifest, jit_target(check_bounds)) if "kernels" in manifest else None
    return Derived(library, manifest["function"], tuple(manifest["wrt"]), tuple(manifest["passthrough"] or ()),
                   manifest.get("forward"))


# ---------------------------------------------------------------- shared objects

def write_shared_object(module: Module, out_path: str | os.PathLike, gradients: bool = True,
                        target: Target | None = None) -> ModuleInfo:
    """Compile to a sealed shared object with the runtime library linked in, and return its metadata;
    with `gradients`, each kernel's VJP kernel is exported next to it (`adc_kernel_<name>_vjp`), so
    `adc.load` differentiates without the compiler. Kernels are compiled one LLVM module each, cached by
    their code and all it calls, the ones not cached in parallel processes (see `_compile_kernels`)."""
    from adc.codegen import aot     # the linker's driver: only `adc compile` needs it (5 ms at every start)
    from adc.codegen import emit
    from adc.codegen.target import Target

    externs = _externs()
    externs.resolve(module)
    target = target or Target.host(pic=True)
    compiler = _compiler()
    sources = compiler.kernel_sources(module, GRADIENTS_EMBEDDED if gradients else GRADIENTS_NONE)
    objects = _compile_kernels(sources, module.name, target)
    metadata = with_check_bounds(sources.metadata) if target.check_bounds else sources.metadata
    objects.append(_cached(cache_key(target, "metadata", metadata), f"{module.name}: metadata",
                           lambda: emit.emit_object(compiler.metadata_module(metadata), target)))
    objects.append(runtime_object(target.unchecked))
    with compile_log.stage(module.name, "link"):
        aot.link_shared_object(objects, out_path, externs.link_arguments(module))
    seal_file(out_path, {"triple": target.triple, "cpu": target.cpu, "features": list(target.required_features)})
    return decode_metadata(metadata)


def _compile_kernels(sources, module_name: str, target: Target) -> list[bytes]:
    """The object code of each kernel of `sources` (compiler.KernelSources): from the cache, else
    compiled — in one forked worker process per core when several are missing and this process
    runs one Python thread (a fork copies only the calling thread: with no other Python thread, no
    lock the child needs, llvmlite's included, can be held; native threads such as BLAS's or adc's
    pool hold none). The kernels go to the workers in chunks, about four per worker, so the
    module's IR text is sent a few times, not once per kernel; a worker finds the module this
    process printed from that text in its forked memory, and parses nothing."""
    cache = open_cache()
    kernels = sources.kernels
    keys = {symbol: _kernel_key(symbol, digest, target) for symbol, digest in kernels.items()}
    found = {symbol: cache.get("modules", key) if cache else None for symbol, key in keys.items()}
    missing = [symbol for symbol, data in found.items() if data is None]
    for symbol, key in keys.items():
        compile_log.event(f"{module_name}: {symbol}", f"cache {'miss' if symbol in missing else 'hit'} {key[:12]}"
                          if cache else "cache off")
    workers = min(len(missing), os.cpu_count() or 1)
    if workers > 1 and threading.active_count() == 1:
        import concurrent.futures       # only `adc compile` needs them: 14 ms at every start otherwise
        import multiprocessing

        from adc import compile_worker

        context = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            built = pool.map(compile_worker.kernel_object, missing, repeat(sources.ir), repeat(module_name), repeat(target),
                             chunksize=max(1, len(missing) // (4 * workers)))
            found.update(zip(missing, built))
    else:
        found.update((s, kernel_object(s, sources.ir, module_name, target)) for s in missing)
    if cache:
        for symbol in missing:
            cache.put("modules", keys[symbol], found[symbol])
    return [found[symbol] for symbol in kernels]
