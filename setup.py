"""The compiled parts of adc, built at install:

- adc/runtime/native_call.c, a kernel call's Python-side work (Kernel.run_bound). Without a C
  compiler the build skips it (optional=True) and calls take the Python route, the same work in
  kernel.py.
- adc/runtime/native_substitution.c, the loop recovering a sparse Hessian's entries from an
  acyclic coloring's products. Without it, sparse Hessians take the star coloring instead (more
  seeds, the same values).
- the runtime library (adc/codegen/native/: gemm, thread pool) for this machine, into
  adc/prebuilt/ (adc/driver/runtime_library.py), so the first kernel of a first-ever process does
  not wait seconds for it. It needs llvmlite, lark and platformdirs at build time (pyproject.toml's
  build requirements); if it fails, the install goes on and the first use compiles it instead.

Everything else about the package is in pyproject.toml."""
import os
import subprocess
import sys
from pathlib import Path

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE = Path(__file__).resolve().parent


class BuildWithRuntimeLibrary(build_ext):
    def run(self):
        super().run()
        folder = (SOURCE if self.inplace else Path(self.build_lib)) / "adc" / "prebuilt"
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE), os.environ.get("PYTHONPATH")])),
                       "ADC_BUILD_AHEAD": "0", "ADC_CACHE": "0"}
        environment.pop("ADC_CPU", None)
        build = f"from adc.driver.runtime_library import build_installed; build_installed(__import__('pathlib').Path({str(folder)!r}))"
        built = subprocess.run([sys.executable, "-c", build], env=environment)
        if built.returncode != 0:
            self.warn("the runtime library was not compiled at install; adc compiles it at first use")


setup(ext_modules=[Extension(f"adc.runtime.{name}", [f"adc/runtime/{name}.c"], include_dirs=[numpy.get_include()],
                             optional=True) for name in ("native_call", "native_substitution")],
      cmdclass={"build_ext": BuildWithRuntimeLibrary})
