"""Two sets of sweep reports side by side: each fault's verdict on the left
(for example the logical ranks of one GPU) and on the right (a GPU per rank),
the disagreements first. Several reports on a side are shards of one sweep
(different faults): they are merged; a fault in two shards of one side is an
error, for its verdict would be ambiguous.

    afdep-faults compare --left A.json [B.json ...] --right C.json [...] [--out F.md]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

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


def markdown(left: Side, right: Side) -> str:
    both = sorted(set(left.verdicts) & set(right.verdicts))
    differ = [f for f in both if left.verdicts[f] != right.verdicts[f]]
    same = [f for f in both if f not in differ]
    lines = [
        f"# Verdicts: {left.label} vs {right.label}",
        "",
        f"- left: {left.label}, source {', '.join(d[:12] for d in left.digests)}",
        f"- right: {right.label}, source {', '.join(d[:12] for d in right.digests)}",
        f"- {len(both)} faults on both sides, {len(differ)} disagree; "
        f"{len(set(left.verdicts) - set(right.verdicts))} only left, "
        f"{len(set(right.verdicts) - set(left.verdicts))} only right",
        "",
        f"| fault | {left.label} | {right.label} |",
        "|---|---|---|",
    ]
    for fault in differ:
        lines.append(f"| **{fault}** | **{left.verdicts[fault]}** | **{right.verdicts[fault]}** |")
    for fault in same:
        lines.append(f"| {fault} | {left.verdicts[fault]} | {right.verdicts[fault]} |")
    return "\n".join(lines) + "\n"
