"""Bad input said in one line naming the culprit, exit 2 for a CLI: the
error, the parser whose errors are one line, and an argparse type."""

from __future__ import annotations

import argparse


def at_least_one(text: str) -> int:
    """argparse type for runs at a time (--slots, --jobs, --repeat): an int >= 1."""

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"at least 1, got {value}")
    return value


class UsageError(ValueError):
    """Bad input: said in one line naming the argument, knob or file at fault
    (exit 2), before any work starts."""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line, `prog: error: ...`, exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")
