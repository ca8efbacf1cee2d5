"""What the publish contract's tests share: a target (a ContractTarget) of
sources under `src/` that spells its contract as each test says."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from invariants.sync.spellings import ContractSpellings, call_pattern


@dataclass(frozen=True)
class SpelledTarget:  # a ContractTarget
    name: str
    contract: ContractSpellings
    sources: str = "src"
    anchors: tuple = ()
    env: dict = field(default_factory=dict)
    timeout_s: float = 10.0


@pytest.fixture
def spelled() -> Callable[..., SpelledTarget]:
    """`spelled(name, barrier={"block": "__syncthreads"}, release={"sys": ...})`:
    a target whose contract tables spell each call as given."""

    def make(name: str, **tables: dict[str, str]) -> SpelledTarget:
        spellings = {
            key: {k: call_pattern(v) for k, v in table.items()} for key, table in tables.items()
        }
        return SpelledTarget(name, ContractSpellings(**spellings))

    return make
