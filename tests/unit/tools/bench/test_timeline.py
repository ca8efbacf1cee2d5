"""The bench's traced buckets as Chrome-trace JSON and SVG, and its Markdown report."""

from __future__ import annotations

import json

import pytest

from tools.bench.report import write_report
from tools.bench.timeline import Slice, chrome_trace, main, parse_timeline, svg

TRACE = [
    "## CF T=512",
    "anchor rank 0 first kernel start = 0; period median 118.06 us",
    " rank0 0:attention_dispatch_impl start 0.00 end 23.81 dur 23.81",
    " rank1 0:ffn_place_impl start -3.75 end 45.08 dur 48.83",
]
DOCUMENT = {
    "machine": "2xH200",
    "native_source_sha256": "ab" * 32,
    "arms": {"C": {"AFDEP_PAYLOAD_FIRST": "1"}, "CF": {}},
    "table": [
        {
            "tokens": 512,
            "C": {"median_us": 122.0, "geomean_change_pct": 0.0, "paired_change_pct": [0.0]},
            "CF": {"median_us": 129.6, "geomean_change_pct": 6.04, "paired_change_pct": [6.04]},
            "nccl_round_trip_us": 135.8,
            "nccl_pipeline_round_trip_us": 412.25,
            "peer_copy_gb_per_s": 82.4,
        }
    ],
    "targets": {"CF.speedup_vs_nccl_at_128": 1.42},
    "traces": {"CF-t512": TRACE},
}


def test_a_trace_reads_into_slices_per_rank():
    timeline = parse_timeline(TRACE)
    assert (timeline.title, timeline.period_us, timeline.ranks) == ("CF T=512", 118.06, [0, 1])
    assert timeline.slices[1] == Slice(1, "ffn_place_impl", -3.75, 45.08)


def test_the_chrome_trace_has_a_track_per_rank_and_no_negative_time():
    trace = chrome_trace(parse_timeline(TRACE), "d" * 64, "2xH200")
    events = trace["traceEvents"]
    assert [e["args"]["name"] for e in events if e["ph"] == "M"] == ["CF T=512", "rank 0", "rank 1"]
    slices = [(e["name"], e["tid"], e["ts"], e["dur"]) for e in events if e["ph"] == "X"]
    assert slices == [
        ("attention_dispatch_impl", 0, 3.75, 23.81),
        ("ffn_place_impl", 1, 0.0, 48.83),
    ]
    assert trace["otherData"] == {
        "native_source_sha256": "d" * 64,
        "machine": "2xH200",
        "period_median_us": 118.06,
    }


def test_the_picture_draws_each_kernel_on_its_rank_row():
    picture = svg(parse_timeline(TRACE)).splitlines()
    assert picture[1] == '<text x="4" y="14">CF T=512 (0 = -3.75 us; 48.83 us shown)</text>'
    bars = [line for line in picture if line.startswith("<rect")]
    assert bars[0].startswith('<rect x="133.0" y="32" width="399.8" height="20"')
    assert bars[1].startswith('<rect x="70.0" y="60" width="820.0" height="20"')


def test_the_report_shows_the_table_targets_and_timelines(tmp_path):
    path = write_report(DOCUMENT, tmp_path / "bench-2xH200.json")
    text = path.read_text().splitlines()
    assert text[2] == f"- tree `{'ab' * 6}`; arms: C AFDEP_PAYLOAD_FIRST=1; CF (no variables)"
    assert "| tokens | C µs | CF µs | NCCL a2a µs | NCCL pipeline µs | peer copy GB/s |" in text
    assert "| 512 | 122.0 | 129.6 (+6.0 %) | 135.8 | 412.2 | 82 |" in text
    assert "- CF.speedup_vs_nccl_at_128 = 1.42" in text
    assert "![CF T=512](bench-2xH200-CF-t512.svg)" in text
    chrome = json.loads((tmp_path / "bench-2xH200-CF-t512.trace.json").read_text())
    assert len(chrome["traceEvents"]) == 5


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "cannot read it"),
        ('{"table": []}', "not a bench document (no traces)"),
        (
            '{"traces": {"x": ["## t", "p", "garbage"]}}',
            "not a kernel line of a trace: 'garbage'",
        ),
    ],
)
def test_a_bad_document_is_one_line_and_writes_nothing(tmp_path, capsys, content, message):
    document = tmp_path / "bench.json"
    document.write_text(content)
    with pytest.raises(SystemExit) as ended:
        main([str(document), "--out", str(tmp_path / "out")])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tools.bench.timeline: error: document {document}: {message}")
    assert len(err.splitlines()) == 1 and not (tmp_path / "out").exists()
