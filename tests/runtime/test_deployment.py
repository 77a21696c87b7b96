"""Shipping a .so: built for a chosen CPU (`adc compile --cpu`), refused on a CPU that lacks its
features before any code is mapped, and usable where llvmlite cannot be imported."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import adc
from adc import cpus
from adc.runtime import module as runtime_module
from tests.support.no_llvmlite import BLOCK_LLVMLITE
from tests.support.repository import SAMPLES


def _recorded_target(path) -> str:
    info = subprocess.run([sys.executable, "-m", "adc", "info", str(path)], capture_output=True, text=True,
                          check=True).stdout
    return next(line for line in info.splitlines() if line.strip().startswith("target:"))


@pytest.fixture(scope="module")
def v2_so(tmp_path_factory):
    out = tmp_path_factory.mktemp("v2") / "kernels.so"
    subprocess.run([sys.executable, "-m", "adc", "compile", str(SAMPLES / "kernels.adc"), "-o", str(out),
                    "--cpu", "x86-64-v2"], check=True, capture_output=True, text=True)
    return out


def test_the_target_is_recorded_and_shown(v2_so):
    line = _recorded_target(v2_so)
    assert "cpu x86-64-v2" in line
    assert set(cpus.LEVELS["x86-64-v2"]) <= set(line.split(": ", 2)[2].split())
    assert " avx " not in f" {line} " and "avx2" not in line


def test_a_level_build_runs_here(v2_so):
    m = adc.load(v2_so)
    x = np.linspace(-2, 2, 300_001, dtype=np.float32)            # large enough to use threads
    np.testing.assert_allclose(m.sigmoid_shift(x, 0.25).numpy(), 1 / (1 + np.exp(-(x + 0.25))), rtol=1e-5,
                               atol=1e-6)
    rng = np.random.default_rng(0)
    a, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((7, 33), (33, 9), (9,)))
    np.testing.assert_allclose(m.dense_relu(a, w, b).numpy(), np.maximum(a @ w + b, 0), rtol=1e-4, atol=1e-5)


def test_a_cpu_lacking_features_is_refused_before_mapping(v2_so, monkeypatch):
    monkeypatch.setattr(cpus, "host_features", lambda: frozenset(cpus.LEVELS["x86-64"]))

    def no_mapping(*args, **kwargs):
        raise AssertionError("the dynamic loader was asked to map the file")
    monkeypatch.setattr(runtime_module.ctypes, "CDLL", no_mapping)
    with pytest.raises(adc.LoadError, match=r"compiled for CPU 'x86-64-v2', whose features this CPU lacks: "
                                            r"cx16, popcnt, sahf, sse3, sse4\.1, sse4\.2, ssse3"):
        adc.load(v2_so)


def test_adc_cpu_is_the_default_cpu_of_adc_compile_and_cpu_overrides_it(tmp_path):
    """ADC_CPU names the CPU adc compiles for when nothing else does, the JIT's and `adc compile`'s
    (a process under a tool that cannot decode this CPU's widest instructions loads what its tests
    compile); --cpu still wins."""
    source = tmp_path / "k.adc"
    source.write_text("def f(x: f32[N]) -> f32[N]:\n    return exp(x)\n")
    env = {**os.environ, "ADC_CPU": "x86-64-v2"}
    builds = ((tmp_path / "env.so", [], "x86-64-v2"), (tmp_path / "flag.so", ["--cpu", "x86-64"], "x86-64"))
    for out, extra, cpu in builds:
        subprocess.run([sys.executable, "-m", "adc", "compile", str(source), "-o", str(out), *extra], check=True,
                       capture_output=True, text=True, env=env)
        assert f"cpu {cpu}," in _recorded_target(out)


def test_an_unknown_cpu_is_a_usage_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "adc", "compile", str(SAMPLES / "kernels.adc"), "-o",
                             str(tmp_path / "k.so"), "--cpu", "pentium9000"], capture_output=True, text=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "unknown CPU 'pentium9000'" in result.stderr and "x86-64-v3" in result.stderr


def test_loading_and_first_order_gradients_need_no_llvmlite(kernels_so):
    script = BLOCK_LLVMLITE + textwrap.dedent(f"""
        import numpy as np
        import adc
        m = adc.load({str(kernels_so)!r})
        x = np.linspace(-2, 2, 11).astype(np.float32)
        v = adc.Variable(x)
        with adc.GradientTape() as tape:
            y = m.sigmoid_shift(v, 0.5)         # a kernel call: eager ops would need the compiler
        s = 1 / (1 + np.exp(-(x + 0.5)))
        assert np.allclose(tape.gradient(y, v).numpy(), s * (1 - s), rtol=1e-5, atol=1e-6)
        assert not any(name.startswith("llvmlite") for name in sys.modules)
        with adc.GradientTape() as outer:
            with adc.GradientTape() as inner:
                y = m.sigmoid_shift(v, 0.5)
            g = inner.gradient(y, v)
        try:
            outer.gradient(g, v)
        except LookupError as err:
            print(err)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "higher orders are compiled from the IR it carries, which needs the adc compiler" in result.stdout
