"""The compiler driver: compiled code for the runtime and the CLI, through the on-disk cache.

The driver sits under the runtime and knows nothing of it: it returns native
libraries (anything with `address(symbol) -> int`) and the runtime wraps them.
The JIT and `adc compile` differ only in the `Target` (position-independent code
for a `.so`) and in what happens to the object code: loaded into this process
(codegen/toolchain/jit.py) or linked with the runtime library's object code into a
shared object (codegen/toolchain/aot.py).

Object code is kept in the on-disk cache (codegen/toolchain/cache.py), keyed by what it
is compiled from, the target and the versions of everything that compiles it
(cache_keys.py, host.py), so a second process never runs LLVM. A JIT module's
manifest (its metadata and optimized IR, see jit_module.py) is IR, not machine code:
its key holds adc's fingerprint but neither the target nor LLVM's version (`ir_key`):

    jit_source(text, "k.adc")                  # key: the source text and file   -> a JitModule
    jit(ir_module)                             # key: the IR text                -> a JitModule
    derive(ir_text, "k.adc", "vjp", "f", None) # key: the IR text and the request -> a JitModule
    JitModule.address("adc_kernel_f")          # key: a digest of f and all it calls, the target -> object code
    runtime_object(target)                     # the shared runtime library, once per target
    cached_analysis("sparsity", ...)           # key: the IR text and the question -> what an analysis found

`derive` runs a composition of passes (compiler.DERIVATIONS: the VJP, the batched
VJP, the JVP, the gradient, the Jacobians, the Hessian, the Hessian-vector product of
a kernel) on the IR a compiled module carries; its key is the request, so a warm
derivation parses no IR. The pipeline itself (compiler.py: frontend, passes, lowering)
is imported on the first miss only, so a process whose code is all cached starts in
milliseconds. LLVM (llvmlite.binding, its library and the codegen modules built on it:
~35 ms) is imported only to compile or to load fresh object code: a kernel compiled
once is also kept as a shared object, linked by the C compiler on a thread while the
process goes on (linking.py), which later processes map with the dynamic loader (see
jit_module.py). So a process whose kernels are all cached loads no LLVM at all.

One module per concern, bottom up: sources.py (reading a source file), cache_keys.py
(adc's fingerprint, IR keys, get-or-build), host.py (this machine's target and
compiler, object-code keys), linking.py (shared objects made by the C compiler),
runtime_library.py (its object code and this process's copy), loading.py (object code
linked into this process), kernel_objects.py (where a kernel's object code is
compiled), jit_module.py (`JitModule`), manifests.py (`jit_source`, `jit`),
derivations.py (`derive`), shared_objects.py (`write_shared_object`). This package
exports what the runtime and the CLI call.
"""
from adc import compile_log
from adc.driver.cache_keys import cached_analysis, open_cache
from adc.driver.derivations import Derived, derive
from adc.driver.host import checked, host_target, jit_target, require_llvm
from adc.driver.jit_module import JitModule
from adc.driver.manifests import jit, jit_source
from adc.driver.shared_objects import write_shared_object
from adc.driver.sources import read_source

__all__ = ["Derived", "JitModule", "cached_analysis", "checked", "derive", "host_target", "jit", "jit_source", "jit_target",
           "open_cache", "read_source", "require_llvm", "write_shared_object"]

compile_log.enable_from_environment()
