"""The optional C part of adc: adc/runtime/native_call.c, a kernel call's Python-side work
(Kernel.run_bound). Without a C compiler the build skips it (optional=True) and calls take the
Python route, the same work in kernel.py. Everything else about the package is in pyproject.toml."""
import numpy
from setuptools import Extension, setup

setup(ext_modules=[Extension("adc.runtime.native_call", ["adc/runtime/native_call.c"],
                             include_dirs=[numpy.get_include()], optional=True)])
