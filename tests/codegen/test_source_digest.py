"""The compile cache's keys hold adc's sources by content: a reinstall that rewrites the same files
with new modification times keeps the digest, a changed byte changes it, and the content is hashed
again only when the files' stats change."""
import os
import shutil
from pathlib import Path

import pytest

import adc
from adc.codegen.toolchain.cache import Cache
from adc.codegen.toolchain.source_digest import NAMESPACE, source_digest
from adc.driver.cache_keys import SOURCE_SUFFIXES

PACKAGE = Path(adc.__file__).parent


@pytest.fixture
def package(tmp_path) -> Path:
    """A copy of adc's sources, as an installation would lay them."""
    copy = tmp_path / "site-packages" / "adc"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    return copy


def touch_all(folder: Path, later_ns: int) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            stat = path.stat()
            os.utime(path, ns=(stat.st_atime_ns + later_ns, stat.st_mtime_ns + later_ns))


@pytest.mark.parametrize("with_cache", [True, False])
def test_new_modification_times_keep_the_digest_and_a_changed_byte_changes_it(package, tmp_path, with_cache):
    cache = Cache(tmp_path / "cache") if with_cache else None
    first = source_digest(str(package), SOURCE_SUFFIXES, cache)
    touch_all(package, 10**9 * 3600)
    assert source_digest(str(package), SOURCE_SUFFIXES, cache) == first
    source = package / "frontend" / "grammar.lark"
    data = bytearray(source.read_bytes())
    data[len(data) // 2] ^= 0x01
    source.write_bytes(bytes(data))
    changed = source_digest(str(package), SOURCE_SUFFIXES, cache)
    assert changed != first
    data[len(data) // 2] ^= 0x01            # the same bytes again, with yet another time
    source.write_bytes(bytes(data))
    assert source_digest(str(package), SOURCE_SUFFIXES, cache) == first


def test_a_new_or_renamed_source_changes_the_digest(package):
    first = source_digest(str(package), SOURCE_SUFFIXES, None)
    (package / "extra.py").write_text("")
    added = source_digest(str(package), SOURCE_SUFFIXES, None)
    (package / "extra.py").rename(package / "other.py")
    assert len({first, added, source_digest(str(package), SOURCE_SUFFIXES, None)}) == 3


def test_the_content_is_hashed_again_only_when_a_stat_changes(package, tmp_path):
    cache = Cache(tmp_path / "cache")
    first = source_digest(str(package), SOURCE_SUFFIXES, cache)
    remembered = list((tmp_path / "cache" / NAMESPACE).iterdir())
    assert len(remembered) == 1
    # an entry says what the content digest of these stats is: answered from it, not from the files
    cache.put(NAMESPACE, remembered[0].name, b"remembered")
    assert source_digest(str(package), SOURCE_SUFFIXES, cache) == "remembered"
    touch_all(package, 10**9)
    assert source_digest(str(package), SOURCE_SUFFIXES, cache) == first
    assert len(list((tmp_path / "cache" / NAMESPACE).iterdir())) == 2
