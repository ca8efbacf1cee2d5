"""What every review test shares."""

from __future__ import annotations

from contextlib import contextmanager

import pytest


@pytest.fixture(autouse=True)
def progress(monkeypatch) -> list:
    """What `review --run` tells its progress display, each event kept (the
    display itself, rich's, is the command's: tested apart)."""
    import tools.faults_cli.review as cli

    events: list = []

    @contextmanager
    def kept():
        yield events.append

    monkeypatch.setattr(cli, "shown_progress", kept)
    return events
