"""Ctrl-C (SIGINT) stops a running kernel's loops: the kernel unwinds, frees its blocks, and the call
raises KeyboardInterrupt; the next call runs in full (adc/codegen/lowering/interrupts.py, adc/runtime/interrupts.py).

Each case runs in a child process, which the test sends SIGINT as a terminal would on Ctrl-C, once
the child is inside the endless call; a kernel that ignores it is a timeout, not a hung suite."""
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from adc import compiler
from adc.codegen.toolchain.target import Target
from tests.support.interrupts import INTERRUPTED

LOOPS = """
def forever(x: f64) -> f64:
    while x > 0.0:
        x = x + 1.0
    return x

def steps(x: f64, n: i64) -> f64:
    for i in range(n):
        x = x * 0.5 + 1.0
    return x

def upto(x: f64, limit: f64) -> f64:
    while x < limit:
        x = x + 1.0
    return x

def flow(x: f64[N], n: i64) -> f64:
    for i in range(n, checkpoint=1000):
        x = sin(x) + 0.5 * x
    return sum(x)

def spin(x: f64[N]) -> f64[N]:
    while x[0] > 0.0:
        x = x + 1.0
    return x
"""

ROUTES = {"native": "",
          "run_bound": "from adc.runtime.kernel import Kernel\nKernel.call_in_c = False\n",
          "python": "from adc.runtime.kernel import Kernel\nKernel.call_in_c = False\n"
                    "Kernel.run_bound = Kernel._run_in_python\n"}

# After the interrupted call: the kernels run in full again (no interrupt left over), and the
# blocks of an interrupted call are freed: 30 interrupted calls of a kernel whose carried vector
# and its spare take 16 MB would grow the process by ~480 MB if they leaked. There SIGINT comes
# every 5 ms, and Python's handler for it does nothing (a signal outside a kernel stops nothing):
# a kernel stopped by it raises KeyboardInterrupt all the same.
AFTER = """
assert m.upto(0.0, 1000.0) == 1000.0
assert abs(m.steps(0.0, 60) - 2.0) < 1e-12
import threading, time
signal.signal(signal.SIGINT, lambda *args: None)
time.sleep(0.05)
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
""" + INTERRUPTED + """
def interrupted_spin():
    return interrupted(m.spin, np.ones(1_000_000))
assert interrupted_spin()
before = rss()
assert all(interrupted_spin() for _ in range(30))
grown = (rss() - before) / 2**20
assert grown < 100, f"30 interrupted calls grew the process by {grown:.0f} MB"
print("ok", flush=True)
"""


def _child(setup: str, call: str, route: str = "native") -> str:
    return "\n".join([
        "import os, signal, sys, numpy as np, adc",
        ROUTES[route],
        setup,
        "print('running', flush=True)",
        "try:",
        textwrap.indent(call, "    "),
        "except KeyboardInterrupt:",
        "    print('interrupted', flush=True)",
        "else:",
        "    print('finished', flush=True)",
        AFTER,
    ])


def _interrupt(script: str, tmp_path, timeout: float = 120.0) -> str:
    """The child's output, once it printed `running`, was sent SIGINT a second later and ended."""
    env = {k: v for k, v in os.environ.items() if k != "ADC_CPU"}
    path = tmp_path / "child.py"
    path.write_text(script)
    child = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    try:
        deadline = time.monotonic() + timeout
        first = child.stdout.readline()
        assert first == "running\n", first + child.communicate(timeout=max(1.0, deadline - time.monotonic()))[1]
        time.sleep(1.0)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail("the kernel did not stop within a minute of SIGINT")
    assert child.returncode == 0, err
    return first + out


def _jit(first_calls: str) -> str:
    return f"m = adc.compile({LOOPS!r}, 'loops.adc')\n{first_calls}"


# every kernel compiled (and run once, finitely) before the interrupt, which must find it running
WARM = "m.upto(0.0, 3.0); m.steps(0.0, 3); m.forever(-1.0); m.spin(-np.ones(3))\n"


@pytest.mark.parametrize("route", ROUTES)
def test_sigint_stops_an_endless_while(tmp_path, route):
    out = _interrupt(_child(_jit(WARM), "m.forever(1.0)", route), tmp_path)
    assert out.split() == ["running", "interrupted", "ok"]


def test_sigint_stops_a_for_of_a_huge_trip_count(tmp_path):
    out = _interrupt(_child(_jit(WARM), "m.steps(0.0, 2**62)"), tmp_path)
    assert out.split() == ["running", "interrupted", "ok"]


def test_sigint_stops_the_gradient_of_a_long_loop(tmp_path):
    setup = _jit(WARM + "g = adc.grad(m.flow)\ng(np.ones(2), 10)\n")
    out = _interrupt(_child(setup, "g(np.ones(2), 10**9)"), tmp_path)
    assert out.split() == ["running", "interrupted", "ok"]


def test_sigint_stops_a_kernel_running_in_another_thread(tmp_path):
    """The main thread gets Python's KeyboardInterrupt, the thread whose kernel stopped adc's."""
    call = textwrap.dedent("""
        import threading, time
        raised = []
        def work():
            try:
                m.forever(1.0)
            except KeyboardInterrupt:
                raised.append(True)
        worker = threading.Thread(target=work)
        worker.start()
        try:
            time.sleep(60)
        finally:
            worker.join(30)
            assert raised and not worker.is_alive()
    """)
    out = _interrupt(_child(_jit(WARM), call), tmp_path)
    assert out.split() == ["running", "interrupted", "ok"]


def test_sigint_stops_a_kernel_after_signal_signal_put_pythons_handler_back(tmp_path):
    """Jupyter sets SIGINT's handler before each cell, asyncio.run for its run: adc's goes back in front."""
    setup = _jit(WARM + "signal.signal(signal.SIGINT, signal.default_int_handler)\nimport time; time.sleep(0.05)\n")
    out = _interrupt(_child(setup, "m.forever(1.0)"), tmp_path)
    assert out.split() == ["running", "interrupted", "ok"]


@pytest.mark.skipif(shutil.which("cc") is None, reason="adc compile links with the system C compiler")
def test_sigint_stops_a_kernel_of_a_shared_object(tmp_path):
    source = tmp_path / "loops.adc"
    source.write_text(LOOPS)
    subprocess.run([sys.executable, "-m", "adc", "compile", str(source), "-o", str(tmp_path / "loops.so")],
                   check=True, capture_output=True, text=True)
    setup = f"m = adc.load({str(tmp_path / 'loops.so')!r})\n{WARM}"
    out = _interrupt(_child(setup, "m.forever(1.0)"), tmp_path)
    assert out.split() == ["running", "interrupted", "ok"]


def test_an_interrupt_before_a_call_does_not_stop_it(tmp_path):
    """A SIGINT delivered while Python code ran is that code's KeyboardInterrupt, not the next kernel's."""
    script = "\n".join(["import os, signal, numpy as np, adc", _jit(WARM), textwrap.dedent("""
        try:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10**6):
                pass
        except KeyboardInterrupt:
            pass
        assert m.steps(0.0, 10**6) == 2.0
        assert m.upto(0.0, 10**6) == 10**6
        print("ok")
    """)])
    path = tmp_path / "child.py"
    path.write_text(script)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["ok"], done.stderr


def test_only_loops_poll_for_interrupts():
    """A kernel without loops reads no counter: it costs nothing and is never stopped."""
    module = compiler.optimize(compiler.elaborate(LOOPS + "\ndef plain(x: f64[N]) -> f64:\n    return sum(exp(x))\n",
                                                  "loops.adc"))
    text = compiler.kernel_sources(module).ir

    def llvm(name):
        return str(compiler.lower_kernel(text, "loops.adc", name, Target.host()))
    assert "adc_rt_interrupts" not in llvm("plain")
    assert all("adc_rt_interrupts" in llvm(name) for name in ("forever", "steps", "upto", "spin"))


@pytest.mark.skipif(shutil.which("cc") is None, reason="adc compile links with the system C compiler")
def test_a_c_program_stops_a_shared_objects_kernel_through_its_own_counter(tmp_path):
    """runtime/adc.h: adc_watch_interrupts(&counter); moving the counter makes the running kernel
    return ADC_ERR_INTERRUPTED (4), and the next call runs in full."""
    source = tmp_path / "loops.adc"
    source.write_text(LOOPS)
    subprocess.run([sys.executable, "-m", "adc", "compile", str(source), "-o", str(tmp_path / "loops.so")],
                   check=True, capture_output=True, text=True)
    script = tmp_path / "c_caller.py"
    script.write_text(textwrap.dedent(f"""
        import ctypes, threading
        lib = ctypes.CDLL({str(tmp_path / "loops.so")!r})
        counter = ctypes.c_int32(0)
        lib.adc_watch_interrupts(ctypes.byref(counter))

        def call(kernel, *args):
            inputs = [ctypes.c_double(a) for a in args]
            out = ctypes.c_double()
            status = kernel(None, (ctypes.c_void_p * len(args))(*map(ctypes.addressof, inputs)),
                            (ctypes.c_void_p * 1)(ctypes.addressof(out)))
            return status, out.value

        mover = threading.Timer(0.5, lambda: setattr(counter, "value", counter.value + 1))
        mover.start()
        assert call(lib.adc_kernel_forever, 1.0)[0] == 4
        mover.join()
        assert call(lib.adc_kernel_upto, 0.0, 1000.0) == (0, 1000.0)
        print("ok")
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["ok"], done.stderr
