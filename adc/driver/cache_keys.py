"""What every cache key holds, and the get-or-build every cached artefact goes through.

Each key holds a fingerprint of the compiler: adc's version and the content of its sources
(codegen/toolchain/source_digest.py), so a changed compiler never reuses another's entries and a
reinstall of the same adc reuses them all. A manifest is IR, which depends on adc alone
(`ir_key`); object code also depends on the target and on LLVM (host.py's `cache_key`).

    ir_key("source", "/abs/k.adc", text)        # sha256 of the fingerprint and the parts
    cached(key, "k.adc: f", build)              # the entry's bytes, built and stored on a miss
    cached_analysis("sparsity", "k.adc: f", (ir_text, ...), build)    # what an analysis of IR found
"""
from __future__ import annotations

import functools
import hashlib
import os
from typing import Callable

from adc import compile_log
from adc.abi import ADC_VERSION
from adc.codegen.toolchain.cache import Cache
from adc.codegen.toolchain.source_digest import source_digest

SOURCE_SUFFIXES = (".py", ".lark")     # the files of adc that decide what it compiles


@functools.lru_cache(maxsize=None)
def fingerprint() -> str:
    """What compiles the IR, as text: adc's version and the content of its sources, so a changed
    compiler never reuses another's entries, version bump or not, and a reinstall of the same adc
    (new modification times, same files) reuses them all (codegen/toolchain/source_digest.py)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))     # adc/, above adc/driver/
    return f"adc {ADC_VERSION} {source_digest(package, SOURCE_SUFFIXES, open_cache())[:16]}"


def ir_key(*parts: str) -> str:
    """The key of IR compiled from `parts` (a manifest): IR depends on adc only."""
    return digest(fingerprint(), parts)


def digest(compiler: str, parts: tuple[str, ...]) -> str:
    """The key of what `compiler` (a description of everything that compiles it) makes from `parts`."""
    key = hashlib.sha256(compiler.encode())
    for part in parts:
        key.update(b"\0" + part.encode("utf-8", "surrogatepass"))   # invalid text is reported by the parser
    return key.hexdigest()


def open_cache() -> Cache | None:
    """The cache the environment asks for (read on every compile, so tests and tools may change it)."""
    return Cache.from_environment()


def cached(key: str, subject: str, build: Callable[[], bytes], accept=lambda data: True,
           namespace: str = "modules") -> bytes:
    """The bytes cached under `key`, built and stored on a miss; an entry `accept` rejects counts
    as a miss."""
    cache = open_cache()
    data = cache.get(namespace, key) if cache else None
    if data is not None and accept(data):
        compile_log.event(subject, f"cache hit {key[:12]}")
        return data
    compile_log.event(subject, f"cache miss {key[:12]}" if cache else "cache off")
    data = build()
    if cache:
        cache.put(namespace, key, data)
    return data


def cached_analysis(analysis: str, subject: str, parts: tuple[str, ...], build: Callable[[], bytes]) -> bytes:
    """What `analysis` found in IR (`parts`: the IR text and the question asked of it, e.g. a
    kernel's sparsity pattern at some sizes), as the bytes `build` encodes it in, kept in the
    cache's namespace of that name, so a second process does not run the analysis again."""
    return cached(ir_key(analysis, *parts), subject, build, namespace=analysis)
