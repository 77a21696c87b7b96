"""Modules and kernels pickle by value: a fresh process, in another folder and without the user's
files, rebuilds them — source through its compile cache, a shared object from the bytes sent
(with no llvmlite) — and gets the numbers this process gets; a derivative is derived again."""
from __future__ import annotations

import pickle
import shutil
import subprocess
import sys

import numpy as np
import pytest

import adc
from adc.runtime import module as runtime_module
from tests.support.no_llvmlite import BLOCK_LLVMLITE

SOURCE = "def energy(x: f64[N], w: f64) -> f64:\n    return sum(tanh(w * x) ** 2)\n"
RECEIVE = """
import pickle, sys
import numpy as np
kernels = pickle.loads(sys.stdin.buffer.read())
x = np.linspace(-1.0, 2.0, 7)
for k in kernels:
    print(repr(np.asarray(k(x, 0.7)).tolist()))
"""


def received(payload: bytes, tmp_path, prelude: str = "") -> list[str]:
    """What a fresh Python in an empty folder prints for RECEIVE on `payload`."""
    run = subprocess.run([sys.executable, "-c", prelude + RECEIVE], input=payload, capture_output=True,
                         cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr.decode()
    return run.stdout.decode().splitlines()


def here(*kernels) -> list[str]:
    x = np.linspace(-1.0, 2.0, 7)
    return [repr(np.asarray(k(x, 0.7)).tolist()) for k in kernels]


def test_a_source_module_and_its_gradient_travel_as_text(tmp_path):
    path = tmp_path / "energy.adc"
    path.write_text(SOURCE)
    m = adc.compile_file(path)
    kernels = (m.energy, adc.grad(m.energy, wrt="x"))
    payload = pickle.dumps(kernels)
    path.unlink()       # the receiver never needs the file
    (tmp_path / "elsewhere").mkdir()
    assert received(payload, tmp_path / "elsewhere") == here(*kernels)


def test_a_shared_object_travels_as_its_bytes_and_needs_no_compiler(tmp_path):
    so = tmp_path / "energy.so"
    (tmp_path / "energy.adc").write_text(SOURCE)
    subprocess.run([sys.executable, "-m", "adc", "compile", str(tmp_path / "energy.adc"), "-o", str(so)],
                   check=True, capture_output=True)
    m = adc.load(so)
    payload = pickle.dumps([m.energy])
    so.unlink()
    (tmp_path / "elsewhere").mkdir()
    assert received(payload, tmp_path / "elsewhere", BLOCK_LLVMLITE) == here(m.energy)


def test_a_process_opens_each_shipped_module_once():
    m = adc.compile(SOURCE, "energy_once.adc")
    payload = pickle.dumps(m.energy)
    first, second = pickle.loads(payload), pickle.loads(payload)
    assert first is second and first is not m.energy
    assert pickle.loads(pickle.dumps(adc.grad(first))) is adc.grad(first)


def test_a_shared_object_changed_since_it_was_loaded_is_refused(tmp_path, kernels_so):
    so = tmp_path / "kernels.so"
    shutil.copy(kernels_so, so)
    m = adc.load(so)
    data = bytearray(so.read_bytes())
    data[100] ^= 1
    rebuilt = tmp_path / "rebuilt.so"      # replaced, as a rebuild does (the loaded file stays mapped)
    rebuilt.write_bytes(bytes(data))
    rebuilt.replace(so)
    with pytest.raises(ValueError, match="changed since it was loaded"):
        pickle.dumps(m)


def test_damaged_bytes_are_refused_on_arrival(kernels_so):
    data = bytearray(kernels_so.read_bytes())
    digest = data[-32:].hex()
    data[100] ^= 1
    with pytest.raises(adc.LoadError, match="damaged"):
        runtime_module.open_shipment("shared_object", "kernels.so", digest, bytes(data))


def test_a_kernel_with_no_way_back_says_so(kernels_so):
    vjp = adc.load(kernels_so).sigmoid_shift.derivative().kernel    # an embedded VJP: no recipe
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(vjp)
