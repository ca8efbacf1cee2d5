"""A release file pinned in a package registry: the one model of it that
the registry fetcher (tools/targets/registry.py), a target's release table
(tools/targets/fetch.py) and a foreign corpus's releases
(faults/corpus/releases.py) share (docs/targets.md, "The release cache")."""

from __future__ import annotations

import re
from dataclasses import dataclass

SHA256 = re.compile(r"^[0-9a-f]{64}$")  # how a pin writes its file's digest


@dataclass(frozen=True)
class Pin:
    """One release file, pinned: the package and its version, the registry's
    file name, its sha256, the folder in it that holds the members, and who
    pins it (a table's path and key, named by every error)."""

    package: str
    version: str
    file: str
    sha256: str
    prefix: str  # "flashinfer/data" in a wheel, "<name>-<version>" in an sdist
    where: str

    @property
    def spec(self) -> str:
        return f"{self.package}=={self.version}"
