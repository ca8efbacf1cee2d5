"""Sweep history in SQLite: one row per sweep, one per fault summary, and the
sites each sweep saw, so a sweep can say what changed since the last one."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from faults.judge.verdict import Verdict

SCHEMA = """
CREATE TABLE IF NOT EXISTS sweeps (
    id INTEGER PRIMARY KEY, catalog TEXT NOT NULL, digest TEXT NOT NULL,
    machine TEXT NOT NULL, started TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS verdicts (
    sweep INTEGER NOT NULL REFERENCES sweeps(id), fault TEXT NOT NULL,
    verdict TEXT NOT NULL, ok INTEGER NOT NULL, kill_rate REAL,
    PRIMARY KEY (sweep, fault));
CREATE TABLE IF NOT EXISTS sites (
    sweep INTEGER NOT NULL REFERENCES sweeps(id), site TEXT NOT NULL,
    PRIMARY KEY (sweep, site));
"""


@dataclass
class Changes:
    previous: int | None = None  # the sweep compared against
    verdicts: list[tuple[str, Verdict, Verdict]] = field(default_factory=list)  # fault, before, now
    new_survivors: list[str] = field(default_factory=list)
    new_sites: list[str] = field(default_factory=list)
    new_sites_without_faults: list[str] = field(default_factory=list)


class History:
    def __init__(self, path: Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path))
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def last(self, catalog: str) -> int | None:
        row = self.db.execute("SELECT max(id) FROM sweeps WHERE catalog = ?", (catalog,))
        return row.fetchone()[0]

    def record(self, *, catalog: str, digest: str, machine: str, summaries, sites) -> int:
        """Store one sweep in a single transaction (all of it or nothing)."""
        with self.db:
            cursor = self.db.execute(
                "INSERT INTO sweeps (catalog, digest, machine, started) VALUES (?, ?, ?, ?)",
                (catalog, digest, machine, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
            )
            sweep = cursor.lastrowid
            self.db.executemany(
                "INSERT INTO verdicts VALUES (?, ?, ?, ?, ?)",
                [
                    (sweep, s.fault, Verdict(s.verdict).value, int(s.ok), s.kill_rate)
                    for s in summaries
                ],
            )
            self.db.executemany(
                "INSERT INTO sites VALUES (?, ?)", [(sweep, site) for site in sorted(set(sites))]
            )
        return sweep

    def changes(self, catalog: str, summaries, sites, covered_sites) -> Changes:
        """What differs from the history of `catalog` (call before record): each
        fault against its latest recorded verdict, so a partial sweep (--only,
        --config) never hides a fault it left out; sites never seen before."""
        previous = self.last(catalog)
        changes = Changes(previous=previous)
        if previous is None:
            return changes
        before = {
            fault: Verdict(word)
            for fault, word in self.db.execute(
                "SELECT v.fault, v.verdict FROM verdicts v JOIN sweeps s ON v.sweep = s.id "
                "WHERE s.catalog = ? AND v.sweep = (SELECT max(v2.sweep) FROM verdicts v2 "
                "JOIN sweeps s2 ON v2.sweep = s2.id WHERE s2.catalog = ? AND v2.fault = v.fault)",
                (catalog, catalog),
            )
        }
        for summary in summaries:
            old, now = before.get(summary.fault), Verdict(summary.verdict)
            if old is not None and old is not now:
                changes.verdicts.append((summary.fault, old, now))
            if now is Verdict.SURVIVED and old is not Verdict.SURVIVED:
                changes.new_survivors.append(summary.fault)
        seen = {
            row[0]
            for row in self.db.execute(
                "SELECT DISTINCT site FROM sites JOIN sweeps ON sites.sweep = sweeps.id "
                "WHERE sweeps.catalog = ?",
                (catalog,),
            )
        }
        changes.new_sites = sorted(set(sites) - seen)
        changes.new_sites_without_faults = [s for s in changes.new_sites if s not in covered_sites]
        return changes
