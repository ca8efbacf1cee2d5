"""A traced bucket as a timeline: the bench's trace lines (tools.bench.traces,
`aligned_lines`) as a Chrome-trace JSON that Perfetto and chrome://tracing
open (a track per rank, a slice per kernel) and as an SVG picture the bench's
Markdown report shows.

    python -m tools.bench.timeline docs/results/bench-2xH200.json [--out DIR]
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from html import escape
from pathlib import Path

from hostio import OneLineParser, UsageError, entry_point, write_json, write_text

TITLE = re.compile(r"^## (?P<title>.+)$")
PERIOD = re.compile(r"period median (?P<period>[0-9.]+) us")
KERNEL = re.compile(
    r"^ rank(?P<rank>\d+) (?P<index>\d+):(?P<name>\S+) start (?P<start>-?[0-9.]+) "
    r"end (?P<end>-?[0-9.]+) dur -?[0-9.]+$"
)


@dataclass(frozen=True)
class Slice:
    rank: int
    name: str
    start_us: float
    end_us: float


@dataclass(frozen=True)
class Timeline:
    title: str
    period_us: float | None
    slices: tuple[Slice, ...]

    @property
    def ranks(self) -> list[int]:
        return sorted({s.rank for s in self.slices})


def parse_timeline(lines: list[str]) -> Timeline:
    """The timeline `aligned_lines` printed; a line it cannot read is a ValueError naming it."""
    if not lines or not TITLE.match(lines[0]):
        raise ValueError(f"a trace starts with '## <title>', got {lines[:1]}")
    period = PERIOD.search(lines[1]) if len(lines) > 1 else None
    slices = []
    for line in lines[2:]:
        kernel = KERNEL.match(line)
        if kernel is None:
            raise ValueError(f"not a kernel line of a trace: {line!r}")
        slices.append(
            Slice(int(kernel["rank"]), kernel["name"], float(kernel["start"]), float(kernel["end"]))
        )
    title = TITLE.match(lines[0])["title"]
    return Timeline(title, float(period["period"]) if period else None, tuple(slices))


def chrome_trace(timeline: Timeline, digest: str, machine: str) -> dict:
    """Chrome's trace-event format: complete events ("X") in microseconds,
    one process for the bucket, one thread (track) per rank."""
    events: list[dict] = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": timeline.title}},
    ]
    for rank in timeline.ranks:
        events.append(
            {
                "name": "thread_name",
                "ph": "M",
                "pid": 0,
                "tid": rank,
                "args": {"name": f"rank {rank}"},
            }
        )
    origin = min((s.start_us for s in timeline.slices), default=0.0)
    for s in timeline.slices:
        events.append(
            {
                "name": s.name,
                "ph": "X",
                "pid": 0,
                "tid": s.rank,
                "ts": round(s.start_us - origin, 3),  # Perfetto wants no negative times
                "dur": round(s.end_us - s.start_us, 3),
                "args": {"start_us": s.start_us, "end_us": s.end_us},
            }
        )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"native_source_sha256": digest, "machine": machine,
                      "period_median_us": timeline.period_us},
    }  # fmt: skip


ROW_PX, LABEL_PX, WIDTH_PX = 28, 70, 900
COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1")


def svg(timeline: Timeline) -> str:
    """The same timeline as a picture: a row per rank, a bar per kernel, the
    time axis in µs from the earliest start."""
    origin = min((s.start_us for s in timeline.slices), default=0.0)
    span = max((s.end_us for s in timeline.slices), default=1.0) - origin or 1.0
    scale = (WIDTH_PX - LABEL_PX - 10) / span
    ranks = timeline.ranks
    height = ROW_PX * (len(ranks) + 2)
    names = sorted({s.name for s in timeline.slices})
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH_PX}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<text x="4" y="14">{escape(timeline.title)} (0 = {origin:.2f} us; '
        f"{span:.2f} us shown)</text>",
    ]
    for row, rank in enumerate(ranks):
        y = ROW_PX * (row + 1)
        parts.append(f'<text x="4" y="{y + 17}">rank {rank}</text>')
        for s in (s for s in timeline.slices if s.rank == rank):
            x = LABEL_PX + (s.start_us - origin) * scale
            width = max((s.end_us - s.start_us) * scale, 1.0)
            colour = COLOURS[names.index(s.name) % len(COLOURS)]
            label = f"{s.name} {s.end_us - s.start_us:.1f} us"
            parts.append(
                f'<rect x="{x:.1f}" y="{y + 4}" width="{width:.1f}" height="{ROW_PX - 8}" '
                f'fill="{colour}"><title>{escape(label)}</title></rect>'
            )
            parts.append(f'<text x="{x + 2:.1f}" y="{y + 17}" fill="white">{escape(label)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def timelines(document: dict) -> dict[str, Timeline]:
    """Each traced bucket of a bench document, all read before any is written."""
    return {key: parse_timeline(trace) for key, trace in document.get("traces", {}).items()}


def write_timelines(document: dict, out: Path, stem: str) -> list[str]:
    """Each traced bucket of a bench document as `<stem>-<trace>.trace.json`
    and `.svg` under `out`; the Markdown lines that show them. A trace that
    cannot be read is a ValueError before any file is written."""
    lines = []
    for key, timeline in timelines(document).items():
        name = f"{stem}-{key}"
        chrome = chrome_trace(timeline, document["native_source_sha256"], document["machine"])
        write_json(out / f"{name}.trace.json", chrome)
        write_text(out / f"{name}.svg", svg(timeline))
        lines += [
            f"### {timeline.title}",
            "",
            f"![{timeline.title}]({name}.svg)",
            "",
            f"Perfetto: open `{name}.trace.json` at https://ui.perfetto.dev",
            "",
        ]
    return lines


def read_document(path: Path) -> dict:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise UsageError(f"document {path}: cannot read it ({error})") from None
    if not isinstance(document, dict) or "traces" not in document:
        raise UsageError(f"document {path}: not a bench document (no traces)")
    try:
        timelines(document)
    except ValueError as error:
        raise UsageError(f"document {path}: {error}") from None
    return document


@entry_point
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="tools.bench.timeline", description=__doc__)
    parser.add_argument("document", type=Path, help="a bench JSON document")
    parser.add_argument("--out", type=Path, default=None, help="default: beside the document")
    args = parser.parse_args(argv)
    try:
        document = read_document(args.document)
    except UsageError as error:
        parser.error(str(error))
    out = args.out or args.document.parent
    write_timelines(document, out, args.document.stem)
    print(f"wrote {len(document['traces'])} timelines under {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
