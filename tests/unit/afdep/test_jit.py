"""The cubin cache is LRU by size: AFDEP_JIT_CACHE_MAX_MB bounds it, a hit marks
its entry used, a write evicts the least recently used entries but never itself."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from afdep import jit
from afdep.config import KNOBS, PROTOCOL_FIELDS, Settings, ConfigError
from afdep.jit import KernelSpec, compile_kernel, evict

MiB = 2**20


def entry(directory: Path, name: str, size: int, used_s: int) -> Path:
    """A cache entry of `size` bytes last used at `used_s` (seconds since the epoch)."""
    path = directory / f"{name}.cubin"
    path.write_bytes(b"x" * size)
    os.utime(path, ns=(used_s * 10**9, used_s * 10**9))
    return path


def names(paths) -> list[str]:
    return [path.name for path in paths]


def test_eviction_removes_least_recently_used_first_until_the_bound(tmp_path):
    for index, name in enumerate("abcde", start=1):
        entry(tmp_path, name, 100, used_s=1000 + index)
    new = entry(tmp_path, "new", 100, used_s=2000)
    removed = evict(tmp_path, 350, keep=new)
    assert names(removed) == ["a.cubin", "b.cubin", "c.cubin"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.cubin", "e.cubin", "new.cubin"]


def test_the_entry_just_written_is_kept_even_when_oldest_and_over_the_bound(tmp_path):
    new = entry(tmp_path, "new", 500, used_s=1000)  # an old clock: still the one just written
    entry(tmp_path, "a", 100, used_s=1001)
    entry(tmp_path, "b", 100, used_s=1002)
    assert names(evict(tmp_path, 300, keep=new)) == ["a.cubin", "b.cubin"]
    assert [p.name for p in tmp_path.iterdir()] == ["new.cubin"]


def test_a_cache_under_the_bound_loses_nothing(tmp_path):
    new = entry(tmp_path, "new", 100, used_s=1002)
    entry(tmp_path, "a", 100, used_s=1001)
    assert evict(tmp_path, 200, keep=new) == []
    assert len(list(tmp_path.iterdir())) == 2


def test_temporary_files_of_a_write_under_way_are_neither_counted_nor_removed(tmp_path):
    new = entry(tmp_path, "new", 100, used_s=1002)
    partial = tmp_path / ".x.cubin.abc.tmp"
    partial.write_bytes(b"x" * 1000)
    assert evict(tmp_path, 100, keep=new) == []
    assert partial.exists()


def test_an_entry_another_process_removed_first_is_no_error(tmp_path, monkeypatch):
    entry(tmp_path, "a", 100, used_s=1001)
    entry(tmp_path, "b", 100, used_s=1002)
    new = entry(tmp_path, "new", 100, used_s=1003)
    real_unlink = Path.unlink

    def racing_unlink(self, missing_ok=False):
        if self.name == "a.cubin":
            real_unlink(self)  # the other process evicts it between our stat and unlink
        return real_unlink(self, missing_ok)

    monkeypatch.setattr(Path, "unlink", racing_unlink)
    # a's bytes are gone all the same: only b must go to fit 100 bytes
    assert names(evict(tmp_path, 100, keep=new)) == ["b.cubin"]
    assert [p.name for p in tmp_path.iterdir()] == ["new.cubin"]


def test_threads_writing_and_evicting_at_once_never_fail(tmp_path):
    errors = []

    def writer(index: int) -> None:
        try:
            for round_ in range(20):
                path = tmp_path / f"t{index}-{round_}.cubin"
                jit._write_entry(path, "symbol", b"x" * 100)
                evict(tmp_path, 300, keep=path)  # others' evictions may take it next
        except Exception as error:  # reported below, with the thread's index
            errors.append((index, error))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert not list(tmp_path.glob("*.tmp"))


def test_a_missing_entry_reads_as_none(tmp_path):
    assert jit._read_entry(tmp_path / "gone.cubin") is None


SPEC_A = KernelSpec.make("attention_combine", kHidden=256, kNumThreads=512)
SPEC_B = KernelSpec.make("attention_combine", kHidden=512, kNumThreads=512)


def test_a_hit_refreshes_its_place_and_a_write_evicts_the_stalest(tmp_path, monkeypatch):
    monkeypatch.setenv("AFDEP_JIT_CACHE", str(tmp_path))
    monkeypatch.setenv("AFDEP_JIT_CACHE_MAX_MB", "1")
    first = compile_kernel(SPEC_A)
    size_a = first.path.stat().st_size
    # Fills the cache to 1000 bytes under the bound, used after A was.
    stale = entry(tmp_path, "stale", MiB - size_a - 1000, used_s=2000)
    os.utime(first.path, ns=(1000 * 10**9, 1000 * 10**9))
    hit = compile_kernel(SPEC_A)
    assert hit.from_cache and hit.path.stat().st_mtime_ns > stale.stat().st_mtime_ns
    second = compile_kernel(SPEC_B)  # over the bound: the stalest entry goes
    assert not second.from_cache
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.path.name, second.path.name])


def test_without_the_hit_the_older_entry_would_go(tmp_path, monkeypatch):
    """B goes over the bound by less than A's size, so evicting A, the older
    entry, is enough: the stale entry stays."""
    monkeypatch.setenv("AFDEP_JIT_CACHE_MAX_MB", "1")
    monkeypatch.setenv("AFDEP_JIT_CACHE", str(tmp_path / "sizes"))
    sizes = [compile_kernel(spec).path.stat().st_size for spec in (SPEC_A, SPEC_B)]
    cache = tmp_path / "cache"
    monkeypatch.setenv("AFDEP_JIT_CACHE", str(cache))
    first = compile_kernel(SPEC_A)
    stale = entry(cache, "stale", MiB - max(sizes) - 1000, used_s=2000)
    os.utime(first.path, ns=(1000 * 10**9, 1000 * 10**9))
    second = compile_kernel(SPEC_B)
    assert sorted(p.name for p in cache.iterdir()) == sorted([stale.name, second.path.name])


def test_the_knob_defaults_to_2048_mib_and_is_no_protocol_knob():
    assert Settings.from_env({}).jit_cache_max_mb == 2048
    assert Settings.from_env({"AFDEP_JIT_CACHE_MAX_MB": "64"}).jit_cache_max_mb == 64
    assert KNOBS["AFDEP_JIT_CACHE_MAX_MB"].field == "jit_cache_max_mb"
    assert "jit_cache_max_mb" not in PROTOCOL_FIELDS
    assert Settings(jit_cache_max_mb=1).protocol() == Settings().protocol()


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "", "lots"])
def test_bad_cache_bounds_are_named_with_their_value(value):
    with pytest.raises(ConfigError) as error:
        Settings.from_env({"AFDEP_JIT_CACHE_MAX_MB": value})
    assert str(error.value) == f"AFDEP_JIT_CACHE_MAX_MB={value!r}: expected a positive integer"
