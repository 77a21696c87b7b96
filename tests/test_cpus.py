"""adc.cpus: the x86-64 levels, /proc/cpuinfo read in LLVM's feature names, and the load-time check."""
import subprocess
import sys
from pathlib import Path

import pytest

from adc import cpus
from tests.support.imports import imports_of

CPUS_PY = Path(cpus.__file__)

# Abridged from a Haswell laptop's /proc/cpuinfo (two processors): LLVM names differ for
# pni, sse4_1, sse4_2, lahf_lm, abm, bmi1, fpu, pclmulqdq; `hypervisor` and `ht` are not ISA.
HASWELL_CPUINFO = """\
processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Core(TM) i7-4770 CPU @ 3.40GHz
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx \
fxsr sse sse2 ht syscall nx pdpe1gb rdtscp lm constant_tsc pni pclmulqdq ssse3 fma cx16 pcid sse4_1 \
sse4_2 movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm fsgsbase bmi1 avx2 smep bmi2 \
erms invpcid xsaveopt

processor\t: 1
vendor_id\t: GenuineIntel
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx \
fxsr sse sse2 ht syscall nx pdpe1gb rdtscp lm constant_tsc pni pclmulqdq ssse3 fma cx16 pcid sse4_1 \
sse4_2 movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm fsgsbase bmi1 avx2 smep bmi2 \
erms invpcid xsaveopt
"""


def test_levels_are_cumulative_and_checkable():
    names = list(cpus.LEVELS)
    assert names == ["x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"]
    for lower, higher in zip(names, names[1:]):
        assert set(cpus.LEVELS[lower]) < set(cpus.LEVELS[higher]), higher
    assert set(cpus.LEVELS["x86-64-v2"]) - set(cpus.LEVELS["x86-64"]) == {
        "cx16", "popcnt", "sahf", "sse3", "sse4.1", "sse4.2", "ssse3"}
    assert set(cpus.LEVELS["x86-64-v4"]) - set(cpus.LEVELS["x86-64-v3"]) == {
        "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
    for features in cpus.LEVELS.values():
        assert cpus.checkable(features) == features


def test_cpuinfo_flags_read_in_llvm_names():
    features = cpus._parse_cpuinfo(HASWELL_CPUINFO)
    assert features == set(cpus.LEVELS["x86-64-v3"]) | {"aes", "pclmul"}


def test_only_features_every_processor_lists_count():
    hybrid = HASWELL_CPUINFO + "\nprocessor\t: 2\nflags\t\t: fpu cx8 cmov mmx fxsr sse sse2\n"
    assert cpus._parse_cpuinfo(hybrid) == set(cpus.LEVELS["x86-64"])


def test_cpuinfo_without_flags_is_an_error_not_an_empty_set():
    with pytest.raises(OSError, match="flags"):
        cpus._parse_cpuinfo("processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1\n")


def test_checkable_drops_tuning_and_system_features():
    assert cpus.checkable(["avx2", "prefer-256-bit", "fsgsbase", "rdrnd", "64bit", "sse4.2"]) == (
        "avx2", "sse4.2")


def test_missing_features_names_what_a_fake_host_lacks():
    haswell = cpus._parse_cpuinfo(HASWELL_CPUINFO)
    assert cpus.missing_features(cpus.LEVELS["x86-64-v4"], haswell) == (
        "avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl")
    assert cpus.missing_features(cpus.LEVELS["x86-64-v3"], haswell) == ()
    assert cpus.missing_features(["avx2", "prefer-256-bit"], set()) == ("avx2",)


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists() or "flags" not in Path("/proc/cpuinfo").read_text(),
                    reason="needs x86 Linux /proc/cpuinfo")
def test_host_features_include_what_llvm_detects_on_this_machine():
    import llvmlite.binding as llvm

    detected = {name for name, on in llvm.get_host_cpu_features().items() if on}
    assert set(cpus.checkable(detected)) <= cpus.host_features()
    assert cpus.missing_features(cpus.checkable(detected)) == ()


def test_imports_only_the_standard_library():
    assert set(imports_of(CPUS_PY)) <= {"__future__", "functools", "typing"}


def test_works_where_llvmlite_and_numpy_cannot_be_imported():
    script = ("import importlib.util, sys\n"
              "sys.modules['llvmlite'] = sys.modules['numpy'] = None\n"
              f"spec = importlib.util.spec_from_file_location('cpus', {str(CPUS_PY)!r})\n"
              "cpus = importlib.util.module_from_spec(spec)\n"
              "spec.loader.exec_module(cpus)\n"
              "print(cpus.missing_features(['sse2'], ['sse2']))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "()"
