"""Scratch folders for what the C compiler reads and writes while it links (object files, a version
script, the shared object), in the system's temporary folder, each named by the process that made
it: `adc-<pid>-<random>`.

A process killed while it links (SIGKILL, the OOM killer, an `os._exit` with the JIT's background
link still running) cannot remove its folder. So the first scratch folder a process makes removes
those of processes that no longer run, once they are an hour old: a link takes well under a
second, and a process of another PID namespace sharing the folder (whose PID this one cannot
see) is not mid-link an hour on.

    with scratch_folder() as folder:      # removed at the end of the block
        (folder / "part0.o").write_bytes(code)
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

STALE_AFTER = 3600.0        # seconds: a folder this old whose process has exited is debris
_NAME = re.compile(r"adc-(\d+)-[a-z0-9_]+")     # what tempfile adds has no '-'
_swept = False              # whether this process has swept the temporary folder yet


@contextmanager
def scratch_folder() -> Iterator[Path]:
    """A new folder of this process's, removed with what it holds when the block ends."""
    global _swept
    if not _swept:
        _swept = True
        sweep(Path(tempfile.gettempdir()))
    with tempfile.TemporaryDirectory(prefix=f"adc-{os.getpid()}-") as folder:
        yield Path(folder)


def sweep(root: Path, now: float | None = None) -> None:
    """Remove the scratch folders under `root` of processes that no longer run, an hour old or more."""
    now = time.time() if now is None else now
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        found = _NAME.fullmatch(entry.name)
        if found is None or _running(int(found.group(1))):
            continue
        try:
            stale = entry.is_dir(follow_symlinks=False) and \
                now - entry.stat(follow_symlinks=False).st_mtime >= STALE_AFTER
        except OSError:
            continue
        if stale:
            shutil.rmtree(entry.path, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:         # another user's process (EPERM): it runs
        return True
    return True
