"""The digest of a package's source files by their content, which the compile cache's keys hold.

Keyed by content, not by modification times: reinstalling the same adc (`pip install .` again)
writes the same files with new times, and must find the code the first install compiled.
Reading and hashing the ~100 sources takes 1.5 ms at every process start with the files in the
page cache, more without; so the content digest is remembered in the compile cache under a digest
of the files' names, sizes and modification times (what Python's own bytecode cache compares),
and read only when one of those changes: after a reinstall, once.

    source_digest("/…/adc", (".py", ".lark"), cache)   # hex digest; cache may be None
"""
from __future__ import annotations

import hashlib
import os

from adc.codegen.toolchain.cache import Cache

NAMESPACE = "sources"       # the cache's folder of remembered digests: stat digest -> content digest


def source_digest(package: str, suffixes: tuple[str, ...], cache: Cache | None) -> str:
    """The digest of the content of every file under `package` whose name ends with one of
    `suffixes` (and of their names relative to it), __pycache__ aside."""
    files = _sources(package, suffixes)
    by_stat = hashlib.sha256(os.path.abspath(package).encode())
    for relative, stat in files:
        by_stat.update(f"\0{relative}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    stat_key = by_stat.hexdigest()
    remembered = cache.get(NAMESPACE, stat_key) if cache else None
    if remembered is not None:
        return remembered.decode()
    by_content = hashlib.sha256()
    for relative, _ in files:
        with open(os.path.join(package, relative), "rb") as f:
            content = f.read()
        by_content.update(f"{relative}\0{len(content)}\0".encode() + content)
    digest = by_content.hexdigest()
    if cache:
        cache.put(NAMESPACE, stat_key, digest.encode())
    return digest


def _sources(package: str, suffixes: tuple[str, ...]) -> list[tuple[str, os.stat_result]]:
    """(path relative to `package`, its stat) of each source file, in a fixed order."""
    found = []
    for folder, subfolders, names in os.walk(package):      # os.walk: a third of pathlib's time
        subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
        for name in sorted(names):
            if name.endswith(suffixes):
                path = os.path.join(folder, name)
                found.append((os.path.relpath(path, package), os.stat(path)))
    return found
