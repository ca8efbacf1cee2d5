"""Run ids and seeded fault ids (docs/operators.md, "Seeded schedules and
replay"): a scheduled fault run over seeds is, per seed, a fault of its own,
`<fault>~s<seed>`; a run is named `<fault>[~s<seed>]@<config>#<repeat>`, so
a report's line says what `replay` takes."""

from __future__ import annotations

import re
from dataclasses import dataclass

SEED_MARK = "~s"
RUN_ID = re.compile(r"^(?P<fault>[^@#~]+)(?:~s(?P<seed>\d+))?@(?P<config>[^#]+)#(?P<repeat>\d+)$")
RUN_ID_FORM = "<fault>[~s<seed>]@<config>#<repeat>"


@dataclass(frozen=True)
class RunId:
    """One run of a sweep: a fault (with a seed, when scheduled over seeds), a
    config and a repeat."""

    fault: str  # the catalog's fault, without the seed
    seed: int | None
    config: str
    repeat: int

    @property
    def label(self) -> str:
        """The fault the run ran: the catalog's, or a seeded fault of it."""
        return self.fault if self.seed is None else seeded_id(self.fault, self.seed)

    def __str__(self) -> str:
        return run_id(self.label, self.config, self.repeat)


def parse_run_id(text: str) -> RunId:
    """A run id back from its text; ValueError naming the form otherwise."""
    found = RUN_ID.match(text)
    if found is None:
        raise ValueError(f"run id {text!r}: not of the form {RUN_ID_FORM}")
    seed = found["seed"]
    return RunId(
        found["fault"], None if seed is None else int(seed), found["config"], int(found["repeat"])
    )


def run_id(label: str, config: str, repeat: int) -> str:
    """The id of the run `repeat` of `label` (a seeded fault's holds its seed) under `config`."""
    return f"{label}@{config}#{repeat}"


def seeded_id(fault_id: str, seed: int) -> str:
    return f"{fault_id}{SEED_MARK}{seed}"


def split_seed(fault_id: str) -> tuple[str, int | None]:
    """(the catalog's fault, the seed) of a seeded fault; (itself, None) for any other."""
    head, mark, seed = fault_id.rpartition(SEED_MARK)
    return (head, int(seed)) if mark and seed.isdigit() else (fault_id, None)


def base_id(fault_id: str) -> str:
    """The catalog's fault of a seeded fault (itself for any other)."""
    return split_seed(fault_id)[0]
