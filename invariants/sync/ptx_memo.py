"""The PTX check's results per variant, kept on disk by all they depend on:
the variant's PTX text, the sites (names, files, lines, contracts), the
guarded data and this package's own code. A change to one header leaves
most variants' PTX byte for byte the clean tree's, so a review, a corpus
or a sweep's survivors check only the variants the change reached; the
others are read back, never parsed (docs/synchronization.md, "The publish
contract")."""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

from hostio import write_json
from invariants.sync.finding import Finding
from invariants.sync.ptx_check import (
    ModuleFindings,
    ModuleStores,
    PtxError,
    assembled,
    merged_guarded,
    module_findings,
    module_stores,
    variants,
)
from invariants.sync.ptx_dataflow import Bases, Field
from invariants.sync.ptx_read import read_module
from invariants.sync.sites import Site

KEPT = 4096  # result files kept per target: a few hundred trees' variants


@lru_cache(maxsize=1)
def checker_digest() -> str:
    """This package's code: a change to any rule makes every result anew."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def sites_digest(sites: list[Site], sources: Path) -> str:
    """What the check reads of the sites: each one's file, lines and header."""
    rows = [
        [site.path.relative_to(sources).as_posix(), site.start, site.end, site.header()]
        for site in sites
    ]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def _bases(bases: Bases) -> list:
    return sorted([field.parameter, list(field.offsets)] for field in bases)


def _fields(rows: list) -> Bases:
    return frozenset(Field(parameter, tuple(offsets)) for parameter, offsets in rows)


class Memo:
    """Results under `root`, one JSON file each, named by the digest of what made them."""

    def __init__(self, root: Path):
        self.root = root

    def _path(self, *parts: str) -> Path:
        key = hashlib.sha256("\0".join((checker_digest(), *parts)).encode()).hexdigest()
        return self.root / f"{key[:40]}.json"

    def load(self, *parts: str):
        try:
            return json.loads(self._path(*parts).read_text())
        except (OSError, ValueError):  # absent, or unreadable: made again
            return None

    def save(self, value: dict, *parts: str) -> None:
        """Written whole or not at all (hostio.write_json)."""
        write_json(self._path(*parts), value)

    def evict(self) -> None:
        """The oldest results past KEPT removed."""
        try:
            entries = [e for e in os.scandir(self.root) if not e.name.startswith(".")]
        except OSError:
            return
        if len(entries) <= KEPT:
            return
        entries.sort(key=lambda e: e.stat().st_mtime, reverse=True)
        for stale in entries[KEPT:]:
            Path(stale.path).unlink(missing_ok=True)


def remembered_findings(
    sites: list[Site], sources: Path, folder: Path, every_site: list[Site], memo: Memo
) -> tuple[list[Finding], int]:
    """ptx_findings over the PTX in `folder`, each variant's parts read from
    `memo` where made before and saved there where not; and how many
    variants there are."""
    texts = []
    for label, path in variants(folder):
        try:
            texts.append((label, path, hashlib.sha256(path.read_bytes()).hexdigest()))
        except OSError as error:
            raise PtxError(f"{path.name}: cannot read it ({error})") from None
    every_key = sites_digest(every_site, sources)
    parts: list[ModuleStores] = []
    for _, path, text in texts:
        kept = memo.load("stores", every_key, text)
        if kept is None:
            stored, published = module_stores(every_site, sources, read_module(path))
            kept = {
                "stored": {k: [_bases(b) for b in v] for k, v in stored.items()},
                "published": {k: [_bases(b) for b in v] for k, v in published.items()},
            }
            memo.save(kept, "stores", every_key, text)
        parts.append(
            tuple(
                {k: [_fields(b) for b in v] for k, v in kept[side].items()}
                for side in ("stored", "published")
            )
        )
    guarded = merged_guarded(parts)
    guarded_key = json.dumps(sorted((name, _bases(b)) for name, b in guarded.items()))
    key = sites_digest(sites, sources)
    found: list[tuple[str, ModuleFindings]] = []
    for label, path, text in texts:
        kept = memo.load("findings", key, guarded_key, text)
        if kept is None:
            present, said = module_findings(sites, sources, read_module(path), guarded)
            kept = {"present": sorted(present), "said": said}
            memo.save(kept, "findings", key, guarded_key, text)
        said = [(name, line, message) for name, line, message in kept["said"]]
        found.append((label, (frozenset(kept["present"]), said)))
    memo.evict()
    return assembled(sites, found), len(texts)
