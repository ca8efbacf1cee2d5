"""Logical ranks' lines, prefixed as torchrun's `--tee` prefixes a rank's
(`[default<rank>]:`), so the log-line contract (afdep.vocab) reads a run of
logical ranks in one process as it reads a torchrun run. What the kernels
print (device printf) reaches the file descriptor directly, untagged; those
lines name their rank themselves (`rank=<r>`)."""

from __future__ import annotations

import contextlib
import io
import re
import sys
import threading
from collections.abc import Iterator

_PIECES = re.compile(r"[^\n]*\n|[^\n]+")


def rank_prefix(rank: int) -> str:
    return f"[default{rank}]:"


class RankTags:
    """Which logical rank the host is speaking for: set around each rank's
    work (`speaking`), per thread; rank 0 otherwise, as torchrun's summary line
    comes from rank 0."""

    def __init__(self) -> None:
        self._local = threading.local()

    @property
    def rank(self) -> int:
        return getattr(self._local, "rank", 0)

    @contextlib.contextmanager
    def speaking(self, rank: int) -> Iterator[None]:
        before = self.rank
        self._local.rank = rank
        try:
            yield
        finally:
            self._local.rank = before


class TaggedStream(io.TextIOBase):
    """A text stream that starts every line with the speaking rank's prefix and
    hands each completed line on at once (device lines interleave by line)."""

    def __init__(self, stream, tags: RankTags) -> None:
        self._stream = stream
        self._tags = tags
        self._lock = threading.Lock()
        self._line_start = True

    def write(self, text: str) -> int:
        with self._lock:
            for piece in _PIECES.findall(text):
                prefix = rank_prefix(self._tags.rank) if self._line_start else ""
                self._stream.write(prefix + piece)
                self._line_start = piece.endswith("\n")
                if self._line_start:
                    self._stream.flush()
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", "utf-8")


@contextlib.contextmanager
def tagged_output(tags: RankTags) -> Iterator[None]:
    """sys.stdout and sys.stderr tagged with the speaking rank while inside."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TaggedStream(saved[0], tags), TaggedStream(saved[1], tags)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = saved
