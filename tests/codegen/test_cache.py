"""The on-disk compile cache: sealed entries, atomic writes, damage detected, LRU eviction by a
running total, settings."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from adc.abi import SEAL_SIZE
from adc.codegen.toolchain import cache as cache_module
from adc.codegen.toolchain.cache import DEFAULT_MAX_BYTES, EVICT_TO, Cache, CacheConfigError


def test_an_entry_reads_back_what_was_stored(tmp_path):
    cache = Cache(tmp_path)
    assert cache.get("modules", "k1") is None
    cache.put("modules", "k1", b"object code")
    assert cache.get("modules", "k1") == b"object code"
    assert (tmp_path / "modules" / "k1").stat().st_size == len(b"object code") + SEAL_SIZE


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_a_damaged_entry_is_a_miss_and_is_removed(tmp_path, damage):
    cache = Cache(tmp_path)
    cache.put("modules", "k1", b"x" * 100)
    path = tmp_path / "modules" / "k1"
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[:60]
    elif damage == "flip":
        data[10] ^= 0xFF
    else:
        data = b""
    path.write_bytes(bytes(data))
    assert cache.get("modules", "k1") is None
    assert not path.exists()


def test_writes_leave_no_temporary_files(tmp_path):
    cache = Cache(tmp_path)
    for k in range(5):
        cache.put("modules", f"k{k}", bytes(k))
    assert sorted(p.name for p in (tmp_path / "modules").iterdir()) == [f"k{k}" for k in range(5)]


def test_least_recently_used_entries_are_evicted_first(tmp_path):
    cache = Cache(tmp_path, max_bytes=10 * (1000 + SEAL_SIZE))
    for k in range(10):
        cache.put("modules", f"k{k}", b"x" * 1000)
        os.utime(tmp_path / "modules" / f"k{k}", (1000 + k, 1000 + k))
    assert cache.get("modules", "k0") is not None        # a hit makes k0 the most recently used
    cache.put("modules", "k10", b"x" * 1000)              # over the bound: evict down to EVICT_TO
    left = {p.name for p in (tmp_path / "modules").iterdir()}
    assert "k0" in left and "k10" in left
    assert {"k1", "k2", "k3"}.isdisjoint(left)
    assert cache.info().size <= cache.max_bytes


def _listings(cache: Cache, monkeypatch) -> list[int]:
    """A list that grows by one each time `cache` lists its entries (scans its root folder)."""
    listed, scan = [], os.scandir

    def counted(path="."):
        # other threads scan too (a background link's rmtree, by file descriptor)
        if not isinstance(path, int) and os.fspath(path) == os.fspath(cache.root):
            listed.append(1)
        return scan(path)
    monkeypatch.setattr(os, "scandir", counted)
    return listed


def test_writes_under_the_bound_are_counted_without_listing_the_entries(tmp_path, monkeypatch):
    cache = Cache(tmp_path)
    cache.put("modules", "k0", b"x" * 10)                   # this process's first write: listed once
    listed = _listings(cache, monkeypatch)
    for k in range(1, 20):
        cache.put("modules" if k % 2 else "shared", f"k{k}", b"x" * 10)
    assert listed == []
    assert cache.info().size == 20 * (10 + SEAL_SIZE)


def test_the_write_that_would_pass_the_bound_lists_the_entries_and_evicts(tmp_path, monkeypatch):
    cache = Cache(tmp_path, max_bytes=10 * (1000 + SEAL_SIZE))
    cache.put("modules", "k0", b"x" * 1000)
    listed = _listings(cache, monkeypatch)
    for k in range(1, 10):
        cache.put("modules", f"k{k}", b"x" * 1000)
    assert listed == [] and cache.info().size == cache.max_bytes
    listed.clear()
    cache.put("modules", "k10", b"x" * 1000)
    assert listed == [1] and cache.info().size <= cache.max_bytes * EVICT_TO


def test_other_processes_writes_are_seen_at_the_next_recount(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "RECOUNT_EVERY", 4)
    cache = Cache(tmp_path / "cache", max_bytes=10 * (1000 + SEAL_SIZE))
    cache.put("modules", "mine0", b"x")                     # listed
    entries = tmp_path / "cache" / "modules"
    other = Cache(tmp_path / "other")                       # another process's writes, moved into this cache
    for k in range(20):
        other.put("modules", f"theirs{k}", b"x" * 1000)
        os.replace(tmp_path / "other" / "modules" / f"theirs{k}", entries / f"theirs{k}")
        os.utime(entries / f"theirs{k}", (1000 + k, 1000 + k))
    for k in range(1, 4):
        cache.put("modules", f"mine{k}", b"x")
    assert cache.info().size > cache.max_bytes              # not seen yet
    cache.put("modules", "mine4", b"x")                     # the fourth write since the listing lists again
    left = {p.name for p in entries.iterdir()}
    assert cache.info().size <= cache.max_bytes * EVICT_TO
    assert {f"mine{k}" for k in range(5)} <= left and "theirs0" not in left


def _in_another_process(root, program: str) -> str:
    """Run `program` in a fresh interpreter with `cache`, a Cache at `root`, and `scans`, a list that
    grows by one each time it lists the cache's entries; what it prints."""
    prelude = ("import os\nfrom adc.codegen.toolchain.cache import Cache\n"
               f"cache = Cache({str(root)!r}, max_bytes=1 << 30)\nscans, scan = [], os.scandir\n"
               "os.scandir = lambda path='.': (scans.append(1) if os.fspath(path) == os.fspath(cache.root) else None) "
               "or scan(path)\n")
    return subprocess.run([sys.executable, "-c", prelude + program], capture_output=True, text=True,
                          check=True).stdout


def test_a_processs_first_write_reads_the_recorded_total_instead_of_listing(tmp_path):
    # a user's cache of thousands of entries took a process's first write 23 ms to list (~0.2 s at its bound)
    cache = Cache(tmp_path)
    for k in range(5):
        cache.put("modules", f"k{k}", b"x" * 10)
    assert _in_another_process(tmp_path, "cache.put('modules', 'new', b'x' * 10)\nprint(len(scans))") == "0\n"
    assert cache.info().size == 6 * (10 + SEAL_SIZE)
    cache.clear()                                           # the total goes with the entries
    assert _in_another_process(tmp_path, "cache.put('modules', 'new', b'x' * 10)\nprint(len(scans))") == "1\n"


def test_another_processs_writes_count_at_once(tmp_path, monkeypatch):
    cache = Cache(tmp_path, max_bytes=10 * (1000 + SEAL_SIZE))
    cache.put("modules", "mine0", b"x" * 1000)
    _in_another_process(tmp_path, "for k in range(20):\n    cache.put('modules', f'theirs{k}', b'x' * 1000)\n"
                                  "    os.utime(cache.path('modules', f'theirs{k}'), (1000 + k, 1000 + k))\n")
    listed = _listings(cache, monkeypatch)
    cache.put("modules", "mine1", b"x" * 1000)              # the shared total is past the bound: listed now
    assert listed == [1] and cache.info().size <= cache.max_bytes * EVICT_TO
    assert "mine1" in {p.name for p in (tmp_path / "modules").iterdir()}


def test_info_counts_entries_per_namespace_and_clear_empties(tmp_path):
    cache = Cache(tmp_path)
    cache.put("modules", "a", b"1")
    cache.put("modules", "b", b"22")
    cache.put("runtime", "r", b"333")
    info = cache.info()
    assert info.entries == {"modules": 2, "runtime": 1}
    assert info.size == 6 + 3 * SEAL_SIZE and info.location == tmp_path
    cache.clear()
    assert cache.info().entries == {} and tmp_path.is_dir()


def test_a_folder_another_process_removes_while_listed_is_skipped(tmp_path, monkeypatch):
    """Another process clearing the cache (`adc cache clear`) between this one's listing of the
    root and its scan of a namespace: the scan finds the folder gone, and a write still succeeds."""
    cache = Cache(tmp_path)
    cache.put("runtime", "r", b"333")
    cache.put("modules", "a", b"1")
    scan = os.scandir

    def cleared_meanwhile(path="."):
        if os.fspath(path) == os.fspath(tmp_path / "runtime"):
            for entry in scan(path):
                os.unlink(entry.path)
            os.rmdir(path)
        return scan(path)
    monkeypatch.setattr(os, "scandir", cleared_meanwhile)
    assert cache.info().entries == {"modules": 1}
    cache.put("modules", "b", b"22")                        # its eviction lists the entries too
    assert cache.get("modules", "b") == b"22"


def test_an_unwritable_cache_is_skipped(tmp_path):
    (tmp_path / "modules").write_text("a file where the folder should be")
    cache = Cache(tmp_path)
    cache.put("modules", "k", b"data")                     # no exception: compiling still works
    assert cache.get("modules", "k") is None


def test_environment_settings():
    assert Cache.from_environment({"ADC_CACHE": "0"}) is None
    cache = Cache.from_environment({"ADC_CACHE_DIR": "/somewhere", "ADC_CACHE_MAX_MB": "5"})
    assert str(cache.root) == "/somewhere" and cache.max_bytes == 5 << 20
    default = Cache.from_environment({})
    assert default.max_bytes == DEFAULT_MAX_BYTES and default.root.name == "adc"
    with pytest.raises(CacheConfigError, match="ADC_CACHE_MAX_MB must be a whole number"):
        Cache.from_environment({"ADC_CACHE_MAX_MB": "lots"})
