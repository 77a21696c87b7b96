"""adc's locks, and llvmlite's, across a fork: a forked child finds them all free.

A fork copies only the calling thread. A lock another thread held at that moment stays held in
the child, by no thread, and the child's first compile waited for it forever. So:

- every lock of adc is made by `lock()`, and a forked child gets each anew, unlocked. What such a
  lock guards is Python state (caches of compiled code) that the other thread left between two
  bytecodes, at worst missing what it was about to add, which the child makes again. The
  forking thread itself must hold none of them (adc's own forks end their children in os._exit);
- llvmlite runs one LLVM call at a time under its lock. LLVM's state inside a call is C++ that no
  reset could mend, so no fork happens during one: the fork waits for the lock, and releases it
  on both sides after. The forking thread may hold it already (a fork from inside a callback
  LLVM makes into Python): the lock is reentrant.

    _lock = locks.lock()                    # instead of threading.Lock()
    _lock = locks.lock(reentrant=True)      # instead of threading.RLock()
"""
from __future__ import annotations

import os
import sys
import threading
import weakref

_made: weakref.WeakSet = weakref.WeakSet()


def lock(reentrant: bool = False):
    """A new lock (an RLock if `reentrant`) that a process forked from this one gets unlocked."""
    made = threading.RLock() if reentrant else threading.Lock()
    _made.add(made)
    return made


def _renew_in_child() -> None:
    for made in list(_made):
        # The standard library's own hook for this (threading, logging and concurrent.futures call
        # it in a forked child): there is no public way to free an RLock its owner cannot release.
        made._at_fork_reinit()


def _llvm_lock():
    """llvmlite's lock of LLVM calls, or None before llvmlite.binding is imported (then no LLVM
    call can be under way) or in an llvmlite that does not have it.

    Private to llvmlite (ffi.lib._lock, an _LLVMLock, and its RLock): llvmlite offers only
    callbacks run under it, not a way to hold it. The inner RLock, not _LLVMLock's context
    manager, whose callbacks take other libraries' locks (numba's compiler lock) in their order."""
    ffi = sys.modules.get("llvmlite.binding.ffi")
    held = getattr(getattr(getattr(ffi, "lib", None), "_lock", None), "_lock", None)
    return held if hasattr(held, "acquire") and hasattr(held, "release") else None


_held_across_fork = None      # the LLVM lock this process took before its fork, released after


def _before_fork() -> None:
    global _held_across_fork
    held = _llvm_lock()
    if held is not None:
        held.acquire()
    _held_across_fork = held


def _after_fork() -> None:
    global _held_across_fork
    held, _held_across_fork = _held_across_fork, None
    if held is not None:
        held.release()


def _after_fork_in_child() -> None:
    _after_fork()
    _renew_in_child()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_after_fork_in_child)
