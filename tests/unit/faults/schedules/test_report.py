"""The kill rates per schedule family and per fault, in the sweep's Markdown
(docs/operators.md, "Seeded schedules and replay")."""

from __future__ import annotations

from faults.schedules.over_seeds import kill_rates
from faults.schedules.report import schedule_tables


SCHEDULES = {
    "seeds": [0, 1],
    "runs": [
        {
            "fault": "N2s.pct",
            "seed": 0,
            "family": "pct",
            "expect": "fail",
            "schedule": "cf.attention_dispatch.row_store pct seed 0: 9 ns at cta 1 warp 4 step 0",
            "verdict": "KILLED",
            "runs": ["N2s.pct~s0@bf16-graph#0"],
        },
        {
            "fault": "N2s.pct",
            "seed": 1,
            "family": "pct",
            "expect": "fail",
            "schedule": "cf.attention_dispatch.row_store pct seed 1: 9 ns at cta 0 warp 2 step 0",
            "verdict": "SURVIVED",
            "runs": ["N2s.pct~s1@bf16-graph#0"],
        },
        {
            "fault": "P5s.uneven",
            "seed": 0,
            "family": "uneven",
            "expect": "pass",
            "schedule": "cb.ffn_combine.row_store uneven seed 0: ns by warp [3, 1]",
            "verdict": "PASSED",
            "runs": ["P5s.uneven~s0@bf16-graph#0"],
        },
    ],
}


def test_the_kill_rate_per_schedule_family_in_markdown():
    document = {**SCHEDULES, **kill_rates(SCHEDULES["runs"])}
    assert "\n".join(schedule_tables(document)) == "\n".join(
        [
            "",
            "## Kill rate per schedule family (2 seeds from 0)",
            "",
            "kill rate = seeds whose every run killed / seeds of must-fail faults; "
            "met: seeds whose runs all killed (must-fail) or all passed (must-pass)",
            "",
            "| family | must-fail faults | seeds | killed | kill rate | must-pass seeds | passed |",
            "|---|---|---|---|---|---|---|",
            "| pct | 1 | 2 | 1 | 0.50 | 0 | 0 |",
            "| uneven | 0 | 0 | 0 | n/a | 1 | 1 |",
            "",
            "| fault | family | expect | seeds | met | rate | verdict per seed |",
            "|---|---|---|---|---|---|---|",
            "| N2s.pct | pct | fail | 2 | 1 | 0.50 | s0 KILLED, s1 SURVIVED |",
            "| P5s.uneven | uneven | pass | 1 | 1 | 1.00 | s0 PASSED |",
            "",
            "| run ids | verdict | schedule |",
            "|---|---|---|",
            "| `N2s.pct~s0@bf16-graph#0` | KILLED | "
            "cf.attention_dispatch.row_store pct seed 0: 9 ns at cta 1 warp 4 step 0 |",
            "| `N2s.pct~s1@bf16-graph#0` | SURVIVED | "
            "cf.attention_dispatch.row_store pct seed 1: 9 ns at cta 0 warp 2 step 0 |",
            "| `P5s.uneven~s0@bf16-graph#0` | PASSED | "
            "cb.ffn_combine.row_store uneven seed 0: ns by warp [3, 1] |",
        ]
    )
    assert schedule_tables(None) == []
