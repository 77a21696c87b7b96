"""What the tests of adc's C extensions under AddressSanitizer share: an extension built with
`gcc -fsanitize=address` into a temporary folder, and a child Python that preloads ASan's runtime
(the interpreter is not built with it), hands Python's allocations to malloc (PYTHONMALLOC=malloc:
ASan then sees the extension's PyMem blocks and the objects it makes), leaves out leak checks (the
interpreter does not free everything at exit) and imports the extension in place of the
installed build. LIBASAN is None where there is no gcc or no ASan runtime."""
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np

from tests.support.repository import ROOT

ASAN_FLAGS = ["-fsanitize=address", "-fno-omit-frame-pointer", "-g", "-O1"]


def _libasan() -> str | None:
    """The path of gcc's ASan runtime, or None when there is no gcc or no ASan runtime."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    path = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


LIBASAN = _libasan()


def build(source: Path, name: str, folder: Path) -> Path:
    """Extension module `name` built from `source` with ASan, as setup.py builds it otherwise."""
    out = folder / (name + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(["gcc", *ASAN_FLAGS, "-shared", "-fPIC", "-I", sysconfig.get_paths()["include"],
                    "-I", np.get_include(), str(source), "-o", str(out)], check=True, capture_output=True, text=True)
    return out


def run_with_asan(program: str, module: str, path: Path) -> subprocess.CompletedProcess:
    """Python `program` in a child under ASan, extension `module` loaded from `path` first."""
    preamble = (f"import importlib.util, sys\n"
                f"spec = importlib.util.spec_from_file_location({module!r}, {str(path)!r})\n"
                f"extension = importlib.util.module_from_spec(spec)\n"
                f"spec.loader.exec_module(extension)\n"
                f"sys.modules[{module!r}] = extension\n")
    env = {**os.environ, "LD_PRELOAD": LIBASAN, "ASAN_OPTIONS": "detect_leaks=0", "PYTHONMALLOC": "malloc",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-c", preamble + program], env=env, capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
