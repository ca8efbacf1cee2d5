"""Two sets of sweep reports side by side: each fault's verdict on the left
(for example the logical ranks of one GPU) and on the right (a GPU per rank),
the disagreements first. Several reports on a side are shards of one sweep
(different faults): they are merged; a fault in two shards of one side is an
error, for its verdict would be ambiguous.

    afdep-faults compare --left A.json [B.json ...] --right C.json [...] [--out F.md]
        [--notes NOTES.toml]

A notes file says why each disagreement is what it is (`[why]`, fault id =
text); a disagreement it does not explain is marked unexplained, and a note
on a fault that does not disagree is refused as stale.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import tomllib

from hostio import UsageError


@dataclass(frozen=True)
class Side:
    label: str  # "1xH200, logical" - the machine and rank mode of its reports
    digests: tuple[str, ...]
    verdicts: dict[str, str]  # fault -> verdict word


def read_side(paths: list[Path], option: str) -> Side:
    verdicts: dict[str, str] = {}
    labels, digests = set(), set()
    for path in paths:
        try:
            document = json.loads(Path(path).read_text())
            faults = document["faults"]
            labels.add(f"{document['machine']}, {document.get('rank_mode', 'per-gpu')}")
            digests.add(document["native_source_sha256"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise UsageError(f"{option} {path}: not a sweep report ({error})") from None
        for summary in faults:
            if summary["fault"] in verdicts:
                raise UsageError(f"{option} {path}: fault {summary['fault']} is in two shards")
            verdicts[summary["fault"]] = summary["verdict"]
    if len(labels) != 1:
        raise UsageError(f"{option}: reports of different machines or modes: {sorted(labels)}")
    return Side(labels.pop(), tuple(sorted(digests)), verdicts)


def disagreements(left: Side, right: Side) -> list[str]:
    both = sorted(set(left.verdicts) & set(right.verdicts))
    return [f for f in both if left.verdicts[f] != right.verdicts[f]]


def read_notes(path: Path, left: Side, right: Side) -> dict[str, str]:
    """`[why]` of the notes file: a text per disagreeing fault."""
    try:
        why = tomllib.loads(Path(path).read_text()).get("why", {})
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise UsageError(f"--notes {path}: {error}") from None
    if not isinstance(why, dict) or not all(isinstance(t, str) for t in why.values()):
        raise UsageError(f"--notes {path}: [why] must map fault ids to texts")
    differ = set(disagreements(left, right))
    stale = sorted(set(why) - differ)
    if stale:
        raise UsageError(f"--notes {path}: {stale[0]} does not disagree here: its note is stale")
    return why


def markdown(left: Side, right: Side, notes: dict[str, str] | None = None) -> str:
    notes = notes or {}
    both = sorted(set(left.verdicts) & set(right.verdicts))
    differ = disagreements(left, right)
    same = [f for f in both if f not in differ]
    unexplained = [f for f in differ if f not in notes]
    lines = [
        f"# Verdicts: {left.label} vs {right.label}",
        "",
        f"- left: {left.label}, source {', '.join(d[:12] for d in left.digests)}",
        f"- right: {right.label}, source {', '.join(d[:12] for d in right.digests)}",
        f"- {len(both)} faults on both sides, {len(differ)} disagree; "
        f"{len(set(left.verdicts) - set(right.verdicts))} only left, "
        f"{len(set(right.verdicts) - set(left.verdicts))} only right; "
        f"{len(unexplained)} disagreement{'' if len(unexplained) == 1 else 's'} unexplained",
        "",
        f"| fault | {left.label} | {right.label} | why they differ |",
        "|---|---|---|---|",
    ]
    for fault in differ:
        why = notes.get(fault, "**unexplained**")
        lines.append(
            f"| **{fault}** | **{left.verdicts[fault]}** | **{right.verdicts[fault]}** | {why} |"
        )
    for fault in same:
        lines.append(f"| {fault} | {left.verdicts[fault]} | {right.verdicts[fault]} | |")
    return "\n".join(lines) + "\n"
