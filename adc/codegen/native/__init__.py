"""The native runtime library: code every compiled module calls and no kernel specialises.

The gemm micro-kernels and the parallel-for with its thread pool are compiled once per target
(runtime_library.py) and linked into every `.so` or loaded once per JIT process; lowering only
declares and calls them (`gemm.declare_gemm`, `parallel.call_loop`), so their definitions and
the ABI of those calls live together here, apart from the per-kernel lowering.
"""
