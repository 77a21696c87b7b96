"""A process forked while another of its threads compiles, derives or loads kernels gets a working
adc: the child compiles, runs and differentiates a kernel of its own. The fork may land while
that thread is inside an LLVM call or holds one of adc's locks; the scenario runs in a fresh
interpreter, each child under an alarm, so a deadlock fails instead of hanging. The forks start
after that thread's first compile: one landing while it imports the compiler leaves Python's own
lock of that module held in the child (a limit of CPython's import system, not adc's locks)."""
import os
import subprocess
import sys

from tests.support.repository import ROOT

FORK_WHILE_COMPILING = """
import os, random, signal, threading, uuid
import numpy as np
import adc

token = uuid.uuid4().hex[:8]        # kernels no earlier run has cached: each one is compiled


def fresh_kernel(name, scale):
    source = f"def {name}_{token}(x: f64[N]) -> f64:\\n    return sum(sin(x) * {scale})\\n"
    return getattr(adc.compile(source, f"{name}.adc"), f"{name}_{token}")


def check(kernel, scale):
    x = np.linspace(-1.0, 1.0, 7)
    assert np.isclose(float(kernel(x)), scale * np.sin(x).sum())
    assert np.allclose(np.asarray(adc.grad(kernel)(x)), scale * np.cos(x))   # d/dx sum(scale sin x)


stop = threading.Event()
imported = threading.Event()
compiled = []


def compile_in_a_loop():
    while not stop.is_set():
        k = len(compiled) + 1
        check(fresh_kernel(f"busy{k}", k), k)
        compiled.append(k)
        imported.set()


busy = threading.Thread(target=compile_in_a_loop)
busy.start()
imported.wait()
statuses = []
for n in range(6):
    threading.Event().wait(random.uniform(0.05, 0.4))
    pid = os.fork()
    if pid == 0:
        signal.alarm(120)               # a deadlocked child dies instead of lingering
        try:
            check(fresh_kernel(f"child{n}", n + 0.5), n + 0.5)
        except BaseException as err:
            print(repr(err), flush=True)
            os._exit(1)
        os._exit(0)
    statuses.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
stop.set()
busy.join()
print(len(compiled), *statuses)
"""


def test_a_child_forked_while_another_thread_compiles_compiles_its_own_kernels():
    result = subprocess.run([sys.executable, "-c", FORK_WHILE_COMPILING], capture_output=True, text=True,
                            cwd=ROOT, timeout=900)
    assert result.returncode == 0, result.stderr
    compiled, *statuses = map(int, result.stdout.split()[-7:])
    assert compiled >= 2                # the forks did land among compiles
    assert statuses == [0] * 6, f"children's exit codes (-14: hung, killed by the alarm): {statuses}"


def run_script(script: str) -> str:
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()[-1]


CHILD = """
def child(compile_and_check):
    pid = os.fork()
    if pid == 0:
        signal.alarm(120)               # a deadlocked child dies instead of lingering
        try:
            compile_and_check()
        except BaseException as err:
            print(repr(err), flush=True)
            os._exit(1)
        os._exit(0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def compile_and_check():
    name = f"g_{uuid.uuid4().hex[:8]}"
    kernel = getattr(adc.compile(f"def {name}(x: f64[N]) -> f64[N]:\\n    return exp(x) - 1.0\\n", "g.adc"), name)
    x = np.linspace(-1.0, 1.0, 5)
    assert np.allclose(np.asarray(kernel(x)), np.expm1(x))
"""

WHILE_A_THREAD_IS_INSIDE_AN_LLVM_CALL = """
import os, signal, threading, uuid
import numpy as np
import llvmlite.binding as llvm
from llvmlite.binding import ffi
import adc
""" + CHILD + """
compile_and_check()                     # everything imported
inside, go_on = threading.Event(), threading.Event()


def hold():                             # llvmlite runs it with its lock held, before the LLVM call
    if threading.current_thread().name == "in LLVM":
        inside.set()
        go_on.wait()


ffi.register_lock_callback(hold, lambda: None)
thread = threading.Thread(target=llvm.get_process_triple, name="in LLVM")
thread.start()
inside.wait()
threading.Timer(0.5, go_on.set).start()  # the call ends half a second from now
status = child(compile_and_check)       # forked at once, or when the call has ended
thread.join()
print(status)
"""

FROM_A_CALLBACK_UNDER_THE_LLVM_LOCK = """
import os, signal, threading, uuid
import numpy as np
import llvmlite.binding as llvm
from llvmlite.binding import ffi
import adc
""" + CHILD + """
compile_and_check()
statuses = []


def fork_once():                        # this thread holds llvmlite's lock: the fork must not wait for it
    if not statuses:
        statuses.append(None)
        statuses[0] = child(compile_and_check)


ffi.register_lock_callback(fork_once, lambda: None)
llvm.get_process_triple()
print(statuses[0])
"""

WHILE_A_THREAD_HOLDS_ADCS_LOCKS = """
import os, signal, threading, uuid
import numpy as np
import adc
from adc import locks
""" + CHILD + """
plain, reentrant = locks.lock(), locks.lock(reentrant=True)
held, done = threading.Event(), threading.Event()


def hold():
    with plain, reentrant:
        held.set()
        done.wait()


thread = threading.Thread(target=hold)
thread.start()
held.wait()


def take_both():
    assert plain.acquire(timeout=10) and reentrant.acquire(timeout=10)
    compile_and_check()


status = child(take_both)
done.set()
thread.join()
print(status)
"""


def test_a_fork_waits_for_the_llvm_call_another_thread_is_in():
    """Forked mid-call, the child would find llvmlite's lock held by a thread it does not have."""
    assert run_script(WHILE_A_THREAD_IS_INSIDE_AN_LLVM_CALL) == "0"


def test_a_fork_from_a_callback_under_the_llvm_lock_does_not_wait_for_itself():
    assert run_script(FROM_A_CALLBACK_UNDER_THE_LLVM_LOCK) == "0"


def test_a_child_gets_adcs_locks_free():
    assert run_script(WHILE_A_THREAD_HOLDS_ADCS_LOCKS) == "0"
