"""Bad input said in one line naming the culprit, exit 2 for a CLI: the
error, the parser whose errors are one line, and an argparse type."""

from __future__ import annotations

import argparse


def at_least(minimum: int):
    """An argparse type: an int >= `minimum`, else a one-line error saying so."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"at least {minimum}, got {value}")
        return value

    return parse


at_least_one = at_least(1)  # runs at a time (--slots, --jobs, --repeat)


class UsageError(ValueError):
    """Bad input: said in one line naming the argument, knob or file at fault
    (exit 2), before any work starts."""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line, `prog: error: ...`, exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")
