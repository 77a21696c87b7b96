"""The toolchain and loaders: what turns LLVM IR into code this process or a `.so` runs.

The `Target` (triple, CPU, features: the cache key), the on-disk cache and the digest of adc's
sources its keys hold, the loaders of object code (ORC JIT) and of shared objects (the dynamic
loader), the C compiler's link step, external libraries, and the C header of a `.so`. None of
it depends on what a kernel computes; lowering reads only the `Target` from here.
"""
