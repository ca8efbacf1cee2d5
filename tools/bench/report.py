"""The bench's Markdown report: the round-trip table beside NCCL and the
peer-copy bound, the performance targets' ratios and each traced bucket's
timeline (tools.bench.timeline), written beside its JSON document."""

from __future__ import annotations

from pathlib import Path

from hostio import write_text
from tools.bench.overlap import overlap_lines
from tools.bench.timeline import write_timelines


def arm_words(env: dict[str, str]) -> str:
    return " ".join(f"{key}={value}" for key, value in env.items()) or "(no variables)"


def table_lines(document: dict) -> list[str]:
    arms = list(document["arms"])
    lines = [
        "| tokens | "
        + " | ".join(f"{arm} µs" for arm in arms)
        + " | NCCL a2a µs | NCCL pipeline µs | peer copy GB/s |",
        "|---|" + "---|" * (len(arms) + 3),
    ]
    for row in document["table"]:
        cells = [str(row["tokens"])]
        for arm in arms:
            cell = f"{row[arm]['median_us']:.1f}"
            if row[arm].get("paired_change_pct") and any(row[arm]["paired_change_pct"]):
                cell += f" ({row[arm]['geomean_change_pct']:+.1f} %)"
            cells.append(cell)
        pipeline = row.get("nccl_pipeline_round_trip_us")
        cells += [
            f"{row['nccl_round_trip_us']:.1f}",
            "not measured" if pipeline is None else f"{pipeline:.1f}",
            f"{row['peer_copy_gb_per_s']:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write_report(document: dict, json_path: Path) -> Path:
    """`<document>.md` beside `json_path`, with the timelines' files beside it."""
    lines = [
        f"# Bench on {document['machine']}",
        "",
        f"- tree `{document['native_source_sha256'][:12]}`; arms: "
        + "; ".join(f"{name} {arm_words(env)}" for name, env in document["arms"].items()),
        "- round trip: median over processes of each rank-0 median; change: paired geomean vs "
        f"{document.get('control', 'C')}",
        "",
        *table_lines(document),
        "",
        "## Targets (ratios in this run)",
        "",
        *(f"- {key} = {value}" for key, value in document["targets"].items()),
        "",
        *overlap_lines(document.get("overlap", [])),
        "## Timelines",
        "",
        *write_timelines(document, json_path.parent, json_path.stem),
    ]
    path = json_path.with_suffix(".md")
    write_text(path, "\n".join(lines).rstrip("\n") + "\n")
    return path
