"""Where a kernel's object code is compiled: in this process for the first few, then in a worker.

llvmlite's new pass manager never frees what an optimization run registers with its
PassBuilder (`LLVMPY_CreatePassBuilder` allocates PassInstrumentationCallbacks that nothing
deletes: ~70 KB a compile, measured with llvmlite 0.50), so a process that compiled fresh
kernels for hours would grow without bound. A process compiles its first `in_process_budget()`
kernels itself — most processes never compile more, and pay nothing but LLVM's work — and
sends later ones to a worker, a child process running `main`, that is replaced after
`WORKER_COMPILES` compiles: what the leak holds stays bounded in both. The worker is started a
few compiles before it is first needed, so its start (~0.3 s: Python, the compiler, LLVM)
overlaps them. If it dies, the compile runs here and the next one starts a new worker.

    object_code(symbol, ir_text, module_name, target)    # ELF bytes of one kernel, here or there
    kernel_object(symbol, ir_text, module_name, target)  # always here (also in forked workers)
    worker_pid()                                         # None until the worker is started

`ADC_IN_PROCESS_COMPILES` sets the budget (default 64; 0 sends every compile to the worker).
"""
from __future__ import annotations

import atexit
import os
import pickle
import signal
import subprocess
import sys
from typing import TYPE_CHECKING, Iterator

from adc import locks
from adc.abi import KERNEL_PREFIX

if TYPE_CHECKING:
    from adc.codegen.toolchain.target import Target

DEFAULT_IN_PROCESS = 64
WORKER_COMPILES = 256       # a worker's leak stays under ~20 MB before it is replaced
START_AHEAD = 8             # compiles before the budget runs out at which the worker starts


def kernel_object(symbol: str, ir_text: str, module_name: str, target: Target) -> bytes:
    """Compile one kernel, in this process, from its module's `KernelSources.ir` text."""
    from adc.codegen import emit

    return emit.emit_object(*_lowered(symbol, ir_text, module_name, target))


def kernel_tiers(symbol: str, ir_text: str, module_name: str, target: Target) -> Iterator[bytes]:
    """kernel_object's code for `target.first_tier`, then for `target`, from one optimization
    (emit.emit_tiers), each as soon as it is made."""
    from adc.codegen import emit

    yield from emit.emit_tiers(*_lowered(symbol, ir_text, module_name, target))


def _lowered(symbol: str, ir_text: str, module_name: str, target: Target) -> tuple:
    """emit's arguments for one kernel: its LLVM IR, the target, its name in the log, `unroll`."""
    from adc import compiler

    name = symbol[len(KERNEL_PREFIX):]
    llvm_module, unroll = compiler.lowered_kernel(ir_text, module_name, name, target)
    return llvm_module, target, f"{module_name}: {name}", unroll


def in_process_budget() -> int:
    """How many kernels this process compiles itself (`ADC_IN_PROCESS_COMPILES`)."""
    text = os.environ.get("ADC_IN_PROCESS_COMPILES", "")
    try:
        return max(0, int(text)) if text else DEFAULT_IN_PROCESS
    except ValueError:
        raise ValueError(f"ADC_IN_PROCESS_COMPILES must be a whole number, not {text!r}") from None


class _Worker:
    """One worker process and the pipes to it; requests are pickled, one at a time. It imports adc
    from where this process did, whatever its working folder holds."""

    def __init__(self):
        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        serve = f"import sys; sys.path.insert(0, {package_parent!r}); import adc.compile_worker as w; w.main()"
        self.process = subprocess.Popen([sys.executable, "-c", serve], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE)
        self.compiles = 0

    def compile(self, request: tuple) -> bytes:
        """The worker's answer to `request`; EOFError/OSError if it died, re-raising its errors."""
        assert self.process.stdin is not None and self.process.stdout is not None
        pickle.dump(request, self.process.stdin)
        self.process.stdin.flush()
        ok, answer = pickle.load(self.process.stdout)
        self.compiles += 1
        if not ok:
            raise answer
        return answer

    def close(self, kill: bool = False) -> None:
        """End the worker (it exits at the end of its input; `kill`: at once, mid-request) and reap
        it: a process object dropped while its process runs warns (ResourceWarning) wherever the
        collector happens to drop it."""
        try:
            if kill:
                self.process.kill()
            else:
                self.process.stdin.close()
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        except OSError:
            pass
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()
            except OSError:
                pass


class _Compiles:
    """This process's count of kernels compiled and its worker, if started. A worker that cannot
    be started, or dies before its first answer (no Python to run it, say), makes every later
    compile run here."""

    def __init__(self):
        self.lock = locks.lock()
        self.in_process = 0
        self.worker: _Worker | None = None
        self.unavailable = False

    def object_code(self, request: tuple) -> bytes:
        budget = in_process_budget()
        with self.lock:
            here = self.in_process < budget or self.unavailable
            self.in_process += here
            if self.worker is None and self.in_process >= budget - START_AHEAD:
                self._start()
            if not here:
                return self._in_worker(request)
        return kernel_object(*request)

    def _start(self) -> None:
        if not self.unavailable:
            try:
                self.worker = _Worker()
            except OSError:
                self.unavailable = True

    def _in_worker(self, request: tuple) -> bytes:
        if self.worker is None:
            self._start()
        worker = self.worker
        if worker is None:
            return kernel_object(*request)
        try:
            return worker.compile(request)
        except (EOFError, OSError, pickle.UnpicklingError):
            worker.close()                      # died: this compile runs here, the next starts anew
            self.worker = None
            self.unavailable = worker.compiles == 0
            return kernel_object(*request)
        except BaseException as error:         # its own error, or an interrupt mid-request
            if not isinstance(error, Exception):
                worker.close(kill=True)
                self.worker = None
            raise
        finally:
            if self.worker is worker and worker.compiles >= WORKER_COMPILES:
                worker.close()
                self._start()                   # its start overlaps this process's work until the next

    def close(self) -> None:
        """At exit: end the worker, if any."""
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    def forget(self) -> None:
        """In a forked child: the parent's worker is the parent's (its lock is renewed by adc.locks)."""
        self.worker = None


_compiles = _Compiles()
os.register_at_fork(after_in_child=_compiles.forget)
atexit.register(_compiles.close)


def object_code(symbol: str, ir_text: str, module_name: str, target: Target) -> bytes:
    """Object code of one kernel: compiled in this process within its budget, else in the worker."""
    return _compiles.object_code((symbol, ir_text, module_name, target))


def worker_pid() -> int | None:
    """The process id of this process's compile worker, None before it is started."""
    worker = _compiles.worker
    return worker.process.pid if worker else None


def main() -> None:
    """The worker: compile each request read from stdin until its end, answering on stdout
    (errors are sent back); stray output goes to stderr, an interrupt is the parent's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    requests = sys.stdin.buffer
    while True:
        try:
            request = pickle.load(requests)
        except EOFError:
            return
        try:
            answer = (True, kernel_object(*request))
        except Exception as error:
            answer = (False, error)
        try:
            data = pickle.dumps(answer)
        except Exception:                       # an error that does not pickle: its text does
            error = answer[1]
            data = pickle.dumps((False, RuntimeError(f"{type(error).__name__}: {error}")))
        answers.write(data)
        answers.flush()
