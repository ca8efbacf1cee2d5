"""What `review --run` says as it goes: each stage as it is planned (what
runs, and how many runs it adds), then each run as it lands, with how many
of those planned so far are left. The command shows them (tools/faults_cli/review.py);
the events are data, so a test reads them, not their text."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from faults.judge.run_result import RunResult
from faults.judge.verdict import Verdict


@dataclass(frozen=True)
class Planned:
    """A stage of the review: what it runs and how many runs it adds."""

    what: str
    runs: int
    planned: int  # every run planned so far, this stage's included
    done: int

    def __str__(self) -> str:  # how many are done and planned: the display's to say
        return f"{self.what} ({self.runs} runs)"


@dataclass(frozen=True)
class Ran:
    """One run landed: in which tree (the change's, or BASE's), which fault or
    control, under which config, its verdict."""

    tree: str
    fault: str
    config: str
    verdict: Verdict
    done: int
    planned: int

    @property
    def left(self) -> int:
        return self.planned - self.done

    def __str__(self) -> str:  # how many are done and planned: the display's to say
        return f"{self.tree}: {self.fault} [{self.config}] {self.verdict}"


Event = Planned | Ran
Listener = Callable[[Event], None]


class Tally:
    """The runs planned and done, told to `listener` (runs land on several threads)."""

    def __init__(self, listener: Listener | None = None):
        self.listener = listener or (lambda event: None)
        self.planned = self.done = 0
        self.lock = threading.Lock()

    def plan(self, what: str, runs: int) -> None:
        with self.lock:
            self.planned += runs
            self.listener(Planned(what, runs, self.planned, self.done))

    def unplan(self, runs: int) -> None:
        """Runs planned that will not happen (a forced failure after a failed
        clean run, a must-fail fault's configs after its first kill)."""
        with self.lock:
            self.planned -= runs

    def ran(self, tree: str) -> Callable[[RunResult], None]:
        """What a stage calls as each of its runs in `tree` lands."""

        def landed(result: RunResult) -> None:
            with self.lock:
                self.done += 1
                self.listener(
                    Ran(tree, result.fault, result.config, result.verdict, self.done, self.planned)
                )

        return landed
