"""The on-disk compile cache: sealed entries of object code, shared by every process of a user.

A key is a hex digest the driver computes from everything the code depends on
(the optimized IR or the source it comes from, the target, the adc, llvmlite and
LLVM versions); an entry is the bytes the driver stores under it. Each entry is
one file `<root>/<namespace>/<key>`, sealed like a shared object (abi.seal):

    cache = Cache.from_environment()        # $ADC_CACHE_DIR, else the user cache folder
    cache.get("modules", key)               # None: missing, or damaged (then removed)
    cache.locate("shared", key)             # the entry's file, checked likewise: for the dynamic loader
    cache.put("modules", key, data)         # atomic; evicts least recently used entries

- Writes are atomic: a temporary file in the same folder, then `os.replace`. Several
  processes compiling one module at once each write a whole entry and the last
  rename wins; a reader sees a whole entry or none.
- A truncated or damaged entry fails its seal: it is removed and reported as a miss,
  so the caller rebuilds it. It is never loaded.
- A hit refreshes the entry's modification time; when a write takes the cache over
  its size bound, the entries used longest ago are removed first. Listing every entry at each
  write cost 30 ms a write in a cache of a few thousand, and at a process's first write 23 ms in
  a user's cache of 3,000 entries (~0.2 s at its bound), so the cache keeps its running total in
  the file `<root>/total`: each write reads it, adds its entry's bytes and writes it back
  (atomically, by rename). The entries are listed, and the total written from the listing, only
  when there is no total yet, when a write would take it past the bound, and at every
  RECOUNT_EVERY-th write of a process. No lock (a child forked while another thread held one
  would wait on itself): two processes writing at once may each add to the same old total, and
  the lost bytes are found at the next listing.
- `lock(namespace)` is held by one process at a time (an flock on `<root>/<namespace>.lock`,
  never an entry): builders of an entry too costly to build twice (the runtime library) wait
  for each other, then find it.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

try:
    import fcntl
except ImportError:         # no flock (Windows): builders do not wait for each other
    fcntl = None

from adc.abi import MetadataError, seal, unseal

DEFAULT_MAX_BYTES = 1 << 30
EVICT_TO = 0.8        # after eviction the cache holds at most this share of its bound
TEMP_SUFFIX = ".tmp"
RECOUNT_EVERY = 256     # a process's writes to a cache between two listings of its entries
TOTAL_FILE = "total"    # the running total of the entries' bytes, in the root folder

# cache root -> this process's writes to it since it last listed its entries
_writes_since_listing: dict[Path, int] = {}


class CacheConfigError(ValueError):
    """An ADC_CACHE* environment variable has a value adc cannot use."""


@dataclass(frozen=True)
class CacheInfo:
    location: Path
    entries: dict[str, int]     # namespace -> entries
    size: int                   # bytes
    max_size: int


class Cache:
    """Sealed entries under `root`, at most `max_bytes` in all."""

    def __init__(self, root: str | os.PathLike, max_bytes: int = DEFAULT_MAX_BYTES):
        self.root = Path(root)
        self.max_bytes = max_bytes

    @staticmethod
    def from_environment(environ=os.environ) -> Cache | None:
        """The cache the environment asks for: none when ADC_CACHE=0; at $ADC_CACHE_DIR, else the
        platform's user cache folder; bounded by $ADC_CACHE_MAX_MB megabytes (default 1024)."""
        if environ.get("ADC_CACHE", "1").strip() == "0":
            return None
        root = environ.get("ADC_CACHE_DIR") or _user_cache_folder()
        setting = environ.get("ADC_CACHE_MAX_MB", "").strip()
        try:
            max_bytes = int(setting) << 20 if setting else DEFAULT_MAX_BYTES
        except ValueError:
            raise CacheConfigError(f"ADC_CACHE_MAX_MB must be a whole number of megabytes, not {setting!r}") from None
        return Cache(root, max_bytes)

    def path(self, namespace: str, key: str) -> Path:
        return self.root / namespace / key

    def get(self, namespace: str, key: str) -> bytes | None:
        path = self.path(namespace, key)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        try:
            body = unseal(data)
        except MetadataError:
            _remove(path)
            return None
        try:
            os.utime(path)
        except OSError:
            pass            # read-only cache: still a hit
        return body

    def locate(self, namespace: str, key: str) -> Path | None:
        """The file of an entry whose seal holds, for a caller that maps it rather than reading it
        (a shared object for the dynamic loader, which ignores the seal after its image)."""
        return self.path(namespace, key) if self.get(namespace, key) is not None else None

    def put(self, namespace: str, key: str, data: bytes) -> None:
        """Store an entry; a cache that cannot be written (read-only, disk full) is skipped silently."""
        folder = self.root / namespace
        sealed = seal(data)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _write_atomically(folder / key, sealed)
        except OSError:
            return
        self._count(len(sealed))

    def _count(self, added: int) -> None:
        """Add a written entry's bytes to the cache's running total; list the entries (and evict)
        only when there is no total, past the bound, and every RECOUNT_EVERY writes of this
        process (see the module docstring)."""
        total = self._recorded_total()
        writes = _writes_since_listing.get(self.root, 0) + 1
        if total is None or total + added > self.max_bytes or writes >= RECOUNT_EVERY:
            total, writes = self.evict(), 0
        else:
            total += added
        _writes_since_listing[self.root] = writes
        self._record_total(total)

    def _recorded_total(self) -> int | None:
        try:
            return int((self.root / TOTAL_FILE).read_text())
        except (OSError, ValueError):
            return None

    def _record_total(self, total: int) -> None:
        try:
            _write_atomically(self.root / TOTAL_FILE, str(total).encode())
        except OSError:
            pass            # unwritable: the next write lists the entries

    @contextmanager
    def lock(self, namespace: str) -> Iterator[None]:
        """Held by one process at a time (see the module docstring); an unwritable cache holds nothing."""
        fd = self._lock_file(namespace)
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            if fd is not None:
                os.close(fd)

    def try_lock(self, namespace: str) -> int | None:
        """The lock of `namespace` taken now, as a descriptor whose closing (by every process it was
        handed to) releases it; None when another process holds it or it cannot be taken."""
        fd = self._lock_file(namespace)
        if fd is None:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        return fd

    def _lock_file(self, namespace: str) -> int | None:
        if fcntl is None:
            return None
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            return os.open(self.root / f"{namespace}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return None

    def evict(self) -> int:
        """Remove the entries used longest ago until the cache is within EVICT_TO of its bound;
        the bytes of the entries left."""
        entries = self._entries()
        total = sum(size for _, size, _ in entries)
        if total <= self.max_bytes:
            return total
        for path, size, _ in sorted(entries, key=lambda e: e[2]):
            if total <= self.max_bytes * EVICT_TO:
                break
            _remove(path)
            total -= size
        return total

    def info(self) -> CacheInfo:
        entries = self._entries()
        per_namespace: dict[str, int] = {}
        for path, _, _ in entries:
            per_namespace[path.parent.name] = per_namespace.get(path.parent.name, 0) + 1
        return CacheInfo(self.root, per_namespace, sum(size for _, size, _ in entries), self.max_bytes)

    def clear(self) -> None:
        """Remove every entry (and the folders adc made), leaving the root folder."""
        for child in _listed(self.root):
            if child.is_dir():
                shutil.rmtree(child.path, ignore_errors=True)
        _writes_since_listing.pop(self.root, None)
        _remove(self.root / TOTAL_FILE)

    def _entries(self) -> list[tuple[Path, int, float]]:
        """(path, bytes, last use) of every entry; files being written are not entries. Another
        process may remove entries or whole folders meanwhile (its eviction, `adc cache clear`):
        what is gone is not listed."""
        found = []
        for folder in _listed(self.root):
            if not folder.is_dir():
                continue
            for entry in _listed(folder):
                if entry.name.endswith(TEMP_SUFFIX) or not entry.is_file():
                    continue
                try:
                    stat = entry.stat()
                except OSError:
                    continue
                found.append((Path(entry.path), stat.st_size, stat.st_mtime))
        return found


def _write_atomically(path: Path, data: bytes) -> None:
    """`path` holds `data` whole or is as it was: written to a temporary beside it, then renamed."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temp, path)
    except BaseException:
        _remove(Path(temp))
        raise


def _listed(folder: os.PathLike) -> list[os.DirEntry]:
    """The entries of `folder`; none when it is missing, gone or unreadable."""
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except OSError:
        return []


def _user_cache_folder() -> str:
    import platformdirs     # only where ADC_CACHE_DIR is not set: 3 ms at every start otherwise

    return platformdirs.user_cache_dir("adc", appauthor=False)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
