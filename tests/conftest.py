"""Shared fixtures: the sample module compiled once per session, in process and as a .so.

The session compiles into a compile cache of its own, which its pytest-xdist workers share
(ADC_CACHE_DIR, inherited by the processes tests start; ADC_TEST_CACHE_DIR names one kept
across sessions), so a run neither reads nor fills the user's cache, and builds the runtime
library where it needs it, not ahead (ADC_BUILD_AHEAD=0); it links no kernel's shared object
(ADC_LINK=0) and compiles no VJP half ahead (ADC_COMPILE_AHEAD=0). Where bytecode writes are off,
the processes it starts share a bytecode cache of the session's (`_share_bytecode`).
"""
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from tests.support.repository import ROOT, SAMPLES


SESSION_CACHE = "ADC_SESSION_CACHE_DIR"     # the session's cache, as its pytest-xdist workers inherit it


def pytest_configure(config):
    # ADC_TEST_CACHE_DIR: a cache that outlives the session, shared by runs that want the same
    # kernels (tests.support.memcheck fills it without valgrind, then runs the tests under it)
    kept = os.environ.get("ADC_TEST_CACHE_DIR")
    if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(SESSION_CACHE):
        # a worker compiles into the cache of the session that started it (which removes it), so
        # the kernels of samples and shared sources compile once per session, not once per worker
        config.adc_cache_dir, config.adc_cache_kept = os.environ[SESSION_CACHE], True
    else:
        config.adc_cache_dir = kept or tempfile.mkdtemp(prefix="adc-test-cache-")
        config.adc_cache_kept = bool(kept)
        os.environ[SESSION_CACHE] = config.adc_cache_dir
        _share_bytecode(config)
    os.environ["ADC_CACHE_DIR"] = config.adc_cache_dir
    os.environ.pop("ADC_CACHE", None)
    # no runtime library built ahead by each process a test starts with a cache of its own (a
    # child per process, outliving it); tests/test_build_ahead.py turns it on where it is tested
    os.environ["ADC_BUILD_AHEAD"] = "0"
    # no kernel linked into a shared object for later processes (a C compiler run each), and no
    # VJP half compiled ahead in a forked child (with both cores busy running tests, the fork and
    # the child's extra first-tier code made a sample of the runtime tests 17% slower):
    # tests/test_compile_cache.py turns both on where they are tested, and test_tiers.py compares
    # first-tier code with the full code
    os.environ["ADC_LINK"] = "0"
    os.environ["ADC_COMPILE_AHEAD"] = "0"


def _share_bytecode(config) -> None:
    """With bytecode writes off (PYTHONDONTWRITEBYTECODE), every Python process a test starts (the
    command line, compile workers, scripts: hundreds a session) compiled adc's modules from source,
    ~0.1 s and more each; the session's processes share a bytecode cache of its own instead, outside
    the repository, removed with the session (tests/cli and three other files of such processes:
    37-38 -> 28-29 s on two workers)."""
    config.adc_bytecode_dir = None
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
        config.adc_bytecode_dir = tempfile.mkdtemp(prefix="adc-test-bytecode-")
        del os.environ["PYTHONDONTWRITEBYTECODE"]
        os.environ["PYTHONPYCACHEPREFIX"] = config.adc_bytecode_dir


def pytest_unconfigure(config):
    if not getattr(config, "adc_cache_kept", True):
        shutil.rmtree(config.adc_cache_dir, ignore_errors=True)
        shutil.rmtree(_valgrind_cache_dir(config), ignore_errors=True)
    if getattr(config, "adc_bytecode_dir", None):
        shutil.rmtree(config.adc_bytecode_dir, ignore_errors=True)


def _valgrind_cache_dir(config) -> str:
    return config.adc_cache_dir + "-valgrind"


@pytest.fixture(scope="session")
def valgrind_cache(request) -> str:
    """The compile cache the session's runs under valgrind share (tests.support.memcheck): their
    code is for another CPU, and the runtime library and kernels they have in common compile once,
    not once per test (~3.5 s each for the runtime library alone)."""
    return _valgrind_cache_dir(request.config)


@pytest.fixture(scope="session")
def kernels_module():
    import adc

    return adc.compile_file(SAMPLES / "kernels.adc")


@pytest.fixture(scope="session")
def kernels_so(tmp_path_factory):
    """samples/kernels.adc compiled by the command line, as a user would (from the repository, as
    the README's commands do: its compiled code is then cached for them), with its C header."""
    out = tmp_path_factory.mktemp("so") / "kernels.so"
    subprocess.run([sys.executable, "-m", "adc", "compile", "samples/kernels.adc", "-o", str(out),
                    "--header", str(out.with_suffix(".h"))], cwd=ROOT, check=True, capture_output=True, text=True)
    return out
