"""Bad input said in one line naming the culprit, exit 2 for a CLI: the
error, the parser whose errors are one line, and an argparse type."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import itertools
import os
from collections.abc import Iterable
from pathlib import Path


def positive_seconds(text: str) -> float:
    """An argparse type: seconds above 0, else a one-line error saying so."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"seconds above 0, got {text!r}")
    return value


def at_least(minimum: int, maximum: int | None = None):
    """An argparse type: an int >= `minimum` (and <= `maximum`, when given),
    else a one-line error saying so."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"at most {maximum}, got {value}")
        return value

    return parse


at_least_one = at_least(1)  # runs at a time (--slots, --jobs, --repeat)


NAMES_LISTED = 12  # more known names than this: the nearest few, not all


def known_names(name: str, known: Iterable[str], listing: str) -> str:
    """The end of a "no such name" error: every known name when they are few,
    else the nearest three and how many there are (`listing` says where they
    are all listed), so the line stays one a reader can take in."""
    known = sorted(known)
    if len(known) <= NAMES_LISTED:
        return f"known: {', '.join(known)}"
    nearest = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    said = f"nearest: {', '.join(nearest)}; " if nearest else ""
    return f"{said}{len(known)} in all ({listing})"


class UsageError(ValueError):
    """Bad input: said in one line naming the argument, knob or file at fault
    (exit 2), before any work starts."""


def folder_problem(path: Path) -> str | None:
    """Why `path` cannot be a folder that takes files (`not a directory`,
    `cannot create it (...)`, `not writable`), or None; found out before any
    work without leaving anything made: the folders made to find out go again."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        return "not a directory"
    missing = list(itertools.takewhile(lambda p: not p.exists(), (path, *path.parents)))
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            return "not writable"
        return None
    except OSError as error:
        return f"cannot create it ({error.strerror})"
    finally:
        for made in missing:  # the deepest first
            with contextlib.suppress(OSError):
                made.rmdir()


def writable_dir(path: Path, argument: str) -> Path:
    """`path` is a folder, or can be made one, that takes files: checked before
    any work, so a bad output folder is not found after it."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{argument} {path}: not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{argument} {path}: cannot create it ({error.strerror})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{argument} {path}: not writable")
    return path


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line, `prog: error: ...`, exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")

    def add_some_of(self, option: str, choices: Iterable, **options) -> None:
        """`option` takes one or more of `choices` (a str enum's: their
        values), every one of them when it is not given."""
        names = [getattr(choice, "value", choice) for choice in choices]
        self.add_argument(option, nargs="+", choices=names, default=list(names), **options)
