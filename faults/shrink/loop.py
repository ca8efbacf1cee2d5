"""The shrink loop (docs/operators.md, "Shrinking"): from a run input that
kills a must-fail fault, a greedy walk down each dimension's ladder of the
catalog's [shrink] table, keeping a smaller value whenever the fault is still
KILLED there, until no dimension shrinks or the time budget is spent.

Each probe is one real run of the target (seconds of a GPU process), so the
loop is deterministic and frugal rather than Hypothesis's in-process shrinker:
the runner is injected (`Runner`), a fake one in the CPU tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from faults.catalog.errors import FaultsError
from faults.judge.run_result import RunResult
from faults.judge.verdict import Verdict
from faults.shrink.table import Number, ShrinkSpec

# The override arguments of one probe -> its judged run.
Runner = Callable[[list[str]], RunResult]


class ShrinkError(FaultsError):
    """A shrink that cannot start as asked; said in one line."""


@dataclass
class Probe:
    index: int
    values: dict[str, Number]
    args: list[str]
    verdicts: list[str]  # one per repeat, in order (stops at the first not KILLED)
    killed: bool
    reason: str
    seconds: float


@dataclass
class Shrunk:
    start: dict[str, Number]
    minimal: dict[str, Number]
    probes: list[Probe] = field(default_factory=list)
    budget_spent: bool = False  # stopped before every dimension's next rung was tried
    finished: bool = False  # False while the loop runs: a report then is partial

    @property
    def start_killed(self) -> bool:
        return any(p.killed for p in self.probes if p.values == self.start)


def option_values(words: list[str], arg: str) -> list[str]:
    """The words the last `arg` in `words` gives (argparse's last wins)."""
    found = [i for i, word in enumerate(words) if word == arg]
    given: list[str] = []
    for word in words[found[-1] + 1 :] if found else []:
        if word.startswith("--"):
            break
        given.append(word)
    return given


def option_value(words: list[str], arg: str) -> str | None:
    """The value the last `arg` in `words` gives (of a list such as
    `--tokens 8 128 512`, its last word); None when absent."""
    given = option_values(words, arg)
    return given[-1] if given else None


def number(text: str) -> Number:
    try:
        return int(text)
    except ValueError:
        return float(text)


def start_input(spec: ShrinkSpec, words: list[str]) -> dict[str, Number]:
    """Each dimension's start: its `values`' first, its `start`, else the value
    the run command `words` gives; a command without one is an error."""
    start: dict[str, Number] = {}
    for dimension in spec.dimensions:
        if dimension.values:
            start[dimension.name] = dimension.values[0]
            continue
        given = option_value(words, dimension.arg)
        if dimension.start is None and given is None:
            raise ShrinkError(
                f"shrink: dimension {dimension.name}: the run command gives no "
                f"{dimension.arg} and the catalog's [shrink] no start"
            )
        try:
            start[dimension.name] = int(given) if dimension.start is None else dimension.start
        except ValueError:
            raise ShrinkError(
                f"shrink: dimension {dimension.name}: {dimension.arg} {given!r} in the run "
                "command is not an integer to halve"
            ) from None
    return start


def start_alternatives(
    spec: ShrinkSpec, words: list[str], start: dict[str, Number]
) -> list[dict[str, Number]]:
    """Where the run command gives a list (`--tokens 8 128 512`), the start
    takes its last value and one run covers them all: the fault may be killed
    at another of them only. These starts, largest first, are tried in turn
    when the start does not kill."""
    others = []
    for dimension in spec.dimensions:
        if dimension.values or dimension.start is not None:
            continue
        listed = [int(w) for w in option_values(words, dimension.arg)[:-1] if w.isdigit()]
        others += [{**start, dimension.name: v} for v in sorted(set(listed), reverse=True)]
    return others


def override_args(spec: ShrinkSpec, values: dict[str, Number]) -> list[str]:
    """The arguments that, appended to the run command, set every dimension."""
    return [word for d in spec.dimensions for word in (d.arg, str(values[d.name]))]


def relations_hold(spec: ShrinkSpec, values: dict[str, Number], words: list[str]) -> bool:
    def value_of(operand: str) -> Number | None:
        if operand in values:
            return values[operand]
        if operand.isdigit():
            return int(operand)
        given = option_value(words, operand)
        return None if given is None else number(given)

    return all(relation.holds(value_of) for relation in spec.relations)


@dataclass
class ShrinkLoop:
    spec: ShrinkSpec
    words: list[str]  # the run command with the config's args, for the relations
    runner: Runner
    budget_s: float
    repeat: int = 1
    clock: Callable[[], float] = time.monotonic
    # Told after every probe (a report written as it goes survives a kill).
    on_probe: Callable[[Shrunk], None] = lambda shrunk: None

    def run(self, start: dict[str, Number], alternatives: list | tuple = ()) -> Shrunk:
        shrunk = Shrunk(start=dict(start), minimal=dict(start))
        self._walk(shrunk, [start, *alternatives])
        shrunk.finished = True
        return shrunk

    def _walk(self, shrunk: Shrunk, starts: list[dict[str, Number]]) -> None:
        """The start input first, then each alternative until one kills: the
        first that does is where shrinking starts; when none does, nothing shrinks."""
        began = self.clock()
        for start in starts:
            if self._probe(shrunk, start).killed:
                shrunk.start, shrunk.minimal = dict(start), dict(start)
                break
        else:
            return
        changed = True
        while changed:
            changed = False
            for dimension in self.spec.dimensions:
                while (values := self.one_rung_down(shrunk.minimal, dimension.name)) is not None:
                    if self._out_of_time(shrunk, began):
                        shrunk.budget_spent = True
                        return
                    if not self._killed(shrunk, values):
                        break
                    shrunk.minimal, changed = values, True
                    self.on_probe(shrunk)  # told again: the kill is now the minimal input

    def one_rung_down(self, current: dict[str, Number], name: str) -> dict[str, Number] | None:
        """The input with `name` one rung down (rungs that break a relation
        skipped); None at the bottom."""
        dimension = self.spec.dimension(name)
        value = dimension.smaller(current[name])
        while value is not None:
            candidate = {**current, name: value}
            if relations_hold(self.spec, candidate, self.words):
                return candidate
            value = dimension.smaller(value)
        return None

    def _out_of_time(self, shrunk: Shrunk, began: float) -> bool:
        """Would one more probe, as long as the mean so far, end past the budget?"""
        mean = sum(p.seconds for p in shrunk.probes) / len(shrunk.probes)
        return self.clock() - began + mean > self.budget_s

    def _killed(self, shrunk: Shrunk, values: dict[str, Number]) -> bool:
        """A probe at `values`, unless one ran there already (a dimension
        tried again in a later round, nothing else having moved)."""
        tried = [p.killed for p in shrunk.probes if p.values == values]
        return tried[0] if tried else self._probe(shrunk, values).killed

    def _probe(self, shrunk: Shrunk, values: dict[str, Number]) -> Probe:
        """`repeat` runs at `values`: killed only when every one is KILLED, so
        a flaky kill is not taken for a kill."""
        args = override_args(self.spec, values)
        started = self.clock()
        verdicts, reason = [], ""
        for _ in range(self.repeat):
            result = self.runner(args)
            verdicts.append(str(result.verdict))
            reason = result.reason
            if result.verdict is not Verdict.KILLED:
                break
        killed = len(verdicts) == self.repeat and verdicts[-1] == str(Verdict.KILLED)
        seconds = round(self.clock() - started, 3)
        probe = Probe(len(shrunk.probes), dict(values), args, verdicts, killed, reason, seconds)
        shrunk.probes.append(probe)
        self.on_probe(shrunk)
        return probe
