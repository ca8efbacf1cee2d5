"""The PTX of a target compiled one translation unit at a time, each unit's
cached by what it read (docs/synchronization.md, "The publish contract"):
the catalog's `ptx_units` and its per-unit `ptx` command, which also writes
the unit's dependencies (`nvcc -MD -MF {deps}`). A unit's entry is kept with
the digest of every file its compile read, as ccache's direct mode keeps it,
so a change to one header recompiles only the units that include it (a
mutant of one of flashinfer's three headers: one of three compiles)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hostio import write_bytes
from invariants.sync.ptx_compile import run_ptx

UNIT_ENTRIES = 16  # dependency sets kept per unit and command: the trees a review compares
TREE = "tree:"  # a dependency under the tree, by its path there: the same in every scratch tree


def unit_key(command: tuple[str, ...], unit: str) -> str:
    """A unit's cache folder: the command's words (placeholders unfilled) and the unit."""
    return hashlib.sha256("\0".join((*command, "", unit)).encode()).hexdigest()[:32]


def dependencies(deps_file: Path, tree_root: Path) -> list[str]:
    """The files a make-style dependency file (`target: dep dep \\`) names,
    those under `tree_root` as `tree:<path there>`, the rest absolute."""
    text = deps_file.read_text().replace("\\\n", " ").replace("\\ ", "\0")
    named: list[str] = []
    root = Path(tree_root).resolve()
    for rule in text.splitlines():
        _, _, words = rule.partition(": ")
        for word in words.split():
            path = Path(word.replace("\0", " "))
            path = (root / path if not path.is_absolute() else path).resolve()
            inside = path.is_relative_to(root)
            name = f"{TREE}{path.relative_to(root).as_posix()}" if inside else str(path)
            if name not in named:
                named.append(name)
    return named


def digests(names: list[str], tree_root: Path) -> dict[str, str] | None:
    """Each dependency's sha256 in the tree at `tree_root`; None when one is gone."""
    found = {}
    for name in names:
        path = Path(tree_root) / name.removeprefix(TREE) if name.startswith(TREE) else Path(name)
        try:
            found[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            return None
    return found


def cached_unit(folder: Path, tree_root: Path) -> Path | None:
    """The PTX of an entry of `folder` whose every dependency is as it is in this tree."""
    entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for entry in entries:
        with contextlib.suppress(OSError, ValueError):
            kept = json.loads(entry.read_text())
            if digests(list(kept), tree_root) == kept:
                with contextlib.suppress(OSError):
                    os.utime(entry)
                return entry.with_suffix(".ptx")
    return None


def keep_unit(folder: Path, ptx: Path, deps: dict[str, str]) -> None:
    """The unit's PTX and its dependencies' digests into `folder`, each
    whole (hostio.write_bytes), the PTX first, the oldest past UNIT_ENTRIES
    evicted."""
    name = hashlib.sha256(json.dumps(deps, sort_keys=True).encode()).hexdigest()[:32]
    write_bytes(folder / f"{name}.ptx", ptx.read_bytes())
    write_bytes(folder / f"{name}.json", json.dumps(deps, sort_keys=True).encode())
    entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in entries[UNIT_ENTRIES:]:
        stale.with_suffix(".ptx").unlink(missing_ok=True)
        stale.unlink(missing_ok=True)


def compile_units(
    command: tuple[str, ...],
    units: tuple[str, ...],
    tree_root: Path,
    out: Path,
    cache: Path,
    *,
    values: dict[str, str],
    env: dict[str, str],
    timeout_s: float,
) -> dict[str, str]:
    """Each unit's PTX into `out` (`<unit's stem>.ptx`), from the cache or
    compiled side by side; the index (PTX file -> unit) of those whose PTX
    holds a kernel (`.entry`: a unit that instantiates none has nothing to
    check)."""
    stop = threading.Event()

    def one(unit: str) -> tuple[str, bool]:
        stem = Path(unit).stem
        ptx, folder = out / f"{stem}.ptx", cache / unit_key(command, unit)
        hit = cached_unit(folder, tree_root)
        if hit is not None:
            with contextlib.suppress(OSError):
                shutil.copyfile(hit, ptx)
                return stem, True
        deps_file, log = out / f"{stem}.d", out.with_name(f"{out.name}.{stem}.log")
        filled = {**values, "unit": unit, "ptx": str(ptx), "deps": str(deps_file)}
        words = [word.format(**filled) for word in command]
        run_ptx(words, log, tree_root, env=env, timeout_s=timeout_s, wrote=[ptx, deps_file],
                what=f"the ptx command on {unit}", stop=stop)  # fmt: skip
        found = digests(dependencies(deps_file, tree_root), tree_root)
        deps_file.unlink()
        if found is not None:  # a file it read is gone already: nothing to key it by
            keep_unit(folder, ptx, found)
        return stem, False

    with ThreadPoolExecutor(max_workers=min(len(units), os.cpu_count() or 1)) as pool:
        jobs = [pool.submit(one, unit) for unit in units]
        try:
            stems = [job.result()[0] for job in jobs]
        except BaseException:  # a failed unit or Ctrl-C: no compile outlives the check
            stop.set()
            raise
    index = {}
    for unit, stem in zip(units, stems, strict=True):
        if ".entry" in (out / f"{stem}.ptx").read_text(errors="replace"):
            index[f"{stem}.ptx"] = Path(unit).name
        else:
            (out / f"{stem}.ptx").unlink()
    return index
